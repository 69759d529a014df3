# expect: 9:13: error: '[' was never closed
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if x:
        a = [x
    return a
