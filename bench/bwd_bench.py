#!/usr/bin/env python3
"""Backward-kernel benchmark (GPU machine, not a test): tgrad's generated
backward vs a hand-written Triton backward written the classic way vs
torch.autograd of the PyTorch reference, for softmax and rms norm.

    python3 bench/bwd_bench.py [--out bench/RESULTS.md]

Times are medians of triton.testing.do_bench (CUDA events, warm-up first).
GB/s counts the bytes each backward must move at least: softmax reads x (or
y) and dy and writes dx; rms norm reads x, dy and writes dx (w and rstd are
small). The generated kernels come from tests/golden/backward/ (fp32
pointers; the same source runs on fp16 buffers, loads upcast explicitly).
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
    gen_fn = lambda: bwd.softmax_kernel_bwd[(M,)](y, x, N, N, N, BLOCK_SIZE=block, din_ptr=dx, dout_ptr=dy, num_warps=w)
    hand_fn = lambda: softmax_bwd_hand[(M,)](dx, y, dy, N, N, BLOCK=block, num_warps=w)
    xt = x.detach().float().requires_grad_(True) if dtype == torch.float32 else x.detach().requires_grad_(True)
    yt = torch.softmax(xt, dim=1)
    torch_fn = lambda: torch.autograd.grad(yt, xt, dy, retain_graph=True)
    # Correctness first: the generated backward against the hand-written one.
    gen_fn(); dx_gen = dx.clone(); hand_fn(); dx_hand = dx.clone()
    err = (dx_gen.float() - dx_hand.float()).norm().item() / dx_hand.float().norm().item()
    bytes_moved = 3 * M * N * x.element_size()
    return [(f"softmax {M}x{N} {str(dtype)[6:]}", name, do_bench(fn, quantiles=[0.5]), bytes_moved, err if name == "tgrad" else None)
            for name, fn in (("tgrad", gen_fn), ("hand-written", hand_fn), ("torch.autograd", torch_fn))]


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

    def gen_fn():
        dx.zero_(); dw.zero_()
        bwd.rms_norm_fwd_kernel_bwd[(M,)](x, wt, y, rstd, N, N, N, 1e-6, BLOCK_SIZE=block,
                                          dX=dx, dW=dw, dY=dy, dRstd=drstd, num_warps=w)

    groups = torch.cuda.get_device_properties(0).multi_processor_count * 2
    partial = torch.empty(groups, N, device="cuda")

    def hand_fn():
        rms_norm_bwd_hand[(groups,)](dx, partial, x, wt, dy, rstd, N, M, N, BLOCK=block, num_warps=w)
        return partial.sum(0)

    xt = x.detach().float().requires_grad_(True)
    wtt = wt.detach().float().requires_grad_(True)
    yt = xt * torch.rsqrt((xt * xt).mean(dim=1, keepdim=True) + 1e-6) * wtt
    torch_fn = lambda: torch.autograd.grad(yt, [xt, wtt], dy.float(), retain_graph=True)
    gen_fn(); dx_gen = dx.clone(); dw_gen = dw.clone()
    dw_hand = hand_fn(); dx_hand = dx.clone()
    err = max((dx_gen.float() - dx_hand.float()).norm().item() / dx_hand.float().norm().item(),
              (dw_gen - dw_hand).norm().item() / dw_hand.norm().item())
    bytes_moved = 3 * M * N * x.element_size()
    return [(f"rms norm {M}x{N} {str(dtype)[6:]}", name, do_bench(fn, quantiles=[0.5]), bytes_moved, err if name == "tgrad" else None)
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
    table = "| case | backward | median ms | GB/s | tgrad / hand-written speed | tgrad vs hand-written rel. diff |\n| --- | --- | --- | --- | --- | --- |\n"
    hand = {case: ms for case, name, ms, _, _ in rows if name == "hand-written"}
    for case, name, ms, nbytes, err in rows:
        ratio = f"{hand[case] / ms:.2f}x" if name == "tgrad" else ""
        table += f"| {case} | {name} | {ms:.4f} | {nbytes / ms / 1e6:.0f} | {ratio} | {'' if err is None else f'{err:.1e}'} |\n"
    device = torch.cuda.get_device_name()
    print(table + f"\n{device}, Triton {triton.__version__}, PyTorch {torch.__version__}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# Backward benchmark\n\n{datetime.date.today().isoformat()}: `python3 bench/bwd_bench.py` on {device} "
                    f"(Triton {triton.__version__}, PyTorch {torch.__version__}).\n\n{table}")


if __name__ == "__main__":
    main()
