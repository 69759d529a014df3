# expect: 10:5: error: 'for ... else' is not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    for i in range(4):
        x = x + i
    else:
        x = 0
    return x
