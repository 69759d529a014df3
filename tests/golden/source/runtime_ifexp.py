import triton
import triton.language as tl


@triton.jit
def scale_kernel(X, Y, S, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = row * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    s = tl.load(S + row)
    y = x * s if s > 0 else x * x
    tl.store(Y + offs, y, mask=mask)
