# expect: 8:13: error: integer literal '99999999999999999999' does not fit in 64 bits
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x + 99999999999999999999
    return a
