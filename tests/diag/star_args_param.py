# expect: 7:10: error: '*args', '**kwargs' and '/' parameters are not supported in a @triton.jit function; list each parameter by name
import triton
import triton.language as tl


@triton.jit
def f(x, *args):
    return x
