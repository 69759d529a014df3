# expect: 8:10: error: expected an indented block after 'if' statement on line 8
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if x:
