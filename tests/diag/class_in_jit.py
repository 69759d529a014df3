# expect: 8:5: error: 'class' is not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    class C:
        pass
    return x
