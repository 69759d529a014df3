# expect: 8:9: error: list comprehensions are not supported in a @triton.jit function; use a tl.static_range loop or tile operations
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = [i * 2 for i in range(4)]
