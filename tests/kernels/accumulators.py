# Kernels that keep a running value in memory: each loop iteration loads what the one before
# stored at the same addresses. tgrad differentiates the loop as if the value were carried in a
# register (src/ad/MemoryAccumulators.h).
import triton
import triton.language as tl


# A norm's backward in the shape Liger writes it: a grid-stride loop over rows, each program adding
# its rows' weight gradient into its own row of DW (in memory), summed later on the host. Here
# the "gradient" is DY * X * RSTD, DX is DY * W * RSTD; with HAS_WEIGHT False there is no W.
@triton.jit
def weight_rows_kernel(X, DY, W, RSTD, DX, DW, n_rows, n_cols, stride,
                       BLOCK: tl.constexpr, HAS_WEIGHT: tl.constexpr):
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


# Applies x <- x + x * x / 4 to each block of X, n_steps times, in place: the loop loads what its
# previous iteration stored, a nonlinear update whose incoming values the backward tapes.
@triton.jit
def repeated_update_inplace_kernel(X, n, n_steps, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    for step in range(0, n_steps):
        x = tl.load(X + offsets, mask=inside, other=0.0)
        tl.store(X + offsets, x + x * x * 0.25, mask=inside)


# Blocks of BR rows in a grid-stride loop whose step is the program count times BR (Liger's block
# rms norm): the running maximum is taped, so the backward counts the loop's iterations.
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
