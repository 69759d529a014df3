# A conditional expression on a value loaded at run time (x * s if s > 0 else x * x): Triton evaluates
# the branch taken; tgrad reverses it as a runtime if.
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
