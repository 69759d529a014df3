import triton
import triton.language as tl


@triton.jit
def _keyword_operands(x, y):
    a = tl.where(condition=x > 0, x=x * y, y=tl.sin(x=y))
    return tl.sum(input=a, axis=0) + tl.maximum(x=x, y=y)
