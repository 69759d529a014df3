# expect: 9:9: error: 'break' is not supported in a @triton.jit function; express the exit as the condition of a 'while' loop
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    for i in range(4):
        break
    return x
