# expect: 8:13: error: leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x + 012
    return a
