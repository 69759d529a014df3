#!/usr/bin/env python3
"""Kernels choosing their compute type by their inputs' element types, at mixed dtypes (run on the GPU machine).

tests/kernels/dtype_dispatch.py decides casts with ifs on element types (`if a.dtype != b.dtype:`); their one
backward keeps each choice as a conditional expression that Triton decides when it compiles the backward. The
modules --emit torch wrote (tests/golden/torch/) run here with inputs of different element types, which take the
branches tools/gpu_check's uniform dtypes do not, against torch.autograd in float64.

    python3 tests/gpu/dtype_dispatch.py     # from the repository root; prints one line per case
"""
import importlib.util
import os
import sys

import torch
import triton


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join("tests", "golden", "torch", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rms = load("rms_scale_kernel")
energy = load("energy_cumsum_kernel")
matmul = load("mixed_matmul_kernel")
gen = torch.Generator(device="cuda").manual_seed(0)
failures = 0


def first(out):
    return out if isinstance(out, torch.Tensor) else out[0]


def check(label, inputs, forward, reference, tolerance):
    """Runs forward(*inputs) and reference on float64 copies; compares the gradients of a random projection."""
    global failures
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    out = forward(*leaves)
    upstream = torch.rand(out.shape, generator=gen, device="cuda")
    (out.float() * upstream).sum().backward()
    wide = [x.detach().double().requires_grad_() for x in inputs]
    (reference(*wide) * upstream.double()).sum().backward()
    worst = 0.0
    for got, want in zip(leaves, wide):
        scale = want.grad.abs().max().item() or 1.0
        worst = max(worst, (got.grad.double() - want.grad).abs().max().item() / scale)
    ok = worst <= tolerance
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {label}: max error {worst:.2e} (tolerance {tolerance:.0e})")


rows, cols = 300, 1000
for mode in ("eager", "compile"):
    wrap = torch.compile if mode == "compile" else (lambda f: f)
    for x_dtype, w_dtype in ((torch.float16, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.float32, torch.float16)):
        x = (torch.rand(rows, cols, generator=gen, device="cuda") * 2 - 1).to(x_dtype)
        w = (torch.rand(cols, generator=gen, device="cuda") + 0.5).to(w_dtype)
        run = wrap(lambda x, w: first(rms.rms_scale_kernel[(rows,)](x, w, torch.zeros(rows, cols, device="cuda"), cols,
                                                                    1e-3, BLOCK=1024)))
        check(f"{mode} rms_scale_kernel X={x_dtype} W={w_dtype}", [x, w], run,
              lambda x, w: x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-3) * w,
              2e-2 if torch.bfloat16 in (x_dtype, w_dtype) else 4e-3)
    for x_dtype in (torch.float16, torch.float32):
        x = (torch.rand(rows, cols, generator=gen, device="cuda") * 2 - 1).to(x_dtype)
        run = wrap(lambda x: first(energy.energy_cumsum_kernel[(rows,)](x, torch.zeros(rows, cols, device="cuda"),
                                                                        cols, BLOCK=1024)))
        check(f"{mode} energy_cumsum_kernel X={x_dtype}", [x], run,
              lambda x: torch.cumsum(x * x, 1) / ((x * x).sum(1, keepdim=True) + 1.0),
              4e-3 if x_dtype == torch.float16 else 1e-5)
    m, n, k = 200, 150, 100
    for a_dtype, b_dtype, c_dtype in ((torch.float16, torch.float32, torch.float32),
                                      (torch.float32, torch.bfloat16, torch.bfloat16),
                                      (torch.float16, torch.float16, torch.float32)):
        a = (torch.rand(m, k, generator=gen, device="cuda") * 2 - 1).to(a_dtype)
        b = (torch.rand(k, n, generator=gen, device="cuda") * 2 - 1).to(b_dtype)
        grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
        run = wrap(lambda a, b: first(matmul.mixed_matmul_kernel[grid](
            a, b, torch.zeros(m, n, device="cuda", dtype=c_dtype), m, n, k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)))
        check(f"{mode} mixed_matmul_kernel A={a_dtype} B={b_dtype} C={c_dtype}", [a, b], run, lambda a, b: a @ b,
              2e-2 if torch.bfloat16 in (a_dtype, b_dtype, c_dtype) else 4e-3)

print(f"{failures} failures")
sys.exit(1 if failures else 0)
