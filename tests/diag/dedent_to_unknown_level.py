# expect: 9:3: error: unindent does not match any outer indentation level
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = 1
  b = 2
