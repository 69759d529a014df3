# expect: 8:22: error: invalid syntax: expected ':' before end of line
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    for i in range(3)
        a = 1
