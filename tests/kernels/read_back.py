# Loads that read back what the same program stored (src/ad/StoredValueForwarding.h): the backward takes the
# stored value, rounded to the buffer's type, instead of what memory held before the kernel.
import triton
import triton.language as tl


# Two passes over a block of rows, column block by column block: the first writes x * w, the third adds a
# term that needs the whole row (as fla's WY-representation backwards write dk in one loop and add to it in a
# later one). The third loop's loads read what the first loop's iteration with the same index stored. X's rows are
# stride_x apart (an expanded view: 0).
@triton.jit
def two_pass_kernel(X, W, Y, n_rows, stride_x, N: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < n_rows
    w = tl.load(W + rows, mask=row_mask, other=0.0)
    for i in range(tl.cdiv(N, BLOCK_N)):
        cols = i * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
        tl.store(Y + rows[:, None] * N + cols[None, :], x * w[:, None], mask=mask)
    total = tl.zeros([BLOCK_R], dtype=tl.float32)
    for i in range(tl.cdiv(N, BLOCK_N)):
        cols = i * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
        total += tl.sum(x * x, axis=1)
    for i in range(tl.cdiv(N, BLOCK_N)):
        cols = i * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        y = tl.load(Y + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
        tl.store(Y + rows[:, None] * N + cols[None, :], y + tl.sqrt(total + 1.0)[:, None], mask=mask)


@triton.jit
def _store_scaled(Y, offs, mask, x, scale):
    tl.store(Y + offs, x * scale, mask=mask)


# A helper stores, the kernel loads the same addresses back and writes them again: the load reads the helper's
# value (as fla's parallel simple GLA backward stores dg in its dq part and subtracts from it in its dk part).
@triton.jit
def reread_kernel(X, Y, Z, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    _store_scaled(Y, offs, mask, tl.exp(x), scale)
    y = tl.load(Y + offs, mask=mask, other=0.0)
    z = y * x
    tl.store(Z + offs, z, mask=mask)
    tl.store(Y + offs, y - z, mask=mask)
