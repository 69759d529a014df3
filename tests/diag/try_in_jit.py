# expect: 8:5: error: 'try' is not supported in a @triton.jit function; use tl.device_assert for runtime checks
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    try:
        a = x
    except Exception:
        a = y
    return a
