# state-spaces/mamba's Triton forward kernels (mamba_ssm/ops/triton/*.py, fetched at e9594ce1c732, not committed)
# through their generated modules, each launched as mamba's own host function launches it (grid or grid lambda of the
# autotuned kernels, strides, flags, BLOCK sizes, num_warps, buffers passed as None where the host passes None), against
# a float64 PyTorch reference of the kernel's math written here. Every output the kernel writes (the saved statistics
# Mean and Rstd, the residual, the new SSM state, dt_out, out_x too) goes into a loss with random fp64 weights; the
# outputs and the input gradients are compared, max abs error over max(1, max|ref|) (2e-5 fp32, 6e-2 bf16; kernels
# with tl.dot: 5e-3 fp32 on the GPU, whose fp32 dots run in TF32).
# Usage: python3 tests/gpu/real/mamba_kernels.py [MODULES_DIR] [--only NAME]   (default scratch/mamba/mods)
# MODULES_DIR holds mamba_NAME_op.py for each NAME of KERNELS below, written from a checkout of mamba at SRC
# (`git archive HEAD mamba_ssm | tar -x -C SRC`), from SRC (no --arg, no -D):
#   tgrad mamba_ssm/ops/triton/layer_norm.py -I . --kernel _layer_norm_fwd_1pass_kernel \
#         --wrt X,W,B,RESIDUAL,X1,W1,B1,ROWSCALE --emit torch -o DIR/mamba_layer_norm_fwd_1pass_kernel_op.py
#   tgrad mamba_ssm/ops/triton/layernorm_gated.py -I . --kernel _layer_norm_fwd_1pass_kernel --wrt X,W,B,Z \
#         --emit torch -o DIR/mamba_gated_layer_norm_fwd_1pass_kernel_op.py
#   tgrad mamba_ssm/ops/triton/selective_state_update.py -I . --kernel _selective_scan_update_kernel \
#         --wrt state_ptr,x_ptr,dt_ptr,dt_bias_ptr,A_ptr,B_ptr,C_ptr,D_ptr,z_ptr --emit torch \
#         -o DIR/mamba_selective_scan_update_kernel_op.py
#   tgrad mamba_ssm/ops/triton/k_activations.py -I . --kernel _swiglu_fwd_kernel --wrt X,Y --emit torch \
#         -o DIR/mamba_swiglu_fwd_kernel_op.py
#   tgrad mamba_ssm/ops/triton/ssd_chunk_state.py -I . --kernel _chunk_cumsum_fwd_kernel --wrt dt_ptr,A_ptr,dt_bias_ptr \
#         --emit torch -o DIR/mamba_chunk_cumsum_fwd_kernel_op.py
#   tgrad mamba_ssm/ops/triton/ssd_chunk_state.py -I . --kernel _chunk_state_fwd_kernel \
#         --wrt x_ptr,b_ptr,dt_ptr,dA_cumsum_ptr --emit torch -o DIR/mamba_chunk_state_fwd_kernel_op.py
#   tgrad mamba_ssm/ops/triton/ssd_state_passing.py -I . --kernel _state_passing_fwd_kernel \
#         --wrt states_ptr,dA_cs_ptr,initstates_ptr --emit torch -o DIR/mamba_state_passing_fwd_kernel_op.py
#   tgrad mamba_ssm/ops/triton/ssd_bmm.py -I . --kernel _bmm_chunk_fwd_kernel --wrt a_ptr,b_ptr --emit torch \
#         -o DIR/mamba_bmm_chunk_fwd_kernel_op.py
#   tgrad mamba_ssm/ops/triton/ssd_chunk_scan.py -I . --kernel _chunk_scan_fwd_kernel \
#         --wrt cb_ptr,x_ptr,z_ptr,dt_ptr,dA_cumsum_ptr,C_ptr,prev_states_ptr,D_ptr --emit torch \
#         -o DIR/mamba_chunk_scan_fwd_kernel_op.py
# Found by this script (the helper's binary, 2026-11-27) and fixed in tgrad since:
# - two wrong gradients of selective_state_update: the state it updates in place came back non-differentiable
#   from a module of several specializations (dstate, dx, ddt, dA, dB wrong), and inputs passed as expanded views
#   (Mamba2.step's einops.repeat of A, dt, dt_bias, D) got their gradient once per element sharing memory (the
#   expansion factor times too large). Repros: scratch/mamba/repro/inplace_state_flag.py, expanded_input.py;
#   tests: shared_decay_inplace_kernel (gpu_check), tests/gpu/expanded_inputs.py.
# - softplus.py's two definitions under `if TRITON3: ... else: ...`: tgrad took the later (Triton 2) one,
#   tl.math.log1p, which Triton 3 lacks; it now takes the one whose code Triton 3 has (tests/kernels/version_branches.py).
# - k_activations' module kept `swiglu = SwiGLU.apply` without the class (NameError at import); a binding the
#   module does not read is now left out (tests/kernels/host_code.py).
# - chunk_scan's `tl.arange(0, BLOCK_SIZE_DSTATE if BLOCK_SIZE_DSTATE <= 128 else BLOCK_SIZE_K)`, split into an if
#   assigning a name without `: tl.constexpr`, did not compile in Triton 3; a choice between tl.constexpr values now
#   stays one expression.
# Still open, a FAIL line here: chunk_scan's op schema has 67 arguments and PyTorch takes 64, so its module does not
# import (RuntimeError); the script loads it again with the ops unregistered (eager launches) to check its gradients.
# - A tie in tl.minimum (chunk_state's exp(min(dA_last - dA_k, 0)) at the last valid position of a ragged last
#   chunk, dA_cumsum being constant past seqlen): tgrad passes half the gradient to each side, as torch.minimum;
#   the reference uses torch.minimum (mamba's own backward passes all of it; end to end through dt the same).
# The modules are imported on their own; they keep the kernel files' `from mamba_ssm.utils.determinism import
# autotune_configs` (the autotune decorators call it), and mamba_ssm's __init__ imports its CUDA extensions: where
# `import mamba_ssm.utils.determinism` fails, the script binds a stand-in whose autotune_configs returns the configs
# (mamba's own, outside MAMBA_DETERMINISTIC).
# Each kernel runs in a process of its own (--only K runs one); MAMBA_JOBS processes at a time (default: all; 1 on
# the CPU), MAMBA_TIMEOUT seconds for the whole run (default 900). The last line says `N of M pass`, M the checks (a
# kernel whose process died counts one failed check).
# MAMBA_CPU=1: on the CPU under TRITON_INTERPRET=1 (fp32 only, small ragged shapes): each autotuned kernel keeps the
# one config mamba's deterministic mode picks (the smallest blocks; the interpreter cannot benchmark), the backward's
# launch tuning is off (TGRAD_TUNE_BACKWARD=0), and the interpreter gets a float atomic_xchg (it has none; the
# selective_state_update backward exchanges) and int1 masks where a scalar comparison comes out int32 there: PYTHONPATH=... TRITON_INTERPRET=1 MAMBA_CPU=1 python3 THIS DIR
import importlib
import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import types

ARGS = [a for a in sys.argv[1:]]
ONLY = None
if "--only" in ARGS:
    i = ARGS.index("--only")
    ONLY = ARGS[i + 1]
    del ARGS[i:i + 2]
FOLDER = ARGS[0] if ARGS else "scratch/mamba/mods"
CPU = os.environ.get("MAMBA_CPU") == "1"
if CPU:
    os.environ["TGRAD_TUNE_BACKWARD"] = "0"
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("MAMBA_CPU=1 needs TRITON_INTERPRET=1")

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

DEV = "cpu" if CPU else "cuda"
f32, bf16 = torch.float32, torch.bfloat16
DTYPES = (f32,) if CPU else (f32, bf16)
TOL = {f32: 2e-5, bf16: 6e-2}
# fp32 tl.dot: TF32 on the GPU (10-bit mantissa), exact fp32 in the interpreter
TOL_DOT = {f32: 1e-4 if CPU else 5e-3, bf16: 6e-2}
FAILS = 0
CHECKS = 0


def cdiv(a, b):
    return (a + b - 1) // b


def next_pow2(n):
    return 1 << (n - 1).bit_length()


def rnd(*shape, dtype=f32, scale=1.0, shift=0.0, grad=True):
    t = (torch.randn(*shape, device=DEV) * scale + shift).to(dtype)
    return t.requires_grad_() if grad else t


def dname(dtype):
    return str(dtype)[6:]


def report(ok, text):
    global FAILS, CHECKS
    CHECKS += 1
    FAILS += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {text}", flush=True)


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[-1] if text else ''}"


class _RawOK(Exception):
    pass


class _Probe:
    """The module's copy of the forward kernel launched as Triton launches it (no tgrad op): tells whether a
    failing launch fails in the forward kernel itself (as the module holds it) or in the op around it."""

    def __init__(self, K):
        self.raw = getattr(K, "_autotuner", None) or K.jit

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.raw[grid](*args, **kwargs)
            raise _RawOK()
        return launch


def run_case(tag, K, leaves, launch, ref, tol, tols=None):
    """leaves: name -> leaf tensor (requires grad); launch(K) -> {output name: tensor} through the module (the
    outputs in the loss); ref({name: fp64 leaf}) -> {output name: fp64 tensor} laid out as launch's outputs."""
    tols = tols or {}
    try:
        outs = launch(K)
    except Exception as e:
        where = "the op around it"
        try:
            launch(_Probe(K))
        except _RawOK:
            pass
        except Exception:
            where = "the module's forward kernel itself"
        report(False, f"{tag}: {first_line(e)} (fails in {where})")
        traceback.print_exc(limit=2)
        return
    try:
        gen = torch.Generator(device=DEV).manual_seed(1234)
        weights = {n: torch.randn(o.shape, dtype=torch.float64, device=DEV, generator=gen) for n, o in outs.items()}
        loss = sum((o.double() * weights[n]).sum() for n, o in outs.items())
        if loss.requires_grad:
            loss.backward()
        ref_leaves = {n: t.detach().double().requires_grad_() for n, t in leaves.items()}
        want = ref(ref_leaves)
        sum((want[n] * weights[n]).sum() for n in outs).backward()
        checks = [(n, outs[n], want[n]) for n in outs]
        checks += [("d" + n, leaves[n].grad, ref_leaves[n].grad) for n in leaves]
        for name, got, w in checks:
            t = tols.get(name, tol)
            if got is None or w is None:
                report(False, f"{tag} {name}: {'no gradient from the module' if got is None else 'reference has none'}")
                continue
            if got.shape != w.shape:
                report(False, f"{tag} {name}: shape {tuple(got.shape)}, reference {tuple(w.shape)}")
                continue
            err = (got.double() - w).abs().max().item() / max(1.0, w.abs().max().item())
            ok = err <= t  # a NaN fails
            report(ok, f"{tag} {name}: {err:.2e}" + (f" (tol {t:g})" if t != tol else ""))
    except Exception as e:
        report(False, f"{tag}: {first_line(e)}")
        traceback.print_exc(limit=4)


def leaf_dict(**kw):
    return {k: v for k, v in kw.items() if v is not None}


# ------------------------------------------------------------------------------------------------------ layer_norm.py
def ln_ref_math(x, w, b, eps, rms):
    if rms:
        rstd = torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
        xhat, mean = x * rstd, None
    else:
        mean = x.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
        xhat = (x - mean) * rstd
    y = xhat * w + b if b is not None else xhat * w
    return xhat, y, mean, rstd


LN_CONFIGS = [
    # name, rms, bias, residual, residual_in_fp32, x1 (+w1, b1), rowscale, dropout_p, return_mask, W in fp32
    dict(name="layer_norm", rms=False, bias=True),
    dict(name="rms_norm", rms=True, bias=False),
    dict(name="layer_norm+residual", rms=False, bias=True, residual=True),
    dict(name="rms_norm+residual fp32", rms=True, bias=False, residual=True, res_fp32=True),
    dict(name="rms_norm prenorm residual_dtype fp32 (no residual in)", rms=True, bias=False, res_fp32=True),
    dict(name="rms_norm+residual+rowscale", rms=True, bias=False, residual=True, rowscale=True),
    dict(name="layer_norm parallel x1 w1 b1 +residual", rms=False, bias=True, residual=True, x1=True, w1=True, b1=True),
    dict(name="rms_norm parallel w1 (no x1, no b1)", rms=True, bias=False, w1=True),
    dict(name="layer_norm dropout 0.1 mask stored", rms=False, bias=True, dropout=0.1, mask=True),
    dict(name="rms_norm dropout 0.2 +x1 +residual", rms=True, bias=False, residual=True, x1=True, dropout=0.2),
    dict(name="layer_norm W fp32", rms=False, bias=True, w_fp32=True),
]


def t_layer_norm_fwd_1pass_kernel(K):
    # mamba_ssm/ops/triton/layer_norm.py _layer_norm_fwd (as LayerNormFn / RMSNorm / layer_norm_fn call it)
    eps = 1e-6
    shapes = [(5, 37), (3, 64)] if CPU else [(37, 1000), (16, 2560), (6, 4099)]
    for dtype in DTYPES:
        for shape in shapes:
            for cfg in LN_CONFIGS:
                if CPU and shape != shapes[0] and cfg["name"] not in ("layer_norm", "rms_norm+residual+rowscale"):
                    continue
                M, N = shape
                wd = f32 if cfg.get("w_fp32") else dtype
                X = rnd(M, N, dtype=dtype, shift=0.3)
                W = rnd(N, dtype=wd, scale=0.3, shift=1.0)
                Bb = rnd(N, dtype=wd, scale=0.3) if cfg.get("bias") else None
                R = rnd(M, N, dtype=f32 if cfg.get("res_fp32") else dtype) if cfg.get("residual") else None
                X1 = rnd(M, N, dtype=dtype) if cfg.get("x1") else None
                W1 = rnd(N, dtype=wd, scale=0.3, shift=1.0) if cfg.get("w1") else None
                B1 = rnd(N, dtype=wd, scale=0.3) if cfg.get("b1") else None
                RS = rnd(M, dtype=dtype, scale=0.3, shift=1.0) if cfg.get("rowscale") else None
                p = cfg.get("dropout", 0.0)
                residual_dtype = f32 if cfg.get("res_fp32") else None
                seeds = torch.randint(2 ** 32, (M if X1 is None else 2 * M,), device=DEV, dtype=torch.int64) \
                    if p > 0 else None
                rms = cfg["rms"]

                def host(K, return_mask, X=X, W=W, Bb=Bb, R=R, X1=X1, W1=W1, B1=B1, RS=RS, p=p, seeds=seeds,
                         residual_dtype=residual_dtype, rms=rms):
                    M, N = X.shape
                    if R is not None:
                        residual_dtype = R.dtype
                    y = torch.empty_like(X)
                    y1 = torch.empty_like(y) if W1 is not None else None
                    if R is not None or (residual_dtype is not None and residual_dtype != X.dtype) or p > 0.0 \
                            or RS is not None or X1 is not None:
                        residual_out = torch.empty(M, N, device=X.device,
                                                   dtype=residual_dtype if residual_dtype is not None else X.dtype)
                    else:
                        residual_out = None
                    mean = torch.empty((M,), dtype=torch.float32, device=X.device) if not rms else None
                    rstd = torch.empty((M,), dtype=torch.float32, device=X.device)
                    dropout_mask = torch.empty(M if X1 is None else 2 * M, N, device=X.device, dtype=torch.bool) \
                        if return_mask and p > 0.0 else None
                    MAX_FUSED_SIZE = 65536 // X.element_size()
                    BLOCK_N = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
                    return K[(M,)](X, y, W, Bb, R, X1, W1, B1, y1, residual_out, RS, seeds, dropout_mask, mean, rstd,
                                   X.stride(0), y.stride(0), R.stride(0) if R is not None else 0,
                                   residual_out.stride(0) if residual_out is not None else 0,
                                   X1.stride(0) if X1 is not None else 0, y1.stride(0) if y1 is not None else 0,
                                   M, N, eps, p, rms, BLOCK_N, R is not None, residual_out is not None, Bb is not None,
                                   p > 0.0, dropout_mask is not None, RS is not None)

                keep = None
                if p > 0:
                    # the kernel's own keep mask (tl.rand of the seeds), from a launch that stores it
                    with torch.no_grad():
                        keep = host(K, True).DROPOUT_MASK.clone() if hasattr(K, "run") else None

                def launch(K, host=host, cfg=cfg):
                    o = host(K, cfg.get("mask", False))
                    outs = {"Y": o.Y, "Rstd": o.Rstd}
                    if o.Y1 is not None:
                        outs["Y1"] = o.Y1
                    if o.RESIDUAL_OUT is not None:
                        outs["RESIDUAL_OUT"] = o.RESIDUAL_OUT
                    if o.Mean is not None:
                        outs["Mean"] = o.Mean
                    if cfg.get("mask"):
                        report(bool(torch.equal(o.DROPOUT_MASK, keep)), f"{tag} DROPOUT_MASK the kernel's")
                    return outs

                def ref(x, M=M, p=p, keep=keep, rms=rms):
                    xx = x["X"]
                    if "ROWSCALE" in x:
                        xx = xx * x["ROWSCALE"][:, None]
                    if p > 0:
                        xx = torch.where(keep[:M], xx / (1.0 - p), torch.zeros_like(xx))
                    if "X1" in x:
                        x1 = x["X1"]
                        if p > 0:
                            x1 = torch.where(keep[M:], x1 / (1.0 - p), torch.zeros_like(x1))
                        xx = xx + x1
                    if "RESIDUAL" in x:
                        xx = xx + x["RESIDUAL"]
                    xhat, y, mean, rstd = ln_ref_math(xx, x["W"], x.get("B"), eps, rms)
                    out = {"Y": y, "Rstd": rstd[:, 0], "RESIDUAL_OUT": xx}
                    if mean is not None:
                        out["Mean"] = mean[:, 0]
                    if "W1" in x:
                        out["Y1"] = xhat * x["W1"] + x["B1"] if "B1" in x else xhat * x["W1"]
                    return out

                tag = f"{dname(dtype)} W {dname(wd)} {shape} {cfg['name']}"
                run_case(tag, K, leaf_dict(X=X, W=W, B=Bb, RESIDUAL=R, X1=X1, W1=W1, B1=B1, ROWSCALE=RS), launch, ref,
                         TOL[dtype])


# ------------------------------------------------------------------------------------------------- layernorm_gated.py
def t_gated_layer_norm_fwd_1pass_kernel(K):
    # mamba_ssm/ops/triton/layernorm_gated.py _layer_norm_fwd (RMSNormGated / LayerNormGated; Mamba2 uses
    # rms norm, z, norm_before_gate=False, group_size = d_ssm / ngroups, no bias)
    eps = 1e-5
    shapes = [((5, 40), 10), ((3, 37), None)] if CPU else [((37, 2048), 256), ((16, 1000), None), ((9, 1536), 768)]
    for dtype in DTYPES:
        for (M, N), group_size in shapes:
            for rms in (True, False):
                for zmode in ("none", "before", "after"):
                    for bias in ((False, True) if not CPU or zmode == "after" else (not rms,)):
                        X = rnd(M, N, dtype=dtype, shift=0.2)
                        W = rnd(N, dtype=dtype, scale=0.3, shift=1.0)
                        Bb = rnd(N, dtype=dtype, scale=0.3) if bias else None
                        Z = rnd(M, N, dtype=dtype) if zmode != "none" else None
                        nbg = zmode != "after"

                        def launch(K, X=X, W=W, Bb=Bb, Z=Z, nbg=nbg, rms=rms, group_size=group_size):
                            M, N = X.shape
                            gs = N if group_size is None else group_size
                            ngroups = N // gs
                            out = torch.empty_like(X)
                            mean = torch.empty((ngroups * M,), dtype=torch.float32, device=X.device) if not rms else None
                            rstd = torch.empty((ngroups * M,), dtype=torch.float32, device=X.device)
                            MAX_FUSED_SIZE = 65536 // X.element_size()
                            BLOCK_N = min(MAX_FUSED_SIZE, triton.next_power_of_2(gs))
                            num_warps = min(max(BLOCK_N // 256, 1), 8)
                            o = K[(M, ngroups)](X, out, W, Bb, Z, mean, rstd, X.stride(0), out.stride(0),
                                                Z.stride(0) if Z is not None else 0, M, gs, eps, BLOCK_N=BLOCK_N,
                                                NORM_BEFORE_GATE=nbg, IS_RMS_NORM=rms, num_warps=num_warps)
                            outs = {"Y": o.Y, "Rstd": o.Rstd}
                            if o.Mean is not None:
                                outs["Mean"] = o.Mean
                            return outs

                        def ref(x, M=M, N=N, nbg=nbg, rms=rms, group_size=group_size):
                            gs = N if group_size is None else group_size
                            g = N // gs
                            xx = x["X"]
                            z = x.get("Z")
                            if z is not None and not nbg:
                                xx = xx * F.silu(z)
                            xg = xx.reshape(M, g, gs)
                            if rms:
                                rstd = torch.rsqrt((xg * xg).mean(-1, keepdim=True) + eps)
                                xhat, mean = xg * rstd, None
                            else:
                                mean = xg.mean(-1, keepdim=True)
                                rstd = torch.rsqrt(((xg - mean) ** 2).mean(-1, keepdim=True) + eps)
                                xhat = (xg - mean) * rstd
                            y = xhat.reshape(M, N) * x["W"]
                            if "B" in x:
                                y = y + x["B"]
                            if z is not None and nbg:
                                y = y * F.silu(z)
                            # Mean, Rstd: [group * M + row]
                            out = {"Y": y, "Rstd": rstd[..., 0].t().reshape(-1)}
                            if mean is not None:
                                out["Mean"] = mean[..., 0].t().reshape(-1)
                            return out

                        tag = (f"{dname(dtype)} ({M}, {N}) group_size={group_size} {'rms' if rms else 'layer'} norm "
                               f"z={zmode} bias={bias}")
                        run_case(tag, K, leaf_dict(X=X, W=W, B=Bb, Z=Z), launch, ref, TOL[dtype])


# ------------------------------------------------------------------------------------------ selective_state_update.py
def ssu_case(K, dtype, state_dtype, batch, nheads, dim, dstate, ngroups, softplus, has_D, has_z, has_bias, tie,
             slots=None, out_only=False):
    # mamba_ssm/ops/triton/selective_state_update.py selective_state_update. tie: Mamba2.step's layout, A, dt,
    # dt_bias, D as einops.repeat views (stride 0); the leaves are then the per-head parameters. slots: a state cache
    # of that many slots and state_batch_indices (int32, one -1: a padding token). mamba's host writes
    # `*(D.stride(0), D.stride(1)) if D is not None else 0`, which raises for D (or dt_bias) None; (0, 0) here.
    has_heads = nheads > 1 or tie
    pd = f32  # A, D, dt_bias: fp32 parameters, as Mamba / Mamba2 keep them
    nslots = slots or batch
    state = rnd(nslots, nheads, dim, dstate, dtype=state_dtype)
    x = rnd(batch, nheads, dim, dtype=dtype)
    z = rnd(batch, nheads, dim, dtype=dtype) if has_z else None
    Bm = rnd(batch, ngroups, dstate, dtype=dtype)
    Cm = rnd(batch, ngroups, dstate, dtype=dtype)
    if tie:
        A0 = (-torch.exp(torch.randn(nheads, device=DEV) * 0.5)).requires_grad_()
        dt0 = rnd(batch, nheads, dtype=dtype, shift=-1.0)
        dtb0 = rnd(nheads, dtype=pd, scale=0.5) if has_bias else None
        D0 = rnd(nheads, dtype=pd) if has_D else None
        A = A0[:, None, None].expand(nheads, dim, dstate)
        dt = dt0[:, :, None].expand(batch, nheads, dim)
        dt_bias = dtb0[:, None].expand(nheads, dim) if has_bias else None
        D = D0[:, None].expand(nheads, dim) if has_D else None
        leaves = leaf_dict(A=A0, dt=dt0, dt_bias=dtb0, D=D0)
    else:
        A = (-torch.exp(torch.randn(nheads, dim, dstate, device=DEV) * 0.5)).requires_grad_()
        dt = rnd(batch, nheads, dim, dtype=dtype, shift=-1.0)
        dt_bias = rnd(nheads, dim, dtype=pd, scale=0.5) if has_bias else None
        D = rnd(nheads, dim, dtype=pd) if has_D else None
        leaves = leaf_dict(A=A, dt=dt, dt_bias=dt_bias, D=D)
    leaves.update(leaf_dict(state=state, x=x, z=z, B=Bm, C=Cm))
    sbi = None
    if slots:
        perm = torch.randperm(slots, device=DEV)[:batch].to(torch.int32)
        perm[1] = -1
        sbi = perm

    def launch(K):
        out = torch.empty_like(x)
        grid = lambda META: (triton.cdiv(dim, META['BLOCK_SIZE_M']), batch, nheads)
        z_strides = (z.stride(0), z.stride(1), z.stride(2)) if z is not None else (0, 0, 0)
        BLOCK_SIZE_M, num_warps = ((32, 4) if dstate <= 16 else ((16, 4) if dstate <= 32 else
                                   ((8, 4) if dstate <= 64 else ((4, 4) if dstate <= 128 else ((4, 8))))))
        tie_hdim = A.stride(-1) == 0 and A.stride(-2) == 0 and dt.stride(-1) == 0 and dt_bias is not None \
            and dt_bias.stride(-1) == 0
        o = K[grid](state, x, dt, dt_bias, A, Bm, Cm, D, z, out, sbi,
                    batch, nheads, dim, dstate, nheads // ngroups,
                    state.stride(0), state.stride(1), state.stride(2), state.stride(3),
                    x.stride(0), x.stride(1), x.stride(2),
                    dt.stride(0), dt.stride(1), dt.stride(2),
                    *((dt_bias.stride(0), dt_bias.stride(1)) if dt_bias is not None else (0, 0)),
                    A.stride(0), A.stride(1), A.stride(2),
                    Bm.stride(0), Bm.stride(1), Bm.stride(2),
                    Cm.stride(0), Cm.stride(1), Cm.stride(2),
                    *((D.stride(0), D.stride(1)) if D is not None else (0, 0)),
                    z_strides[0], z_strides[1], z_strides[2],
                    out.stride(0), out.stride(1), out.stride(2),
                    softplus, tie_hdim, BLOCK_SIZE_M, num_warps=num_warps)
        return {"out": o.out_ptr} if out_only else {"state": o.state_ptr, "out": o.out_ptr}

    def ref(v):
        if tie:
            A_ = v["A"][:, None, None]
            dt_ = v["dt"][:, :, None]
            dtb_ = v["dt_bias"][:, None] if has_bias else None
            D_ = v["D"][:, None] if has_D else None
        else:
            A_, dt_, dtb_, D_ = v["A"], v["dt"], v.get("dt_bias"), v.get("D")
        d = dt_ + dtb_ if dtb_ is not None else dt_
        if softplus:
            d = torch.where(d <= 20.0, F.softplus(d), d)
        d = d.expand(batch, nheads, dim)
        Bh = v["B"].repeat_interleave(nheads // ngroups, 1)
        Ch = v["C"].repeat_interleave(nheads // ngroups, 1)
        st_all = v["state"]
        if sbi is None:
            st_old = st_all
        else:
            st_old = st_all[sbi.clamp_min(0).long()]
        st = st_old * torch.exp(A_ * d[..., None]) + Bh[:, :, None, :] * d[..., None] * v["x"][..., None]
        out = (st * Ch[:, :, None, :]).sum(-1)
        if D_ is not None:
            out = out + v["x"] * D_
        if "z" in v:
            out = out * F.silu(v["z"])
        if sbi is not None:
            valid = (sbi >= 0)
            out = torch.where(valid[:, None, None], out, torch.zeros_like(out))
            new = st_all.clone()
            for bi in range(batch):
                if int(sbi[bi]) >= 0:
                    new[int(sbi[bi])] = st[bi]
            st = new
        return {"state": st, "out": out}

    tol = max(TOL[dtype], TOL[state_dtype])
    tag = (f"x {dname(dtype)} state {dname(state_dtype)} batch={batch} nheads={nheads} dim={dim} dstate={dstate} "
           f"ngroups={ngroups} dt_softplus={softplus} D={has_D} z={has_z} dt_bias={has_bias} tie_hdim={tie}"
           + (f" state_batch_indices (cache {slots})" if slots else "") + (" loss on out only" if out_only else ""))
    run_case(tag, K, leaves, launch, ref, tol)


def t_selective_scan_update_kernel(K):
    if CPU:
        shapes = [(2, 4, 5, 6, 2), (3, 1, 37, 16, 1)]  # batch, nheads, dim, dstate, ngroups
    else:
        shapes = [(3, 8, 64, 128, 1), (2, 24, 64, 128, 2), (4, 1, 1000, 16, 1), (3, 4, 50, 200, 4)]
    for dtype in DTYPES:
        for sd in ((f32,) if dtype == f32 else (f32, bf16)):
            for bi, (b, h, p, n, g) in enumerate(shapes):
                for softplus, has_D, has_z, has_bias in ((True, True, True, True), (False, True, False, True),
                                                         (True, False, True, True), (True, True, True, False)):
                    if CPU and bi > 0 and not (softplus and has_D and has_z and has_bias):
                        continue
                    ssu_case(K, dtype, sd, b, h, p, n, g, softplus, has_D, has_z, has_bias, tie=False)
                    if h > 1 and has_bias:
                        ssu_case(K, dtype, sd, b, h, p, n, g, softplus, has_D, has_z, has_bias, tie=True)
                # one specialization each, the loss on out only (separates the in-place state's gradient), and the
                # state cache with state_batch_indices
                ssu_case(K, dtype, sd, b, h, p, n, g, True, True, True, True, tie=False, out_only=True)
                if h > 1:
                    ssu_case(K, dtype, sd, b, h, p, n, g, True, True, True, True, tie=True, out_only=True)
                ssu_case(K, dtype, sd, b, h, p, n, g, True, True, True, True, tie=False, slots=b + 3)


# ----------------------------------------------------------------------------------------------------- k_activations.py
def t_swiglu_fwd_kernel(K):
    # _swiglu_fwd: xy (..., 2 d) contiguous, x, y = chunk(2, -1) (views of xy, row stride 2 d), out like x,
    # grid = lambda META: (M, cdiv(N, META['BLOCK_N'])), autotuned BLOCK_N
    shapes = [(2, 3, 2 * 37), (1, 5, 2 * 64)] if CPU else [(2, 37, 2 * 1000), (4, 128, 2 * 2731), (1, 7, 2 * 8192)]
    for dtype in DTYPES:
        for shape in shapes:
            xy = rnd(*shape, dtype=dtype)

            def launch(K, xy=xy):
                batch_shape = xy.shape[:-1]
                xy2 = xy.reshape(-1, xy.shape[-1])
                x, y = xy2.chunk(2, dim=-1)
                out = torch.empty_like(x)
                M, N = x.shape
                grid = lambda META: (M, triton.cdiv(N, META['BLOCK_N']))
                o = K[grid](x, y, out, x.stride(0), y.stride(0), out.stride(0), N)
                return {"out": o.OUT.reshape(*batch_shape, N)}

            def ref(v):
                x, y = v["xy"].chunk(2, dim=-1)
                return {"out": F.silu(x) * y}

            run_case(f"{dname(dtype)} xy {shape}", K, {"xy": xy}, launch, ref, TOL[dtype])


# ---------------------------------------------------------------------------------------------------- ssd_chunk_state.py
def chunk_cumsum_ref(dt, A, dt_bias, chunk_size, softplus, dt_min, dt_max):
    batch, seqlen, nheads = dt.shape
    nchunks = cdiv(seqlen, chunk_size)
    d = dt + dt_bias if dt_bias is not None else dt
    if softplus:
        d = torch.where(d <= 20.0, F.softplus(d), d)
    d = torch.minimum(torch.maximum(d, torch.full_like(d, dt_min)), torch.full_like(d, dt_max))
    d = F.pad(d, (0, 0, 0, nchunks * chunk_size - seqlen))  # 0 past seqlen (the kernel's tl.where)
    d = d.reshape(batch, nchunks, chunk_size, nheads).permute(0, 3, 1, 2)  # b h c l
    return torch.cumsum(d * A[None, :, None, None], -1), d


def t_chunk_cumsum_fwd_kernel(K):
    # _chunk_cumsum_fwd: dt (batch, seqlen, nheads), A, dt_bias (nheads,); dt_out and dA_cumsum fp32
    # (batch, nheads, nchunks, chunk_size); grid (batch, nchunks, cdiv(nheads, BLOCK_SIZE_H))
    shapes = [(2, 37, 3, 16), (1, 32, 5, 16)] if CPU else [(2, 1000, 24, 256), (3, 512, 8, 128), (1, 77, 80, 64)]
    for dtype in DTYPES:
        for batch, seqlen, nheads, chunk_size in shapes:
            for softplus, has_bias, limit in ((True, True, (0.0, float("inf"))), (False, True, (0.0, float("inf"))),
                                              (True, False, (0.0, float("inf"))), (True, True, (0.001, 0.1))):
                if CPU and seqlen == 32 and not (softplus and has_bias and limit[1] == float("inf")):
                    continue
                dt = rnd(batch, seqlen, nheads, dtype=dtype, shift=-2.0 if limit[1] < 1 else 0.0)
                A = (-torch.exp(torch.randn(nheads, device=DEV))).requires_grad_()
                dt_bias = rnd(nheads, dtype=f32, scale=0.5) if has_bias else None

                def launch(K, dt=dt, A=A, dt_bias=dt_bias, chunk_size=chunk_size, softplus=softplus, limit=limit):
                    batch, seqlen, nheads = dt.shape
                    nchunks = math.ceil(seqlen / chunk_size)
                    dt_out = torch.empty(batch, nheads, nchunks, chunk_size, device=dt.device, dtype=torch.float32)
                    dA_cumsum = torch.empty(batch, nheads, nchunks, chunk_size, device=dt.device, dtype=torch.float32)
                    grid = lambda META: (batch, nchunks, triton.cdiv(nheads, META['BLOCK_SIZE_H']))
                    o = K[grid](dt, A, dt_bias, dt_out, dA_cumsum, batch, seqlen, nheads, chunk_size, limit[0], limit[1],
                                dt.stride(0), dt.stride(1), dt.stride(2), A.stride(0),
                                dt_bias.stride(0) if dt_bias is not None else 0,
                                dt_out.stride(0), dt_out.stride(2), dt_out.stride(1), dt_out.stride(3),
                                dA_cumsum.stride(0), dA_cumsum.stride(2), dA_cumsum.stride(1), dA_cumsum.stride(3),
                                softplus, HAS_DT_BIAS=dt_bias is not None,
                                BLOCK_SIZE_CHUNK=triton.next_power_of_2(chunk_size))
                    return {"dA_cumsum": o.dA_cumsum_ptr, "dt_out": o.dt_out_ptr}

                def ref(v, chunk_size=chunk_size, softplus=softplus, limit=limit):
                    dA_cs, d = chunk_cumsum_ref(v["dt"], v["A"], v.get("dt_bias"), chunk_size, softplus, *limit)
                    return {"dA_cumsum": dA_cs, "dt_out": d}

                tag = (f"dt {dname(dtype)} batch={batch} seqlen={seqlen} nheads={nheads} chunk={chunk_size} "
                       f"dt_softplus={softplus} dt_bias={has_bias} dt_limit={limit}")
                # (ddt comes back in dt's dtype: bf16 rounds it to 2**-8 relative, measured 2e-3 to 3e-3 on the H100.)
                run_case(tag, K, leaf_dict(dt=dt, A=A, dt_bias=dt_bias), launch, ref,
                         TOL[f32] * 5 if dtype == f32 else 1e-2)


def ssd_inputs(batch, seqlen, nheads, chunk_size, dtype):
    """dt (fp32, after softplus) and dA_cumsum as _chunk_cumsum_fwd makes them (b h c l), leaves of their own."""
    nchunks = cdiv(seqlen, chunk_size)
    dt_raw = torch.randn(batch, seqlen, nheads, device=DEV) - 2.0
    A = -torch.exp(torch.randn(nheads, device=DEV) * 0.5)
    dA_cs, d = chunk_cumsum_ref(dt_raw, A, None, chunk_size, True, 0.0, float("inf"))
    return d.float().contiguous().requires_grad_(), dA_cs.float().contiguous().requires_grad_(), nchunks


def make_seq_idx(batch, seqlen):
    # int32 (batch, seqlen), nondecreasing: three packed sequences per row
    cuts = sorted(torch.randint(1, seqlen, (2,)).tolist())
    s = torch.zeros(batch, seqlen, dtype=torch.int32, device=DEV)
    s[:, cuts[0]:] += 1
    s[:, cuts[1]:] += 1
    return s


def pad_chunks(t, nchunks, chunk_size):
    # (b, seqlen, ...) -> (b, nchunks, chunk_size, ...), zero past seqlen
    pad = nchunks * chunk_size - t.shape[1]
    t = torch.cat([t, t.new_zeros(t.shape[0], pad, *t.shape[2:])], 1) if pad else t
    return t.reshape(t.shape[0], nchunks, chunk_size, *t.shape[2:])


def t_chunk_state_fwd_kernel(K):
    # _chunk_state_fwd: x (b, l, h, p), B (b, l, g, n), dt and dA_cumsum fp32 (b, h, c, cs), seq_idx int32 or None;
    # states fp32 (b, c, h, p, n) (states_in_fp32); autotuned block sizes, grid lambda
    if CPU:
        shapes = [(2, 37, 2, 8, 16, 1, 16), (1, 100, 2, 4, 8, 2, 48)]  # batch, seqlen, nheads, hdim, dstate, g, cs
    else:
        shapes = [(2, 1000, 8, 64, 128, 1, 256), (2, 300, 6, 50, 16, 2, 128), (1, 517, 4, 64, 64, 4, 64)]
    for dtype in DTYPES:
        for batch, seqlen, nheads, hdim, dstate, ngroups, chunk_size in shapes:
            for has_seq_idx in (False, True):
                x = rnd(batch, seqlen, nheads, hdim, dtype=dtype)
                Bm = rnd(batch, seqlen, ngroups, dstate, dtype=dtype)
                dt, dA_cs, nchunks = ssd_inputs(batch, seqlen, nheads, chunk_size, dtype)
                seq_idx = make_seq_idx(batch, seqlen) if has_seq_idx else None

                def launch(K, x=x, Bm=Bm, dt=dt, dA_cs=dA_cs, seq_idx=seq_idx):
                    batch, seqlen, nheads, headdim = x.shape
                    _, _, nchunks, chunk_size = dt.shape
                    _, _, ngroups, dstate = Bm.shape
                    states = torch.empty((batch, nchunks, nheads, headdim, dstate), device=x.device,
                                         dtype=torch.float32)
                    grid = lambda META: (triton.cdiv(headdim, META['BLOCK_SIZE_M']) *
                                         triton.cdiv(dstate, META['BLOCK_SIZE_N']), batch * nchunks, nheads)
                    o = K[grid](x, Bm, states, dt, dA_cs, seq_idx, headdim, dstate, chunk_size,
                                batch, seqlen, nheads // ngroups,
                                x.stride(0), x.stride(1), x.stride(2), x.stride(3),
                                Bm.stride(0), Bm.stride(1), Bm.stride(2), Bm.stride(-1),
                                states.stride(0), states.stride(1), states.stride(2), states.stride(3), states.stride(4),
                                dt.stride(0), dt.stride(2), dt.stride(1), dt.stride(3),
                                dA_cs.stride(0), dA_cs.stride(2), dA_cs.stride(1), dA_cs.stride(3),
                                *((seq_idx.stride(0), seq_idx.stride(1)) if seq_idx is not None else (0, 0)),
                                HAS_SEQ_IDX=seq_idx is not None)
                    return {"states": o.states_ptr}

                def ref(v, seq_idx=seq_idx, nchunks=nchunks, chunk_size=chunk_size, seqlen=seqlen):
                    h = v["x"].shape[2]
                    g = v["B"].shape[2]
                    xc = pad_chunks(v["x"], nchunks, chunk_size)  # b c l h p
                    Bc = pad_chunks(v["B"], nchunks, chunk_size).repeat_interleave(h // g, 3)  # b c l h n
                    dA = v["dA_cumsum"]  # b h c l
                    # the kernel reads dA_cumsum at chunk_size - 1 (the last chunk too). exp(min(d, 0)) at d == 0 has
                    # no derivative; the last chunk of a ragged seqlen meets it, dA_cumsum being constant past seqlen
                    # (dt 0 there) so that dA_last == dA at the last valid position. tgrad's tl.minimum passes half
                    # the gradient to d there, as torch.minimum does (the reference is the kernel's math in torch:
                    # torch.minimum); torch.clamp passes 0, and mamba's own backward 1 (_chunk_state_bwd_ddAcs_stable
                    # differentiates exp(dA_last - dA) without the minimum). Through _chunk_cumsum_fwd all three give
                    # the same dt gradient: the +g and -g at the two positions cancel.
                    d = dA[..., -1:] - dA
                    decay = torch.exp(torch.minimum(d, torch.zeros_like(d)))  # b h c l
                    scale = (decay * v["dt"]).permute(0, 2, 3, 1)  # b c l h
                    if seq_idx is not None:
                        sc = pad_chunks(seq_idx, nchunks, chunk_size)  # b c l
                        limit = [min(chunk_size, seqlen - c * chunk_size) for c in range(nchunks)]
                        last = torch.stack([sc[:, c, limit[c] - 1] for c in range(nchunks)], 1)  # b c
                        keep = (sc == last[:, :, None]) & (last[:, :, None] >= 0)
                        scale = scale * keep[..., None]
                    return {"states": torch.einsum("bclhn,bclh,bclhp->bchpn", Bc, scale, xc)}

                tag = (f"{dname(dtype)} batch={batch} seqlen={seqlen} nheads={nheads} hdim={hdim} dstate={dstate} "
                       f"ngroups={ngroups} chunk={chunk_size} seq_idx={has_seq_idx}")
                run_case(tag, K, {"x": x, "B": Bm, "dt": dt, "dA_cumsum": dA_cs}, launch, ref, TOL_DOT[dtype])


# ------------------------------------------------------------------------------------------------ ssd_state_passing.py
def t_state_passing_fwd_kernel(K):
    # _state_passing_fwd(rearrange(states, "... p n -> ... (p n)"), dA_cumsum[:, :, :, -1], initial_states, seq_idx,
    # chunk_size, out_dtype): out (b, c, h, dim) out_dtype, final_states fp32 (b, h, dim)
    shapes = [(2, 3, 2, 37, 16), (1, 5, 3, 64, 8)] if CPU else [(2, 4, 8, 64 * 128, 256), (3, 7, 5, 50 * 16, 64),
                                                              (1, 1, 4, 1000, 128)]
    for dtype in DTYPES:
        for batch, nchunks, nheads, dim, chunk_size in shapes:
            for has_init, has_seq_idx, out_dtype in ((False, False, None), (True, False, None), (True, True, None),
                                                     (False, True, dtype)):
                states = rnd(batch, nchunks, nheads, dim, dtype=f32)  # chunk states in fp32 (states_in_fp32)
                dA = (-torch.rand(batch, nheads, nchunks, device=DEV) * 2).requires_grad_()
                init = rnd(batch, nheads, dim, dtype=dtype) if has_init else None
                seqlen = nchunks * chunk_size - chunk_size // 3
                seq_idx = make_seq_idx(batch, seqlen) if has_seq_idx else None

                def launch(K, states=states, dA=dA, init=init, seq_idx=seq_idx, chunk_size=chunk_size,
                           out_dtype=out_dtype):
                    batch, nchunks, nheads, dim = states.shape
                    od = states.dtype if out_dtype is None else out_dtype
                    out = torch.empty((batch, nchunks, nheads, dim), device=states.device, dtype=od)
                    final = torch.empty((batch, nheads, dim), device=states.device, dtype=torch.float32)
                    grid = lambda META: (triton.cdiv(dim, META['BLOCK_SIZE']), batch, nheads)
                    sl = seq_idx.shape[-1] if seq_idx is not None else 0
                    o = K[grid](states, out, final, dA, init, seq_idx, dim, nchunks, sl,
                                chunk_size if seq_idx is not None else 0,
                                states.stride(0), states.stride(1), states.stride(2), states.stride(3),
                                out.stride(0), out.stride(1), out.stride(2), out.stride(3),
                                final.stride(0), final.stride(1), final.stride(2),
                                dA.stride(0), dA.stride(2), dA.stride(1),
                                *((init.stride(0), init.stride(1), init.stride(2)) if init is not None else (0, 0, 0)),
                                *((seq_idx.stride(0), seq_idx.stride(1)) if seq_idx is not None else (0, 0)),
                                HAS_INITSTATES=init is not None, HAS_SEQ_IDX=seq_idx is not None)
                    return {"out": o.out_ptr, "final_states": o.final_states_ptr}

                def ref(v, seq_idx=seq_idx, chunk_size=chunk_size, seqlen=seqlen, nchunks=nchunks):
                    st = v["init"] if "init" in v else torch.zeros_like(v["states"][:, 0])
                    outs = [st]
                    prev = torch.zeros(st.shape[0], dtype=torch.int32, device=DEV)
                    for c in range(nchunks):
                        scale = torch.exp(v["dA"][:, :, c])[..., None]  # b h 1
                        if seq_idx is not None:
                            new = seq_idx[:, min((c + 1) * chunk_size, seqlen) - 1]
                            scale = scale * (new == prev).to(scale.dtype)[:, None, None]
                            prev = new
                        st = scale * st + v["states"][:, c]
                        if c < nchunks - 1:
                            outs.append(st)
                    return {"out": torch.stack(outs, 1), "final_states": st}

                tag = (f"init {dname(dtype)} out {dname(out_dtype or f32)} batch={batch} nchunks={nchunks} "
                       f"nheads={nheads} dim={dim} initial_states={has_init} seq_idx={has_seq_idx}")
                run_case(tag, K, leaf_dict(states=states, dA=dA, init=init), launch, ref,
                         max(TOL[dtype], TOL[out_dtype or f32]))


# ---------------------------------------------------------------------------------------------------------- ssd_bmm.py
def t_bmm_chunk_fwd_kernel(K):
    # _bmm_chunk_fwd(C, B, chunk_size, seq_idx, causal, output_dtype): a, b (b, l, g, k) or (b, l, k); out
    # (b, c, [g,] cs, cs); dot_dtype from a's / b's dtype; ssd_combined passes output_dtype fp32, causal False.
    # causal=True leaves out[i, j] for i < j in blocks past the diagonal unset: the loss takes i >= j only.
    if CPU:
        shapes = [(2, 37, 2, 16, 16), (1, 100, 1, 8, 48)]  # batch, seqlen, ngroups (0: no group dim), K, chunk
    else:
        shapes = [(2, 1000, 1, 128, 256), (2, 300, 2, 64, 128), (1, 517, 0, 100, 64), (3, 200, 4, 16, 64)]
    for dtype in DTYPES:
        for batch, seqlen, ngroups, k, chunk_size in shapes:
            for has_seq_idx, causal, out_dtype in ((False, False, f32), (True, False, f32), (False, True, f32),
                                                   (False, False, None)):
                if CPU and ngroups == 1 and (causal or out_dtype is None):
                    continue
                shape = (batch, seqlen, ngroups, k) if ngroups else (batch, seqlen, k)
                a = rnd(*shape, dtype=dtype)
                b = rnd(*shape, dtype=dtype)
                seq_idx = make_seq_idx(batch, seqlen) if has_seq_idx else None
                nchunks = cdiv(seqlen, chunk_size)
                tri = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=DEV))

                def launch(K, a=a, b=b, seq_idx=seq_idx, causal=causal, out_dtype=out_dtype, chunk_size=chunk_size,
                           tri=tri):
                    has_groups = a.dim() == 4
                    if not has_groups:
                        batch, seqlen, k = a.shape
                    else:
                        batch, seqlen, ngroups, k = a.shape
                    nchunks = math.ceil(seqlen / chunk_size)
                    od = a.dtype if out_dtype is None else out_dtype
                    out = torch.empty((batch, nchunks, chunk_size, chunk_size) if not has_groups else
                                      (batch, nchunks, ngroups, chunk_size, chunk_size), device=a.device, dtype=od)
                    dot_dtype = (tl.bfloat16 if a.dtype == torch.bfloat16 or b.dtype == torch.bfloat16 else
                                 (tl.float16 if a.dtype == torch.float16 or b.dtype == torch.float16 else tl.float32))
                    grid = lambda META: (triton.cdiv(chunk_size, META['BLOCK_SIZE_M']) *
                                         triton.cdiv(chunk_size, META['BLOCK_SIZE_N']),
                                         batch, nchunks if not has_groups else nchunks * ngroups)
                    o = K[grid](a, b, out, seq_idx, seqlen, chunk_size, k, ngroups if has_groups else 1,
                                a.stride(0), a.stride(1), 0 if not has_groups else a.stride(2), a.stride(-1),
                                b.stride(0), b.stride(1), 0 if not has_groups else b.stride(2), b.stride(-1),
                                out.stride(0), out.stride(1), 0 if not has_groups else out.stride(2),
                                out.stride(-2), out.stride(-1),
                                *((seq_idx.stride(0), seq_idx.stride(1)) if seq_idx is not None else (0, 0)),
                                causal, dot_dtype, HAS_SEQ_IDX=seq_idx is not None)
                    r = o.out_ptr
                    if causal:  # the elements the kernel writes for certain: i >= j
                        r = torch.where(tri, r, torch.zeros_like(r))
                    return {"out": r}

                def ref(v, seq_idx=seq_idx, causal=causal, nchunks=nchunks, chunk_size=chunk_size, tri=tri,
                        has_groups=bool(ngroups)):
                    ac = pad_chunks(v["a"], nchunks, chunk_size)  # b c l [g] k
                    bc = pad_chunks(v["b"], nchunks, chunk_size)
                    if has_groups:
                        r = torch.einsum("bcigk,bcjgk->bcgij", ac, bc)
                    else:
                        r = torch.einsum("bcik,bcjk->bcij", ac, bc)
                    if seq_idx is not None:
                        sc = pad_chunks(seq_idx, nchunks, chunk_size)  # b c l (padding: 0, masked below)
                        valid = pad_chunks(torch.ones_like(seq_idx, dtype=torch.bool), nchunks, chunk_size)
                        same = (sc[:, :, :, None] == sc[:, :, None, :]) & valid[:, :, :, None] & valid[:, :, None, :]
                        r = r * (same[:, :, None] if has_groups else same)
                    if causal:
                        r = torch.where(tri, r, torch.zeros_like(r))
                    return {"out": r}

                tag = (f"{dname(dtype)} out {dname(out_dtype or dtype)} a,b {shape} chunk={chunk_size} "
                       f"seq_idx={has_seq_idx} causal={causal}")
                run_case(tag, K, {"a": a, "b": b}, launch, ref, max(TOL_DOT[dtype], TOL[out_dtype or dtype]))


# ---------------------------------------------------------------------------------------------------- ssd_chunk_scan.py
def t_chunk_scan_fwd_kernel(K):
    # _chunk_scan_fwd(cb, x, dt, dA_cumsum, C, states, D, z, seq_idx): cb fp32 (b, c, g, cs, cs) from _bmm_chunk_fwd,
    # x, z (b, l, h, p), C (b, l, g, n), states (b, c, h, p, n) in C's dtype (_state_passing_fwd's out_dtype),
    # D (h, p) or (h,); out, out_x like x; IS_CAUSAL True; autotuned, grid lambda
    if CPU:
        shapes = [(2, 37, 2, 8, 16, 1, 16), (1, 100, 2, 4, 8, 2, 48)]  # batch, seqlen, nheads, hdim, dstate, g, cs
    else:
        shapes = [(2, 1000, 8, 64, 128, 1, 256), (2, 300, 6, 50, 16, 2, 128), (1, 517, 4, 64, 200, 4, 64)]
    for dtype in DTYPES:
        for si, (batch, seqlen, nheads, hdim, dstate, ngroups, chunk_size) in enumerate(shapes):
            for dmode, has_z, has_seq_idx in (("hdim", True, False), ("head", False, False), (None, True, True),
                                              ("hdim", False, True)):
                if CPU and si == 1 and dmode != "hdim":
                    continue
                nchunks = cdiv(seqlen, chunk_size)
                cb = rnd(batch, nchunks, ngroups, chunk_size, chunk_size, dtype=f32, scale=0.3)
                x = rnd(batch, seqlen, nheads, hdim, dtype=dtype)
                z = rnd(batch, seqlen, nheads, hdim, dtype=dtype) if has_z else None
                dt, dA_cs, _ = ssd_inputs(batch, seqlen, nheads, chunk_size, dtype)
                C = rnd(batch, seqlen, ngroups, dstate, dtype=dtype)
                states = rnd(batch, nchunks, nheads, hdim, dstate, dtype=dtype, scale=0.5)
                D = rnd(nheads, hdim, dtype=f32) if dmode == "hdim" else (rnd(nheads, dtype=f32) if dmode else None)
                seq_idx = make_seq_idx(batch, seqlen) if has_seq_idx else None

                def launch(K, cb=cb, x=x, dt=dt, dA_cs=dA_cs, C=C, states=states, D=D, z=z, seq_idx=seq_idx):
                    batch, seqlen, nheads, headdim = x.shape
                    _, _, nchunks, chunk_size = dt.shape
                    _, _, ngroups, dstate = C.shape
                    out = torch.empty(batch, seqlen, nheads, headdim, device=x.device, dtype=x.dtype)
                    out_x = torch.empty(batch, seqlen, nheads, headdim, device=x.device, dtype=x.dtype) \
                        if z is not None else None
                    grid = lambda META: (triton.cdiv(chunk_size, META['BLOCK_SIZE_M']) *
                                         triton.cdiv(headdim, META['BLOCK_SIZE_N']), batch * nchunks, nheads)
                    z_strides = (z.stride(0), z.stride(1), z.stride(2), z.stride(3)) if z is not None else (0, 0, 0, 0)
                    o = K[grid](cb, x, z, out, out_x, dt, dA_cs, seq_idx, C, states, D,
                                chunk_size, headdim, dstate, batch, seqlen, nheads // ngroups,
                                cb.stride(0), cb.stride(1), cb.stride(2), cb.stride(3), cb.stride(4),
                                x.stride(0), x.stride(1), x.stride(2), x.stride(3),
                                z_strides[0], z_strides[1], z_strides[2], z_strides[3],
                                out.stride(0), out.stride(1), out.stride(2), out.stride(3),
                                dt.stride(0), dt.stride(2), dt.stride(1), dt.stride(3),
                                dA_cs.stride(0), dA_cs.stride(2), dA_cs.stride(1), dA_cs.stride(3),
                                *((seq_idx.stride(0), seq_idx.stride(1)) if seq_idx is not None else (0, 0)),
                                C.stride(0), C.stride(1), C.stride(2), C.stride(3),
                                states.stride(0), states.stride(1), states.stride(2), states.stride(3),
                                states.stride(4),
                                D.stride(0) if D is not None else 0,
                                True, D is not None, D.dim() == 2 if D is not None else True,
                                BLOCK_SIZE_DSTATE=max(triton.next_power_of_2(dstate), 16),
                                HAS_Z=z is not None, HAS_SEQ_IDX=seq_idx is not None, IS_TRITON_22=True)
                    outs = {"out": o.out_ptr}
                    if o.out_x_ptr is not None:
                        outs["out_x"] = o.out_x_ptr
                    return outs

                def ref(v, seq_idx=seq_idx, nchunks=nchunks, chunk_size=chunk_size, seqlen=seqlen, dmode=dmode):
                    h = v["x"].shape[2]
                    g = v["C"].shape[2]
                    r = h // g
                    xc = pad_chunks(v["x"], nchunks, chunk_size)  # b c l h p
                    Cc = pad_chunks(v["C"], nchunks, chunk_size).repeat_interleave(r, 3)  # b c l h n
                    dA = v["dA_cumsum"].permute(0, 2, 3, 1)  # b c l h
                    dtc = v["dt"].permute(0, 2, 3, 1)  # b c l h
                    scale_m = torch.exp(dA)
                    if seq_idx is not None:
                        sc = pad_chunks(seq_idx, nchunks, chunk_size)  # b c l
                        prev = torch.stack([seq_idx[:, c * chunk_size - 1] if c > 0 else
                                            torch.zeros_like(seq_idx[:, 0]) for c in range(nchunks)], 1)  # b c
                        scale_m = scale_m * (sc == prev[:, :, None])[..., None]
                    acc = torch.einsum("bclhn,bchpn->bclhp", Cc, v["prev_states"]) * scale_m[..., None]
                    cbh = v["cb"].repeat_interleave(r, 2)  # b c h m k
                    diff = dA.permute(0, 1, 3, 2)  # b c h l
                    dd = diff[..., :, None] - diff[..., None, :]
                    decay = torch.exp(torch.minimum(dd, torch.zeros_like(dd)))  # b c h m k (as in chunk_state)
                    tri = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=DEV))
                    w = cbh * decay * dtc.permute(0, 1, 3, 2)[..., None, :] * tri
                    acc = acc + torch.einsum("bchmk,bckhp->bcmhp", w, xc)
                    if dmode == "hdim":
                        acc = acc + xc * v["D"]
                    elif dmode == "head":
                        acc = acc + xc * v["D"][:, None]
                    acc = acc.reshape(acc.shape[0], -1, *acc.shape[3:])[:, :seqlen]
                    outs = {}
                    if "z" in v:
                        outs["out_x"] = acc
                        acc = acc * F.silu(v["z"])
                    outs["out"] = acc
                    return outs

                tag = (f"{dname(dtype)} batch={batch} seqlen={seqlen} nheads={nheads} hdim={hdim} dstate={dstate} "
                       f"ngroups={ngroups} chunk={chunk_size} D={dmode} z={has_z} seq_idx={has_seq_idx}")
                run_case(tag, K, leaf_dict(cb=cb, x=x, z=z, dt=dt, dA_cumsum=dA_cs, C=C, prev_states=states, D=D),
                         launch, ref, TOL_DOT[dtype])


# name -> (the jit function's name in the module, the test, the config the interpreter keeps); the module is
# mamba_NAME_op.py
KERNELS = {
    "layer_norm_fwd_1pass_kernel": ("_layer_norm_fwd_1pass_kernel", t_layer_norm_fwd_1pass_kernel),
    "gated_layer_norm_fwd_1pass_kernel": ("_layer_norm_fwd_1pass_kernel", t_gated_layer_norm_fwd_1pass_kernel),
    "selective_scan_update_kernel": ("_selective_scan_update_kernel", t_selective_scan_update_kernel),
    "swiglu_fwd_kernel": ("_swiglu_fwd_kernel", t_swiglu_fwd_kernel),
    "chunk_cumsum_fwd_kernel": ("_chunk_cumsum_fwd_kernel", t_chunk_cumsum_fwd_kernel),
    "chunk_state_fwd_kernel": ("_chunk_state_fwd_kernel", t_chunk_state_fwd_kernel),
    "state_passing_fwd_kernel": ("_state_passing_fwd_kernel", t_state_passing_fwd_kernel),
    "bmm_chunk_fwd_kernel": ("_bmm_chunk_fwd_kernel", t_bmm_chunk_fwd_kernel),
    "chunk_scan_fwd_kernel": ("_chunk_scan_fwd_kernel", t_chunk_scan_fwd_kernel),
}


def install_determinism():
    """mamba_ssm.utils.determinism, which the modules import for autotune_configs: mamba's own where it imports,
    else a stand-in (mamba_ssm's __init__ imports its CUDA extensions, einops, ...)."""
    try:
        importlib.import_module("mamba_ssm.utils.determinism")
        return
    except Exception as e:
        for name in [n for n in sys.modules if n == "mamba_ssm" or n.startswith("mamba_ssm.")]:
            del sys.modules[name]
        print(f"note: import mamba_ssm.utils.determinism: {first_line(e)}; a stand-in returns the autotune configs "
              "as mamba does outside deterministic mode", flush=True)
    m = types.ModuleType("mamba_ssm")
    m.__path__ = []
    u = types.ModuleType("mamba_ssm.utils")
    u.__path__ = []
    d = types.ModuleType("mamba_ssm.utils.determinism")
    d.autotune_configs = lambda configs: configs
    sys.modules.update({"mamba_ssm": m, "mamba_ssm.utils": u, "mamba_ssm.utils.determinism": d})


def patch_interpreter():
    """Triton's interpreter has no float atomic_xchg ("Unsupported data type"); its programs run one at a time, so
    an exchange is a load and a store."""
    import numpy as np
    from triton._C.libtriton import ir
    from triton.runtime import interpreter as I
    orig = I.InterpreterBuilder.create_atomic_rmw

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        if rmwOp == ir.ATOMIC_OP.XCHG and val.dtype.scalar.is_floating():
            np_dtype = I._get_np_dtype(val.dtype.scalar)
            data = np.broadcast_to(val.data, ptr.data.shape).astype(np_dtype)
            old = I._interpreter.load(ptr.data, mask.data, np.zeros(ptr.data.shape, dtype=np_dtype), np_dtype)
            I._interpreter.store(ptr.data, data, mask.data)
            return I.TensorHandle(old, val.dtype.scalar)
        return orig(self, rmwOp, ptr, val, mask, sem, scope)
    I.InterpreterBuilder.create_atomic_rmw = create_atomic_rmw

    # A scalar comparison of the loop counter (a Python int there) with an int argument comes out int32, not int1,
    # in the interpreter, and a block store masked by it fails ("mask has unsupported dtype"); compiled Triton
    # types it i1. The generated backwards' tape stores and loads are masked so (`mask=iteration < tape_trips`).
    store = I.InterpreterBuilder.create_masked_store

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        if mask is not None and mask.data.dtype != np.bool_:
            mask = I.TensorHandle(mask.data.astype(np.bool_), tl.int1)
        return store(self, ptrs, value, mask, cache_policy)
    I.InterpreterBuilder.create_masked_store = create_masked_store
    load = I.InterpreterBuilder.create_masked_load

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        if mask is not None and mask.data.dtype != np.bool_:
            mask = I.TensorHandle(mask.data.astype(np.bool_), tl.int1)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)
    I.InterpreterBuilder.create_masked_load = create_masked_load


class _EagerOnlyOp:
    """Stands in for torch.library.custom_op's result where PyTorch refuses the op's schema (more than 64
    arguments): the function itself, for the module's eager path (its autograd.Function calls the functions, not
    the ops); torch.compile cannot use it."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def register_fake(self, fn):
        return fn

    def register_autograd(self, *args, **kwargs):
        pass


def load_module(name):
    """mamba_NAME_op.py from FOLDER, imported on its own. A module that raises NameError on import (a module-level
    statement of the kernel file kept without what it names) is a failed check; it is then loaded again with the
    name bound to a placeholder, so that its kernel is checked all the same. So is a module whose ops PyTorch
    refuses (a schema of more than 64 arguments): it is loaded again with the ops left unregistered, for the
    eager launches this script makes."""
    path = os.path.join(FOLDER, f"mamba_{name}_op.py")
    source = open(path).read()
    # tgrad writes a constexpr conditional expression (chunk_scan's `tl.arange(0, BLOCK_SIZE_DSTATE if
    # BLOCK_SIZE_DSTATE <= 128 else BLOCK_SIZE_K)`) as an if/else assigning a local `choice_N` without the
    # `tl.constexpr` annotation: Triton 3 makes such a local a tensor, and the backward does not compile
    # ("arange's arguments must be of type tl.constexpr"). A failed check; the module is loaded with the annotation.
    choices = sorted(set(re.findall(r"tl\.arange\(0, (choice_\d+)\)", source)))
    if choices:
        report(False, f"{os.path.basename(path)}: tl.arange(0, {', '.join(choices)}) of un-annotated locals does not "
                      "compile (loaded with `: tl.constexpr` added to their assignments)")
        source = re.sub(r"^(\s+)(" + "|".join(choices) + r") = ", r"\1\2: tl.constexpr = ", source, flags=re.M)
    bound = {}
    eager_only = False
    while True:
        spec = importlib.util.spec_from_loader(f"mamba_{name}_op", loader=None, origin=path)
        module = importlib.util.module_from_spec(spec)
        module.__file__ = path
        module.__dict__.update(bound)
        custom_op = torch.library.custom_op
        if eager_only:
            torch.library.custom_op = lambda *a, **k: _EagerOnlyOp
        try:
            # through a file: Triton's @jit reads each kernel's source with inspect
            if choices:
                tmp = os.path.join(tempfile.mkdtemp(), os.path.basename(path))
                open(tmp, "w").write(source)
                module.__file__ = tmp
            exec(compile(source, module.__file__, "exec"), module.__dict__)
            return module
        except NameError as e:
            missing = re.search(r"name '(\w+)' is not defined", str(e))
            if not missing or missing.group(1) in bound:
                raise
            report(False, f"import {os.path.basename(path)}: {first_line(e)} (loaded again with "
                          f"{missing.group(1)} bound to a placeholder)")
            bound[missing.group(1)] = types.SimpleNamespace(apply=None)
        except RuntimeError as e:
            if eager_only or "only supports 64" not in str(e):
                raise
            report(False, f"import {os.path.basename(path)}: {first_line(e)} (loaded again with its ops "
                          "unregistered, eager launches only)")
            eager_only = True
        finally:
            torch.library.custom_op = custom_op


def cheapest_config(configs):
    # mamba_ssm.utils.determinism._estimate_config_cost: the config deterministic mode keeps
    def cost(cfg):
        p = 1
        for key, val in cfg.kwargs.items():
            if key.startswith("BLOCK_SIZE_"):
                p *= val
        return p * (getattr(cfg, "num_stages", 1) or 1)
    return min(configs, key=cost)


def run_one(name):
    torch.manual_seed(0)
    attr, test = KERNELS[name]
    install_determinism()
    if CPU:
        patch_interpreter()
    K = getattr(load_module(name), attr)
    tuner = getattr(K, "_autotuner", None)
    if CPU and tuner is not None and len(tuner.configs) > 1:
        tuner.configs = [cheapest_config(tuner.configs)]
    test(K)
    print(f"{name}: {CHECKS} checks, {FAILS} failures", flush=True)


def run_all():
    # One process per kernel, several at a time: Triton compiles on the CPU, one kernel at a time per process.
    jobs = int(os.environ.get("MAMBA_JOBS", "1" if CPU else str(len(KERNELS))))
    limit = float(os.environ.get("MAMBA_TIMEOUT", "900"))
    names = list(KERNELS)
    procs, results, pending = {}, {}, list(names)
    start = time.time()
    while pending or procs:
        while pending and len(procs) < jobs:
            name = pending.pop(0)
            # the child's output goes to a file, not a pipe (a full pipe would stop the child)
            log = tempfile.TemporaryFile(mode="w+")
            procs[name] = (subprocess.Popen([sys.executable, __file__, FOLDER, "--only", name], stdout=log,
                                            stderr=subprocess.STDOUT, text=True), time.time(), log)
        time.sleep(0.2)
        for name, (p, t0, log) in list(procs.items()):
            if p.poll() is None and time.time() - start < limit:
                continue
            if p.poll() is None:
                p.kill()
            p.wait()
            log.seek(0)
            out = log.read()
            log.close()
            results[name] = (p.returncode, out, time.time() - t0)
            del procs[name]
            print(out, end="", flush=True)
    total_checks = total_fails = 0
    print("\nkernel                                  checks  failures  seconds")
    for name in names:
        rc, out, secs = results[name]
        last = [l for l in out.splitlines() if l.startswith(f"{name}: ")]
        if rc == 0 and last:
            parts = last[-1].split()
            checks, fails = int(parts[1]), int(parts[3])
        else:
            checks, fails = 1, 1
            print(f"FAIL {name}: its process ended with {rc} (killed at the time limit, or crashed) before finishing")
        total_checks += checks
        total_fails += fails
        print(f"{name:40s} {checks:6d} {fails:9d} {secs:8.0f}")
    print(f"{total_checks - total_fails} of {total_checks} pass")


if __name__ == "__main__":
    if ONLY:
        run_one(ONLY)
    else:
        run_all()
