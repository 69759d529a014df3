import triton
import triton.language as tl


@triton.jit
def biased_scale_kernel(X, bias, Y, n, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias + offs, mask=mask, other=0.0).to(tl.float32)
        x = x * bias + bias
    tl.store(Y + offs, x * x, mask=mask)


@triton.jit
def dequant_scale_kernel(S, Z, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ptr = S + offs
    s = tl.load(ptr, mask=mask, other=0.0)
    ptr = Z + offs
    z = tl.load(ptr, mask=mask, other=0)
    z = z >> 4 & 0xF
    y = (z + 1).to(tl.float32) * s
    tl.store(Y + offs, y * s, mask=mask)


@triton.jit
def hinted_rows_kernel(X, W, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x_ptrs = tl.max_contiguous(tl.multiple_of(X + row * n_cols + cols, BLOCK), BLOCK)
    w_row = W + cols
    w_ptrs = w_row[None, :]
    x = tl.load(x_ptrs, mask=mask, other=0.0)
    w = tl.load(w_ptrs, mask=mask[None, :], other=0.0)
    y = x[None, :] * w
    tl.store(Y + row * n_cols + cols[None, :], y * y, mask=mask[None, :])


@triton.jit
def shifted_with_state_kernel(X, S, Y, n_cols, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    state = tl.load(S + row * SHIFT + cols, mask=cols < SHIFT, other=0.0)
    src = cols - SHIFT
    x = tl.load(X + row * n_cols + src, mask=(src >= 0) & (src < n_cols), other=state)
    tl.store(Y + row * n_cols + cols, x * x, mask=cols < n_cols)
