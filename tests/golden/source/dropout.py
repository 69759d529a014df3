import triton
import triton.language as tl


@triton.jit
def dropout_kernel(X, Y, n_elements, p, seed, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask, other=0.0)
    keep = tl.rand(seed, offsets) > p
    y = tl.where(keep, x / (1 - p), 0.0)
    tl.store(Y + offsets, y, mask=mask)


@triton.jit
def row_dropout_scale_kernel(X, W, SEEDS, Y, n_cols, p, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    seed = tl.load(SEEDS + row)
    keep = tl.rand(seed, cols, n_rounds=7) > p
    x = tl.where(keep, x / (1.0 - p), 0.0)
    tl.store(Y + row * n_cols + cols, x * w, mask=mask)
