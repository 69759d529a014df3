# expect: 8:15: error: '(' was never closed
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = tl.exp(x
