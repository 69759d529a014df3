# expect: 6:1: warning: decorator '@my_decorator' on @triton.jit function 'f' is not known to tgrad; it is kept as text and its effect is ignored
import triton
import triton.language as tl


@my_decorator
@triton.jit
def f(x, y):
    return x + y
