# expect: 8:9: error: invalid syntax: expected ':' before end of line
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if x
        a = 1
