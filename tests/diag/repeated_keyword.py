# expect: 8:28: error: keyword argument 'mask' repeated
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = tl.load(x, mask=y, mask=y)
    return a
