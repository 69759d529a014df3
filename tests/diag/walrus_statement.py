# expect: 8:5: error: ':=' is not supported in a @triton.jit function; use a plain assignment
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    n := x + 1
    return n
