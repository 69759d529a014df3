import math
import sys
import torch
import triton
import triton.language as tl

BLOCK: tl.constexpr = 128
EPS = tl.constexpr(1e-6)


def _plain(x):
    return x * tl.sigmoid(x)


_plain_jit = triton.jit(_plain)


@triton.jit
def _fast_exp(x):
    return tl.exp(x)


@triton.heuristics({"EVEN_N": lambda args: args["N"] % args["BLOCK_N"] == 0})
@triton.jit
def _silu_scale_fwd_kernel(X, Y, N, scale, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    """Y = scale * silu(X); each program handles BLOCK_N contiguous elements.

    When EVEN_N is true (set by the heuristic) the bounds mask is skipped.
    """
    pid = tl.program_id(0)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    if EVEN_N:
        x = tl.load(X + offs).to(tl.float32)
    else:
        x = tl.load(X + offs, mask=offs < N, other=0.).to(tl.float32)
    y = _plain_jit(x) * scale
    if EVEN_N:
        tl.store(Y + offs, y.to(Y.dtype.element_ty))
    else:
        tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=offs < N)


@triton.jit
def _silu_scale_bwd_kernel(X, DY, DX, N, scale, BLOCK_N: tl.constexpr):
    """DX = DY * scale * d silu(X) / dX."""
    pid = tl.program_id(0)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.).to(tl.float32)
    dy = tl.load(DY + offs, mask=mask, other=0.).to(tl.float32)
    s = 1.0 / (1.0 + _fast_exp(-x))
    dx = dy * scale * (s + x * s * (1.0 - s))
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n"])
def _l2_normalize_kernel(X, Y, stride_x, stride_y, n, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n, other=0.).to(tl.float32)
        sq += x * x
    inv_norm = 1.0 / tl.sqrt(tl.sum(sq, axis=0) + EPS)
    for start in range(0, n, BLOCK_SIZE):
        m = start + cols < n
        x = tl.load(x_row + start + cols, mask=m, other=0.).to(tl.float32)
        tl.store(y_row + start + cols, (x * inv_norm).to(Y.dtype.element_ty), mask=m)
