import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_fwd_kernel(X, W, Y, Rstd, stride_x_row, stride_y_row, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride_x_row + cols, mask=mask, other=0.).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / N
    rstd = tl.math.rsqrt(mean_sq + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    y = x * rstd * w
    tl.store(Y + row * stride_y_row + cols, y.to(Y.dtype.element_ty), mask=mask)
