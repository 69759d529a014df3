# expect: 7:13: error: duplicate parameter 'x'
import triton
import triton.language as tl


@triton.jit
def f(x, y, x):
    return x + y
