# expect: 8:9: error: ':=' is not supported in a @triton.jit function; assign the value in a statement of its own first
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    if (n := x + 1) > 0:
        pass
