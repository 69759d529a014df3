# expect: 8:5: error: 'with' is not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    with x:
        pass
    return x
