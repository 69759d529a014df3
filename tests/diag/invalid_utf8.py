# expect: 8:21: error: file is not valid UTF-8
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x + 1  # café
    return a
