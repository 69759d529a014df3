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


# Conditional expressions inside larger ones: on a tl.constexpr flag without a value (as fla's cross
# entropy writes `x - (lse if not SPLIT else 0.0)`) and on a value loaded at run time, choosing between
# two reductions of a row. The max is a real dependence here (y * z is stored), not a stabilizer.
@triton.jit
def centered_kernel(X, Y, L, S, n_cols, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    lse = tl.load(L + row)
    s = tl.load(S + row)
    y = x * x - (lse if not SPLIT else 0.0)
    z = tl.sum(tl.where(mask, y, 0.0), axis=0) if s > 0 else tl.max(tl.where(mask, y, -float("inf")), axis=0)
    tl.store(Y + row * n_cols + cols, y * z, mask=mask)
