# expect: 8:5: error: cannot assign to this expression
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    f(x) = 1
    return x
