"""Tries launch values for tgrad's owner-computes matmul backward (tests/golden/backward/
matmul_kernel_no_activation.py) on the GPU and prints a table: each config's median time for the dA
kernel and the dB kernel apart, at M = N = K = SIZE in fp16. The backward's blocks need not be the
forward's (a matmul's gradient does not depend on them); bench/bwd_bench.py's OWNER_CONFIG takes the best.

    python3 bench/matmul_owner_tune.py [--size 4096]
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
from bwd_bench import load  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    M = N = K = args.size
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b, dc = (torch.randn(*s, generator=gen, device="cuda").half() for s in ((M, K), (K, N), (M, N)))
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    da, db = torch.zeros_like(a), torch.zeros_like(b)
    with tempfile.TemporaryDirectory() as tmp:
        bwd = load("tests/golden/backward/matmul_kernel_no_activation.py", tmp)
        print("| kernel | BLOCK_SIZE_M | BLOCK_SIZE_N | BLOCK_SIZE_K | warps | stages | median ms |\n| --- | --- | --- | --- | --- | --- | --- |")
        for which, (out_a, step, out_b), warps, stages in itertools.product(
                ("da", "db"), ((128, 64, 128), (128, 32, 128), (64, 64, 128), (128, 64, 256), (128, 128, 128)),
                (4, 8), (3, 4)):
            if which == "da":  # tile BLOCK_SIZE_M x BLOCK_SIZE_K, stepping BLOCK_SIZE_N
                bm, bn, bk = out_a, step, out_b
                fn = lambda: bwd.matmul_kernel_bwd_da_ptr[(triton.cdiv(M, bm), triton.cdiv(K, bk))](
                    a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                    ACTIVATION="", da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_1=triton.cdiv(N, bn),
                    num_warps=warps, num_stages=stages)
            else:  # tile BLOCK_SIZE_K x BLOCK_SIZE_N, stepping BLOCK_SIZE_M
                bm, bn, bk = step, out_a, out_b
                fn = lambda: bwd.matmul_kernel_bwd_db_ptr[(triton.cdiv(K, bk), triton.cdiv(N, bn))](
                    a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                    ACTIVATION="", da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_0=triton.cdiv(M, bm),
                    num_warps=warps, num_stages=stages)
            try:
                ms = do_bench(fn, quantiles=[0.5])
                print(f"| {which} | {bm} | {bn} | {bk} | {warps} | {stages} | {ms:.4f} |", flush=True)
            except Exception as e:  # out of shared memory, say
                print(f"| {which} | {bm} | {bn} | {bk} | {warps} | {stages} | {type(e).__name__} |", flush=True)


if __name__ == "__main__":
    main()
