# expect: 8:9: error: unterminated string literal
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    s = "hello
    return x
