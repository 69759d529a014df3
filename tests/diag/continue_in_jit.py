# expect: 9:9: error: 'continue' is not supported in a @triton.jit function; put the rest of the loop body under an 'if' instead
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    for i in range(4):
        continue
