# expect: 9:9: error: unexpected indent
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x + 1
        b = a * 2
    return b
