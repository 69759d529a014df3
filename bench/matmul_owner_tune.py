"""Tries launch values for tgrad's owner-computes matmul backward (tests/golden/backward/
matmul_kernel_no_activation.py) on the GPU and prints a table: each config's median time for the dA
kernel and the dB kernel apart, at M = N = K = SIZE in fp16. The backward's blocks need not be the
forward's (a matmul's gradient does not depend on them); bench/bwd_bench.py's OWNER_CONFIG takes the best.
With --relu, the owners of the relu epilogue's backward (tests/golden/backward/matmul_kernel.py, relu' read back
from C, which the forward fills first), then the backward with the best of each, timed beside the hand-written one
(RELU_OWNER_CONFIG takes those).

    python3 bench/matmul_owner_tune.py [--size 4096] [--relu]
"""
import argparse
import itertools
import os
import sys
import tempfile

import torch
import triton
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bwd_bench import load, matmul_flags, matmul_hand  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--relu", action="store_true")
    args = parser.parse_args()
    act = "relu" if args.relu else ""
    M = N = K = args.size
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b, dc = (torch.randn(*s, generator=gen, device="cuda").half() for s in ((M, K), (K, N), (M, N)))
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    da, db = torch.zeros_like(a), torch.zeros_like(b)
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        bwd = load(f"tests/golden/backward/matmul_kernel{'' if args.relu else '_no_activation'}.py", tmp)
        fwd = load("tests/kernels/matmul.py", tmp)
        if args.relu:
            c = fwd.matmul(a, b, activation="relu")  # the backward reads C
        golden = "matmul_kernel" if args.relu else "matmul_kernel_no_activation"
        # The relu backward's owners read the masked dC a prologue saves in B's (dA) and A's (dB) dtype, laid out
        # like C; it is computed once here for the owners tuned one by one, and again in each timed backward.
        saved_da, saved_db = {}, {}
        prologue = lambda: None  # noqa: E731
        if args.relu:
            saved_da = {"baccumulator_2_saved": torch.empty_like(c, dtype=b.dtype)}
            saved_db = {"baccumulator_2_saved_2": torch.empty_like(c, dtype=a.dtype)}
            prologue_flags = matmul_flags(golden, fwd, a, b, c, (64, 128, 32), ACTIVATION=act)

            def prologue():
                bwd.matmul_kernel_bwd_prologue[(triton.cdiv(M, 64), triton.cdiv(N, 128))](
                    a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=32,
                    ACTIVATION=act, da_ptr=da, db_ptr=db, dc_ptr=dc, **saved_da, **saved_db, **prologue_flags)
            prologue()

        def launcher(which, bm, bn, bk, warps, stages):
            # The layout flags the launch protocol asks for (these contiguous tensors: 1, plain stores).
            flags = matmul_flags(golden, fwd, a, b, c, (bm, bn, bk), ACTIVATION=act)
            if which == "da":
                return lambda: bwd.matmul_kernel_bwd_da_ptr[(triton.cdiv(M, bm), triton.cdiv(K, bk))](
                    a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                    ACTIVATION=act, da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_1=triton.cdiv(N, bn),
                    num_warps=warps, num_stages=stages, **saved_da, **flags)
            return lambda: bwd.matmul_kernel_bwd_db_ptr[(triton.cdiv(K, bk), triton.cdiv(N, bn))](
                a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                ACTIVATION=act, da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_0=triton.cdiv(M, bm),
                num_warps=warps, num_stages=stages, **saved_db, **flags)

        print("| kernel | BLOCK_SIZE_M | BLOCK_SIZE_N | BLOCK_SIZE_K | warps | stages | median ms |\n| --- | --- | --- | --- | --- | --- | --- |")
        for which, (out_a, step, out_b), warps, stages in itertools.product(
                ("da", "db"), ((128, 64, 128), (128, 32, 128), (64, 64, 128), (128, 64, 256), (128, 128, 128)),
                (4, 8), (3, 4)):
            if which == "da":  # tile BLOCK_SIZE_M x BLOCK_SIZE_K, stepping BLOCK_SIZE_N
                bm, bn, bk = out_a, step, out_b
            else:  # tile BLOCK_SIZE_K x BLOCK_SIZE_N, stepping BLOCK_SIZE_M
                bm, bn, bk = step, out_a, out_b
            fn = launcher(which, bm, bn, bk, warps, stages)
            try:
                ms = do_bench(fn, quantiles=[0.5])
                print(f"| {which} | {bm} | {bn} | {bk} | {warps} | {stages} | {ms:.4f} |", flush=True)
                if which not in best or ms < best[which][0]:
                    best[which] = (ms, (bm, bn, bk, warps, stages), fn)
            except Exception as e:  # out of shared memory, say
                print(f"| {which} | {bm} | {bn} | {bk} | {warps} | {stages} | {type(e).__name__} |", flush=True)
        if args.relu:
            # The backward with the best of each beside the hand-written one (dC masked by C > 0 beforehand, the
            # masking not timed), as bench/bwd_bench.py runs them.
            dc_eff = (dc.float() * (c > 0)).half()
            hda, hdb = torch.empty_like(a), torch.empty_like(b)

            def hand_fn():
                matmul_hand[(triton.cdiv(M, 128), triton.cdiv(K, 128))](dc_eff, b, hda, M, K, N, N, 1, 1, N, K, 1,
                                                                        BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                                                                        num_warps=8)
                matmul_hand[(triton.cdiv(K, 128), triton.cdiv(N, 128))](a, dc_eff, hdb, K, N, M, 1, K, N, 1, N, 1,
                                                                        BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                                                                        num_warps=8)

            def gen_fn():
                da.zero_(); db.zero_()
                prologue(); best["da"][2](); best["db"][2]()

            gen_fn(); hand_fn()
            err = max((da.float() - hda.float()).norm().item() / hda.float().norm().item(),
                      (db.float() - hdb.float()).norm().item() / hdb.float().norm().item())
            g, h = do_bench(gen_fn, quantiles=[0.5]), do_bench(hand_fn, quantiles=[0.5])
            print(f"\nbest: da {best['da'][1]}, db {best['db'][1]}: backward {g:.4f} ms, hand-written {h:.4f} ms, "
                  f"{h / g:.2f}x, rel. diff {err:.1e}")


if __name__ == "__main__":
    main()
