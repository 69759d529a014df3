# expect: 8:5: error: 'yield' is not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    yield x
