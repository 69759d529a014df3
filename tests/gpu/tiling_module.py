# Modules written with --tiling (tests/golden/torch/*_tiling.py): the backward's block sizes tuned for it, on the GPU.
#
#   python3 tests/gpu/tiling_module.py [--sizes 2048] [--skip-timing]
#
# 1. The relu matmul (tests/kernels/matmul.py) through the module written with
#    `--tiling BLOCK_SIZE_M,BLOCK_SIZE_N,BLOCK_SIZE_K`, launched as a user launches it (the grid a function of the
#    config, then torch.autograd.grad), against torch.autograd on the same math in float64, at ragged sizes (fp16
#    relu, fp32 and bf16 without): the gradients must meet it within the dtype's tolerance. Each case's first
#    backward tunes (tens of compiles: minutes for the whole script).
# 2. The same at SIZE^3 fp16 (relu and not), timed side by side: the module with --tiling, the module without
#    (tests/golden/torch/matmul_kernel.py, held to the forward's autotune configs) and torch.autograd (a median of
#    the backward after the first, which tunes).
# 3. A wrong declaration (tests/kernels/block_sums.py, `--tiling BLOCK` where BLOCK decides which elements each output
#    sums): the tuning is made to prefer other values of BLOCK (triton.testing.do_bench replaced by a clock that says
#    every later candidate is faster), and the module's check must notice that the gradients change, warn, and keep
#    the forward's BLOCK: the gradient must be the one of the forward as launched.
# The last line says `N of M pass`.
import argparse
import importlib.util
import os
import sys
import warnings

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
results = []


def load(name):
    path = os.path.join(ROOT, "tests", "golden", "torch", name + ".py")
    spec = importlib.util.spec_from_file_location("tiling_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(label, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {label} {detail}", flush=True)


def matmul_gradients(module, a, b, dc, activation):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]), triton.cdiv(N, META["BLOCK_SIZE_N"]))  # noqa: E731
    out, = module.matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                      c.stride(0), c.stride(1), ACTIVATION=activation)
    return out, torch.autograd.grad(out, [a, b], dc, retain_graph=True)


def reference(a, b, dc, activation):
    a64, b64 = a.detach().double().requires_grad_(True), b.detach().double().requires_grad_(True)
    c = a64 @ b64
    if activation == "relu":
        c = torch.relu(c)
    return torch.autograd.grad(c, [a64, b64], dc.double())


def correctness(module):
    tolerance = {torch.float32: 5e-3, torch.float16: 2e-2, torch.bfloat16: 5e-2}  # (fp32: TF32 dots)
    # (Each case tunes on its first backward: tens of compiles. A few cases, ragged in every dimension.)
    for (M, N, K), dtype, activation in (((257, 129, 65), torch.float16, "relu"), ((300, 200, 100), torch.float32, ""),
                                         ((257, 129, 65), torch.bfloat16, "")):
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda", generator=g).to(dtype).requires_grad_(True)
        b = torch.randn(K, N, device="cuda", generator=g).to(dtype).requires_grad_(True)
        dc = torch.randn(M, N, device="cuda", generator=g).to(dtype)
        _, (da, db) = matmul_gradients(module, a, b, dc, activation)
        rda, rdb = reference(a, b, dc, activation)
        for name, ours, theirs in (("dA", da, rda), ("dB", db, rdb)):
            err = (ours.double() - theirs).norm().item() / theirs.norm().item()
            check(f"matmul {M}x{N}x{K} {str(dtype)[6:]} ACTIVATION={activation!r} {name}", err <= tolerance[dtype],
                  f"rel. err {err:.2e}")


def timing(size, plain, tiled):
    rows = []
    for activation in ("relu", ""):
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(size, size, device="cuda", generator=g).half().requires_grad_(True)
        b = torch.randn(size, size, device="cuda", generator=g).half().requires_grad_(True)
        dc = torch.randn(size, size, device="cuda", generator=g).half()
        times = {}
        gradients = {}
        for label, module in (("tgrad module, --tiling", tiled), ("tgrad module, the forward's configs", plain)):
            out, gradients[label] = matmul_gradients(module, a, b, dc, activation)  # (the first backward tunes)
            times[label] = triton.testing.do_bench(lambda: torch.autograd.grad(out, [a, b], dc, retain_graph=True),
                                                   quantiles=[0.5])
        at, bt = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
        ct = at @ bt
        ct = torch.relu(ct) if activation == "relu" else ct
        times["torch.autograd"] = triton.testing.do_bench(
            lambda: torch.autograd.grad(ct, [at, bt], dc, retain_graph=True), quantiles=[0.5])
        rda, rdb = reference(a, b, dc, activation)
        for label, (da, db) in gradients.items():
            err = max((da.double() - rda).norm().item() / rda.norm().item(),
                      (db.double() - rdb).norm().item() / rdb.norm().item())
            check(f"matmul {size}^3 fp16 ACTIVATION={activation!r} {label}", err <= 2e-2, f"rel. err {err:.2e}")
        for label, t in times.items():
            rows.append((f"matmul {size}^3 fp16 ({activation or 'no epilogue'})", label, t,
                         4 * size ** 3 / t / 1e9, times["torch.autograd"] / t))
    print("\n| case | backward | median ms | TFLOP/s | speed vs torch.autograd |\n| --- | --- | --- | --- | --- |")
    for case, label, t, tflops, ratio in rows:
        print(f"| {case} | {label} | {t:.4f} | {tflops:.0f} | {ratio:.2f}x |")
    print()


def wrong_declaration():
    module = load("block_sums_kernel_tiling")
    N, BLOCK = 1000, 64
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(N, device="cuda", generator=g).requires_grad_(True)
    out = torch.empty(triton.cdiv(N, BLOCK), device="cuda")
    upstream = torch.randn(out.shape, device="cuda", generator=g)
    clock = [1.0]

    def faster_each_time(fn, *args, **kwargs):  # every later candidate looks faster than the one before
        fn()
        clock[0] *= 0.5
        return clock[0]

    real = triton.testing.do_bench
    triton.testing.do_bench = faster_each_time
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grid = lambda META: (triton.cdiv(N, META["BLOCK"]),)  # noqa: E731
            y, = module.block_sums_kernel[grid](x, out, N, BLOCK=BLOCK)
            dx, = torch.autograd.grad(y, [x], upstream)
    finally:
        triton.testing.do_bench = real
    expected = upstream.repeat_interleave(BLOCK)[:N]
    sums = torch.stack([x.detach()[i:i + BLOCK].sum() for i in range(0, N, BLOCK)])
    check("block sums: the forward as launched", torch.allclose(y, sums, rtol=1e-5, atol=1e-5))
    check("block sums: the gradient of the forward as launched (BLOCK=64), not of another BLOCK",
          torch.allclose(dx, expected), f"max err {(dx - expected).abs().max().item():.2e}")
    said = [str(w.message) for w in caught if "do not only tile the computation" in str(w.message)]
    check("block sums: the module warns that BLOCK does not only tile the computation", len(said) == 1,
          said[0][:160] if said else f"{len(caught)} other warnings")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2048")
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args()
    tiled, plain = load("matmul_kernel_tiling"), load("matmul_kernel")
    wrong_declaration()
    if not args.skip_timing:
        for size in (int(s) for s in args.sizes.split(",")):
            timing(size, plain, tiled)
    correctness(tiled)
    print(f"{sum(results)} of {len(results)} pass on {torch.cuda.get_device_name()} (Triton {triton.__version__}, "
          f"PyTorch {torch.__version__})")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
