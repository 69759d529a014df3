#!/usr/bin/env python3
"""Buffers a caller passes as None, through the modules `--emit torch` wrote (run on the GPU machine).

Kernels take optional buffers guarded by flags (flash-attention's layer norm passes RESIDUAL, X1, W1, B1,
Y1, ... as None when unused), or test the pointer itself (`if W is None:`, FlagGems' norms). The generated op must launch the kernel with None there, return None for an
output passed as None, and give no gradient to an input passed as None, eagerly and under torch.compile.
Gradients are compared with torch.autograd in float64.

    python3 tests/gpu/optional_buffers.py        # from the repository root; prints one line per case
"""
import importlib.util
import os
import sys

import torch


def load(name):
    path = os.path.join("tests", "golden", "torch", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.compile imports a traced function's module by name
    spec.loader.exec_module(module)
    return module


failures = 0


def check(label, got, want, tol=1e-5):
    global failures
    if want is None or got is None:
        ok = got is None and want is None
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {'None' if got is None else 'a tensor'} "
              f"(expected {'None' if want is None else 'a tensor'})")
    else:
        err = (got.double() - want.double()).abs().max().item()
        ok = err <= tol * max(1.0, want.double().abs().max().item())
        print(f"{'ok  ' if ok else 'FAIL'} {label}: max_abs_err={err:.3g}")
    failures += not ok


gated = load("gated_affine_kernel")
optional = load("optional_accumulator_kernel")
dev = "cuda"
torch.manual_seed(0)


def gated_case(has_weight, has_bias, compiled):
    rows, n = 5, 37
    x = torch.randn(rows, n, device=dev, requires_grad=True)
    w = torch.randn(n, device=dev, requires_grad=True) if has_weight else None
    b = torch.randn(n, device=dev, requires_grad=True) if has_bias else None
    y = torch.empty(rows, n, device=dev)

    def run(x, w, b):
        return gated.gated_affine_kernel[(rows,)](x, w, b, y, n, HAS_WEIGHT=has_weight, HAS_BIAS=has_bias, BLOCK=64).Y

    out = (torch.compile(run, fullgraph=True) if compiled else run)(x, w, b)
    g = torch.randn(rows, n, device=dev, dtype=torch.float64)
    (out.double() * g).sum().backward()
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_() if w is not None else None
    b64 = b.detach().double().requires_grad_() if b is not None else None
    pre = x64 * x64 * (w64 if w64 is not None else 1.0) + (b64 if b64 is not None else 0.0)
    want = torch.sigmoid(pre)
    (want * g).sum().backward()
    label = f"gated_affine HAS_WEIGHT={has_weight} HAS_BIAS={has_bias} {'compile' if compiled else 'eager'}"
    check(label + " Y", out, want)
    check(label + " dX", x.grad, x64.grad)
    if has_weight:
        check(label + " dW", w.grad, w64.grad)
    if has_bias:
        check(label + " dB", b.grad, b64.grad)


def optional_case(has_z, compiled):
    rows, chunks, block = 3, 4, 16
    x = torch.randn(rows * chunks * block, device=dev, requires_grad=True)
    w = torch.randn(chunks * block, device=dev, requires_grad=True) if has_z else None
    y = torch.empty(rows * block, device=dev)
    z = torch.empty(rows * block, device=dev) if has_z else None

    def run(x, w):
        return optional.optional_accumulator_kernel[(rows,)](x, w, y, z, chunks, HAS_Z=has_z, BLOCK=block)

    out = (torch.compile(run, fullgraph=True) if compiled else run)(x, w)
    label = f"optional_accumulator HAS_Z={has_z} {'compile' if compiled else 'eager'}"
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_() if w is not None else None
    xs = x64.view(rows, chunks, block)
    y_want = (xs * xs).sum(1).reshape(-1)
    gy = torch.randn(rows * block, device=dev, dtype=torch.float64)
    loss, loss_want = (out.Y.double() * gy).sum(), (y_want * gy).sum()
    z_want = torch.sigmoid((xs * w64.view(1, chunks, block)).sum(1).reshape(-1)) if has_z else None
    if has_z:
        gz = torch.randn(rows * block, device=dev, dtype=torch.float64)
        loss, loss_want = loss + (out.Z.double() * gz).sum(), loss_want + (z_want * gz).sum()
    check(label + " Y", out.Y, y_want)
    check(label + " Z", out.Z, z_want)  # None where Z was passed as None
    loss.backward()
    loss_want.backward()
    check(label + " dX", x.grad, x64.grad)
    if has_z:
        check(label + " dW", w.grad, w64.grad)


normed = load("optional_affine_norm_kernel")


def optional_pointer_case(has_weight, has_bias, compiled):
    # No flag: the kernel tests `W is None` itself (tests/kernels/optional_pointers.py); the backward dispatches on it.
    rows, n = 6, 100
    x = torch.randn(rows, n, device=dev, requires_grad=True)
    w = (torch.rand(n, device=dev) + 0.5).requires_grad_() if has_weight else None
    b = torch.randn(n, device=dev, requires_grad=True) if has_bias else None

    def run(x, w, b):
        out = normed.optional_affine_norm_kernel[(rows,)](x, w, b, torch.empty(rows, n, device=dev), n, 1e-3, BLOCK=128)
        return out if isinstance(out, torch.Tensor) else out[0]

    out = (torch.compile(run, fullgraph=True) if compiled else run)(x, w, b)
    g = torch.randn(rows, n, device=dev, dtype=torch.float64)
    (out.double() * g).sum().backward()
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_() if w is not None else None
    b64 = b.detach().double().requires_grad_() if b is not None else None
    xc = x64 - x64.mean(1, keepdim=True)
    want = xc * torch.rsqrt((xc * xc).mean(1, keepdim=True) + 1e-3) * (w64 if w64 is not None else 1.0)
    want = want + (b64 if b64 is not None else 0.0)
    (want * g).sum().backward()
    label = f"optional_affine_norm W={'tensor' if has_weight else 'None'} B={'tensor' if has_bias else 'None'} " \
            f"{'compile' if compiled else 'eager'}"
    check(label + " Y", out, want)
    check(label + " dX", x.grad, x64.grad)
    if has_weight:
        check(label + " dW", w.grad, w64.grad)
    if has_bias:
        check(label + " dB", b.grad, b64.grad)


for compiled in (False, True):
    for has_weight in (False, True):
        for has_bias in (False, True):
            optional_pointer_case(has_weight, has_bias, compiled)
    for has_weight in (False, True):
        for has_bias in (False, True):
            gated_case(has_weight, has_bias, compiled)
    for has_z in (False, True):
        optional_case(has_z, compiled)
print(f"{failures} failures")
sys.exit(1 if failures else 0)
