# expect: 8:20: error: '*args' and '**kwargs' arguments are not supported in a @triton.jit function; pass each argument explicitly
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = tl.load(x, **y)
    return a
