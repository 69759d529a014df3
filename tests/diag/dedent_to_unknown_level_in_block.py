# expect: 10:9: error: unindent does not match any outer indentation level
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if x:
            a = 1
        b = 2
