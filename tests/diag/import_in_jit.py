# expect: 8:5: error: 'import' is not supported in a @triton.jit function; import at module level
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    import math
    return x
