# expect: 8:9: error: dict and set displays are not supported in a @triton.jit function
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    d = {"a": x, "b": y}
    return d
