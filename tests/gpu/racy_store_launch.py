#!/usr/bin/env python3
"""A forward whose programs store values of their own at shared addresses (run on the GPU machine).

tests/kernels/last_state.py stores each program's row at the same addresses: the output is the last store's, which
is right only for a grid of one program, and so is its backward (tgrad warns; the backward asserts
tl.num_programs(0) == 1). The module --emit torch wrote (tests/golden/torch/last_state_kernel.py) must give the
gradient torch.autograd gives for one program, and refuse a backward launch with more (a ValueError naming the
axis), rather than give a wrong gradient.

    python3 tests/gpu/racy_store_launch.py     # from the repository root; prints one line per case
    RACY_CPU=1 TRITON_INTERPRET=1 python3 tests/gpu/racy_store_launch.py      # on the CPU, Triton's interpreter
"""
import importlib.util
import os
import sys

import torch

DEV = "cpu" if os.environ.get("RACY_CPU") == "1" else "cuda"
path = os.path.join("tests", "golden", "torch", "last_state_kernel.py")
spec = importlib.util.spec_from_file_location("last_state_kernel", path)
module = importlib.util.module_from_spec(spec)
sys.modules["last_state_kernel"] = module
spec.loader.exec_module(module)

failures = 0
gen = torch.Generator(device=DEV).manual_seed(0)
cols = 1000
for mode in ("eager",) if DEV == "cpu" else ("eager", "compile"):
    def run(grid, x, state):
        out = module.last_state_kernel[grid](x, state, cols, BLOCK=1024)
        return out if isinstance(out, torch.Tensor) else out[0]

    call = torch.compile(run) if mode == "compile" else run
    x = (torch.rand(1, cols, generator=gen, device=DEV) * 4 - 2).requires_grad_()
    upstream = torch.rand(cols, generator=gen, device=DEV)
    (call((1,), x, torch.zeros(cols, device=DEV)) * upstream).sum().backward()
    want = (2 * x.detach()[0] * upstream).double()
    err = (x.grad[0].double() - want).abs().max().item()
    ok = err <= 1e-5
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {mode}: one program: max error {err:.2e}")

    x4 = (torch.rand(4, cols, generator=gen, device=DEV) * 4 - 2).requires_grad_()
    try:
        (call((4,), x4, torch.zeros(cols, device=DEV)) * upstream).sum().backward()
        failures += 1
        print(f"FAIL {mode}: four programs: the backward ran (gradient sum {x4.grad.sum().item():.3e})")
    except Exception as e:  # ValueError eagerly; torch.compile may wrap it
        refused = "tl.num_programs(0) == 1" in str(e) and "launch one along that axis" in str(e)
        failures += not refused
        print(f"{'ok  ' if refused else 'FAIL'} {mode}: four programs refused: {type(e).__name__}: "
              f"{str(e).splitlines()[0][:160]}")

print(f"{failures} failures")
sys.exit(1 if failures else 0)
