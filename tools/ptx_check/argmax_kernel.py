# tl.argmax / tl.argmin for tools/ptx_check (no test kernel of tests/kernels
# uses them): a whole row, and one axis of a 2-D tile, with ragged masks.
import triton
import triton.language as tl


@triton.jit
def row_argmax_kernel(X, I, J, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
    tl.store(I + row, tl.argmax(x, axis=0))
    tl.store(I + tl.num_programs(0) + row, tl.argmin(tl.where(cols < n_cols, x, float("inf")), axis=0))
    r = tl.arange(0, ROWS)
    t = tl.load(X + r[:, None] * n_cols + cols[None, :], mask=cols[None, :] < n_cols, other=float("-inf"))
    tl.store(J + row * ROWS + r, tl.argmax(t, axis=1))
