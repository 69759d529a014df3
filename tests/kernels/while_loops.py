# While loops that step one variable, as persistent kernels walk their work: tgrad counts their trips from the
# bounds before the loop and differentiates them as counted for loops (src/ad/WhileLoops.h).
import triton
import triton.language as tl


# A grid-stride row loop: each program takes every NUM_PROGRAMS-th row (the step's sign known at run time only).
@triton.jit
def persistent_rows_kernel(X, W, Y, n_rows, n_cols, NUM_PROGRAMS, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(W + cols, mask=mask, other=0.0)
    while row < n_rows:
        x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
        tl.store(Y + row * n_cols + cols, tl.exp(x) * w, mask=mask)
        row += NUM_PROGRAMS


# The same walk stepping by the grid's size: a step known to be positive (tgrad counts one direction only).
@triton.jit
def grid_stride_rows_kernel(X, W, Y, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(W + cols, mask=mask, other=0.0)
    while row < n_rows:
        x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
        tl.store(Y + row * n_cols + cols, tl.sin(x) * w, mask=mask)
        row += tl.num_programs(0)


# Groups of rows of sizes read from memory, their tiles dealt to the programs in turn as a grouped GEMM's persistent
# kernel deals them: the tile index is carried from group to group, and a while loop with two bounds takes the
# tiles of the current group that fall to this program.
@triton.jit
def grouped_tiles_kernel(X, W, Y, sizes, n_groups, n_cols, NUM_SMS, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tidx = tl.program_id(0)
    done = 0
    row_end = 0
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    for g in range(n_groups):
        row_start = row_end
        m_size = tl.load(sizes + g)
        row_end = row_start + m_size
        tiles = tl.cdiv(m_size, BLOCK_M)
        w = tl.load(W + g * n_cols + cols, mask=cols < n_cols, other=0.0)
        while tidx >= done and tidx < done + tiles:
            r = (tidx - done) * BLOCK_M + rows
            mask = (r[:, None] < m_size) & (cols[None, :] < n_cols)
            offsets = (row_start + r)[:, None] * n_cols + cols[None, :]
            x = tl.load(X + offsets, mask=mask, other=0.0)
            tl.store(Y + offsets, tl.sigmoid(x) * w[None, :], mask=mask)
            tidx += NUM_SMS
        done += tiles


# Rows walked from `first - program id` by `-= STEP` (down for a positive STEP, up for a negative one), the bound
# below written first.
@triton.jit
def descending_rows_kernel(X, Y, first, n_rows, n_cols, STEP, BLOCK: tl.constexpr):
    row = first - tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    carry = tl.zeros([BLOCK], dtype=tl.float32)
    while 0 <= row and row < n_rows:
        x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
        carry = carry * 0.5 + x * x
        tl.store(Y + row * n_cols + cols, carry, mask=mask)
        row -= STEP


# A loop until a value computed inside it crosses a bound: its trip count depends on the data, and tgrad refuses it.
@triton.jit
def until_converged_kernel(X, Y, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < n_cols, other=0.0)
    total = tl.sum(x * x)
    while total > 1.0:
        x = x * 0.5
        total = tl.sum(x * x)
    tl.store(Y + cols, x, mask=cols < n_cols)


# A float step counts no integer trips: refused with the same located error.
@triton.jit
def float_step_kernel(X, Y, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols)
    elapsed = 0.0
    while elapsed < n:
        x = x * 0.9
        elapsed += 0.5
    tl.store(Y + cols, x)
