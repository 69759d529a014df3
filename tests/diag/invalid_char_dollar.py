# expect: 8:11: error: invalid character '$' in source
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x $ y
    return a
