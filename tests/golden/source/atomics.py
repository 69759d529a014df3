import triton
import triton.language as tl


@triton.jit
def weighted_colsum_kernel(X, W, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(W + cols, mask=mask, other=0.0)
    tl.atomic_add(Y + cols, x * w, mask=mask)
    tl.atomic_add(Y + cols, x * x, mask=mask, sem="relaxed")


@triton.jit
def scatter_rows_kernel(X, IDX, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    bucket = tl.load(IDX + row)
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    tl.atomic_add(Y + bucket * n_cols + cols, tl.exp(x) * 0.5, mask=mask)
