# expect: 8:9: error: 'lambda' is not supported in a @triton.jit function; define a @triton.jit function at module level instead
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    g = lambda q: q * 2
    return g(x)
