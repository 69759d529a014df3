# unsloth's forward kernels (unslothai/unsloth, unsloth/kernels/*.py, fetched at 015bdef0d94a, not committed) through
# their generated modules, each launched as unsloth's own host code launches it (the autograd Functions' forward and
# the helpers they call: grid, strides, constexpr flags, BLOCK_SIZE, num_warps of unsloth's calculate_settings), against
# a float64 PyTorch reference of the kernel's math written here. Every output the kernel writes (the saved statistics
# r, mu and logsumexp too) goes into a loss with random fp64 weights; the outputs and the input gradients are
# compared, max abs error over max(1, max|ref|) (2e-5 fp32, 6e-2 bf16, 2e-2 fp16).
# Usage: python3 tests/gpu/real/unsloth_kernels.py [MODULES_DIR] [--only NAME] (default scratch/unsloth), where
# MODULES_DIR holds unsloth_NAME_op.py for each kernel _NAME (layernorm_forward: unsloth_layernorm_forward_op.py),
# written from a checkout of unsloth at SRC (`git archive HEAD unsloth/kernels | tar -x -C SRC`) by
#   tgrad SRC/unsloth/kernels/rms_layernorm.py -I SRC --kernel _rms_layernorm_forward --wrt X,W --emit torch \
#         -o DIR/unsloth_rms_layernorm_forward_op.py
#   tgrad SRC/unsloth/kernels/rms_layernorm.py -I SRC --kernel _gemma_rms_layernorm_forward --wrt X,W --emit torch \
#         -o DIR/unsloth_gemma_rms_layernorm_forward_op.py
#   tgrad SRC/unsloth/kernels/layernorm.py -I SRC --kernel layernorm_forward --wrt X,W,b --emit torch \
#         -o DIR/unsloth_layernorm_forward_op.py
#   tgrad SRC/unsloth/kernels/swiglu.py -I SRC --kernel _fg_kernel --wrt e,g --emit torch -o DIR/unsloth_fg_kernel_op.py
#   tgrad SRC/unsloth/kernels/geglu.py -I SRC --kernel _exact_forward_kernel --wrt e,g --emit torch \
#         -o DIR/unsloth_exact_forward_kernel_op.py
#   tgrad SRC/unsloth/kernels/geglu.py -I SRC --kernel _approx_forward_kernel --wrt e,g --emit torch \
#         -o DIR/unsloth_approx_forward_kernel_op.py
#   tgrad SRC/unsloth/kernels/rope_embedding.py -I SRC --kernel _rope_embedding_QK --wrt Q,K,cos,sin --emit torch \
#         -o DIR/unsloth_rope_embedding_QK_op.py
#   tgrad SRC/unsloth/kernels/cross_entropy_loss.py -I SRC --kernel _cross_entropy_forward --wrt logits_ptr \
#         --emit torch -o DIR/unsloth_cross_entropy_forward_op.py
#   tgrad SRC/unsloth/kernels/cross_entropy_loss.py -I SRC --kernel _chunked_cross_entropy_forward --wrt logits_ptr \
#         --emit torch -o DIR/unsloth_chunked_cross_entropy_forward_op.py
# (no -D: every flag the hosts pass, LONG_INDEXING, BACKWARD_PASS, HAS_ROPE_INDICES, DO_SOFTCAPPING, DO_LOGIT_SCALING,
# is a constexpr tgrad specializes or branches on itself). cos and sin get gradients here though unsloth's Functions
# return None for them: they are float pointers the kernel loads, and their gradient is a check of its own.
#   tgrad SRC/unsloth/kernels/rope_embedding.py -I SRC --kernel _rope_embedding --wrt Q,cos,sin --emit torch \
#         -o DIR/unsloth_rope_embedding_op.py
# (_rope_embedding, the path without position ids, updates Q in place in a loop over a group of heads, head k at
# columns k * head_dim + [0, head_dim / 2) and half a head later: tgrad refused it until 2026-11-27, when it learned
# that such halves under a lane mask are each iteration's own; checked on the CPU interpreter then, and here on
# 2026-11-27 (twelfth session): 48 of 48 on an H200.)
# The modules are imported on their own, as a user imports them: tgrad binds the helpers the kernels read from
# unsloth's utils (triton_tanh = libdevice.tanh, triton_cast) and drops the kernel files' `from .utils import ...`.
# Each kernel runs in a process of its own (compiles in parallel; one crash hides nothing else). --only K runs one;
# UNSLOTH_JOBS processes at a time (default: all), UNSLOTH_TIMEOUT seconds for the whole run (default 400).
# The last line says `N of M pass`, M the checks (a kernel whose process died counts one failed check).
# UNSLOTH_SELFTEST=1 checks the script itself on the CPU: each launch replaced by an emulation of the kernel written
# from its Triton code line by line (its loads' casts, the stores' dtypes, the -100 and chunk logic), in the case's
# dtypes, which must meet the fp64 reference (outputs and, through autograd, gradients) within the same tolerances.
import importlib
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

ARGS = [a for a in sys.argv[1:]]
ONLY = None
if "--only" in ARGS:
    i = ARGS.index("--only")
    ONLY = ARGS[i + 1]
    del ARGS[i:i + 2]
FOLDER = ARGS[0] if ARGS else "scratch/unsloth"
SELFTEST = os.environ.get("UNSLOTH_SELFTEST") == "1"

import torch

DEV = "cpu" if SELFTEST else "cuda"
f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
TOL = {f32: 2e-5, bf16: 6e-2, f16: 2e-2}
FAILS = 0
CHECKS = 0
SKIPS = 0

MAX_FUSED_SIZE = 65536  # unsloth.kernels.utils


def next_pow2(n):
    return 1 << (n - 1).bit_length()


def calculate_settings(n):
    # unsloth.kernels.utils.calculate_settings
    block = next_pow2(n)
    if block > MAX_FUSED_SIZE:
        raise RuntimeError(f"n = {n} exceeds the maximum CUDA blocksize = {MAX_FUSED_SIZE}")
    nw = 4
    if block >= 32768:
        nw = 32
    elif block >= 8192:
        nw = 16
    elif block >= 2048:
        nw = 8
    return block, nw


# swiglu.py / geglu.py module constants
ELEMENTWISE_BLOCK = 1024
INT32_SAFETY_BUFFER = 2 ** 31 - ELEMENTWISE_BLOCK * 4


def rnd(*shape, dtype, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device=DEV) * scale + shift).to(dtype).requires_grad_()


def dname(dtype):
    return str(dtype)[6:]


class _RawOK(Exception):
    pass


class _Probe:
    """The kernel as unsloth launches it (the plain Triton kernel, no tgrad): tells whether a failing case fails in
    unsloth's own kernel too."""

    def __init__(self, K):
        self.raw = getattr(K, "_autotuner", None) or K.jit

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.raw[grid](*args, **kwargs)
            raise _RawOK()
        return launch


def report(ok, text):
    global FAILS, CHECKS
    CHECKS += 1
    FAILS += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {text}", flush=True)


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[-1] if text else ''}"


def run_case(tag, K, leaves, launch, ref, emulate, tol, tols=None):
    """leaves: name -> leaf tensor (requires grad); launch(K) -> {output name: tensor} through the module;
    ref({name: fp64 leaf}) -> {output name: fp64 tensor} laid out as launch's outputs; emulate({name: leaf}) -> the
    same as launch's, computed on the CPU as the kernel's code computes it (UNSLOTH_SELFTEST)."""
    global SKIPS
    tols = tols or {}
    try:
        if SELFTEST:
            outs = emulate(dict(leaves))
        else:
            outs = launch(K)
    except Exception as e:
        if SELFTEST:
            raise
        try:
            launch(_Probe(K))
        except _RawOK:
            pass
        except Exception as e2:
            SKIPS += 1
            print(f"skip {tag}: unsloth's own kernel fails here too: {first_line(e2)}", flush=True)
            return
        report(False, f"{tag}: {first_line(e)} (unsloth's kernel itself runs)")
        traceback.print_exc(limit=3)
        return
    try:
        gen = torch.Generator(device=DEV).manual_seed(1234)
        weights = {n: torch.randn(o.shape, dtype=torch.float64, device=DEV, generator=gen) for n, o in outs.items()}
        sum((o.double() * weights[n]).sum() for n, o in outs.items()).backward()
        ref_leaves = {n: t.detach().double().requires_grad_() for n, t in leaves.items()}
        want = ref(ref_leaves)
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
            ok = err <= t  # a NaN fails
            report(ok, f"{tag} {name}: {err:.2e}" + (f" (tol {t:g})" if t != tol else ""))
    except Exception as e:
        report(False, f"{tag}: {first_line(e)}")
        traceback.print_exc(limit=4)


def rows2d(t, n):
    return t.reshape(-1, n)


# --------------------------------------------------------------------------------------------------- rms_layernorm.py
def rms_ref(X, W, eps, gemma):
    # _rms_layernorm_forward: Y = X * rsqrt(mean(X^2) + eps) * W; _gemma_rms_layernorm_forward: ... * (1 + W);
    # r = rsqrt(mean(X^2) + eps) per row
    r = torch.rsqrt((X * X).mean(-1, keepdim=True) + eps)
    return X * r * ((1 + W) if gemma else W), r[..., 0].reshape(-1)


def rms_emulate(X, W, eps, gemma):
    n = X.shape[-1]
    x = X.reshape(-1, n).float()
    inv = torch.rsqrt((x * x).sum(-1, keepdim=True) / n + eps)
    normed = x * inv
    if gemma:  # W_row .to(tl.float32); output = normed * (W_row + 1.0), all in fp32
        y = normed * (W.float() + 1.0)
    else:  # W_row in its own dtype; normed = normed.to(W_row.dtype); output = normed * W_row
        y = normed.to(W.dtype) * W
    return y.to(X.dtype).view(X.shape), inv[:, 0]


def rms_cases():
    # Fast_RMS_Layernorm.forward: X.reshape(-1, dim), Y empty like X, r fp32 [n_rows], grid (n_rows,),
    # BLOCK_SIZE, num_warps = calculate_settings(n_cols); W is the module's weight (1-D, stride 1)
    eps = 1e-6
    combos = [(f32, f32), (bf16, bf16), (f16, f16), (f32, bf16)]  # (X dtype, W dtype)
    shapes = ((37, 300), (2, 3, 1000), (5, 4096), (3, 5000))
    for xd, wd in combos:
        for shape in (shapes if xd == wd and xd != f16 else shapes[:2]):
            yield xd, wd, shape, eps


def t_rms(K, gemma):
    for xd, wd, shape, eps in rms_cases():
        n = shape[-1]
        X = rnd(*shape, dtype=xd)
        # llama's weight about 1; gemma's is the offset from 1, about 0
        W = rnd(n, dtype=wd, scale=0.5, shift=0.0 if gemma else 1.0)

        def launch(K, X=X, W=W, shape=shape, n=n, eps=eps):
            X2 = rows2d(X, n)
            n_rows = X2.shape[0]
            Y = torch.empty((n_rows, n), dtype=X.dtype, device=X.device)
            r = torch.empty(n_rows, dtype=torch.float32, device=X.device)
            BLOCK, nw = calculate_settings(n)
            o = K[(n_rows,)](Y, Y.stride(0), X2, X2.stride(0), W, W.stride(0), r, r.stride(0), n, eps,
                             BLOCK_SIZE=BLOCK, num_warps=nw)
            return {"Y": o.Y.view(shape), "r": o.r}

        def ref(x, eps=eps):
            y, r = rms_ref(x["X"], x["W"], eps, gemma)
            return {"Y": y, "r": r}

        def emulate(x, eps=eps):
            y, r = rms_emulate(x["X"], x["W"], eps, gemma)
            return {"Y": y, "r": r}

        run_case(f"X {dname(xd)} W {dname(wd)} shape={shape} eps={eps}", K, {"X": X, "W": W}, launch, ref, emulate,
                 TOL[xd] if wd == xd else max(TOL[xd], TOL[wd]))


def t_rms_layernorm_forward(K):
    t_rms(K, gemma=False)


def t_gemma_rms_layernorm_forward(K):
    t_rms(K, gemma=True)


# ------------------------------------------------------------------------------------------------------- layernorm.py
def t_layernorm_forward(K):
    # Fast_Layernorm.forward: X.view(-1, dim), Y like X, r and mu fp32 [n_rows] (the kernel steps them by row_idx),
    # grid (n_rows,), BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    eps = 1e-5
    cases = [(d, d, s) for d in (f32, bf16) for s in ((37, 300), (2, 3, 1000), (4, 4096), (3, 5000))]
    cases += [(f16, f16, (37, 300)), (f16, f16, (2, 3, 1000)), (bf16, f32, (37, 300)), (bf16, f32, (4, 4096))]
    for xd, wd, shape in cases:
        n = shape[-1]
        X = rnd(*shape, dtype=xd, shift=0.5)
        W = rnd(n, dtype=wd, scale=0.5, shift=1.0)
        B = rnd(n, dtype=wd, scale=0.5)

        def launch(K, X=X, W=W, B=B, shape=shape, n=n):
            X2 = rows2d(X, n)
            n_rows = X2.shape[0]
            Y = torch.empty((n_rows, n), dtype=X.dtype, device=X.device)
            r = torch.empty(n_rows, dtype=torch.float32, device=X.device)
            mu = torch.empty(n_rows, dtype=torch.float32, device=X.device)
            BLOCK, nw = calculate_settings(n)
            o = K[(n_rows,)](Y, Y.stride(0), X2, X2.stride(0), W, B, r, mu, n, eps, BLOCK_SIZE=BLOCK, num_warps=nw)
            return {"Y": o.Y.view(shape), "r": o.r, "mu": o.mu}

        def ref(x):
            X = x["X"]
            mean = X.mean(-1, keepdim=True)
            var = ((X - mean) ** 2).mean(-1, keepdim=True)
            r = torch.rsqrt(var + eps)
            return {"Y": (X - mean) * r * x["W"] + x["b"], "r": r.reshape(-1), "mu": mean.reshape(-1)}

        def emulate(x, n=n):
            X = x["X"]
            xf = X.reshape(-1, n).float()
            mean = xf.sum(-1, keepdim=True) / n
            XX = xf - mean
            inv = torch.rsqrt((XX * XX).sum(-1, keepdim=True) / n + eps)
            y = XX * inv * x["W"].float() + x["b"].float()
            return {"Y": y.to(X.dtype).view(X.shape), "r": inv[:, 0], "mu": mean[:, 0]}

        run_case(f"X {dname(xd)} W,b {dname(wd)} shape={shape}", K, {"X": X, "W": W, "b": B}, launch, ref, emulate,
                 max(TOL[xd], TOL[wd]))


# ------------------------------------------------------------------------------------------- swiglu.py and geglu.py
def elementwise_cases():
    # (dtype, shape, LONG_INDEXING forced or None for the host's choice)
    cases = [(d, s, None) for d in (f32, bf16) for s in ((2, 5, 300), (3, 7, 1000), (1, 1, 1023), (2, 3, 11008))]
    cases += [(f16, (2, 5, 300), None), (f16, (3, 7, 1000), None)]
    # LONG_INDEXING=1 is what the host passes past 2**31 - 4096 elements only (8 GiB of bf16 for e, g and h alone);
    # here the same kernel with the flag forced on small shapes, for the other specialized backward
    cases += [(f32, (2, 5, 300), 1), (bf16, (3, 7, 1000), 1), (f16, (1, 1, 1023), 1)]
    return cases


def t_elementwise(K, f_ref, f_emulate):
    # swiglu_fg_kernel / geglu_*_forward_kernel: e, g [batch, seq, hd], h = torch.empty like e, n_elements = e.numel(),
    # grid = lambda meta: (cdiv(n_elements, meta["BLOCK_SIZE"]),), BLOCK_SIZE = 1024 (the module's constant),
    # LONG_INDEXING = 0 if n_elements <= INT32_SAFETY_BUFFER else 1, no num_warps
    for dtype, shape, forced in elementwise_cases():
        e = rnd(*shape, dtype=dtype, scale=2.0)
        g = rnd(*shape, dtype=dtype)

        def launch(K, e=e, g=g, shape=shape, forced=forced):
            n_elements = e.numel()
            h = torch.empty(shape, dtype=e.dtype, device=e.device)
            long_indexing = (0 if n_elements <= INT32_SAFETY_BUFFER else 1) if forced is None else forced
            o = K[lambda meta: (triton_cdiv(n_elements, meta["BLOCK_SIZE"]),)](
                e, g, h, n_elements, BLOCK_SIZE=ELEMENTWISE_BLOCK, LONG_INDEXING=long_indexing)
            return {"h": o.h}

        def emulate(x):
            e, g = x["e"], x["g"]
            f = f_emulate(e.float()).to(g.dtype)  # f_row.to(g_row.dtype); h_row = f_row * g_row
            return {"h": (f * g).to(e.dtype)}

        flag = "" if forced is None else f" LONG_INDEXING={forced} (forced)"
        run_case(f"{dname(dtype)} shape={shape}{flag}", K, {"e": e, "g": g}, launch,
                 lambda x: {"h": f_ref(x["e"]) * x["g"]}, emulate, TOL[dtype])


def triton_cdiv(a, b):
    return (a + b - 1) // b


def silu(e):
    return e * torch.sigmoid(e)


def gelu_exact(e):
    return 0.5 * e * (1 + torch.erf(e / math.sqrt(2)))


def gelu_tanh(e):
    return 0.5 * e * (1 + torch.tanh(math.sqrt(2 / math.pi) * (e + 0.044715 * e ** 3)))


def t_fg_kernel(K):
    t_elementwise(K, silu, lambda e: e * torch.sigmoid(e))


def t_exact_forward_kernel(K):
    t_elementwise(K, gelu_exact, lambda e: 0.5 * e * (torch.erf(e * (1 / math.sqrt(2.0))) + 1.0))


def t_approx_forward_kernel(K):
    s = 0.7978845608028654
    t_elementwise(K, gelu_tanh, lambda e: 0.5 * e * (torch.tanh(s * e * (1.0 + 0.044715 * e * e)) + 1.0))


# -------------------------------------------------------------------------------------------------- rope_embedding.py
def t_rope_embedding_QK(K):
    # Fast_RoPE_Embedding_QK.forward (fast_rope_embedding with position ids, as the llama, mistral, qwen3, gemma2...
    # attentions call it): Q [bs, n_heads_Q, seq, hd] the transpose of a [bs, seq, heads, hd] projection, cloned
    # (strides kept) when not contiguous; cos, sin [rows, hd] (squeezed); rope_ptr the position ids as int32, or
    # cos.new_empty(1, int32) without them; grid (bs * seq, n_heads_Q); BLOCK_SIZE, num_warps =
    # calculate_settings(head_dim). Its backward launches the same kernel with BACKWARD_PASS=True: run here too.
    # cos and sin are in Q's dtype (llama.py's .to(Q.dtype)) or fp32 (gemma2's rotary cache).
    shapes = ((2, 6, 2, 5, 96), (1, 4, 4, 7, 128), (3, 5, 1, 3, 80), (2, 8, 8, 33, 64))  # bs, n_qh, n_kh, seq, hd
    cases = []
    for q_dtype, c_dtype in ((f32, f32), (bf16, bf16), (f16, f16), (bf16, f32)):
        for i, shape in enumerate(shapes):
            for has_idx, bwd in ((True, False), (True, True), (False, False)):
                if q_dtype != c_dtype or q_dtype == f16:
                    if (i + has_idx + bwd) % 2:  # half of the rest
                        continue
                cases.append((q_dtype, c_dtype, shape, has_idx, bwd, i % 2 == 0))
    for q_dtype, c_dtype, (bs, n_qh, n_kh, sl, hd), has_idx, bwd, transposed in cases:
        rows = sl + 3  # the rotary cache is longer than the sequence
        if transposed:  # the attention's Q.view(bs, seq, heads, hd).transpose(1, 2)
            q = torch.randn(bs, sl, n_qh, hd, device=DEV).transpose(1, 2).to(q_dtype).requires_grad_()
            k = torch.randn(bs, sl, n_kh, hd, device=DEV).transpose(1, 2).to(q_dtype).requires_grad_()
        else:
            q = rnd(bs, n_qh, sl, hd, dtype=q_dtype)
            k = rnd(bs, n_kh, sl, hd, dtype=q_dtype)
        cos = rnd(rows, hd, dtype=c_dtype)
        sin = rnd(rows, hd, dtype=c_dtype)
        # position ids, repeats included (packed sequences restart them), as int32 [bs * seq]
        pos = torch.randint(0, rows, (bs, sl), device=DEV) if has_idx else None

        def launch(K, q=q, k=k, cos=cos, sin=sin, pos=pos, bs=bs, sl=sl, n_qh=n_qh, n_kh=n_kh, hd=hd, bwd=bwd):
            Q_out = q.clone() if not q.is_contiguous() else q
            K_out = k.clone() if not k.is_contiguous() else k
            rope_ptr = pos.reshape(-1).to(dtype=torch.int32) if pos is not None else cos.new_empty(1, dtype=torch.int32)
            BLOCK, nw = calculate_settings(hd)
            o = K[(bs * sl, n_qh)](Q_out, Q_out.stride(0), Q_out.stride(1), Q_out.stride(2), K_out, K_out.stride(0),
                                   K_out.stride(1), K_out.stride(2), cos, cos.stride(0), sin, sin.stride(0), rope_ptr,
                                   sl, head_dim=hd, n_heads_K=n_kh, BACKWARD_PASS=bwd, HAS_ROPE_INDICES=pos is not None,
                                   BLOCK_SIZE=BLOCK, num_warps=nw)
            return {"Q": o.Q, "K": o.K}

        def tables(x, pos=pos, bs=bs, sl=sl, hd=hd, bwd=bwd):
            # rot_position = rope_embedding_indices[row] or row % seqlen (row = b * seq + s); the first hd/2 columns
            h = hd // 2
            idx = pos if pos is not None else torch.arange(sl, device=DEV).expand(bs, sl)
            c = x["cos"][idx][..., :h].unsqueeze(1)  # [bs, 1, seq, h]
            s = x["sin"][idx][..., :h].unsqueeze(1)
            return c, (-s if bwd else s), h

        def ref(x):
            c, s, h = tables(x)
            out = {}
            for name in ("Q", "K"):
                t = x[name.lower()]
                t0, t1 = t[..., :h], t[..., h:]
                out[name] = torch.cat((t0 * c - t1 * s, t1 * c + t0 * s), -1)
            return out

        def emulate(x):
            # sin1 = -sin1 in the table's dtype; q0 * cos1 - q1 * sin1 in the promoted dtype, stored in Q's dtype
            c, s, h = tables(x)
            out = {}
            for name in ("Q", "K"):
                t = x[name.lower()]
                t0, t1 = t[..., :h], t[..., h:]
                out[name] = torch.cat((t0 * c - t1 * s, t1 * c + t0 * s), -1).to(t.dtype)
            return out

        run_case(f"Q,K {dname(q_dtype)} cos,sin {dname(c_dtype)} bs={bs} n_heads_Q={n_qh} n_heads_K={n_kh} seq={sl} "
                 f"hd={hd} {'transposed' if transposed else 'contiguous'} HAS_ROPE_INDICES={has_idx} "
                 f"BACKWARD_PASS={bwd}", K, {"q": q, "k": k, "cos": cos, "sin": sin}, launch, ref, emulate,
                 max(TOL[q_dtype], TOL[c_dtype]))


def t_rope_embedding(K):
    # Fast_RoPE_Embedding.forward: Q [batch, seq, n_heads, hd] reshaped to [batch * seq, n_heads * hd] (a copy where
    # the reshape cannot view), cos, sin [seq or more, hd / 2] (squeezed); grid (rows, cdiv(n_heads, 4)) (a group
    # of 4 heads per program, the last group smaller); BLOCK_SIZE, num_warps = calculate_settings(hd // 2).
    # Its backward launches the same kernel with BACKWARD_PASS=True (sin negated): run here too.
    for dtype in (f32, bf16):
        for batch, sl, n_heads, hd in ((2, 5, 6, 64), (1, 7, 9, 128), (3, 4, 4, 80)):
            for bwd in (False, True):
                q = rnd(batch, sl, n_heads, hd, dtype=dtype)
                cos = rnd(sl + 2, hd // 2, dtype=dtype)
                sin = rnd(sl + 2, hd // 2, dtype=dtype)

                def launch(K, q=q, cos=cos, sin=sin, batch=batch, sl=sl, n_heads=n_heads, hd=hd, bwd=bwd):
                    Q = q.reshape(batch * sl, n_heads * hd)
                    BLOCK, nw = calculate_settings(hd // 2)
                    o = K[(Q.shape[0], (n_heads + 3) // 4)](Q, Q.stride(0), cos, cos.stride(0), sin, sin.stride(0), sl,
                                                             hd, n_heads, BACKWARD_PASS=bwd, BLOCK_SIZE=BLOCK,
                                                             num_warps=nw)
                    return {"Q": o.Q}

                def ref(x, batch=batch, sl=sl, n_heads=n_heads, hd=hd, bwd=bwd, out_dtype=None):
                    h = hd // 2
                    rows = torch.arange(batch * sl, device=DEV) % sl  # the row's position: row % seqlen
                    c = x["cos"][rows][:, None, :]
                    s = x["sin"][rows][:, None, :]
                    s = -s if bwd else s
                    t = x["q"].reshape(batch * sl, n_heads, hd)
                    t0, t1 = t[..., :h], t[..., h:]
                    out = torch.cat((t0 * c - t1 * s, t1 * c + t0 * s), -1).reshape(batch * sl, n_heads * hd)
                    return {"Q": out if out_dtype is None else out.to(out_dtype)}

                run_case(f"Q,cos,sin {dname(dtype)} batch={batch} seq={sl} n_heads={n_heads} hd={hd} "
                         f"BACKWARD_PASS={bwd}", K, {"q": q, "cos": cos, "sin": sin}, launch, ref,
                         lambda x, ref=ref, dtype=dtype: ref(x, out_dtype=dtype), TOL[dtype])


# ---------------------------------------------------------------------------------------------- cross_entropy_loss.py
# The flags Fast_CrossEntropyLoss.forward passes: DO_SOFTCAPPING = logit_softcapping != 0, SOFTCAP = logit_softcapping
# (0 when off), DO_LOGIT_SCALING = logit_scaling != 0, LOGIT_SCALE = logit_scaling. Gemma 2's final_logit_softcapping
# is 30.0, Cohere's logit_scale 0.0625, Granite's 1 / logits_scaling; both at once is not a model's but the kernel's.
CE_FLAGS = ((0, 0), (30.0, 0), (0, 0.0625), (10.0, 0.5))


def ce_transform(z, softcap, scale, tanh=torch.tanh):
    if scale != 0:  # logits = LOGIT_SCALE * logits
        z = scale * z
    if softcap != 0:  # logits = SOFTCAP * tanh(logits / SOFTCAP)
        z = softcap * tanh(z / softcap)
    return z


def ce_labels(n_rows, V):
    # int64 as the model's shift_labels; -100 (ignored) on two rows, the first and last vocabulary entries on others
    labels = torch.randint(0, V, (n_rows,), device=DEV)
    labels[1] = -100
    labels[-1] = -100
    labels[0] = V - 1
    labels[2] = 0
    return labels


def ce_ref_loss_at_label(z, labels):
    # z[row, label] where label != -100, else 0 (the loss the kernel stores there is the constant 0.0)
    valid = labels != -100
    picked = z.gather(1, labels.clamp_min(0).unsqueeze(1))[:, 0]
    return torch.where(valid, picked, torch.zeros_like(picked)), valid


def logits_for(n_rows, V, dtype, softcap):
    # spread enough that the softcap's tanh bends (t * tanh(x / t) differs from x by x^3 / (3 t^2))
    return rnd(n_rows, V, dtype=dtype, scale=12.0 if softcap else 4.0)


def t_cross_entropy_forward(K):
    # Fast_CrossEntropyLoss.forward, n_chunks == 1 (vocab <= 65536): losses and logsumexp fp32 [n_rows], grid
    # (n_rows,), BLOCK_SIZE, num_warps = calculate_settings(vocab_size) (halved on CDNA only)
    cases = [(d, V, fl) for d in (f32, bf16) for V in (1000, 32003) for fl in CE_FLAGS]
    cases += [(f16, 1000, fl) for fl in CE_FLAGS] + [(d, 65536, (0, 0)) for d in (f32, bf16)]
    for dtype, V, (softcap, scale) in cases:
        n_rows = 7
        logits = logits_for(n_rows, V, dtype, softcap)
        labels = ce_labels(n_rows, V)

        def launch(K, logits=logits, labels=labels, V=V, softcap=softcap, scale=scale):
            n = logits.shape[0]
            losses = torch.empty(n, dtype=torch.float32, device=logits.device)
            lse = torch.empty(n, dtype=torch.float32, device=logits.device)
            BLOCK, nw = calculate_settings(V)
            o = K[(n,)](logits, logits.stride(0), losses, lse, labels, VOCAB_SIZE=V, BLOCK_SIZE=BLOCK,
                        DO_SOFTCAPPING=bool(softcap != 0), SOFTCAP=softcap, DO_LOGIT_SCALING=bool(scale != 0),
                        LOGIT_SCALE=scale, num_warps=nw)
            return {"loss": o.loss_ptr, "logsumexp": o.logsumexp_ptr}

        def ref(x, labels=labels, softcap=softcap, scale=scale):
            z = ce_transform(x["logits"], softcap, scale)
            lse = torch.logsumexp(z, -1)
            picked, valid = ce_ref_loss_at_label(z, labels)
            return {"loss": torch.where(valid, lse - picked, torch.zeros_like(lse)), "logsumexp": lse}

        def emulate(x, labels=labels, softcap=softcap, scale=scale):
            z = ce_transform(x["logits"].float(), softcap, scale)
            c = z.max(-1, keepdim=True).values.detach()
            lse = c[:, 0] + torch.log(torch.exp(z - c).sum(-1))
            loss = []
            for row in range(z.shape[0]):
                label = int(labels[row])
                if label != -100:
                    xl = ce_transform(x["logits"][row, label].float(), softcap, scale)
                    loss.append(lse[row] - xl)
                else:
                    loss.append(torch.zeros((), dtype=torch.float32))
            return {"loss": torch.stack(loss), "logsumexp": lse}

        run_case(f"{dname(dtype)} vocab={V} rows={n_rows} SOFTCAP={softcap} LOGIT_SCALE={scale}", K,
                 {"logits": logits}, launch, ref, emulate, TOL[dtype])


def t_chunked_cross_entropy_forward(K):
    # Fast_CrossEntropyLoss.forward, n_chunks > 1 (vocab > 65536, Gemma's 256000): n_chunks = cdiv(vocab, 65536),
    # logsumexp fp32 [n_rows, n_chunks], losses fp32 [n_rows]; grid (n_rows, n_chunks), BLOCK_SIZE = MAX_FUSED_SIZE,
    # num_warps 32 (16 on CDNA). The kernel writes each chunk's logsumexp and, from chunk 0, loss = -x (the
    # transformed label logit) or 0.0 for -100; the host then adds logsumexp over the chunks (torch), not checked here.
    cases = [(d, 256000, fl) for d in (f32, bf16) for fl in CE_FLAGS]
    cases += [(d, 66000, fl) for d in (f32, bf16) for fl in (CE_FLAGS[0], CE_FLAGS[3])]
    cases += [(f16, 150001, fl) for fl in CE_FLAGS[:2]]
    for dtype, V, (softcap, scale) in cases:
        n_rows = 5
        logits = logits_for(n_rows, V, dtype, softcap)
        labels = ce_labels(n_rows, V)
        labels[3] = 65536 + 7  # a label in the second chunk
        n_chunks = triton_cdiv(V, MAX_FUSED_SIZE)

        def launch(K, logits=logits, labels=labels, V=V, softcap=softcap, scale=scale, n_chunks=n_chunks):
            n = logits.shape[0]
            losses = torch.empty(n, dtype=torch.float32, device=logits.device)
            lse = torch.empty((n, n_chunks), dtype=torch.float32, device=logits.device)
            o = K[(n, n_chunks)](logits, logits.stride(0), losses, lse, labels, VOCAB_SIZE=V, N_CHUNKS=n_chunks,
                                 BLOCK_SIZE=MAX_FUSED_SIZE, DO_SOFTCAPPING=bool(softcap != 0), SOFTCAP=softcap,
                                 DO_LOGIT_SCALING=bool(scale != 0), LOGIT_SCALE=scale, num_warps=32)
            return {"loss": o.loss_ptr, "logsumexp": o.logsumexp_ptr}

        def ref(x, labels=labels, softcap=softcap, scale=scale, n_chunks=n_chunks):
            z = ce_transform(x["logits"], softcap, scale)
            lse = torch.stack([torch.logsumexp(z[:, c * MAX_FUSED_SIZE:(c + 1) * MAX_FUSED_SIZE], -1)
                               for c in range(n_chunks)], 1)
            picked, _ = ce_ref_loss_at_label(z, labels)
            return {"loss": -picked, "logsumexp": lse}

        def emulate(x, labels=labels, softcap=softcap, scale=scale, n_chunks=n_chunks, V=V):
            lse = []
            for c in range(n_chunks):
                z = ce_transform(x["logits"][:, c * MAX_FUSED_SIZE:min(V, (c + 1) * MAX_FUSED_SIZE)].float(), softcap,
                                 scale)
                m = z.max(-1, keepdim=True).values.detach()
                lse.append(m[:, 0] + torch.log(torch.exp(z - m).sum(-1)))
            loss = []
            for row in range(x["logits"].shape[0]):
                label = int(labels[row])
                if label != -100:
                    loss.append(-1.0 * ce_transform(x["logits"][row, label].float(), softcap, scale))
                else:
                    loss.append(torch.zeros((), dtype=torch.float32))
            return {"loss": torch.stack(loss), "logsumexp": torch.stack(lse, 1)}

        run_case(f"{dname(dtype)} vocab={V} chunks={n_chunks} rows={n_rows} SOFTCAP={softcap} LOGIT_SCALE={scale}", K,
                 {"logits": logits}, launch, ref, emulate, TOL[dtype])


# name -> (the jit function's name in the module, the test); the module is unsloth_NAME_op.py
KERNELS = {
    "rms_layernorm_forward": ("_rms_layernorm_forward", t_rms_layernorm_forward),
    "gemma_rms_layernorm_forward": ("_gemma_rms_layernorm_forward", t_gemma_rms_layernorm_forward),
    "layernorm_forward": ("layernorm_forward", t_layernorm_forward),
    "fg_kernel": ("_fg_kernel", t_fg_kernel),
    "exact_forward_kernel": ("_exact_forward_kernel", t_exact_forward_kernel),
    "approx_forward_kernel": ("_approx_forward_kernel", t_approx_forward_kernel),
    "rope_embedding_QK": ("_rope_embedding_QK", t_rope_embedding_QK),
    "rope_embedding": ("_rope_embedding", t_rope_embedding),
    "cross_entropy_forward": ("_cross_entropy_forward", t_cross_entropy_forward),
    "chunked_cross_entropy_forward": ("_chunked_cross_entropy_forward", t_chunked_cross_entropy_forward),
}
REFUSED = {}

def load_module(name):
    """unsloth_NAME_op.py from FOLDER, imported on its own: a generated module needs nothing of unsloth (tgrad
    binds the helpers the kernels read, such as triton_tanh = libdevice.tanh, and drops the kernel files'
    `from .utils import ...`)."""
    spec = importlib.util.spec_from_file_location(f"unsloth_{name}_op", os.path.join(FOLDER, f"unsloth_{name}_op.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_one(name):
    torch.manual_seed(0)
    K = None
    attr, test = KERNELS[name]
    if not SELFTEST:
        K = getattr(load_module(name), attr)
    test(K)
    print(f"{name}: {CHECKS} checks, {FAILS} failures, {SKIPS} skipped", flush=True)
    print(f"{FAILS} failures", flush=True)


def run_all():
    # One process per kernel, several at a time: Triton compiles on the CPU, one kernel at a time per process.
    jobs = int(os.environ.get("UNSLOTH_JOBS", str(len(KERNELS))))
    limit = float(os.environ.get("UNSLOTH_TIMEOUT", "400"))
    names = list(KERNELS)
    procs, results, pending = {}, {}, list(names)
    start = time.time()
    while pending or procs:
        while pending and len(procs) < jobs:
            name = pending.pop(0)
            # the child's output goes to a file, not a pipe: a pipe nobody reads until the child ends would stop a
            # child that prints more than the pipe holds (64 KiB) until the time limit
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
    print("\nkernel                                  checks  failures  skipped  seconds")
    for name in names:
        rc, out, secs = results[name]
        last = [l for l in out.splitlines() if l.startswith(f"{name}: ")]
        if rc == 0 and last:
            parts = last[-1].split()
            checks, fails, skips = int(parts[1]), int(parts[3]), int(parts[5])
        else:
            checks, fails, skips = 1, 1, 0
            print(f"FAIL {name}: its process ended with {rc} (killed at the time limit, or crashed) before finishing")
        total_checks += checks
        total_fails += fails
        print(f"{name:40s} {checks:6d} {fails:9d} {skips:8d} {secs:8.0f}")
    for name, why in REFUSED.items():
        print(f"{name:40s} not run: {why}")
    print(f"{total_checks - total_fails} of {total_checks} pass")


if __name__ == "__main__":
    if ONLY:
        run_one(ONLY)
    else:
        run_all()
