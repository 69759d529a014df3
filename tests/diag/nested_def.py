# expect: 8:5: error: nested functions are not supported inside a @triton.jit function; define it at module level with @triton.jit and call it
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    def g(z):
        return z
    return g(x)
