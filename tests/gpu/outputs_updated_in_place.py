#!/usr/bin/env python3
"""Outputs the caller updates in place before calling backward, through the modules `--emit torch` wrote.

Host code often finishes a kernel's output in place: unsloth's cross entropy adds the logsumexp to the losses its
kernel returns (`losses += ...; losses.masked_fill_(...)`). Where the backward does not read the output's values
(vector add: only its layout), the module keeps the layout, not the tensor, so autograd takes the update: the
gradient is the kernel's composed with the update's. Where the backward reads what the forward stored (layer
norm reads its Rstd), autograd must refuse the update, as it refuses one of any tensor saved for backward: a
changed Rstd would give a wrong gradient. Eagerly and under torch.compile; gradients against float64 references.

    python3 tests/gpu/outputs_updated_in_place.py        # from the repository root, on the GPU machine
    INPLACE_CPU=1 TRITON_INTERPRET=1 python3 tests/gpu/outputs_updated_in_place.py     # on the CPU
"""
import importlib.util
import os
import sys

import torch

DEV = "cpu" if os.environ.get("INPLACE_CPU") == "1" else "cuda"
os.environ.setdefault("TGRAD_CHECK_STAND_INS", "1")  # a stand-in the backward read would give NaN gradients


def load(name):
    path = os.path.join("tests", "golden", "torch", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.compile imports a traced function's module by name
    spec.loader.exec_module(module)
    return module


failures = 0


def report(ok, label):
    global failures
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {label}")


gen = torch.Generator(device=DEV).manual_seed(0)
modes = ("eager",) if DEV == "cpu" else ("eager", "compile")

add = load("add_kernel")
n = 1000
for mode in modes:
    x = torch.randn(n, generator=gen, device=DEV, requires_grad=True)
    y = torch.randn(n, generator=gen, device=DEV, requires_grad=True)
    w = torch.randn(n, generator=gen, device=DEV)

    def run(x, y):
        out, = add.add_kernel[(4,)](x, y, torch.empty_like(x), n, BLOCK_SIZE=256)
        out.mul_(3.0)          # updated in place, as a caller's epilogue does
        out.masked_fill_(w > 1.0, 0.0)
        return (out * w).sum()

    loss = (torch.compile(run, fullgraph=True) if mode == "compile" else run)(x, y)
    loss.backward()
    want = torch.where(w > 1.0, 0.0, 3.0 * w.double())
    for name, t in (("x", x), ("y", y)):
        err = (t.grad.double() - want).abs().max().item()
        report(err <= 1e-6, f"vector add, its output scaled and masked in place after the launch ({mode}): d{name} "
                            f"max error {err:.1e}")

norm = load("layer_norm_kernel")
rows, cols = 8, 100
x = torch.randn(rows, cols, generator=gen, device=DEV, requires_grad=True)
w = torch.randn(cols, generator=gen, device=DEV, requires_grad=True)
b = torch.randn(cols, generator=gen, device=DEV, requires_grad=True)
y, mean, rstd = norm.layer_norm_fwd_kernel[(rows,)](x, torch.empty_like(x), w, b, torch.empty(rows, device=DEV),
                                                    torch.empty(rows, device=DEV), cols, cols, cols, 1e-5,
                                                    BLOCK_SIZE=128)
y.mul_(2.0)  # Y: the backward does not read it, the update is taken
rstd.add_(1.0)  # Rstd: the backward reads it, so autograd must refuse
try:
    y.sum().backward()
    report(False, "layer norm, Rstd updated in place: backward ran (its gradient would use the changed Rstd)")
except RuntimeError as e:
    report("modified by an inplace operation" in str(e),
           f"layer norm, Rstd updated in place: refused by autograd ({str(e).splitlines()[0][:80]}...)")

print(f"{'all pass' if failures == 0 else f'{failures} failed'}")
sys.exit(1 if failures else 0)
