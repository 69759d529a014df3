"""Where the time of a generated torch module's backward op goes: the rms norm golden module
(tests/golden/torch/rms_norm_kernel.py) at 4096x4096, its op timed as bench/bwd_bench.py times it (do_bench of
the op: CPU launch overhead included when it exceeds the GPU time), the same op captured in a CUDA graph and
replayed (GPU time only), and a profile of its kernels.

    python3 bench/module_overhead.py
"""
import importlib.util

import torch
from triton.testing import do_bench

def load(name):
    spec = importlib.util.spec_from_file_location(name + "_p", f"tests/golden/torch/{name}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
M = N = 4096
for dtype in (torch.float32, torch.float16):
    x = torch.randn(M, N, device="cuda").to(dtype)
    wt = (torch.rand(N, device="cuda") + 0.5).to(dtype)
    dy = torch.randn(M, N, device="cuda").to(dtype)
    rstd = torch.rsqrt((x.float() * x.float()).mean(dim=1) + 1e-6)
    y = torch.empty_like(x); drstd = torch.zeros(M, device="cuda")
    m = load("rms_norm_kernel")
    for w in (4, 8, 16):
        fn = lambda: m.rms_norm_fwd_kernel_backward([M], x, wt, y, rstd, N, N, N, 1e-6, 4096, dy, drstd, num_warps=w)
        fn(); torch.cuda.synchronize()
        t = do_bench(fn, quantiles=[0.5])
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            fn()
        tg = do_bench(lambda: g.replay(), quantiles=[0.5])
        print(f"rms {dtype} warps={w}: op {t*1000:.1f} us, graph replay {tg*1000:.1f} us", flush=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60))
