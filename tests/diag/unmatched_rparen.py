# expect: 8:14: error: unmatched ')'
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x + 1)
    return a
