# Names that hold different things at different points of a kernel, and
# pointers reshaped or wrapped in compiler hints: tgrad reads each name as
# what it holds where it is read (kernl's `bias = tl.load(bias + offs)`, the
# GPTQ kernels' one `ptr` for the scales and then for the packed zeros,
# mamba's `w_base[None, :]`, fla's `tl.max_contiguous(tl.multiple_of(p, BK), BK)`).
import triton
import triton.language as tl


@triton.jit
def biased_scale_kernel(X, bias, Y, n, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        # The parameter becomes the values loaded through it.
        bias = tl.load(bias + offs, mask=mask, other=0.0).to(tl.float32)
        x = x * bias + bias
    tl.store(Y + offs, x * x, mask=mask)


@triton.jit
def dequant_scale_kernel(S, Z, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # One name for two pointers: first the float scales, then the packed integers.
    ptr = S + offs
    s = tl.load(ptr, mask=mask, other=0.0)
    ptr = Z + offs
    z = tl.load(ptr, mask=mask, other=0)
    z = (z >> 4) & 0xF
    y = (z + 1).to(tl.float32) * s
    tl.store(Y + offs, y * s, mask=mask)


@triton.jit
def hinted_rows_kernel(X, W, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # A pointer wrapped in hints, and a row of pointers reshaped to [1, BLOCK].
    x_ptrs = tl.max_contiguous(tl.multiple_of(X + row * n_cols + cols, BLOCK), BLOCK)
    w_row = W + cols
    w_ptrs = w_row[None, :]
    x = tl.load(x_ptrs, mask=mask, other=0.0)
    w = tl.load(w_ptrs, mask=mask[None, :], other=0.0)
    y = x[None, :] * w
    tl.store(Y + row * n_cols + cols[None, :], y * y, mask=mask[None, :])


@triton.jit
def shifted_with_state_kernel(X, S, Y, n_cols, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    # Each row shifted right by SHIFT, the lanes it leaves taken from that row's state: the loaded state is
    # the load's `other`, so its gradient is what those lanes receive (mamba's causal conv1d with
    # initial_states; once given no gradient at all).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    state = tl.load(S + row * SHIFT + cols, mask=cols < SHIFT, other=0.0)
    src = cols - SHIFT
    x = tl.load(X + row * n_cols + src, mask=(src >= 0) & (src < n_cols), other=state)
    tl.store(Y + row * n_cols + cols, x * x, mask=cols < n_cols)
