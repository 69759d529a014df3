#!/usr/bin/env python3
"""Backward-kernel benchmark (GPU machine, not a test): tgrad's generated
backward vs a hand-written Triton backward written the classic way vs
torch.autograd of the PyTorch reference, for softmax, rms norm, layer norm and
matmul.

    python3 bench/bwd_bench.py [--out bench/RESULTS.md]

Times are medians of triton.testing.do_bench (CUDA events, warm-up first).
GB/s counts the bytes each backward must move at least: softmax reads x (or
y) and dy and writes dx; rms norm reads x, dy and writes dx (w and rstd are
small); layer norm also writes dw, db; matmul counts 4*M*N*K flops (two
matmuls). The generated kernels come from tests/golden/backward/ (fp32
pointers; the same source runs on fp16 buffers, loads upcast explicitly).
Kernels with partial sums are launched as `tgrad --emit json` says: over G
programs, then the reduction. The row-looping kernels (tgrad's and the
hand-written ones alike) are timed at G in {2, 4} x SMs and num_warps in
{4, 8, 16}, the softmax kernels at num_warps in {4, 8, 16}, and each reports
its best: the same tuning for both.
"""
import argparse
import datetime
import importlib.util
import os
import tempfile

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


# ----------------------------------------------------------- hand-written

@triton.jit
def softmax_bwd_hand(dx_ptr, y_ptr, dy_ptr, stride, n_cols, BLOCK: tl.constexpr):
    # dx = y * (dy - sum(dy * y)), one program per row, reading the saved output y.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_bwd_hand(dx_ptr, dw_partial_ptr, x_ptr, w_ptr, dy_ptr, rstd_ptr, stride, n_rows, n_cols,
                      BLOCK: tl.constexpr):
    # Classic two-stage dW: each program walks rows pid, pid + G, ... and keeps
    # its partial dW in registers, stored once; a second pass sums the partials.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid, n_rows, programs):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        wdy = w * dy
        c = tl.sum(xhat * wdy, axis=0) / n_cols
        dx = (wdy - xhat * c) * rstd
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
    tl.store(dw_partial_ptr + pid * n_cols + cols, dw, mask=mask)


@triton.jit
def layer_norm_bwd_hand(dx_ptr, dw_partial_ptr, db_partial_ptr, x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, stride,
                        n_rows, n_cols, BLOCK: tl.constexpr):
    # The classic two-stage backward: rows pid, pid + G, ...; dW and dB partials in registers.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid, n_rows, programs):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(dw_partial_ptr + pid * n_cols + cols, dw, mask=mask)
    tl.store(db_partial_ptr + pid * n_cols + cols, db, mask=mask)


@triton.jit
def matmul_hand(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # A plain tiled matmul; the hand-written backward is two of them: dA = dC B^T, dB = A^T dC.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def load(path, tmp):
    with open(path) as f:
        source = f.read()
    file = os.path.join(tmp, os.path.basename(path))
    with open(file, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3] + "_bench", file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tuned(make):
    """The best median over the launch configurations, and that configuration."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = [(do_bench(make(g, w), quantiles=[0.5]), f"G={g}, {w} warps") for g in (2 * sms, 4 * sms) for w in (4, 8, 16)]
    return min(results)


def warps(block):
    return 4 if block <= 2048 else (8 if block <= 4096 else 16)


def bench_softmax(gen, M, N, dtype, tmp):
    bwd = load("tests/golden/backward/softmax_kernel.py", tmp)
    x = (torch.randn(M, N, generator=gen, device="cuda")).to(dtype)
    y = torch.softmax(x.float(), dim=1).to(dtype)
    dy = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    dx = torch.empty_like(x)
    block = triton.next_power_of_2(N)
    w = warps(block)
    make_gen = lambda w: lambda: bwd.softmax_kernel_bwd[(M,)](y, x, N, N, N, BLOCK_SIZE=block, din_ptr=dx, dout_ptr=dy,
                                                               num_warps=w)
    make_hand = lambda w: lambda: softmax_bwd_hand[(M,)](dx, y, dy, N, N, BLOCK=block, num_warps=w)
    gen_fn, hand_fn = make_gen(w), make_hand(w)
    xt = x.detach().float().requires_grad_(True) if dtype == torch.float32 else x.detach().requires_grad_(True)
    yt = torch.softmax(xt, dim=1)
    torch_fn = lambda: torch.autograd.grad(yt, xt, dy, retain_graph=True)
    # Correctness first: the generated backward against the hand-written one.
    gen_fn(); dx_gen = dx.clone(); hand_fn(); dx_hand = dx.clone()
    err = (dx_gen.float() - dx_hand.float()).norm().item() / dx_hand.float().norm().item()
    bytes_moved = 3 * M * N * x.element_size()
    case = f"softmax {M}x{N} {str(dtype)[6:]}"
    best = lambda make: min((do_bench(make(w), quantiles=[0.5]), f"{w} warps") for w in (4, 8, 16))
    (gen_ms, gen_cfg), (hand_ms, hand_cfg) = best(make_gen), best(make_hand)
    return [(case, f"tgrad ({gen_cfg})", gen_ms, bytes_moved, err), (case, f"hand-written ({hand_cfg})", hand_ms, bytes_moved, None),
            (case, "torch.autograd", do_bench(torch_fn, quantiles=[0.5]), bytes_moved, None)]


def bench_rms(gen, M, N, dtype, tmp):
    bwd = load("tests/golden/backward/rms_norm_kernel.py", tmp)
    x = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    wt = (torch.rand(N, generator=gen, device="cuda") + 0.5).to(dtype)
    dy = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    rstd = torch.rsqrt((x.float() * x.float()).mean(dim=1) + 1e-6)
    y = torch.empty_like(x)
    dx = torch.empty_like(x)
    dw = torch.zeros(N, device="cuda", dtype=torch.float32)
    drstd = torch.zeros(M, device="cuda")
    block = triton.next_power_of_2(N)
    w = warps(block)

    def make_gen(groups, w):
        dw_partial = torch.empty(groups, N, device="cuda")

        def gen_fn():
            # `tgrad --emit json`: dX, dW and the scratch may hold anything (nothing to clear).
            bwd.rms_norm_fwd_kernel_bwd[(groups,)](x, wt, y, rstd, N, N, N, 1e-6, BLOCK_SIZE=block,
                                                   dX=dx, dW=dw, dY=dy, dRstd=drstd, dW_partial=dw_partial, W_numel=N,
                                                   num_programs=M, num_warps=w)
            bwd.rms_norm_fwd_kernel_bwd_reduce[(triton.cdiv(N, 32),)](dw_partial, dw, N, groups, BLOCK=32, ROWS=64)
        return gen_fn

    def make_hand(groups, w):
        partial = torch.empty(groups, N, device="cuda")

        def hand_fn():
            rms_norm_bwd_hand[(groups,)](dx, partial, x, wt, dy, rstd, N, M, N, BLOCK=block, num_warps=w)
            return partial.sum(0)
        return hand_fn

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen_fn, hand_fn = make_gen(2 * sms, w), make_hand(2 * sms, w)

    xt = x.detach().float().requires_grad_(True)
    wtt = wt.detach().float().requires_grad_(True)
    yt = xt * torch.rsqrt((xt * xt).mean(dim=1, keepdim=True) + 1e-6) * wtt
    torch_fn = lambda: torch.autograd.grad(yt, [xt, wtt], dy.float(), retain_graph=True)
    gen_fn(); dx_gen = dx.clone(); dw_gen = dw.clone()
    dw_hand = hand_fn(); dx_hand = dx.clone()
    err = max((dx_gen.float() - dx_hand.float()).norm().item() / dx_hand.float().norm().item(),
              (dw_gen - dw_hand).norm().item() / dw_hand.norm().item())
    bytes_moved = 3 * M * N * x.element_size()
    case = f"rms norm {M}x{N} {str(dtype)[6:]}"
    (gen_ms, gen_cfg), (hand_ms, hand_cfg) = tuned(make_gen), tuned(make_hand)
    return [(case, f"tgrad ({gen_cfg})", gen_ms, bytes_moved, err), (case, f"hand-written ({hand_cfg})", hand_ms, bytes_moved, None),
            (case, "torch.autograd", do_bench(torch_fn, quantiles=[0.5]), bytes_moved, None)]


def bench_layer_norm(gen, M, N, dtype, tmp):
    bwd = load("tests/golden/backward/layer_norm_kernel.py", tmp)
    x = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    wt = (torch.rand(N, generator=gen, device="cuda") + 0.5).to(dtype)
    bt = (torch.rand(N, generator=gen, device="cuda") - 0.5).to(dtype)
    dy = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    mean = x.float().mean(dim=1)
    rstd = torch.rsqrt(x.float().var(dim=1, unbiased=False) + 1e-5)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    dw = torch.zeros(N, device="cuda", dtype=dtype)
    db = torch.zeros(N, device="cuda", dtype=dtype)
    dmean, drstd = torch.zeros(M, device="cuda"), torch.zeros(M, device="cuda")  # the statistics carry no upstream gradient
    block = min(triton.next_power_of_2(N), 65536 // x.element_size())  # the forward's own choice
    w = warps(block)
    def make_gen(groups, w):
        dw_partial, db_partial = torch.empty(groups, N, device="cuda"), torch.empty(groups, N, device="cuda")

        def gen_fn():
            # `tgrad --emit json`: dX, dW, dB and the scratch may hold anything (nothing to clear).
            bwd.layer_norm_fwd_kernel_bwd[(groups,)](x, y, wt, bt, mean, rstd, N, N, N, 1e-5, BLOCK_SIZE=block, dX=dx,
                                                     dW=dw, dB=db, dY=dy, dMean=dmean, dRstd=drstd, dW_partial=dw_partial,
                                                     dB_partial=db_partial, W_numel=N, B_numel=N, num_programs=M,
                                                     num_warps=w)
            for part, grad in ((dw_partial, dw), (db_partial, db)):
                bwd.layer_norm_fwd_kernel_bwd_reduce[(triton.cdiv(N, 32),)](part, grad, N, groups, BLOCK=32, ROWS=64)
        return gen_fn

    def make_hand(groups, w):
        hw, hb = torch.empty(groups, N, device="cuda"), torch.empty(groups, N, device="cuda")

        def hand_fn():
            layer_norm_bwd_hand[(groups,)](dx, hw, hb, x, wt, dy, mean, rstd, N, M, N, BLOCK=triton.next_power_of_2(N),
                                           num_warps=w)
            return hw.sum(0), hb.sum(0)
        return hand_fn

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen_fn, hand_fn = make_gen(2 * sms, w), make_hand(2 * sms, w)

    xt = x.detach().float().requires_grad_(True)
    wtt, btt = wt.detach().float().requires_grad_(True), bt.detach().float().requires_grad_(True)
    yt = torch.nn.functional.layer_norm(xt, (N,), wtt, btt, 1e-5)
    torch_fn = lambda: torch.autograd.grad(yt, [xt, wtt, btt], dy.float(), retain_graph=True)
    gen_fn(); dx_gen, dw_gen, db_gen = dx.clone(), dw.clone(), db.clone()
    dw_hand, db_hand = hand_fn(); dx_hand = dx.clone()
    err = max((a.float() - b.float()).norm().item() / b.float().norm().item()
              for a, b in ((dx_gen, dx_hand), (dw_gen, dw_hand), (db_gen, db_hand)))
    bytes_moved = 3 * M * N * x.element_size()
    case = f"layer norm {M}x{N} {str(dtype)[6:]}"
    (gen_ms, gen_cfg), (hand_ms, hand_cfg) = tuned(make_gen), tuned(make_hand)
    return [(case, f"tgrad ({gen_cfg})", gen_ms, bytes_moved, err), (case, f"hand-written ({hand_cfg})", hand_ms, bytes_moved, None),
            (case, "torch.autograd", do_bench(torch_fn, quantiles=[0.5]), bytes_moved, None)]


def bench_matmul(gen, M, N, K, tmp):
    bwd = load("tests/golden/backward/matmul_kernel.py", tmp)
    a = torch.randn(M, K, generator=gen, device="cuda").half()
    b = torch.randn(K, N, generator=gen, device="cuda").half()
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    dc = torch.randn(M, N, generator=gen, device="cuda").half()
    da, db = torch.zeros_like(a), torch.zeros_like(b)
    bm, bn, bk = 128, 128, 32
    # The generated backward is for the relu epilogue: give it and the others the same upstream gradient.
    relu_mask = (a.float() @ b.float()) > 0
    dc_eff = (dc.float() * relu_mask).half()

    def gen_fn():
        da.zero_(); db.zero_()
        bwd.matmul_kernel_bwd[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, ACTIVATION="relu",
            da_ptr=da, db_ptr=db, dc_ptr=dc, num_warps=8)

    hda, hdb = torch.empty_like(a), torch.empty_like(b)

    def hand_fn():
        # dA = dC B^T  (M x K, reduce over N);  dB = A^T dC  (K x N, reduce over M)
        matmul_hand[(triton.cdiv(M, bm), triton.cdiv(K, bn))](dc_eff, b, hda, M, K, N, N, 1, 1, N, K, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)
        matmul_hand[(triton.cdiv(K, bm), triton.cdiv(N, bn))](a, dc_eff, hdb, K, N, M, 1, K, N, 1, N, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)

    at, bt = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
    ct = torch.relu(at @ bt)
    torch_fn = lambda: torch.autograd.grad(ct, [at, bt], dc, retain_graph=True)
    gen_fn(); hand_fn()
    err = max((da.float() - hda.float()).norm().item() / hda.float().norm().item(),
              (db.float() - hdb.float()).norm().item() / hdb.float().norm().item())
    flops = 4 * M * N * K
    return [(f"matmul {M}x{N}x{K} fp16 (relu)", name, do_bench(fn, quantiles=[0.5]), -flops, err if name == "tgrad" else None)
            for name, fn in (("tgrad", gen_fn), ("hand-written", hand_fn), ("torch.autograd", torch_fn))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    args = parser.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (torch.float32, torch.float16):
            rows += bench_softmax(gen, 4096, 4096, dtype, tmp)
            rows += bench_rms(gen, 4096, 4096, dtype, tmp)
            rows += bench_layer_norm(gen, 4096, 4096, dtype, tmp)
        rows += bench_matmul(gen, 2048, 2048, 2048, tmp)
    table = "| case | backward | median ms | GB/s or TFLOP/s | tgrad / hand-written speed | tgrad vs hand-written rel. diff |\n| --- | --- | --- | --- | --- | --- |\n"
    hand = {case: ms for case, name, ms, _, _ in rows if name.startswith("hand-written")}
    for case, name, ms, work, err in rows:
        ratio = f"{hand[case] / ms:.2f}x" if name.startswith("tgrad") else ""
        rate = f"{-work / ms / 1e9:.0f} TFLOP/s" if work < 0 else f"{work / ms / 1e6:.0f} GB/s"
        table += f"| {case} | {name} | {ms:.4f} | {rate} | {ratio} | {'' if err is None else f'{err:.1e}'} |\n"
    device = torch.cuda.get_device_name()
    print(table + f"\n{device}, Triton {triton.__version__}, PyTorch {torch.__version__}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# Backward benchmark\n\n{datetime.date.today().isoformat()}: `python3 bench/bwd_bench.py` on {device} "
                    f"(Triton {triton.__version__}, PyTorch {torch.__version__}).\n\n{table}")


if __name__ == "__main__":
    main()
