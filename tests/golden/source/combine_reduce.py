import triton
import triton.language as tl


@triton.jit
def multiply(a, b):
    return a * b


@triton.jit
def larger(a, b):
    return tl.maximum(a, b)


@triton.jit
def smaller(a, b):
    return tl.where(a < b, a, b)


@triton.jit
def plus(a, b):
    return a + b


@triton.jit
def row_product_kernel(X, Y, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(X + rows[:, None] * n_cols + cols[None, :], mask=mask, other=1.0)
    y = tl.reduce(x, 1, multiply)
    tl.store(Y + rows, y, mask=rows < n_rows)


@triton.jit
def combine_softmax_kernel(X, Y, Low, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=-float("inf"))
    m = tl.reduce(x[None, :], 1, larger, keep_dims=True)
    e = tl.exp(x[None, :] - m)
    y = e / tl.reduce(e, axis=1, combine_fn=plus, keep_dims=True)
    tl.store(Y + row * n_cols + cols[None, :], y, mask=mask[None, :])
    low = tl.reduce(tl.where(mask, x, float("inf")), None, smaller)
    tl.store(Low + row, low)
