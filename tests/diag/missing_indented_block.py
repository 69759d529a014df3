# expect: 9:5: error: expected an indented block after 'if' statement on line 8
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if x:
    a = 1
