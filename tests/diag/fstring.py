# expect: 8:9: error: f-strings are not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    s = f"value {x}"
    return x
