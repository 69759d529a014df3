# attorch's forward kernels (BobMcDear/attorch, attorch/*_kernels.py, fetched, not committed) through their generated
# modules, each launched as attorch's own layer code launches it (attorch/*_layer(s).py: grid lambdas over the
# autotuner's META, @triton.heuristics block sizes, the constexpr flags and modes the layer passes, None for absent
# buffers and parameters), against a float64 PyTorch reference of the kernel's math written here. Every output the
# kernel writes (partial sums and statistics too) goes into a loss with random fp64 weights; the outputs and the
# input gradients are compared, max abs error over max(1, max|ref|) (2e-5 fp32, 6e-2 fp16).
# Usage: python3 tests/gpu/real/attorch_kernels.py [MODULES_DIR] [--only NAME] (default scratch/attorch), where
# MODULES_DIR holds attorch_K_op.py for each kernel K, written (in a checkout of attorch) by
#   tgrad attorch/FILE_kernels.py -I . --kernel K --wrt <the float pointers it loads> --emit torch \
#         -o DIR/attorch_K_op.py
# tgrad refuses act_func_forward_kernel, linear_forward_kernel and batch_norm_forward_kernel without -D (44
# specializations); the act and linear kernels are run here through modules written with one -D each:
#   attorch_act_func_forward_kernel_dropout{True,False}_op.py   (-D dropout=True / False)
#   attorch_linear_forward_kernel_fp16{True,False}_op.py         (-D fp16=True / False)
#   attorch_linear_forward_kernel_fp16{True,False}_actNone_op.py (-D fp16=... -D act_func=None; the modules above
#                                                                  serve act_func=None too since 2026-11-27)
# The modules keep the kernel files' relative imports (`from .utils import ...`): they are loaded as submodules of a
# package `attorch` over attorch's own package folder, ATTORCH_SRC (default MODULES_DIR/src/attorch, e.g.
# `git archive HEAD attorch | tar -x -C MODULES_DIR/src`).
# Each kernel runs in a process of its own (one crash hides nothing else).
import importlib
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback

ARGS = list(sys.argv[1:])
ONLY = None
if "--only" in ARGS:
    i = ARGS.index("--only")
    ONLY = ARGS[i + 1]
    del ARGS[i:i + 2]
FOLDER = ARGS[0] if ARGS else "scratch/attorch"

import torch
import torch.nn.functional as F

DEV = os.environ.get("ATTORCH_DEV", "cuda")
f32, f16 = torch.float32, torch.float16
DTYPES = (f32, f16)
TOL = {f32: 2e-5, f16: 6e-2}
FAILS = CHECKS = SKIPS = 0


def next_pow2(n):
    return 1 << (n - 1).bit_length() if n > 0 else 1


def cdiv(a, b):
    return (a + b - 1) // b


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
    """The kernel as attorch launches it (the plain Triton kernel, autotuner and heuristics, no tgrad)."""

    def __init__(self, K):
        self.raw = getattr(K, "_autotuner", None) or K.jit
        if getattr(K, "_heuristics", None) and getattr(K, "_autotuner", None) is None:
            self.raw = None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            if self.raw is None:
                raise _RawOK()
            self.raw[grid](*args, **kwargs)
            raise _RawOK()
        return launch


def run_case(tag, K, leaves, launch, ref, tol, tols=None):
    """leaves: name -> leaf tensor; launch(K) -> {output name: tensor}; ref({name: fp64 leaf}, outs) -> {name: fp64}."""
    global SKIPS
    tols = tols or {}
    try:
        outs = launch(K)
    except Exception as e:
        try:
            launch(_Probe(K))
        except _RawOK:
            pass
        except Exception as e2:
            SKIPS += 1
            print(f"skip {tag}: attorch's own kernel fails here too: {first_line(e2)}", flush=True)
            return
        report(False, f"{tag}: {first_line(e)} (attorch's kernel itself runs)")
        traceback.print_exc(limit=3)
        return
    try:
        gen = torch.Generator(device=DEV).manual_seed(1234)
        weights = {n: torch.randn(o.shape, dtype=torch.float64, device=DEV, generator=gen) for n, o in outs.items()}
        sum((o.double() * weights[n]).sum() for n, o in outs.items()).backward()
        ref_leaves = {n: t.detach().double().requires_grad_() for n, t in leaves.items()}
        want = ref(ref_leaves, {n: o.detach() for n, o in outs.items()})
        sum((want[n] * weights[n]).sum() for n in outs).backward()
        checks = [(n, outs[n], want[n]) for n in outs] + [("d" + n, leaves[n].grad, ref_leaves[n].grad) for n in leaves]
        for name, got, w in checks:
            t = tols.get(name, tol)
            if got is None or w is None:
                report(False, f"{tag} {name}: {'no gradient from the module' if got is None else 'reference has none'}")
                continue
            if got.shape != w.shape:
                report(False, f"{tag} {name}: shape {tuple(got.shape)}, reference {tuple(w.shape)}")
                continue
            err = (got.double() - w).abs().max().item() / max(1.0, w.abs().max().item())
            report(err <= t, f"{tag} {name}: {err:.2e}" + (f" (tol {t:g})" if t != tol else ""))
    except Exception as e:
        report(False, f"{tag}: {first_line(e)}")
        traceback.print_exc(limit=4)


def rnd(*shape, dtype, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device=DEV) * scale + shift).to(dtype).requires_grad_()


def away_from(x, kinks, gap=0.03):
    """x (float32) moved off the activation's kinks, where the gradient is one-sided."""
    for k in kinks:
        near = (x - k).abs() < gap
        x = torch.where(near, x + 2 * gap, x)
    return x


# ---------------------------------------------------------------------------------------- act_kernels.py (fp64 refs)
SELU_SCALE, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


def act_ref(name, x, p):
    if name == "sigmoid":
        return torch.sigmoid(x)
    if name == "logsigmoid":
        return torch.log(torch.sigmoid(x))
    if name == "tanh":
        return torch.tanh(x)
    if name == "relu":
        return torch.clamp_min(x, 0)
    if name == "gelu":
        return 0.5 * (1 + torch.erf(x / math.sqrt(2))) * x
    if name == "geluapprox":
        return 0.5 * (1 + torch.tanh(math.sqrt(2 / math.pi) * x * (1 + 0.044715 * x * x))) * x
    if name == "silu":
        return x * torch.sigmoid(x)
    if name == "relu6":
        return torch.clamp(x, 0, 6)
    if name == "hardsigmoid":
        return torch.clamp(x / 6 + 0.5, 0, 1)
    if name == "hardtanh":
        return torch.clamp(x, -1, 1)
    if name == "hardswish":
        return x * torch.clamp(x + 3, 0, 6) / 6
    if name == "selu":
        return SELU_SCALE * (torch.clamp_min(x, 0) + torch.clamp_max(SELU_ALPHA * (torch.exp(x) - 1), 0))
    if name == "mish":
        return x * torch.tanh(torch.log(1 + torch.exp(x)))
    if name == "softplus":
        return torch.log(1 + torch.exp(x))
    if name == "softsign":
        return x / (1 + x.abs())
    if name == "tanhshrink":
        return x - torch.tanh(x)
    if name == "leaky_relu":
        return torch.clamp_min(x, 0) + p * torch.clamp_max(x, 0)
    if name == "elu":
        return torch.where(x <= 0, p * (torch.exp(x) - 1), x)
    if name == "celu":
        return torch.clamp_min(x, 0) + torch.clamp_max(p * (torch.exp(x / p) - 1), 0)
    if name == "hardshrink":
        return torch.where(x.abs() <= p, torch.zeros_like(x), x)
    if name == "softshrink":
        return torch.where(x > p, x - p, torch.where(x < -p, x + p, torch.zeros_like(x)))
    raise ValueError(name)


# name as the layer passes it ('leaky_relu_0.1' is split into act_func and param by the layer), input scale, kinks
ACTS = [("sigmoid", 2, ()), ("logsigmoid", 2, ()), ("tanh", 2, ()), ("relu", 2, (0,)), ("gelu", 2, ()),
        ("geluapprox", 2, ()), ("silu", 2, ()), ("relu6", 4, (0, 6)), ("hardsigmoid", 3, (-3, 3)),
        ("hardtanh", 1.5, (-1, 1)), ("hardswish", 3, (-3, 3)), ("selu", 2, (0,)), ("mish", 2, ()),
        ("softplus", 2, ()), ("softsign", 2, (0,)), ("tanhshrink", 2, ()), ("leaky_relu_0.1", 2, (0,)),
        ("elu_0.7", 2, (0,)), ("celu_1.3", 2, (0,)), ("hardshrink_0.5", 1.5, (-0.5, 0.5)),
        ("softshrink_0.5", 1.5, (-0.5, 0.5))]


def split_act(spec):
    # ActFuncAutoGrad.forward / GLUAutoGrad.forward / LinearAutoGrad.forward: 'name_PARAM' -> (name, float(PARAM))
    if spec is not None and "_" in spec:
        comps = spec.split("_")
        return "_".join(comps[:-1]), float(comps[-1])
    return spec, None


def act_input(shape, dtype, scale, kinks):
    x = away_from(torch.randn(*shape, device=DEV) * scale, kinks)
    return x.to(dtype).requires_grad_()


def t_act(K, dropout):
    # ActFuncAutoGrad.forward: flattened input, grid cdiv(size, META['BLOCK_SIZE']) (autotuned on size),
    # (drop_p, seed, param), act_func, dropout = drop_p > 0 and training; seed = randint(0, 65535) or 0.
    rng = random.Random(7)
    for dtype in DTYPES:
        for spec, scale, kinks in ACTS:
            act, param = split_act(spec)
            for shape in ((3, 5, 67), (40003,)):
                drop_p = 0.3 if dropout else 0.0
                seed = rng.randint(0, 65535) if dropout else 0
                x = act_input(shape, dtype, scale, kinks)

                def launch(K, x=x, act=act, param=param, drop_p=drop_p, seed=seed):
                    flat = x.flatten()
                    size = len(flat)
                    out = torch.empty_like(flat)
                    grid = lambda META: (cdiv(size, META["BLOCK_SIZE"]),)
                    r = K[grid](flat, out, size, drop_p, seed, param, act, dropout)
                    return {"output_pointer": r.output_pointer.view_as(x)}

                def ref(v, outs, act=act, param=param, drop_p=drop_p):
                    y = act_ref(act, v["x"], param)
                    if dropout:
                        # the mask the forward drew, recovered from its output (a kept element is nonzero but where
                        # the activation itself is 0, and there its gradient is 0 too)
                        kept = outs["output_pointer"] != 0
                        y = torch.where(kept, y / (1 - drop_p), torch.zeros_like(y))
                    return {"output_pointer": y}

                run_case(f"act {dname(dtype)} act_func={spec} dropout={dropout} drop_p={drop_p} seed={seed} "
                         f"shape={shape}", K, {"x": x}, launch, ref, TOL[dtype])


def t_act_func_forward_kernel_dropoutFalse(K):
    t_act(K, False)


def t_act_func_forward_kernel_dropoutTrue(K):
    t_act(K, True)


# ------------------------------------------------------------------------------------------------------ glu_kernels.py
def t_glu_forward_kernel(K):
    # GLUAutoGrad.forward: input.chunk(2, dim), each half contiguous; grid cdiv(size, META['BLOCK_SIZE'])
    for dtype in DTYPES:
        for spec, scale, kinks in ACTS:
            act, param = split_act(spec)
            for shape, dim in (((3, 10, 134), -1), ((6, 4002), 0)):
                x = act_input(shape, dtype, scale, kinks)

                def launch(K, x=x, dim=dim, act=act, param=param):
                    a, b = x.chunk(2, dim=dim)
                    a, b = a.contiguous(), b.contiguous()
                    size = a.numel()
                    out = torch.empty_like(a)
                    grid = lambda META: (cdiv(size, META["BLOCK_SIZE"]),)
                    r = K[grid](a, b, out, size, param, act)
                    return {"output_pointer": r.output_pointer}

                def ref(v, outs, dim=dim, act=act, param=param):
                    a, b = v["x"].chunk(2, dim=dim)
                    return {"output_pointer": a * act_ref(act, b, param)}

                run_case(f"glu {dname(dtype)} act_func={spec} shape={shape} dim={dim}", K, {"x": x}, launch, ref,
                         TOL[dtype])


# -------------------------------------------------------------------------------------------------- dropout_kernels.py
def t_dropout_forward_kernel(K):
    rng = random.Random(11)
    for dtype in DTYPES:
        for drop_p in (0.1, 0.5, 0.9):
            for shape in ((3, 5, 67), (70001,)):
                seed = rng.randint(0, 65535)
                x = away_from(torch.randn(*shape, device=DEV), (0,)).to(dtype).requires_grad_()

                def launch(K, x=x, drop_p=drop_p, seed=seed):
                    flat = x.flatten()
                    size = len(flat)
                    out = torch.empty_like(flat)
                    grid = lambda META: (cdiv(size, META["BLOCK_SIZE"]),)
                    r = K[grid](flat, out, size, drop_p, seed)
                    return {"output_pointer": r.output_pointer.view_as(x)}

                def ref(v, outs, drop_p=drop_p, shape=shape):
                    kept = outs["output_pointer"] != 0
                    frac = kept.double().mean().item()
                    n = kept.numel()
                    # the mask is a Bernoulli(1 - drop_p) draw: its kept fraction within 6 sigma
                    report(abs(frac - (1 - drop_p)) <= 6 * math.sqrt(drop_p * (1 - drop_p) / n) + 1e-9,
                           f"dropout kept fraction {frac:.3f} for drop_p={drop_p} shape={shape}")
                    return {"output_pointer": torch.where(kept, v["x"] / (1 - drop_p), torch.zeros_like(v["x"]))}

                run_case(f"dropout {dname(dtype)} drop_p={drop_p} seed={seed} shape={shape}", K, {"x": x}, launch, ref,
                         TOL[dtype])


# ---------------------------------------------------------------------------------------------------- norms, softmax
def batch_block(batch_dim, feat_dim):
    # softmax_kernels.BLOCK_SIZE_BATCH_heuristic
    return min(max(1, next_pow2(batch_dim // 2 ** 10)), 128) if feat_dim < 64 else 1


NORM_SHAPES = ((37, 300), (2, 3, 1000), (5000, 40), (4, 4096))  # (5000, 40): 4 rows a program, the last one ragged


def t_layer_norm_forward_kernel(K):
    # LayerNormAutoGrad.forward: output fp32 under autocast (autocast_to_fp32), else the input's dtype; mean and
    # inv_std fp32, passed only when something requires grad (always here); add_bias only with a weight.
    eps = 1e-5
    for dtype in DTYPES:
        for out_dtype in ((f32,) if dtype == f32 else (f32, f16)):
            for affine, bias in ((True, True), (True, False), (False, False)):
                for shape in NORM_SHAPES:
                    n = shape[-1]
                    w_dtype = f32 if out_dtype == f32 else dtype  # fp32 parameters under autocast
                    x = rnd(*shape, dtype=dtype, shift=0.3)
                    W = rnd(n, dtype=w_dtype, scale=0.5, shift=1.0) if affine else None
                    B = rnd(n, dtype=w_dtype, scale=0.5) if bias else None

                    def launch(K, x=x, W=W, B=B, n=n, out_dtype=out_dtype):
                        flat = x.flatten(0, -2)
                        batch_dim, feat_dim = flat.shape
                        out = torch.empty_like(flat, dtype=out_dtype)
                        mean = torch.empty(batch_dim, device=DEV, dtype=f32)
                        inv_std = torch.empty(batch_dim, device=DEV, dtype=f32)
                        grid = lambda META: (cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)
                        r = K[grid](flat, W, B, mean, inv_std, out, batch_dim, feat_dim, *flat.stride(), *out.stride(),
                                    eps, scale_by_weight=W is not None, add_bias=W is not None and B is not None,
                                    save_stats=True)
                        return {"output_pointer": r.output_pointer.view_as(x), "mean_pointer": r.mean_pointer,
                                "inv_std_pointer": r.inv_std_pointer}

                    def ref(v, outs):
                        xx = v["x"]
                        m = xx.mean(-1, keepdim=True)
                        inv = 1 / torch.sqrt(((xx - m) ** 2).mean(-1, keepdim=True) + eps)
                        y = (xx - m) * inv
                        if "W" in v:
                            y = y * v["W"]
                        if "B" in v:
                            y = y + v["B"]
                        return {"output_pointer": y, "mean_pointer": m.reshape(-1), "inv_std_pointer": inv.reshape(-1)}

                    leaves = {"x": x} | ({"W": W} if affine else {}) | ({"B": B} if bias else {})
                    run_case(f"layer_norm {dname(dtype)} out={dname(out_dtype)} weight={affine} bias={bias} "
                             f"shape={shape}", K, leaves, launch, ref, TOL[dtype])


def t_rms_norm_forward_kernel(K):
    # RMSNormAutoGrad.forward: output like the input, inv_rms fp32
    eps = 1e-5
    for dtype in DTYPES:
        for w_dtype in ((f32,) if dtype == f32 else (f16, f32)):
            for affine in (True, False):
                if not affine and w_dtype != dtype:
                    continue
                for shape in NORM_SHAPES:
                    n = shape[-1]
                    x = rnd(*shape, dtype=dtype)
                    W = rnd(n, dtype=w_dtype, scale=0.5, shift=1.0) if affine else None

                    def launch(K, x=x, W=W):
                        flat = x.flatten(0, -2)
                        batch_dim, feat_dim = flat.shape
                        out = torch.empty_like(flat)
                        inv_rms = torch.empty(batch_dim, device=DEV, dtype=f32)
                        grid = lambda META: (cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)
                        r = K[grid](flat, W, inv_rms, out, batch_dim, feat_dim, *flat.stride(), *out.stride(), eps,
                                    scale_by_weight=W is not None, save_stats=True)
                        return {"output_pointer": r.output_pointer.view_as(x), "inv_rms_pointer": r.inv_rms_pointer}

                    def ref(v, outs):
                        xx = v["x"]
                        inv = 1 / torch.sqrt((xx * xx).mean(-1, keepdim=True) + eps)
                        y = xx * inv
                        if "W" in v:
                            y = y * v["W"]
                        return {"output_pointer": y, "inv_rms_pointer": inv.reshape(-1)}

                    leaves = {"x": x} | ({"W": W} if affine else {})
                    run_case(f"rms_norm {dname(dtype)} weight={affine} ({dname(w_dtype)}) shape={shape}", K, leaves,
                             launch, ref, TOL[dtype])


def t_softmax_forward_kernel(K):
    # SoftmaxAutoGrad (Softmax, LogSoftmax, Softmin: neg, log); output fp32 under autocast, else the input's dtype
    for dtype in DTYPES:
        for out_dtype in ((f32,) if dtype == f32 else (f32, f16)):
            for neg in (False, True):
                for log in (False, True):
                    for shape in NORM_SHAPES:
                        x = rnd(*shape, dtype=dtype, scale=2.0)

                        def launch(K, x=x, neg=neg, log=log, out_dtype=out_dtype):
                            flat = x.flatten(0, -2)
                            batch_dim, feat_dim = flat.shape
                            out = torch.empty_like(flat, dtype=out_dtype)
                            grid = lambda META: (cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)
                            r = K[grid](flat, out, batch_dim, feat_dim, *flat.stride(), *out.stride(), neg=neg, log=log)
                            return {"output_pointer": r.output_pointer.view_as(x)}

                        def ref(v, outs, neg=neg, log=log):
                            xx = -v["x"] if neg else v["x"]
                            return {"output_pointer": torch.log_softmax(xx, -1) if log else torch.softmax(xx, -1)}

                        run_case(f"softmax {dname(dtype)} out={dname(out_dtype)} neg={neg} log={log} shape={shape}",
                                 K, {"x": x}, launch, ref, TOL[dtype])


# --------------------------------------------------------------------------------------------------------------- losses
def t_cross_entropy_loss_forward_kernel(K):
    # CrossEntropyLossAutoGrad.forward: output [batch_dim // BLOCK_SIZE_BATCH] fp32 (autocast 'fp32'; the input's dtype
    # without autocast), sum_weights fp32 when weighted; grid cdiv(batch_dim, BLOCK_SIZE_BATCH). attorch sizes the
    # output batch_dim // BLOCK_SIZE_BATCH, so a batch not a multiple of the block writes past it: not launched here.
    for dtype in DTYPES:
        for weighted in (False, True):
            for B, C in ((37, 300), (6, 1000), (3000, 40), (8192, 10)):
                x = rnd(B, C, dtype=dtype, scale=2.0)
                target = torch.randint(0, C, (B,), device=DEV)
                W = (torch.rand(C, device=DEV) + 0.5).to(f32 if dtype == f32 else dtype).requires_grad_() \
                    if weighted else None
                BB = batch_block(B, C)

                def launch(K, x=x, target=target, W=W, B=B, C=C, BB=BB):
                    out = torch.empty(B // BB, dtype=f32, device=DEV)
                    sw = torch.empty_like(out, dtype=f32) if W is not None else None
                    grid = lambda META: (cdiv(len(x), META["BLOCK_SIZE_BATCH"]),)
                    r = K[grid](x, target, W, sw, out, B, C, *x.stride(), weighted=W is not None)
                    res = {"output_pointer": r.output_pointer}
                    if W is not None:
                        res["sum_weights_pointer"] = r.sum_weights_pointer
                    return res

                def ref(v, outs, target=target, B=B, BB=BB, weighted=weighted):
                    xx = v["x"]
                    loss = torch.logsumexp(xx, -1) - xx.gather(1, target[:, None])[:, 0]
                    res = {}
                    if weighted:
                        w = v["W"][target]
                        loss = loss * w
                        res["sum_weights_pointer"] = w.view(B // BB, BB).sum(1)
                    else:
                        loss = loss / B
                    res["output_pointer"] = loss.view(B // BB, BB).sum(1)
                    return res

                leaves = {"x": x} | ({"W": W} if weighted else {})
                run_case(f"cross_entropy {dname(dtype)} weighted={weighted} B={B} C={C} BLOCK_SIZE_BATCH={BB}", K,
                         leaves, launch, ref, TOL[dtype])


def t_nll_loss_forward_kernel(K):
    # NLLLossAutoGrad.forward: input [B, C, *spatial] passed as is with the strides of its [B, C, S] view, target
    # [B, *spatial]; output [B, S] for 'none', else [B // BLOCK_SIZE_BATCH]; sum_weights fp32 only for 'mean'
    # (stored only when weighted); output strides (1, 1) when reduced.
    for dtype in DTYPES:
        for reduction in ("none", "mean", "sum"):
            for weighted in (False, True):
                for shape in ((37, 30), (4, 7, 5, 13), (2, 5, 80), (4096, 5)):
                    B, C = shape[:2]
                    sp = shape[2:]
                    x = torch.log_softmax(torch.randn(*shape, device=DEV), 1).to(dtype).requires_grad_()
                    target = torch.randint(0, C, (B, *sp), device=DEV)
                    W = (torch.rand(C, device=DEV) + 0.5).to(f32 if dtype == f32 else dtype).requires_grad_() \
                        if weighted else None
                    S = math.prod(sp)
                    BB = batch_block(B, S)

                    def launch(K, x=x, target=target, W=W, B=B, S=S, BB=BB, reduction=reduction):
                        fi = x.unsqueeze(-1) if x.ndim == 2 else x
                        fi = fi.flatten(2, -1)
                        ft = target.unsqueeze(-1) if target.ndim == 1 else target
                        ft = ft.flatten(1, -1)
                        sw = torch.empty(B // BB, dtype=f32, device=DEV) if reduction == "mean" else None
                        out = (torch.empty_like(ft, dtype=f32) if reduction == "none" else
                               torch.empty(B // BB, dtype=f32, device=DEV))
                        grid = lambda META: (cdiv(len(x), META["BLOCK_SIZE_BATCH"]),)
                        r = K[grid](x, target, W, sw, out, B, S, *fi.stride(), *ft.stride(),
                                    *(out.stride() if reduction == "none" else (1, 1)), reduction=reduction,
                                    weighted=W is not None)
                        res = {"output_pointer": r.output_pointer}
                        if reduction == "mean" and W is not None:
                            res["sum_weights_pointer"] = r.sum_weights_pointer
                        return res

                    def ref(v, outs, target=target, B=B, S=S, BB=BB, reduction=reduction, weighted=weighted):
                        xx = v["x"].reshape(B, v["x"].shape[1], S)
                        t = target.reshape(B, S)
                        out = -xx.gather(1, t[:, None, :])[:, 0, :]
                        res = {}
                        if weighted:
                            w = v["W"][t]
                            out = out * w
                        if reduction == "none":
                            res["output_pointer"] = out
                        elif reduction == "sum" or weighted:
                            res["output_pointer"] = out.view(B // BB, BB * S).sum(1)
                            if reduction == "mean":
                                res["sum_weights_pointer"] = w.reshape(B // BB, BB * S).sum(1)
                        else:
                            res["output_pointer"] = out.view(B // BB, BB * S).sum(1) / (B * S)
                        return res

                    leaves = {"x": x} | ({"W": W} if weighted else {})
                    run_case(f"nll_loss {dname(dtype)} reduction={reduction} weighted={weighted} shape={shape} "
                             f"BLOCK_SIZE_BATCH={BB}", K, leaves, launch, ref, TOL[dtype])


def t_p_loss_forward_kernel(K):
    # PLossAutoGrad.forward: p_loss 0 smooth L1, 1 L1, 2 squared L2, 3 Huber; reduction 'none' (output like the
    # input) or 'mean'/'sum' (cdiv(size, 32) partials, the first cdiv(size, best BLOCK_SIZE) written); output fp32
    # (autocast 'fp32').
    names = {0: "smooth_l1", 1: "l1", 2: "l2", 3: "huber"}
    for dtype in DTYPES:
        for p_loss in (0, 1, 2, 3):
            for reduction in ("none", "mean", "sum"):
                for param in ((1.0, 0.5) if p_loss in (0, 3) else (1.0,)):
                    for shape in ((3, 5, 67), (20011,)):
                        x = rnd(*shape, dtype=dtype)
                        y = rnd(*shape, dtype=dtype)

                        def launch(K, x=x, y=y, p_loss=p_loss, reduction=reduction, param=param):
                            fx, fy = x.flatten(), y.flatten()
                            size = len(fx)
                            out = (torch.empty_like(fx, dtype=f32) if reduction == "none"
                                   else torch.empty(cdiv(size, 32), dtype=f32, device=DEV))
                            grid = lambda META: (cdiv(size, META["BLOCK_SIZE"]),)
                            r = K[grid](fx, fy, out, param, size, p_loss=p_loss, reduction=reduction)
                            if reduction == "none":
                                return {"output_pointer": r.output_pointer.view_as(x)}
                            key = (size, str(fx.dtype), str(fy.dtype), str(out.dtype))
                            block = K._configs[key][0]["BLOCK_SIZE"]
                            launch.block = block
                            return {"output_pointer": r.output_pointer[:cdiv(size, block)]}

                        def ref(v, outs, p_loss=p_loss, reduction=reduction, param=param, launch=launch):
                            d = (v["x"] - v["y"]).flatten()
                            a = d.abs()
                            if p_loss == 0:
                                e = torch.where(a < param, 0.5 * d * d / param, a - 0.5 * param)
                            elif p_loss == 1:
                                e = a
                            elif p_loss == 2:
                                e = d * d
                            else:
                                e = torch.where(a < param, 0.5 * d * d, param * (a - 0.5 * param))
                            if reduction == "none":
                                return {"output_pointer": e.view_as(v["x"])}
                            size = e.numel()
                            block = launch.block
                            nb = cdiv(size, block)
                            parts = F.pad(e, (0, nb * block - size)).view(nb, block).sum(1)
                            return {"output_pointer": parts / size if reduction == "mean" else parts}

                        run_case(f"p_loss {dname(dtype)} p_loss={names[p_loss]} reduction={reduction} param={param} "
                                 f"shape={shape}", K, {"x": x, "y": y}, launch, ref, TOL[dtype])


# ------------------------------------------------------------------------------------------------------- linear_kernels
def t_linear(K, fp16, acts=None):
    # LinearAutoGrad.forward: weight [in, out]; bias None -> the input passed in its place (add_bias False); output
    # fp16 under autocast (fp16=True: input, weight and bias loaded as fp16), else the input's dtype (fp16=False);
    # pre_act a buffer of its own only when there is an activation (else the output passed again); tf32 by
    # heuristic (True on Ampere and newer: fp32 products in TF32).
    acts = acts or [None, "relu", "gelu", "silu", "tanh", "leaky_relu_0.1", "softplus"]
    for spec in acts:
        act, param = split_act(spec)
        for bias in (True, False):
            for shape, out_f in (((37, 100), 70), ((2, 9, 64), 130)):
                in_f = shape[-1]
                if fp16:
                    x = rnd(*shape, dtype=f16)  # activations fp16 under autocast, parameters fp32
                else:
                    x = rnd(*shape, dtype=f32)
                W = rnd(in_f, out_f, dtype=f32, scale=1 / math.sqrt(in_f))
                Bv = rnd(out_f, dtype=f32, scale=0.5) if bias else None

                def launch(K, x=x, W=W, Bv=Bv, act=act, param=param, out_f=out_f):
                    flat = x.flatten(0, -2)
                    batch_dim, in_feat = flat.shape
                    out = torch.empty((batch_dim, out_f), device=DEV, dtype=f16 if fp16 else x.dtype)
                    save_pre_act = act is not None
                    pre = torch.empty_like(out) if save_pre_act else out
                    grid = lambda META: (cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]) *
                                         cdiv(out_f, META["BLOCK_SIZE_OUT_FEAT"]),)
                    r = K[grid](flat, W, x if Bv is None else Bv, pre, out, batch_dim, in_feat, out_f, *flat.stride(),
                                *W.stride(), *pre.stride(), *out.stride(), param, add_bias=Bv is not None,
                                act_func=act, save_pre_act=save_pre_act, fp16=fp16)
                    res = {"output_pointer": r.output_pointer.view(*x.shape[:-1], out_f)}
                    if save_pre_act:
                        res["pre_act_pointer"] = r.pre_act_pointer.view(*x.shape[:-1], out_f)
                    return res

                def ref(v, outs, act=act, param=param):
                    z = v["x"] @ v["W"]
                    if "B" in v:
                        z = z + v["B"]
                    if act in ("relu", "leaky_relu"):
                        # the kink at 0: the side the kernel's own pre-activation (TF32 or fp16 products) is on, not
                        # the fp64 one's (an element within rounding of 0 otherwise takes the other slope: in the
                        # first GPU run, leaky_relu dx/dW errors of 5e-2 to 1e-1)
                        pos = outs["pre_act_pointer"] > 0
                        y = torch.where(pos, z, z * (param or 0.0))
                    else:
                        y = z if act is None else act_ref(act, z, param)
                    res = {"output_pointer": y}
                    if act is not None:
                        res["pre_act_pointer"] = z
                    return res

                leaves = {"x": x, "W": W} | ({"B": Bv} if bias else {})
                # TF32 products (fp32) and fp16 operands: the forward itself rounds the inputs to 10-bit mantissas
                tol = 6e-2 if fp16 else 1e-2
                run_case(f"linear fp16={fp16} act_func={spec} bias={bias} shape={shape} out={out_f}", K, leaves, launch,
                         ref, tol)


def t_linear_forward_kernel_fp16True(K):
    t_linear(K, True)


def t_linear_forward_kernel_fp16False(K):
    t_linear(K, False)


def t_linear_forward_kernel_fp16True_actNone(K):
    # the same command with -D act_func=None as well: the module without it has no backward for act_func=None
    t_linear(K, True, [None])


def t_linear_forward_kernel_fp16False_actNone(K):
    t_linear(K, False, [None])


KERNELS = {
    "act_func_forward_kernel_dropoutFalse": t_act_func_forward_kernel_dropoutFalse,
    "act_func_forward_kernel_dropoutTrue": t_act_func_forward_kernel_dropoutTrue,
    "glu_forward_kernel": t_glu_forward_kernel,
    "dropout_forward_kernel": t_dropout_forward_kernel,
    "layer_norm_forward_kernel": t_layer_norm_forward_kernel,
    "rms_norm_forward_kernel": t_rms_norm_forward_kernel,
    "softmax_forward_kernel": t_softmax_forward_kernel,
    "cross_entropy_loss_forward_kernel": t_cross_entropy_loss_forward_kernel,
    "nll_loss_forward_kernel": t_nll_loss_forward_kernel,
    "p_loss_forward_kernel": t_p_loss_forward_kernel,
    "linear_forward_kernel_fp16False": t_linear_forward_kernel_fp16False,
    "linear_forward_kernel_fp16True": t_linear_forward_kernel_fp16True,
    "linear_forward_kernel_fp16False_actNone": t_linear_forward_kernel_fp16False_actNone,
    "linear_forward_kernel_fp16True_actNone": t_linear_forward_kernel_fp16True_actNone,
}


def kernel_name(name):
    for suffix in ("_dropoutFalse", "_dropoutTrue", "_fp16False_actNone", "_fp16True_actNone", "_fp16False", "_fp16True"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def load_module(mod):
    # The generated modules keep the kernel files' relative imports (`from .utils import warps_kernel_configs`,
    # `from .softmax_kernels import BLOCK_SIZE_BATCH_heuristic`): load each as a submodule of a package `attorch`
    # whose path is attorch's own package (ATTORCH_SRC, default MODULES_DIR/src/attorch: the fetched source, not
    # committed), without running attorch/__init__.py.
    import importlib.util
    import types
    src = os.environ.get("ATTORCH_SRC", os.path.join(FOLDER, "src", "attorch"))
    if "attorch" not in sys.modules:
        pkg = types.ModuleType("attorch")
        pkg.__path__ = [os.path.abspath(src)]
        sys.modules["attorch"] = pkg
    spec = importlib.util.spec_from_file_location(f"attorch.{mod}", os.path.join(FOLDER, f"{mod}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"attorch.{mod}"] = module
    spec.loader.exec_module(module)
    return module


def run_one(job):
    # job: NAME@DTYPE, one module in one dtype (the linear modules choose theirs by fp16)
    global DTYPES
    name, _, dt = job.partition("@")
    if dt:
        DTYPES = tuple(d for d in DTYPES if dname(d) == dt)
    torch.manual_seed(0)
    K = getattr(load_module(f"attorch_{name}_op"), kernel_name(name))
    KERNELS[name](K)
    print(f"{job}: {CHECKS} checks, {FAILS} failures, {SKIPS} skipped", flush=True)
    print(f"{FAILS} failures", flush=True)


def run_all():
    jobs = int(os.environ.get("ATTORCH_JOBS", "32"))
    limit = float(os.environ.get("ATTORCH_TIMEOUT", "280"))
    present = [n for n in KERNELS if os.path.exists(os.path.join(FOLDER, f"attorch_{n}_op.py"))]
    for n in KERNELS:
        if n not in present:
            print(f"note: no attorch_{n}_op.py in {FOLDER}: not run")
    # the heavy modules (22 activations, each autotuned over 5 block sizes) one process per dtype
    names = [n + s for n in present
             for s in (("@float32", "@float16") if n.startswith(("act_", "glu_", "softmax", "layer_norm", "nll")) else ("",))]
    procs, results, pending = {}, {}, list(names)
    start = time.time()
    while pending or procs:
        while pending and len(procs) < jobs:
            name = pending.pop(0)
            # Its output goes to a file: a pipe nobody reads until the process ends blocks a process that prints
            # more than the pipe holds (64 KiB), which then ran into the time limit and counted as failed.
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
    total = 0
    print("\nkernel (module)@dtype                           checks  failures  skipped  seconds")
    for name in names:
        rc, out, secs = results[name]
        last = [l for l in out.splitlines() if l.startswith(f"{name}: ")]
        if rc == 0 and last:
            parts = last[-1].split()
            checks, fails, skips = int(parts[1]), int(parts[3]), int(parts[5])
        else:
            checks, fails, skips = 0, 1, 0
            print(f"FAIL {name}: its process ended with {rc} (killed at the time limit, or crashed) before finishing")
        total += fails
        print(f"{name:48s} {checks:6d} {fails:9d} {skips:8d} {secs:8.0f}")
    print(f"{total} failures")


if __name__ == "__main__":
    if ONLY:
        run_one(ONLY)
    else:
        run_all()
