# Forwards that accumulate with tl.atomic_add: every row adds its weighted values into one output
# row (a column sum, as split reductions and scatter-adds write it). Additions commute, so each
# added value's gradient is the upstream gradient at its addresses, whatever the programs' order.
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
    # A second addition into the same buffer, relaxed: the gradients of both are dY.
    tl.atomic_add(Y + cols, x * x, mask=mask, sem="relaxed")


# Scatter-add of rows into buckets chosen by an index buffer (an embedding bag's backward shape).
@triton.jit
def scatter_rows_kernel(X, IDX, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    bucket = tl.load(IDX + row)
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    tl.atomic_add(Y + bucket * n_cols + cols, tl.exp(x) * 0.5, mask=mask)
