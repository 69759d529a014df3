# kernl's layer norm kernels (ELS-RD/kernl, fetched, not committed) through their generated torch modules,
# against torch.autograd in fp64: output, mean and rstd all in the loss.
import sys, traceback
import torch
# The modules tgrad wrote (tests/gpu/REAL_REPOS.md says how): their folder is the first argument.
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "scratch/fa")
torch.manual_seed(0)
dev = "cuda"
results = []
TOL = {torch.float32: 2e-5, torch.float16: 2e-2}

def report(name, got, want, tol):
    err = (got.double() - want.double()).abs().max().item()
    scale = want.double().abs().max().item()
    ok = err <= tol * max(1.0, scale)
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max_abs_err={err:.3g} (scale {scale:.3g})", flush=True)

import kernl_layer_norm_xformers_op as XF
import kernl_layer_norm_fwd_fused_single_pass_op as SP
import kernl_layer_norm_fwd_fused_multi_pass_op as MP

def case(mod, kname, dtype, rms, has_bias, N, BLOCK, compiled=False):
    M = 6
    x = torch.randn(M, N, device=dev, dtype=dtype, requires_grad=True)
    w = torch.randn(N, device=dev, dtype=dtype, requires_grad=True)
    b = torch.randn(N, device=dev, dtype=dtype, requires_grad=True)
    out = torch.empty_like(x)
    mean = torch.empty(M, device=dev, dtype=torch.float32)
    rstd = torch.empty(M, device=dev, dtype=torch.float32)
    kern = getattr(mod, kname)
    def run(x, w, b):
        return kern[(M,)](output_ptr=out, a_ptr=x, weight_ptr=w, bias_ptr=b, mean_ptr=mean, rstd_ptr=rstd,
                          output_row_stride=out.stride(-2), output_col_stride=out.stride(-1),
                          a_row_stride=x.stride(0), a_col_stride=x.stride(1), N_SIZE=N, eps=1e-5,
                          HAS_BIAS=has_bias, IS_RMSNORM=rms, BLOCK_N_SIZE=BLOCK, num_warps=4)
    r = (torch.compile(run, fullgraph=True) if compiled else run)(x, w, b)
    g1 = torch.randn(M, N, device=dev, dtype=torch.float64)
    g2 = torch.randn(M, device=dev, dtype=torch.float64)
    g3 = torch.randn(M, device=dev, dtype=torch.float64) * 0.01
    ((r.output_ptr.double() * g1).sum() + (r.mean_ptr.double() * g2).sum() + (r.rstd_ptr.double() * g3).sum()).backward()
    X, W, B = (t.detach().double().requires_grad_() for t in (x, w, b))
    if rms:
        mu = torch.zeros(M, 1, device=dev, dtype=torch.float64)
        var = (X * X).mean(-1, keepdim=True)
    else:
        mu = X.mean(-1, keepdim=True)
        var = ((X - mu) ** 2).mean(-1, keepdim=True)
    rs = 1 / torch.sqrt(var + 1e-5)
    y = (X - mu) * rs * W + (B if has_bias else 0)
    ((y * g1).sum() + (mu[:, 0] * g2).sum() + (rs[:, 0] * g3).sum()).backward()
    name = f"kernl {kname} {dtype} rms={rms} bias={has_bias} N={N} BLOCK={BLOCK}{' compile' if compiled else ''}"
    report(name + " out", r.output_ptr, y, TOL[dtype])
    report(name + " mean", r.mean_ptr, mu[:, 0], TOL[dtype])
    report(name + " rstd", r.rstd_ptr, rs[:, 0], TOL[dtype] * 10)
    report(name + " dX", x.grad, X.grad, TOL[dtype] * 4)
    report(name + " dW", w.grad, W.grad, TOL[dtype] * 4)
    if has_bias:
        report(name + " dB", b.grad, B.grad, TOL[dtype] * 4)

def run(*a, **k):
    try:
        case(*a, **k)
    except Exception as e:
        results.append(False)
        print(f"FAIL {a} {k}: {type(e).__name__}: {str(e)[:800]}", flush=True)

for dtype in (torch.float32, torch.float16):
    run(XF, "layer_norm_xformers", dtype, False, True, 300, 512)
    for rms in (False, True):
        for has_bias in (False, True):
            run(SP, "_layer_norm_fwd_fused_single_pass", dtype, rms, has_bias, 300, 128)
            run(SP, "_layer_norm_fwd_fused_single_pass", dtype, rms, has_bias, 256, 128)
    run(MP, "_layer_norm_fwd_fused_multi_pass", dtype, False, True, 300, 128)
run(SP, "_layer_norm_fwd_fused_single_pass", torch.float32, False, True, 300, 128, compiled=True)
print(f"{sum(results)} of {len(results)} pass")
