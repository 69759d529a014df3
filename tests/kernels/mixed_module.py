# Mixed module: Triton kernels interleaved with ordinary PyTorch launcher and autograd code.
"""Scaled SiLU (y = scale * x * sigmoid(x)) and row L2-normalization.

This module deliberately mixes plain Python, PyTorch autograd plumbing and
several ways of defining Triton JIT functions.
"""
import math
import sys

import torch
import triton
import triton.language as tl

# Module-level compile-time constants.
# NOTE: Triton 3.6 refuses to read an *annotated* global (BLOCK) from jit code,
# so BLOCK is only used host-side (passed in as BLOCK_SIZE); EPS is a real
# tl.constexpr instance and is read directly inside _l2_normalize_kernel.
BLOCK: tl.constexpr = 128
EPS = tl.constexpr(1e-6)

# Plain (non-constexpr) module data, only used by host code.
_DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
_DEFAULT_BLOCK_N = 1024


def _plain(x):
    # SiLU written as an undecorated function; it is wrapped by triton.jit below.
    return x * tl.sigmoid(x)


# Turn the plain function into a JIT function without decorator syntax.
_plain_jit = triton.jit(_plain)


# Pick an exp implementation at import time (jit functions inside an `if`).
if hasattr(tl, "exp2"):
    @triton.jit
    def _fast_exp(x):
        # exp(x) = 2 ** (x * log2(e))
        return tl.exp2(x * 1.4426950408889634)
else:
    @triton.jit
    def _fast_exp(x):
        # Fallback for very old Triton versions.
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
    # Call the JIT function created via triton.jit(_plain).
    y = _plain_jit(x) * scale
    if EVEN_N:
        tl.store(Y + offs, y.to(Y.dtype.element_ty))
    else:
        # Multi-line call with implicit line joining inside the parentheses.
        tl.store(
            Y + offs,
            y.to(Y.dtype.element_ty),
            mask=offs < N,
        )


@triton.jit
def _silu_scale_bwd_kernel(X, DY, DX, N, scale, BLOCK_N: tl.constexpr):
    """DX = DY * scale * d silu(X) / dX."""
    pid = tl.program_id(0)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.).to(tl.float32)
    dy = tl.load(DY + offs, mask=mask, other=0.).to(tl.float32)
    # sigmoid via the exp helper selected at import time
    s = 1.0 / (1.0 + _fast_exp(-x))
    # d/dx [x * s(x)] = s + x * s * (1 - s); note the backslash continuation.
    dx = dy * scale * \
        (s + x * s * (1.0 - s))
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n"])
def _l2_normalize_kernel(X, Y, stride_x, stride_y, n, BLOCK_SIZE: tl.constexpr):
    # One program per row; the row is streamed in chunks of BLOCK_SIZE.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n, other=0.).to(tl.float32)
        sq += x * x
    # EPS is a module-level tl.constexpr.
    inv_norm = 1.0 / tl.sqrt(tl.sum(sq, axis=0) + EPS)
    for start in range(0, n, BLOCK_SIZE):
        m = start + cols < n
        x = tl.load(x_row + start + cols, mask=m, other=0.).to(tl.float32)
        tl.store(y_row + start + cols, (x * inv_norm).to(Y.dtype.element_ty), mask=m)


def _launch_fwd(x: torch.Tensor, scale: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)
    _silu_scale_fwd_kernel[grid](x, y, n, scale, BLOCK_N=_DEFAULT_BLOCK_N)
    return y


class MyOp(torch.autograd.Function):
    """Autograd wrapper around the scaled-SiLU kernels."""

    @staticmethod
    def forward(ctx, x, scale=1.0):
        x = x.contiguous()
        ctx.save_for_backward(x)
        ctx.scale = scale
        return _launch_fwd(x, scale)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(x)
        n = x.numel()
        _silu_scale_bwd_kernel[(triton.cdiv(n, _DEFAULT_BLOCK_N),)](
            x, dy, dx, n, ctx.scale, BLOCK_N=_DEFAULT_BLOCK_N,
        )
        # No gradient with respect to the python float `scale`.
        return dx, None


def scaled_silu(x, scale=1.0):
    return MyOp.apply(x, scale)


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Normalize each row of a 2D tensor to unit L2 norm."""
    assert x.dim() == 2, f"expected 2D input, got {x.dim()}D"
    y = torch.empty_like(x)
    _l2_normalize_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1],
                                         BLOCK_SIZE=BLOCK)
    return y


def _check(name, got, ref, tol):
    err = (got.float() - ref.float()).abs().max().item()
    status = "ok" if err <= tol else "FAIL"
    print(f"{name:<24s} max err {err:.3e} [{status}]")
    return err <= tol


if __name__ == "__main__":
    torch.manual_seed(0)
    results = {}
    dtypes = [torch.float32, torch.float16]
    sizes = [n * 1000 + 24 for n in range(1, 4)] + [_DEFAULT_BLOCK_N * 4]
    for dtype in dtypes:
        for size in sizes:
            x = torch.randn(size, device="cuda", dtype=dtype, requires_grad=True)
            y = scaled_silu(x, 0.5)
            y.backward(torch.ones_like(y))
            ref_x = x.detach().float().requires_grad_()
            ref = 0.5 * torch.nn.functional.silu(ref_x)
            ref.backward(torch.ones_like(ref))
            tag = f"{_DTYPE_NAMES[dtype]}/{size}"
            tol = 1e-2 if dtype == torch.float16 else 1e-5
            results[tag + " fwd"] = _check(tag + " fwd", y, ref, tol)
            results[tag + " bwd"] = _check(tag + " bwd", x.grad, ref_x.grad, tol)

    with torch.no_grad():
        rows = torch.randn(17, 777, device="cuda")
        normed = l2_normalize(rows)
        results["l2"] = _check("l2_normalize", normed, torch.nn.functional.normalize(rows, dim=1), 1e-5)

    try:
        l2_normalize(torch.randn(3, device="cuda"))
    except AssertionError as e:
        print(f"rejected 1D input as expected: {e}")

    failed = [k for k, ok in results.items() if not ok]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed")
    sys.exit(1 if failed else 0)
