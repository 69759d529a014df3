# Rotary embedding with interleaved pairs: the two values each rotation
# turns are neighbours (x[2i], x[2i+1]), taken apart with tl.split and put
# back with tl.join (as mamba3's kernels write it).
import triton
import triton.language as tl


@triton.jit
def rotary_pairs_kernel(X, COS, SIN, Y, n_rows, HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    cols = tl.arange(0, 2 * HALF)
    half_cols = tl.arange(0, HALF)
    x = tl.load(X + rows[:, None] * (2 * HALF) + cols[None, :], mask=row_mask[:, None], other=0.0)
    cos = tl.load(COS + rows[:, None] * HALF + half_cols[None, :], mask=row_mask[:, None], other=1.0)
    sin = tl.load(SIN + rows[:, None] * HALF + half_cols[None, :], mask=row_mask[:, None], other=0.0)
    x0, x1 = tl.split(tl.reshape(x, [BLOCK_ROWS, HALF, 2]))
    y = tl.join(x0 * cos - x1 * sin, x0 * sin + x1 * cos)
    tl.store(Y + rows[:, None] * (2 * HALF) + cols[None, :], tl.reshape(y, [BLOCK_ROWS, 2 * HALF]),
             mask=row_mask[:, None])


# The same rotation on one row with tl.interleave, and the pair sums
# returned through a second output.
@triton.jit
def rotary_interleave_kernel(X, COS, SIN, Y, S, HALF: tl.constexpr):
    # A local constexpr (flash-attention's rotary writes `BLOCK_K: tl.constexpr = ...`): the annotation is what
    # lets tl.arange take it, so the backward keeps it.
    WIDTH: tl.constexpr = 2 * HALF
    row = tl.program_id(0)
    x = tl.load(X + row * WIDTH + tl.arange(0, WIDTH))
    cos = tl.load(COS + row * HALF + tl.arange(0, HALF))
    sin = tl.load(SIN + row * HALF + tl.arange(0, HALF))
    x0, x1 = tl.split(tl.reshape(x, [HALF, 2]))
    tl.store(Y + row * WIDTH + tl.arange(0, WIDTH), tl.interleave(x0 * cos - x1 * sin, x0 * sin + x1 * cos))
    tl.store(S + row * HALF + tl.arange(0, HALF), x0 + x1)


# The rotation in place, a block of pairs per iteration, read and written as
# the strided halves X + 2 * d and X + 2 * d + 1 (as Liger's llama4 rope does):
# a later iteration's loads never meet an earlier iteration's stores, so X
# after the kernel is a function of X before it.
@triton.jit
def rotary_pairs_inplace_kernel(X, COS, SIN, row_stride, HALF: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = X + row * row_stride
    for start in range(0, HALF, BLOCK):
        d = start + tl.arange(0, BLOCK)
        mask = d < HALF
        cos = tl.load(COS + row * HALF + d, mask=mask, other=1.0)
        sin = tl.load(SIN + row * HALF + d, mask=mask, other=0.0)
        x0 = tl.load(x_row + d * 2, mask=mask, other=0.0)
        x1 = tl.load(x_row + d * 2 + 1, mask=mask, other=0.0)
        tl.store(x_row + d * 2, x0 * cos - x1 * sin, mask=mask)
        tl.store(x_row + d * 2 + 1, x0 * sin + x1 * cos, mask=mask)
