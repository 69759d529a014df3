# expect: 8:10: error: '[' was never closed
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x[0
