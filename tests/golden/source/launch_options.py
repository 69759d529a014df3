import triton
import triton.language as tl


@triton.jit
def _staged_rows_kernel(X, Y, n_rows, n_cols, BLOCK: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
        e = tl.exp(x - tl.max(tl.where(mask, x, float("-inf")), axis=0))
        y = e / tl.sum(tl.where(mask, e, 0.0), axis=0)
        tl.store(Y + row * n_cols + cols, y * x, mask=mask)
