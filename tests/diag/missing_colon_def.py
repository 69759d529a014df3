# expect: 7:12: error: invalid syntax: expected '->' or ':', found end of line
import triton
import triton.language as tl


@triton.jit
def f(x, y)
    return x + y
