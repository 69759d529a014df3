#!/usr/bin/env python3
"""Asks the installed Triton which constructs it accepts, where tgrad's
front end rejects them or is unsure: run on the GPU machine,

    python3 tools/probe_triton_semantics.py

Each probe compiles and runs a one-program kernel and prints OK with the
result, or the first line of Triton's error. The answers are recorded in
README.md (what tgrad accepts) and guide sema/interp."""
import os
import sys
import tempfile
import importlib.util

import torch

PROBES = {
    "pow_tensor_constexpr": "y = x ** 2",
    "pow_tensor_tensor": "y = x ** x",
    "floordiv_float": "y = x // 2.0",
    "mod_float": "y = x % 0.75",
    "chained_compare": "y = tl.where(0.0 < x < 0.5, x, 0.0)",
    "break_in_loop": "y = x\n    for i in range(4):\n        if i == 2:\n            break\n        y = y + 1.0",
    "continue_in_loop": "y = x\n    for i in range(4):\n        if i == 2:\n            continue\n        y = y + 1.0",
    "static_assert_shape_tuple": "tl.static_assert(x.shape == (16,))\n    y = x",
    "sum_fp16_dtype": "y = tl.sum(x.to(tl.float16), axis=0).to(tl.float32) + x * 0",
    "reshape_tuple_shape": "y = tl.reshape(x[:, None], x.shape)",
    "broadcast_to_shape_tuple": "y = tl.sum(tl.broadcast_to(x[None, :], (4, 16)), 0)",
}

TEMPLATE = """import triton
import triton.language as tl


@triton.jit
def probe(X, Y):
    offs = tl.arange(0, 16)
    x = tl.load(X + offs)
    {body}
    tl.store(Y + offs, y)
"""


def run(name, body, tmp):
    path = os.path.join(tmp, f"probe_{name}.py")
    with open(path, "w") as f:
        f.write(TEMPLATE.format(body=body))
    spec = importlib.util.spec_from_file_location(f"probe_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.linspace(-1, 1, 16, device="cuda")
    y = torch.zeros(16, device="cuda")
    try:
        mod.probe[(1,)](x, y)
        torch.cuda.synchronize()
        return "OK " + " ".join(f"{v:.3g}" for v in y[:4].tolist())
    except Exception as e:
        lines = [l for l in str(e).splitlines() if l.strip()]
        msg = next((l for l in lines if "Error" in l or "error" in l), lines[-1] if lines else type(e).__name__)
        return f"REJECTED {type(e).__name__}: {msg.strip()[:160]}"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in PROBES.items():
            print(f"{name:28s} {run(name, body, tmp)}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
