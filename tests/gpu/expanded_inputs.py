#!/usr/bin/env python3
"""Inputs passed as expanded views, through the modules `--emit torch` wrote (run on the GPU machine).

Mamba2's step passes its per-head A, dt, dt_bias and D to selective_state_update as einops.repeat views:
stride 0 over the head dimension, one memory cell shared by every element of a head. The backward indexes a
gradient buffer with the input's strides, so the elements that share a cell add their gradients into one cell.
The module must give autograd each cell's gradient once (autograd's backward of the expand sums over the
expanded dimension), eagerly and under torch.compile. A buffer the kernel stores to, passed as an expanded
view, is refused with a message. Gradients are compared with torch.autograd in float64.

    python3 tests/gpu/expanded_inputs.py       # from the repository root; prints one line per case
    EXPANDED_CPU=1 TRITON_INTERPRET=1 python3 tests/gpu/expanded_inputs.py      # on the CPU, Triton's interpreter
"""
import importlib.util
import os
import sys

import torch
import triton

DEV = "cpu" if os.environ.get("EXPANDED_CPU") == "1" else "cuda"


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
    err = (got.double() - want).abs().max().item() / max(1.0, want.abs().max().item())
    ok = err <= tol
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {label}: max error {err:.2e}")


gen = torch.Generator(device=DEV).manual_seed(0)
modes = ("eager",) if DEV == "cpu" else ("eager", "compile")

# An in-place state whose decay is an expanded view: per row, G = g0[:, None].expand(rows, cols) (strides (1, 0)),
# and one number for all, G = g0.expand(rows, cols) (strides (0, 0)).
decay = load("shared_decay_inplace_kernel")
rows, cols = 40, 100
for mode in modes:
    for per_row in (True, False):
        s = torch.randn(rows, cols, generator=gen, device=DEV, requires_grad=True)
        g0 = torch.rand(rows if per_row else 1, generator=gen, device=DEV, requires_grad=True)
        ws, wy = (torch.randn(rows, cols, generator=gen, device=DEV) for _ in range(2))

        def expanded(g0):
            return (g0[:, None] if per_row else g0[None, :]).expand(rows, cols)

        def run(s, g0):
            g = expanded(g0)
            new_s, y = decay.shared_decay_inplace_kernel[(rows,)](s, g, torch.empty(rows, cols, device=DEV), cols,
                                                                   g.stride(0), g.stride(1), SHARED=False, BLOCK=128)
            return (new_s * ws).sum() + (y * wy).sum()

        (torch.compile(run, fullgraph=True) if mode == "compile" else run)(s, g0).backward()
        sr, gr = s.detach().double().requires_grad_(), g0.detach().double().requires_grad_()
        new = sr * expanded(gr) + expanded(gr)
        ((new * ws.double()).sum() + (3 * new * wy.double()).sum()).backward()
        what = "per row, strides (1, 0)" if per_row else "one number, strides (0, 0)"
        check(f"in-place state, G expanded ({what}, {mode}): dG", g0.grad, gr.grad)
        check(f"in-place state, G expanded ({what}, {mode}): dS", s.grad, sr.grad)

# An input loaded in loops over column blocks, its gradient added in place under the layout flag (two_pass_kernel:
# three loads of X, tests/kernels/read_back.py), passed as one row expanded over all rows (strides (0, 1)): the flag
# is 0 for it, and the rows' gradients add atomically into the one row, as autograd's backward of the expand sums.
two_pass = load("two_pass_kernel")
for mode in modes:
    rows, cols = 12, 40
    x0 = torch.randn(1, cols, generator=gen, device=DEV, requires_grad=True)
    w = torch.randn(rows, generator=gen, device=DEV, requires_grad=True)
    wy = torch.randn(rows, cols, generator=gen, device=DEV)

    def run(x0, w):
        x = x0.expand(rows, cols)
        y = two_pass.two_pass_kernel[(triton.cdiv(rows, 4),)](x, w, torch.empty(rows, cols, device=DEV), rows,
                                                               x.stride(0), N=cols, BLOCK_R=4, BLOCK_N=16)
        return (y.Y * wy).sum()

    (torch.compile(run, fullgraph=True) if mode == "compile" else run)(x0, w).backward()
    xr, wr = x0.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    xe = xr.expand(rows, cols)
    ((xe * wr[:, None] + torch.sqrt((xe * xe).sum(1, keepdim=True) + 1.0)) * wy.double()).sum().backward()
    check(f"two passes over column blocks, X one row expanded ({mode}): dX", x0.grad, xr.grad)
    check(f"two passes over column blocks, X one row expanded ({mode}): dW", w.grad, wr.grad)

# An output passed as an expanded view: refused.
try:
    rows, cols = 4, 8
    x = torch.randn(rows, cols, device=DEV, requires_grad=True)
    load("rms_norm_kernel").rms_norm_fwd_kernel[(rows,)](x, torch.ones(cols, device=DEV), torch.empty(1, cols, device=DEV).expand(rows, cols),
                                     torch.empty(rows, device=DEV), x.stride(0), 0, cols, 1e-6, BLOCK_SIZE=8)
    failures += 1
    print("FAIL an output passed as an expanded view was launched")
except ValueError as e:
    ok = "overlapping strides" in str(e)
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} an output passed as an expanded view is refused: {str(e)[:100]}")

# An input passed as an expanded view whose gradient the backward writes with plain stores, one row per program
# (softmax: it assumes in_row_stride >= n_cols): the rows would share cells and the stores race, so the backward
# refuses the launch with a message instead of returning one row's gradient for the sum of all.
softmax = load("softmax_kernel")
for mode in modes:
    rows, cols = 6, 10
    base = torch.randn(1, cols, generator=gen, device=DEV, requires_grad=True)

    def run(base):
        x = base.expand(rows, cols)
        y = softmax.softmax_kernel[(rows,)](torch.empty(rows, cols, device=DEV), x, x.stride(0), cols, cols, BLOCK_SIZE=16)
        return (y.out_ptr * torch.arange(rows * cols, device=DEV).reshape(rows, cols)).sum()

    try:
        (torch.compile(run, fullgraph=True) if mode == "compile" else run)(base).backward()
        failures += 1
        print(f"FAIL softmax of an expanded input ({mode}): the backward ran, gradient {base.grad}")
    except Exception as e:  # (torch.compile wraps the op's ValueError)
        ok = "assumes in_row_stride >= n_cols" in str(e)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} softmax of an expanded input ({mode}) is refused: {str(e)[:100]}")

# Attention with K and V shared by every head (grouped-query attention's expand: stride 0 over heads). The backward
# stores dQ, dK and dV with plain stores where the strides keep each gradient's cells apart (the layout flags the
# module computes: Q_disjoint, K_disjoint, V_disjoint); for these K and V they do not, and the heads' gradients
# must add (atomically) into the one shared cell, as autograd's backward of the expand sums them. Q stays apart.
if DEV == "cuda":
    attention = load("attention_kernel")
    for mode in modes:
        Z, H, N, D = 2, 3, 200, 64
        q = torch.randn(Z, H, N, D, generator=gen, device=DEV).half().requires_grad_()
        k1, v1 = (torch.randn(Z, 1, N, D, generator=gen, device=DEV).half().requires_grad_() for _ in range(2))
        wo = torch.randn(Z, H, N, D, generator=gen, device=DEV)

        def run(q, k1, v1):
            k, v = k1.expand(Z, H, N, D), v1.expand(Z, H, N, D)
            out = torch.empty(Z, H, N, D, device=DEV, dtype=torch.float16)
            lse = torch.empty(Z, H, N, device=DEV)
            strides = [s for t in (q, k, v, out) for s in t.stride()]
            o = attention.attn_fwd_kernel[(triton.cdiv(N, 64), Z * H)](q, k, v, D ** -0.5, lse, out, *strides, H, N,
                                                                       HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64,
                                                                       IS_CAUSAL=False, num_warps=4, num_stages=2)
            return (o.Out.float() * wo).sum()

        (torch.compile(run, fullgraph=True) if mode == "compile" else run)(q, k1, v1).backward()
        qr, kr, vr = (t.detach().double().requires_grad_() for t in (q, k1, v1))
        ref = torch.nn.functional.scaled_dot_product_attention(qr, kr.expand(Z, H, N, D), vr.expand(Z, H, N, D),
                                                               scale=D ** -0.5)
        (ref * wo.double()).sum().backward()
        for name, got, want in (("dQ", q.grad, qr.grad), ("dK", k1.grad, kr.grad), ("dV", v1.grad, vr.grad)):
            check(f"attention, K and V expanded over heads ({mode}): {name}", got, want, tol=2e-2)

# The matmul's owners store dA and dB once per element where the strides keep the cells apart (a_ptr_disjoint,
# b_ptr_disjoint), leaving out the rows past M that `offs_cm % M` wraps onto the first rows: A passed transposed
# (strides (1, M): apart, the plain stores with other strides), A as one row expanded over M (stride 0: the owners
# add atomically into the one row), B as one column expanded over N (stride 0). Ragged sizes, none a multiple of a
# block.
if DEV == "cuda":
    matmul = load("matmul_kernel_no_activation")
    M, K, N = 300, 200, 260
    for mode in modes:
        for layout in ("A transposed", "A one row expanded", "B one column expanded"):
            a_src = (torch.randn(K, M, generator=gen, device=DEV) if layout == "A transposed" else
                     torch.randn(1, K, generator=gen, device=DEV) if layout == "A one row expanded" else
                     torch.randn(M, K, generator=gen, device=DEV)).half().requires_grad_()
            b_src = (torch.randn(K, 1, generator=gen, device=DEV) if layout == "B one column expanded" else
                     torch.randn(K, N, generator=gen, device=DEV)).half().requires_grad_()
            wc = torch.randn(M, N, generator=gen, device=DEV)

            def views(a_src, b_src):
                a = a_src.t() if layout == "A transposed" else a_src.expand(M, K)
                return a, b_src.expand(K, N)

            def run(a_src, b_src):
                a, b = views(a_src, b_src)
                c = torch.empty(M, N, device=DEV, dtype=torch.float16)
                grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]), triton.cdiv(N, meta["BLOCK_SIZE_N"]))  # noqa: E731
                out = matmul.matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                                 c.stride(0), c.stride(1), ACTIVATION="")
                return (out.c_ptr.float() * wc).sum()

            (torch.compile(run, fullgraph=True) if mode == "compile" else run)(a_src, b_src).backward()
            ar, br = (t.detach().double().requires_grad_() for t in (a_src, b_src))
            a_ref, b_ref = views(ar, br)
            ((a_ref @ b_ref) * wc.double()).sum().backward()
            check(f"matmul, {layout} ({mode}): dA", a_src.grad, ar.grad, tol=1e-2)
            check(f"matmul, {layout} ({mode}): dB", b_src.grad, br.grad, tol=1e-2)

print(f"{failures} failures")
sys.exit(1 if failures else 0)
