import triton
import triton.language as tl


@triton.jit
def kl_rows_kernel(P, Q, Loss, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    p = tl.load(P + row * stride + cols, mask=mask, other=float('-inf'))
    q = tl.load(Q + row * stride + cols, mask=mask, other=float('-inf'))
    p_log = p - tl.max(p, 0)
    p_log = p_log - tl.log(tl.sum(tl.exp(p_log), 0))
    q_log = q - tl.max(q, 0)
    q_log = q_log - tl.log(tl.sum(tl.exp(q_log), 0))
    kl = tl.where(mask, tl.exp(p_log) * (p_log - q_log), 0.0)
    tl.store(Loss + row, tl.sum(kl, 0))


@triton.jit
def padded_scale_kernel(X, S, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=float('-inf'))
    s = tl.load(S)
    tl.store(Y + row * n_cols + cols, x * s, mask=mask)


@triton.jit
def reshaped_scale_kernel(X, S, Out, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=float('-inf'))
    s = tl.load(S)
    z = tl.where(mask, x.reshape(B) * s, 0.0)
    tl.store(Out, tl.sum(z, 0))


@triton.jit
def _log_of(x):
    return tl.log(x)


@triton.jit
def _clipped_log(x):
    return tl.where(x > 0, tl.log(x), 0.0)


@triton.jit
def log_rows_kernel(X, W, Out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(W)
    y = tl.where(mask, _log_of(x * w), 0.0)
    tl.store(Out + row, tl.sum(y, 0))


@triton.jit
def softplus_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    y = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    tl.store(Y + offs, y, mask=mask)
