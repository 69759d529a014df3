# expect: 8:5: error: 'global' is not supported in a @triton.jit function; pass the value as a parameter (module constants must be tl.constexpr)
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    global G
    return x
