import triton
import triton.language as tl


@triton.jit
def weight_rows_kernel(X, DY, W, RSTD, DX, DW, n_rows, n_cols, stride, BLOCK: tl.constexpr, HAS_WEIGHT: tl.constexpr):
    pid = tl.program_id(0)
    num_progs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < n_cols
    if HAS_WEIGHT:
        w = tl.load(W + cols, mask=col_mask, other=0.0)
    for row in range(pid, n_rows, num_progs):
        x = tl.load(X + row * stride + cols, mask=col_mask, other=0.0)
        dy = tl.load(DY + row * stride + cols, mask=col_mask, other=0.0)
        rstd = tl.load(RSTD + row)
        if HAS_WEIGHT:
            tl.store(DX + row * stride + cols, dy * w * rstd, mask=col_mask)
            dw_row = DW + pid * stride
            partial = tl.load(dw_row + cols, mask=col_mask, other=0.0)
            tl.store(dw_row + cols, partial + dy * x * rstd, mask=col_mask)
        else:
            tl.store(DX + row * stride + cols, dy * rstd, mask=col_mask)


@triton.jit
def repeated_update_inplace_kernel(X, n, n_steps, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    for step in range(0, n_steps):
        x = tl.load(X + offsets, mask=inside, other=0.0)
        tl.store(X + offsets, x + x * x * 0.25, mask=inside)


@triton.jit
def block_rows_max_kernel(X, Y, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BC)
    running = tl.full([BC], -1.0e30, dtype=tl.float32)
    for start in range(pid * BR, n_rows, tl.num_programs(0) * BR):
        rows = start + tl.arange(0, BR)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(X + rows[:, None] * n_cols + cols[None, :], mask=mask, other=-1.0e30)
        running = tl.maximum(running, tl.max(x, 0))
    tl.store(Y + pid * n_cols + cols, running, mask=cols < n_cols)
