# expect: 8:11: error: unexpected end of input after line continuation '\'
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x \
