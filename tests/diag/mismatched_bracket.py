# expect: 8:17: error: closing ']' does not match opening '('
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = tl.exp(x]
    return a
