# expect: 4:19: error: invalid syntax: expected ':' before end of line
import triton
@triton.jit
def f(x, y) -> int
    return x
