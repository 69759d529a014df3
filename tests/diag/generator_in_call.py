# expect: 8:13: error: generator expressions are not supported in a @triton.jit function; use a tl.static_range loop or tile operations
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = sum(i for i in range(4))
    return a
