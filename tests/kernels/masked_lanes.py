# Kernels whose padding lanes hold -inf: the forward discards those lanes (a
# tl.where, a store's mask), so its results are finite, but a backward that
# multiplies the zero gradient of a discarded lane by the -inf or NaN value
# there makes NaN (0 * inf), and a sum spreads it over the whole row.
import triton
import triton.language as tl


@triton.jit
def kl_rows_kernel(P, Q, Loss, stride, n_cols, BLOCK: tl.constexpr):
    # KL(p || q) of each row of two logit matrices: sum over columns of p * (log p - log q).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    p = tl.load(P + row * stride + cols, mask=mask, other=float('-inf'))
    q = tl.load(Q + row * stride + cols, mask=mask, other=float('-inf'))
    p_log = p - tl.max(p, 0)
    p_log = p_log - tl.log(tl.sum(tl.exp(p_log), 0))
    q_log = q - tl.max(q, 0)
    q_log = q_log - tl.log(tl.sum(tl.exp(q_log), 0))
    # In a padding lane p_log - q_log is -inf - -inf = NaN: the where discards it.
    kl = tl.where(mask, tl.exp(p_log) * (p_log - q_log), 0.0)
    tl.store(Loss + row, tl.sum(kl, 0))


@triton.jit
def padded_scale_kernel(X, S, Y, n_cols, BLOCK: tl.constexpr):
    # Every row scaled by one scalar; padding lanes of x are -inf and never stored, but the scalar's gradient
    # sums over all lanes of the row.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=float('-inf'))
    s = tl.load(S)
    tl.store(Y + row * n_cols + cols, x * s, mask=mask)


@triton.jit
def reshaped_scale_kernel(X, S, Out, n, B: tl.constexpr):
    # The padding reaches the where through a method of the loaded tile (x.reshape), not a tl function.
    offs = tl.arange(0, B)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=float('-inf'))
    s = tl.load(S)
    z = tl.where(mask, x.reshape(B) * s, 0.0)
    tl.store(Out, tl.sum(z, 0))


@triton.jit
def _log_of(x):
    # A jit helper: its backward (b / x) is a call the kernel's backward does not look into.
    return tl.log(x)


@triton.jit
def _clipped_log(x):
    # log where x > 0, else 0: the gradient at x <= 0 is 0, not b / x (0 / 0 = NaN at x == 0).
    return tl.where(x > 0, tl.log(x), 0.0)


@triton.jit
def log_rows_kernel(X, W, Out, n_cols, BLOCK: tl.constexpr):
    # The sum of log(w * x) over each row; padding lanes load 0.0, whose log is discarded by the where,
    # but the helper's backward divides by it there, and W's gradient sums over every lane.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(W)
    y = tl.where(mask, _log_of(x * w), 0.0)
    tl.store(Out + row, tl.sum(y, 0))


@triton.jit
def softplus_kernel(X, Y, n, BLOCK: tl.constexpr):
    # softplus, linear past 20: the where discards exp(x), which is inf past 88 in fp32 (709 in fp64), and
    # the gradient of the discarded branch there is 0 * inf unless selected.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    y = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    tl.store(Y + offs, y, mask=mask)
