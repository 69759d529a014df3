import os
import triton
import triton.language as tl
try:
    gather = tl.gather
except (ImportError, AttributeError):
    pass


@triton.jit
def gather_rows_kernel(X, T, IDX, PERM, Y, n_rows, C: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, C)
    mask = rows < n_rows
    x = tl.load(X + rows[:, None] * C + cols[None, :], mask=mask[:, None], other=0.0)
    idx = tl.load(IDX + rows[:, None] * C + cols[None, :], mask=mask[:, None], other=0)
    t = tl.load(T + cols)
    scale = tl.gather(t * t, tl.load(PERM + cols), 0)
    y = gather(x, idx, axis=1) * scale[None, :]
    tl.store(Y + rows[:, None] * C + cols[None, :], y, mask=mask[:, None])
