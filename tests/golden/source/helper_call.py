import torch
import triton
import triton.language as tl


@triton.jit
def _gelu(x, inv_sqrt2: tl.constexpr = 0.7071067811865476):
    return 0.5 * x * (1.0 + tl.math.erf(x * inv_sqrt2))


@triton.jit
def _tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def _gelu_tanh(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + _tanh(inner))


@triton.jit
def _gelu_and_grad(x):
    cdf = 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))
    pdf = tl.exp(-0.5 * x * x) * 0.3989422804014327
    y = x * cdf
    dy = cdf + x * pdf
    return y, dy


@triton.jit
def bias_gelu_kernel(X, Bias, Y, G, M, N, stride_xm, stride_ym, stride_gm, APPROX: tl.constexpr, STORE_GRAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=0.).to(tl.float32)
    b = tl.load(Bias + cols, mask=cols < N, other=0.).to(tl.float32)
    z = x + b[None, :]
    if APPROX:
        y = _gelu_tanh(z)
    else:
        y = _gelu(z)
    tl.store(Y + rows[:, None] * stride_ym + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    if STORE_GRAD:
        _, g = _gelu_and_grad(z)
        tl.store(G + rows[:, None] * stride_gm + cols[None, :], g, mask=mask)
