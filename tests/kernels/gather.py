# tl.gather (as chunked linear-attention kernels pick values within a tile):
# each row of X is permuted by loaded indices along the columns, and scaled
# by a table entry picked through a loaded permutation. Indices repeat and
# skip entries, so some inputs are read twice and some not at all.
import os

import triton
import triton.language as tl

# A stand-in where tl.gather is missing, bound by a module-level if as fla
# does: the later binding (tl.gather) is the one tgrad uses.
if os.environ.get("GATHER_STAND_IN") == "1":
    @triton.jit
    def gather(src, index, axis):
        return None
else:
    gather = tl.gather


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
