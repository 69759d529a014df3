# expect: 8:28: error: positional argument follows keyword argument
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = tl.load(x, mask=y, 0)
    return a
