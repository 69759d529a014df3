#!/usr/bin/env python3
"""The relu matmul's backward side by side at 2048^3 fp16 (a table, not a test): the golden as of --before (its
owners loading C and dC in every iteration) and the current one (a prologue saving the masked dC once), beside the
hand-written kernels of bench/bwd_bench.py with and without their mask pass, each timed with do_bench (launches
included) and with CUDA graphs (GPU time), two rounds; then each kernel of the current backward alone.

    python3 bench/relu_matmul_ab.py [--before COMMIT]
"""
import argparse, os, subprocess, sys, tempfile, torch, triton
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bwd_bench import load, matmul_flags, matmul_hand, relu_mask_hand, RELU_OWNER_CONFIG, RELU_PROLOGUE_BLOCKS
from triton.testing import do_bench, do_bench_cudagraph
M = N = K = 2048
gen = torch.Generator(device="cuda").manual_seed(0)
a, b, dc = (torch.randn(*s, generator=gen, device="cuda").half() for s in ((M, K), (K, N), (M, N)))
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--before", default="a7f8ed2", help="the commit whose golden is the 'before' row")
parser.add_argument("--before-file", help="that golden as a file (where the checkout has no git history)")
args = parser.parse_args()
with tempfile.TemporaryDirectory() as tmp:
    before = args.before_file or os.path.join(tmp, "matmul_relu_before.py")
    if not args.before_file:
        with open(before, "w") as f:
            f.write(subprocess.run(["git", "show", f"{args.before}:tests/golden/backward/matmul_kernel.py"],
                                   capture_output=True, text=True, check=True).stdout)
    new = load("tests/golden/backward/matmul_kernel.py", tmp)
    old = load(before, tmp)
    fwd = load("tests/kernels/matmul.py", tmp)
    c = fwd.matmul(a, b, activation="relu")
    da, db = torch.zeros_like(a), torch.zeros_like(b)
    fa = matmul_flags("matmul_kernel", fwd, a, b, c, RELU_OWNER_CONFIG["da"], ACTIVATION="relu")
    fb = matmul_flags("matmul_kernel", fwd, a, b, c, RELU_OWNER_CONFIG["db"], ACTIVATION="relu")
    sb, sa = torch.empty_like(c), torch.empty_like(c)
    pbm, pbn = RELU_PROLOGUE_BLOCKS
    def run(bwd, saved):
        if saved:
            bwd.matmul_kernel_bwd_prologue[(triton.cdiv(M, pbm), triton.cdiv(N, pbn))](
                a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=pbm, BLOCK_SIZE_N=pbn, BLOCK_SIZE_K=32,
                ACTIVATION="relu", da_ptr=da, db_ptr=db, dc_ptr=dc, baccumulator_2_saved=sb,
                baccumulator_2_saved_2=sa, **fa)
        bm, bn, bk, w, st = RELU_OWNER_CONFIG["da"]
        kw = {"baccumulator_2_saved": sb} if saved else {}
        bwd.matmul_kernel_bwd_da_ptr[(triton.cdiv(M, bm), triton.cdiv(K, bk))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, ACTIVATION="relu",
            da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_1=triton.cdiv(N, bn), num_warps=w, num_stages=st, **kw, **fa)
        bm, bn, bk, w, st = RELU_OWNER_CONFIG["db"]
        kw = {"baccumulator_2_saved_2": sa} if saved else {}
        bwd.matmul_kernel_bwd_db_ptr[(triton.cdiv(K, bk), triton.cdiv(N, bn))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, ACTIVATION="relu",
            da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_0=triton.cdiv(M, bm), num_warps=w, num_stages=st, **kw, **fb)
    dc_eff = (dc.float() * (c > 0)).half()
    dcm = torch.empty_like(dc)
    hda, hdb = torch.empty_like(a), torch.empty_like(b)
    def hand(mask_pass):
        src = dc_eff
        if mask_pass:
            relu_mask_hand[(triton.cdiv(M * N, 4096),)](dc, c, dcm, M * N, BLOCK=4096)
            src = dcm
        matmul_hand[(triton.cdiv(M, 128), triton.cdiv(K, 128))](src, b, hda, M, K, N, N, 1, 1, N, K, 1,
                                                                BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8)
        matmul_hand[(triton.cdiv(K, 128), triton.cdiv(N, 128))](a, src, hdb, K, N, M, 1, K, N, 1, N, 1,
                                                                BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8)
    cases = [("tgrad before (owners load C and dC)", lambda: run(old, False)),
             ("tgrad now (prologue saves masked dC)", lambda: run(new, True)),
             ("hand-written, mask not timed", lambda: hand(False)),
             ("hand-written with its mask pass", lambda: hand(True))]
    hand(True); run(new, True)
    ref = (hda.clone(), hdb.clone())
    print("new vs hand rel diff", ((da.float() - ref[0].float()).norm() / ref[0].float().norm()).item(),
          ((db.float() - ref[1].float()).norm() / ref[1].float().norm()).item())
    print("| case | do_bench ms | cuda graph ms |\n| --- | --- | --- |")
    for rep in range(2):
        for name, fn in cases:
            print(f"| {name} | {do_bench(fn, quantiles=[0.5]):.4f} | {do_bench_cudagraph(fn):.4f} |", flush=True)
    # The current backward's kernels alone.
    print("\n| kernel | do_bench ms |\n| --- | --- |")
    prologue = lambda: new.matmul_kernel_bwd_prologue[(triton.cdiv(M, pbm), triton.cdiv(N, pbn))](  # noqa: E731
        a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=pbm, BLOCK_SIZE_N=pbn, BLOCK_SIZE_K=32, ACTIVATION="relu",
        da_ptr=da, db_ptr=db, dc_ptr=dc, baccumulator_2_saved=sb, baccumulator_2_saved_2=sa, **fa)
    print(f"| prologue {RELU_PROLOGUE_BLOCKS} | {do_bench(prologue, quantiles=[0.5]):.4f} |")
