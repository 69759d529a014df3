# expect: 6:1: warning: '@triton.autotune' on 'f', which has no @triton.jit decorator: tgrad skips this function
import triton
import triton.language as tl


@triton.autotune(configs=[], key=["n"])
def f(x, y):
    return x + y
