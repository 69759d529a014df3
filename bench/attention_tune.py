#!/usr/bin/env python3
"""Tries launch values for tgrad's attention backward (tests/golden/backward/attention[_causal]_kernel.py) on the
GPU and prints a table: the median time of the dK/dV part (the prologue that saves the row statistics, then the
owner-computes kernels, which must agree on BLOCK_M) and of the dQ kernel apart, at Z x H x N x D in fp16, each
checked against the hand-written FA2 backward of bench/bwd_bench.py. Like a matmul's, the backward's blocks need not
be the forward's: each kernel recomputes its tiles from Q, K, V and the stored logsumexp and output.
bench/bwd_bench.py's TGRAD_ATTN_CONFIG takes the best.

    python3 bench/attention_tune.py [--shape 4,16,2048,64]
"""
import argparse
import itertools
import json
import os
import sys
import tempfile

import torch
import triton
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bwd_bench import attn_bwd_hand, layout_flags, load, owner_grid  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="4,16,2048,64")
    args = parser.parse_args()
    Z, H, N, D = (int(x) for x in args.shape.split(","))
    gen = torch.Generator(device="cuda").manual_seed(0)
    print("| causal | part | BLOCK_M | BLOCK_N | warps | stages | median ms | rel. err vs hand-written |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        fwd = load("tests/kernels/attention.py", tmp)
        for causal in (False, True):
            bwd = load(f"tests/golden/backward/attention{'_causal' if causal else ''}_kernel.py", tmp)
            q, k, v = (torch.randn(Z, H, N, D, generator=gen, device="cuda").half() for _ in range(3))
            sm_scale = D ** -0.5
            out, lse = fwd.attention(q, k, v, causal=causal, sm_scale=sm_scale)
            do = torch.randn(Z, H, N, D, generator=gen, device="cuda").half()
            dlse = torch.zeros(Z, H, N, device="cuda")
            hq, hk, hv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            attn_bwd_hand(q, k, v, out, do, lse, dlse, sm_scale, causal, hq, hk, hv, torch.empty(Z, H, N, device="cuda"))
            strides = [s for t in (q, k, v, out) for s in t.stride()]
            dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
            base = (q, k, v, sm_scale, lse, out, *strides, H, N)
            owners = [getattr(bwd, n) for n in dir(bwd) if n.startswith("attn_fwd_kernel_bwd_d")]
            prologue = getattr(bwd, "attn_fwd_kernel_bwd_prologue", None)
            # The launch protocol's layout flags (1 for these contiguous tensors) and the row statistic the dQ kernel
            # saves at the logsumexp's rows for the owners (scratch laid out like M), filled once before the owners
            # are timed.
            protocol = json.load(open(f"tests/golden/backward/protocol_attention{'_causal' if causal else ''}_kernel.json"))
            flags = layout_flags(protocol, fwd.attn_fwd_kernel, (q, k, v, sm_scale, lse, out, *strides, H, N),
                                 (triton.cdiv(N, 64), Z * H), HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64, IS_CAUSAL=causal)
            like_m = {p["name"]: torch.empty_like(lse) for p in protocol["parameters"]
                      if p.get("role") == "scratch" and p.get("like") == "M"}
            if like_m:
                bwd.attn_fwd_kernel_bwd[(triton.cdiv(N, 64), Z * H)](
                    *base, HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64, IS_CAUSAL=causal, dQ=dq, dK=dk, dV=dv, dM=dlse,
                    dOut=do, **flags, **like_m)

            def err(a, b):
                return (a.float() - b.float()).norm().item() / b.float().norm().item()

            # dK/dV: the owner's key block BLOCK_N, its query blocks BLOCK_M; dQ: query block BLOCK_M, key step BLOCK_N.
            shapes = {"dK/dV": ((64, 64), (32, 64), (32, 128), (64, 128), (128, 128)),
                      "dQ": ((64, 64), (128, 32), (128, 64), (64, 32))}
            for which, (bm, bn), warps, stages in itertools.chain.from_iterable(
                    itertools.product((w,), shapes[w], (4, 8), (2, 3, 4)) for w in ("dK/dV", "dQ")):
                kw = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, IS_CAUSAL=causal, dQ=dq, dK=dk, dV=dv, dM=dlse, dOut=do,
                          num_warps=warps, num_stages=stages, **flags, **like_m)
                grid = (triton.cdiv(N, bm), Z * H)
                saved = {p: torch.empty(grid[0] * grid[1] * bm, device="cuda")
                         for p in (prologue.arg_names if prologue else []) if p.endswith("_saved")}

                def dkdv():  # (no zero fill: with the layout flags at 1 every element is stored)
                    if prologue:
                        prologue[grid](*base, **kw, **saved)
                    for kernel in owners:
                        programs = [p for p in kernel.arg_names if p.startswith("num_programs_0")][0]
                        kernel[owner_grid(protocol, kernel, triton.cdiv(N, bn), Z * H)](*base, **kw, **{programs: grid[0]},
                                                            **{p: t for p, t in saved.items() if p in kernel.arg_names})

                def dqk():
                    bwd.attn_fwd_kernel_bwd[grid](*base, **kw)

                for part, fn, pairs in (("dK/dV", dkdv, ((dk, hk), (dv, hv))), ("dQ", dqk, ((dq, hq),))):
                    if part != which:
                        continue
                    try:
                        fn()
                        e = max(err(a, b) for a, b in pairs)
                        ms = do_bench(fn, quantiles=[0.5]) if e < 2e-2 else float("nan")
                    except Exception as ex:  # a config Triton cannot compile (shared memory, registers)
                        print(f"| {causal} | {part} | {bm} | {bn} | {warps} | {stages} | - | {type(ex).__name__} |",
                              flush=True)
                        continue
                    print(f"| {causal} | {part} | {bm} | {bn} | {warps} | {stages} | {ms:.4f} | {e:.1e} |", flush=True)


if __name__ == "__main__":
    main()
