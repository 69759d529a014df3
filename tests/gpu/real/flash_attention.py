# flash-attention's Triton kernels (Dao-AILab/flash-attention, fetched, not committed): the generated torch modules
# launched as flash-attention's own host code launches the kernels, gradients against torch.autograd in fp64.
import math, sys, traceback
import torch, triton
# The modules tgrad wrote (tests/gpu/REAL_REPOS.md says how): their folder is the first argument.
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "scratch/fa")
torch.manual_seed(0)
dev = "cuda"
results = []

def report(name, got, want, tol):
    err = (got.double() - want.double()).abs().max().item() if got is not None else float("nan")
    scale = want.double().abs().max().item() + 1e-30
    ok = err <= tol * max(1.0, scale)
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max_abs_err={err:.3g} (scale {scale:.3g})", flush=True)

def run(name, fn):
    try:
        fn()
    except Exception as e:
        results.append(False)
        print(f"FAIL {name}: {type(e).__name__}: {str(e)[:600]}", flush=True)
        traceback.print_exc(limit=3)

TOL = {torch.float32: 2e-5, torch.float16: 2e-2, torch.bfloat16: 6e-2}

# ---------------------------------------------------------------- rotary
import rotary_kernel_op as R

def rotary_ref(x, cos, sin, rd, interleaved, conjugate, offsets):
    # x: (b, s, h, d); cos/sin: (s_ro, rd/2)
    b, s, h, d = x.shape
    pos = torch.arange(s, device=x.device)[None, :] + (offsets[:, None] if torch.is_tensor(offsets) else offsets)
    c = cos[pos][:, :, None, :]  # b, s, 1, rd/2
    sn = sin[pos][:, :, None, :]
    if conjugate: sn = -sn
    xr = x[..., :rd]
    if not interleaved:
        x0, x1 = xr[..., : rd // 2], xr[..., rd // 2:]
        return torch.cat([x0 * c - x1 * sn, x0 * sn + x1 * c], -1)
    x0, x1 = xr[..., 0::2], xr[..., 1::2]
    return torch.stack([x0 * c - x1 * sn, x0 * sn + x1 * c], -1).flatten(-2)

def rotary_case(dtype, interleaved, conjugate, offs_tensor, rd=32, d=48, b=2, s=37, h=3, compiled=False):
    x = torch.randn(b, s, h, d, device=dev, dtype=dtype, requires_grad=True)
    s_ro = s + 8
    cos = torch.randn(s_ro, rd // 2, device=dev, dtype=dtype, requires_grad=True)
    sin = torch.randn(s_ro, rd // 2, device=dev, dtype=dtype, requires_grad=True)
    offsets = torch.randint(0, 8, (b,), device=dev, dtype=torch.int32) if offs_tensor else 5
    out = torch.empty_like(x)
    BLOCK_M = 8
    grid = lambda META: (triton.cdiv(h, META["BLOCK_H"]), triton.cdiv(s, META["BLOCK_M"]), b)
    def launch(x, cos, sin):
        return R.rotary_kernel[grid](out, x, cos, sin, None, offsets, s, h, s_ro,
                                     out.stride(0), out.stride(-3), out.stride(-2), out.stride(-1),
                                     x.stride(0), x.stride(-3), x.stride(-2), x.stride(-1),
                                     rd, offs_tensor, False, interleaved, conjugate, BLOCK_M=BLOCK_M, BLOCK_H=2)
    res = (torch.compile(launch, fullgraph=True) if compiled else launch)(x, cos, sin)
    g = torch.randn(b, s, h, rd, device=dev, dtype=torch.float64)
    (res.OUT[..., :rd].double() * g).sum().backward()
    x64, c64, s64 = (t.detach().double().requires_grad_() for t in (x, cos, sin))
    want = rotary_ref(x64, c64, s64, rd, interleaved, conjugate, offsets.long() if offs_tensor else offsets)
    report(f"rotary {dtype} il={interleaved} conj={conjugate} offs_tensor={offs_tensor} forward", res.OUT[..., :rd], want, TOL[dtype])
    (want * g).sum().backward()
    report(f"rotary {dtype} il={interleaved} conj={conjugate} offs_tensor={offs_tensor} dX", x.grad, x64.grad, TOL[dtype])
    report(f"rotary {dtype} il={interleaved} conj={conjugate} offs_tensor={offs_tensor} dCOS", cos.grad, c64.grad, TOL[dtype])
    report(f"rotary {dtype} il={interleaved} conj={conjugate} offs_tensor={offs_tensor} dSIN", sin.grad, s64.grad, TOL[dtype])

for dtype in (torch.float32, torch.bfloat16):
    for il in (False, True):
        for conj in (False, True):
            for ot in (False, True):
                run(f"rotary {dtype} {il} {conj} {ot}", lambda: rotary_case(dtype, il, conj, ot))
# Under torch.compile, SEQLEN_OFFSETS an int and a tensor (the op takes it in two slots).
for ot in (False, True):
    run(f"rotary compiled {ot}", lambda: rotary_case(torch.float32, False, False, ot, compiled=True))

# ---------------------------------------------------------------- cross entropy
import cross_entropy_fwd_kernel_op as CE

def ce_case(dtype, smoothing, logit_scale, lse_square_scale, precomputed=False):
    n_rows, n_cols = 9, 1000
    logits = (torch.randn(n_rows, n_cols, device=dev, dtype=dtype) * 3).requires_grad_()
    labels = torch.randint(0, n_cols, (n_rows,), device=dev)
    labels[2] = -100
    losses = torch.empty(n_rows, dtype=torch.float32, device=dev)
    lse = torch.empty(n_rows, dtype=torch.float32, device=dev)
    z_losses = torch.empty(n_rows, dtype=torch.float32, device=dev)
    BLOCK_SIZE = 256
    res = CE.cross_entropy_fwd_kernel[(n_rows,)](losses, lse, z_losses, logits, labels, smoothing, logit_scale,
                                                  lse_square_scale, -100, n_cols, 0, n_cols, logits.stride(0),
                                                  BLOCK_SIZE=BLOCK_SIZE, SPLIT=False, PRECOMPUTED_LSE=precomputed, num_warps=4)
    g1, g2, g3 = (torch.randn(n_rows, device=dev, dtype=torch.float64) for _ in range(3))
    loss = (res.loss_ptr.double() * g1).sum() + (res.z_loss_ptr.double() * g2).sum() + (res.lse_ptr.double() * g3).sum()
    loss.backward()
    l64 = logits.detach().double().requires_grad_()
    z = l64 * logit_scale
    lse_r = torch.logsumexp(z, -1)
    valid = labels != -100
    lab = labels.clamp(min=0)
    picked = z.gather(1, lab[:, None])[:, 0]
    if smoothing > 0:
        loss_r = lse_r - smoothing * z.sum(-1) / n_cols - (1 - smoothing) * picked
    else:
        loss_r = lse_r - picked
    zl = lse_square_scale * lse_r * lse_r
    loss_r = torch.where(valid, loss_r + zl, 0.0)
    zl = torch.where(valid, zl, 0.0)
    name = f"cross_entropy {dtype} smoothing={smoothing} scale={logit_scale} z={lse_square_scale}"
    report(name + " loss", res.loss_ptr, loss_r, TOL[dtype])
    ((loss_r * g1).sum() + (zl * g2).sum() + (lse_r * g3).sum()).backward()
    report(name + " dlogits", logits.grad, l64.grad, TOL[dtype])

for dtype in (torch.float32, torch.bfloat16):
    for sm, sc, zs in ((0.0, 1.0, 0.0), (0.1, 1.0, 0.0), (0.0, 0.7, 1e-2), (0.2, 1.3, 1e-3)):
        run(f"ce {dtype}", lambda: ce_case(dtype, sm, sc, zs))

# ---------------------------------------------------------------- layer norm
import layer_norm_fwd_1pass_kernel_op as LN

def ln_case(dtype, rms, has_bias, has_res, store_res, rowscale, x1w1, zero_centered=False):
    M, N = 7, 300
    x = torch.randn(M, N, device=dev, dtype=dtype, requires_grad=True)
    w = (torch.randn(N, device=dev, dtype=dtype) * 0.1 + (0.0 if zero_centered else 1.0)).requires_grad_()
    b = torch.randn(N, device=dev, dtype=dtype, requires_grad=True) if has_bias else None
    res = torch.randn(M, N, device=dev, dtype=dtype, requires_grad=True) if has_res else None
    x1 = torch.randn(M, N, device=dev, dtype=dtype, requires_grad=True) if x1w1 else None
    w1 = torch.randn(N, device=dev, dtype=dtype, requires_grad=True) if x1w1 else None
    b1 = torch.randn(N, device=dev, dtype=dtype, requires_grad=True) if (x1w1 and has_bias) else None
    rs = (torch.rand(M, device=dev, dtype=dtype) + 0.5).requires_grad_() if rowscale else None
    out = torch.empty_like(x)
    y1 = torch.empty_like(x) if x1w1 else None
    res_out = torch.empty(M, N, device=dev, dtype=torch.float32) if store_res else None
    mean = torch.empty(M, device=dev, dtype=torch.float32) if not rms else None
    rstd = torch.empty(M, device=dev, dtype=torch.float32)
    BLOCK_N = triton.next_power_of_2(N)
    r = LN._layer_norm_fwd_1pass_kernel[(M,)](x, out, w, b, res, x1, w1, b1, y1, res_out, rs, None, None, None,
        mean, rstd, x.stride(0), out.stride(0), res.stride(0) if res is not None else 0,
        res_out.stride(0) if res_out is not None else 0, x1.stride(0) if x1 is not None else 0,
        y1.stride(0) if y1 is not None else 0, M, N, 1e-5, 0.0, int(zero_centered), rms, BLOCK_N,
        res is not None, res_out is not None, b is not None, False, False, rs is not None,
        HAS_X1=x1 is not None, HAS_W1=w1 is not None, HAS_B1=b1 is not None)
    gy = torch.randn(M, N, device=dev, dtype=torch.float64)
    gy1 = torch.randn(M, N, device=dev, dtype=torch.float64)
    gr = torch.randn(M, N, device=dev, dtype=torch.float64)
    loss = (r.Y.double() * gy).sum()
    if x1w1: loss = loss + (r.Y1.double() * gy1).sum()
    if store_res: loss = loss + (r.RESIDUAL_OUT.double() * gr).sum()
    loss.backward()
    leaves = [t for t in (x, w, b, res, x1, w1, b1, rs)]
    leaves64 = [t.detach().double().requires_grad_() if t is not None else None for t in leaves]
    X, W, B, RES, X1, W1, B1, RS = leaves64
    xx = X * RS[:, None] if RS is not None else X
    if X1 is not None: xx = xx + X1
    if RES is not None: xx = xx + RES
    if rms:
        xhat = xx / torch.sqrt((xx * xx).mean(-1, keepdim=True) + 1e-5)
    else:
        mu = xx.mean(-1, keepdim=True)
        xhat = (xx - mu) / torch.sqrt(((xx - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
    ww = W + 1.0 if zero_centered else W
    y = xhat * ww + (B if B is not None else 0)
    lr = (y * gy).sum()
    if x1w1:
        ww1 = W1 + 1.0 if zero_centered else W1
        lr = lr + ((xhat * ww1 + (B1 if B1 is not None else 0)) * gy1).sum()
    if store_res: lr = lr + (xx * gr).sum()
    lr.backward()
    name = f"layer_norm {dtype} rms={rms} bias={has_bias} res={has_res} store_res={store_res} rowscale={rowscale} x1w1={x1w1} zc={zero_centered}"
    report(name + " Y", r.Y, y, TOL[dtype])
    for label, got, want in zip("X W B RESIDUAL X1 W1 B1 ROWSCALE".split(), leaves, leaves64):
        if got is not None:
            report(f"{name} d{label}", got.grad, want.grad, TOL[dtype] * 4)

for dtype in (torch.float32, torch.bfloat16):
    for cfg in ((False, True, False, False, False, False), (True, False, False, False, False, False),
                (False, True, True, True, False, False), (True, False, True, True, True, False),
                (False, True, False, True, False, True), (True, True, False, False, False, True)):
        run(f"ln {dtype} {cfg}", lambda: ln_case(dtype, *cfg))
    run(f"ln {dtype} zc", lambda: ln_case(dtype, False, True, False, False, False, False, True))

print(f"{sum(results)} of {len(results)} pass")
