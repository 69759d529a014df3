# expect: 8:11: error: invalid syntax: expected a name before end of line
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = x.
