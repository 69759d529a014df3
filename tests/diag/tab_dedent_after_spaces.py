# expect: 10:1: error: inconsistent use of tabs and spaces in indentation
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if x:
        a = 1
	return x
