# expect: 9:9: error: 'lambda' is not supported in a @triton.jit function; define a @triton.jit function at module level instead
# expect: 15:5: error: 'with' is not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    g = lambda q: q
    return x


@triton.jit
def h(x, y):
    with x:
        pass
    return y
