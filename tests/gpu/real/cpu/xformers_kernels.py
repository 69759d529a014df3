# Gradient checks of tgrad's --emit torch modules for xformers' Triton forward kernels
# (facebookresearch/xformers @ ca6d2aa0, xformers/ops/_triton/*), CPU interpreter.
# Modules (mods/): generated from /tmp/xformers with
#   /tmp/tgrad-s14b xformers/ops/_triton/k_index_select_cat.py -I . --kernel index_select_cat_fwd_kernel --wrt source_ptr --emit torch -o .../xf_index_select_cat_fwd_kernel_op.py
#   /tmp/tgrad-s14b xformers/ops/_triton/k_scaled_index_add.py -I . --kernel scaled_index_add_fwd_kernel --wrt input_ptr,source_ptr,scaling_ptr --emit torch -o .../xf_scaled_index_add_fwd_kernel_op.py
# and, for the kernels tgrad refuses as written, from edited copies in variants/ (see each check):
#   /tmp/tgrad-s14b variants/rmsnorm_kernels_v.py -I /tmp/xformers --kernel _rms_norm_kernel --wrt x_ptr,w_ptr --emit torch -o mods/xfv__rms_norm_kernel_op.py
#   /tmp/tgrad-s14b variants/rope_padded_kernels_v.py -I /tmp/xformers --kernel _rope_padded_kernel --wrt xq,xk,xv --emit torch -o mods/xfv__rope_padded_kernel_op.py --arg 'seqpos=*int32' --arg 'first_seqpos=*int32' --arg 'xq=*fp32' --arg 'xk=*fp32' --arg 'xv=*fp32' --arg 'out_q=*fp32' --arg 'cache_k=*fp32' --arg 'cache_v=*fp32'
# Run: cd /work/main && PYTHONPATH=/tmp/torchsite TRITON_INTERPRET=1 python3 /tmp/wl2/run_shim.py tests/gpu/real/cpu/xformers_kernels.py
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FLA = HERE
exec(open(os.path.join(FLA, "interp_mask_shim.py")).read())
exec(open(os.path.join(FLA, "interp_poison_masked_atomics.py")).read())

import torch
import triton
import triton.language as tl
import triton.language.extra.libdevice as _libdevice

# The interpreter has no libdevice externs (create_extern_elementwise raises/returns None): the modules bind
# libdevice's rsqrt/pow at import, so point those names at the tl.math builtins the interpreter implements.
@triton.jit
def _interp_rsqrt(x):
    return tl.math.rsqrt(x)


@triton.jit
def _interp_pow(x, y):
    return tl.exp2(y * tl.log2(x))  # (x > 0 here: theta)


# The interpreter passes Python float arguments on as Python floats; compiled Triton makes them fp32 scalars
# (rope's `theta.to(tl.float32)` needs that).
import numpy as _np
import triton.runtime.interpreter as _interp_mod
_orig_cvt = _interp_mod._implicit_cvt


def _cvt_float(arg):
    if isinstance(arg, float):
        return tl.tensor(_interp_mod.TensorHandle(_np.array([arg], dtype=_np.float32), tl.float32), tl.float32)
    return _orig_cvt(arg)


_interp_mod._implicit_cvt = _cvt_float
_libdevice.rsqrt = _interp_rsqrt
_libdevice.pow = _interp_pow

torch.manual_seed(0)
TOL = 2e-5
results = []


def load(name):
    path = os.path.join(os.environ.get("MODS") or os.path.join(HERE, "mods"), name + ".py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def report(kernel, config, name, got, ref):
    if got is None or ref is None:
        ok = got is None and ref is None
        err = "missing" if not ok else 0.0
    else:
        got = got.detach().double()
        ref = ref.detach().double()
        if got.shape != ref.shape:
            ok, err = False, f"shape {tuple(got.shape)} vs {tuple(ref.shape)}"
        else:
            e = (got - ref).abs().max().item() if got.numel() else 0.0
            scale = max(1.0, ref.abs().max().item() if ref.numel() else 0.0)
            err = e / scale
            ok = err <= TOL  # (NaN fails)
    results.append(ok)
    print(f"{'ok' if ok else 'FAIL'}  {kernel}  [{config}]  {name}  err={err if isinstance(err, str) else f'{err:.3e}'}",
          flush=True)


def weights_like(t):
    return torch.randn(t.shape, dtype=torch.float64)


# ------------------------------------------------------------------ index_select_cat_fwd_kernel
def check_index_select_cat(mod):
    K = "index_select_cat_fwd_kernel"
    # _IndexSelectCat.forward: one flat output, one launch per (source, index) pair into a view of it.
    for cols_list, rows_list, nidx_list, idx_dtype, dup in [
        ((37,), (13,), (5,), torch.int64, False),
        ((600,), (9,), (4,), torch.int64, False),
        ((37, 600), (13, 9), (5, 4), torch.int64, False),
        ((45,), (11,), (7,), torch.int32, False),
        ((45,), (11,), (7,), torch.int64, True),  # repeated indices (not promised by xformers; a gather all the same)
    ]:
        sources = [torch.randn(r, c, dtype=torch.float32, requires_grad=True) for r, c in zip(rows_list, cols_list)]
        indices = []
        for r, n in zip(rows_list, nidx_list):
            if dup:
                indices.append(torch.randint(0, 3, (n,), dtype=idx_dtype))
            else:
                indices.append(torch.randperm(r)[:n].to(idx_dtype))
        outs = []
        for source, index in zip(sources, indices):
            num_rows, num_cols = source.shape
            num_indices = index.shape[0]
            assert num_indices < num_rows
            output = torch.empty([num_indices, num_cols], dtype=source.dtype)
            stride0, stride1 = source.stride(0), source.stride(1)

            def grid(meta):
                return (triton.cdiv(num_indices, meta["BLOCK_SIZE_INDEX"]),
                        triton.cdiv(num_cols, meta["BLOCK_SIZE_COL"]))

            res = mod.index_select_cat_fwd_kernel[grid](output, source, index, num_indices, num_cols, stride0,
                                                         stride1, BLOCK_SIZE_INDEX=1, BLOCK_SIZE_COL=512)
            outs.append(res.output_ptr.reshape(-1))
        out = torch.cat(outs)
        W = weights_like(out)
        (out.double() * W).sum().backward()
        src64 = [s.detach().double().requires_grad_(True) for s in sources]
        ref = torch.cat([s[i.long()].reshape(-1) for s, i in zip(src64, indices)])
        (ref * W).sum().backward()
        cfg = f"cols={cols_list} rows={rows_list} nidx={nidx_list} {str(idx_dtype)[6:]}{' dup' if dup else ''}"
        report(K, cfg, "output", out, ref)
        for k, (s, r) in enumerate(zip(sources, src64)):
            report(K, cfg, f"d source[{k}]", s.grad, r.grad)


# ------------------------------------------------------------------ scaled_index_add_fwd_kernel
def check_scaled_index_add(mod):
    K = "scaled_index_add_fwd_kernel"
    for B, Bi, M, D, has_scaling, alpha, idx_dtype in [
        (7, 4, 3, 37, True, 0.7, torch.int64),
        (7, 4, 3, 37, False, 0.7, torch.int64),
        (5, 5, 2, 600, True, -1.3, torch.int64),
        (5, 3, 2, 600, False, 1.0, torch.int32),
        (6, 2, 1, 129, True, 2.5, torch.int32),
    ]:
        x = torch.randn(B, M, D, dtype=torch.float32, requires_grad=True)
        source = torch.randn(Bi, M, D, dtype=torch.float32, requires_grad=True)
        scaling = torch.randn(D, dtype=torch.float32, requires_grad=True) if has_scaling else None
        index = torch.randperm(B)[:Bi].to(idx_dtype)  # "Indices in index are assumed to be unique"
        num_inp_indices, num_rows, num_cols = x.shape
        num_src_indices = source.shape[0]

        def grid(meta):
            return (triton.cdiv(num_src_indices, meta["BLOCK_SIZE_INDEX"]),
                    triton.cdiv(num_rows, meta["BLOCK_SIZE_ROW"]),
                    triton.cdiv(num_cols, meta["BLOCK_SIZE_COL"]))

        res = mod.scaled_index_add_fwd_kernel[grid](
            x, index, source, scaling, alpha, num_inp_indices, num_src_indices, num_rows, num_cols,
            x.stride(0), x.stride(1), x.stride(2),
            BLOCK_SIZE_INDEX=1, BLOCK_SIZE_ROW=1, BLOCK_SIZE_COL=512, HAS_SCALING=has_scaling)
        out = res.input_ptr
        W = weights_like(out)
        (out.double() * W).sum().backward()
        x64 = x.detach().double().requires_grad_(True)
        s64 = source.detach().double().requires_grad_(True)
        sc64 = scaling.detach().double().requires_grad_(True) if has_scaling else None
        src = s64 * sc64 if has_scaling else s64
        ref = torch.index_add(x64, 0, index.long(), src, alpha=alpha)
        (ref * W).sum().backward()
        cfg = f"B={B} Bi={Bi} M={M} D={D} HAS_SCALING={has_scaling} alpha={alpha} {str(idx_dtype)[6:]}"
        report(K, cfg, "input (out)", out, ref)
        report(K, cfg, "d input", x.grad, x64.grad)
        report(K, cfg, "d source", source.grad, s64.grad)
        if has_scaling:
            report(K, cfg, "d scaling", scaling.grad, sc64.grad)


# ------------------------------------------------------------------ _rms_norm_kernel (variant)
# tgrad refuses the original file (rsqrt = libdevice_find("rsqrt")); variants/rmsnorm_kernels_v.py differs only in
# `from triton.language.extra.libdevice import rsqrt`. Launched as xformers' _rms_norm_forward launches it.
def check_rms_norm(mod):
    K = "_rms_norm_kernel(variant)"
    for shape, with_w in [((3, 37), True), ((3, 37), False), ((2, 3, 300), True), ((2, 8200), True),
                          ((2, 8200), False), ((1, 5, 129), True)]:
        x = torch.randn(shape, dtype=torch.float32, requires_grad=True)
        w = torch.randn(shape[-1], dtype=torch.float32, requires_grad=True) if with_w else None
        eps = 1e-6
        out = torch.empty_like(x)
        x_arg = x.reshape(-1, x.shape[-1])
        M, N = x_arg.shape
        MAX_FUSED_SIZE = 65536 // x.element_size()
        BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
        BLOCK_SIZE = max(BLOCK_SIZE, 128)
        BLOCK_SIZE = min(BLOCK_SIZE, 8192)
        num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
        res = mod._rms_norm_kernel[(M,)](x_arg, out, w, eps, x_arg.stride(0), N, BLOCK_SIZE=BLOCK_SIZE,
                                         num_warps=num_warps, INCLUDE_WEIGHT=w is not None)
        h = res.h1_ptr
        W = weights_like(h)
        (h.double() * W).sum().backward()
        x64 = x.detach().double().requires_grad_(True)
        w64 = w.detach().double().requires_grad_(True) if with_w else None
        ref = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + eps)
        if with_w:
            ref = ref * w64
        (ref * W).sum().backward()
        cfg = f"shape={shape} INCLUDE_WEIGHT={with_w} BLOCK_SIZE={BLOCK_SIZE}"
        report(K, cfg, "h1 (out)", h, ref)
        report(K, cfg, "d x", x.grad, x64.grad)
        if with_w:
            report(K, cfg, "d w", w.grad, w64.grad)


# ------------------------------------------------------------------ _rope_padded_kernel (variant)
# tgrad refuses the original (tl.where on pointers; see the report). variants/rope_padded_kernels_v.py: libdevice pow
# imported, the pointer selection done by branches calling a @triton.jit helper holding the loop, `and` -> `&`;
# generated with --arg types for the pointers (seqpos/first_seqpos *int32). Launched as xformers' rope_padded launches it.
def rope_reference(x, seq_pos, theta, linear_scale, dyn, adjacents):
    # x: [Q, H, dim] float64; seq_pos: [Q] float64
    dim = x.shape[-1]
    k = torch.arange(dim // 2, dtype=torch.float64)
    freqs = theta ** (-(2.0 * k) / dim)
    if dyn is not None:
        old, scale, lo, hi = dyn
        lo_w, hi_w = old / lo, old / hi
        wav = 6.28318530718 / freqs
        freqs = torch.where(wav > lo_w, freqs / scale, freqs)
        mid = (hi_w < wav) & (wav <= lo_w)
        smooth = (old / wav - lo) / (hi - lo)
        freqs = torch.where(mid, (1 - smooth) * freqs / scale + smooth * freqs, freqs)
    ang = seq_pos[:, None, None] * freqs / linear_scale  # [Q, 1, dim/2]
    if adjacents:
        re, im = x[..., 0::2], x[..., 1::2]
    else:
        re, im = x[..., : dim // 2], x[..., dim // 2:]
    ore = re * torch.cos(ang) - im * torch.sin(ang)
    oim = im * torch.cos(ang) + re * torch.sin(ang)
    if adjacents:
        return torch.stack([ore, oim], -1).reshape(x.shape)
    return torch.cat([ore, oim], -1)


def check_rope(mod):
    K = "_rope_padded_kernel(variant)"
    q_lens, kv_lens, pad = [2, 1, 3], [4, 2, 7], 7
    B = len(q_lens)
    seqstartq = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    seqstartk = torch.tensor([pad * b for b in range(B + 1)], dtype=torch.int32)
    seqlenk = torch.tensor(kv_lens, dtype=torch.int32)
    nq, cache_length, max_q = int(seqstartq[-1]), pad * B, max(q_lens)
    # the cache row each query's k/v goes to, and each query's batch element
    qb = [b for b in range(B) for _ in range(q_lens[b])]
    cache_pos = [int(seqstartk[b]) + kv_lens[b] - (int(seqstartq[b + 1]) - q) for q, b in enumerate(qb)]
    configs = []
    for ndim, n_groups, Hq, Hkv, dim in [(4, 1, 3, 2, 10), (5, 2, 2, 1, 300)]:
        for internal_dtype in ["", "f32", "f64"]:
            for adjacents in [True, False]:
                configs.append((ndim, n_groups, Hq, Hkv, dim, internal_dtype, adjacents, False, "none", 1.0))
    configs += [
        (4, 1, 3, 2, 10, "", True, True, "none", 1.0),
        (4, 1, 3, 2, 10, "f32", False, True, "first", 2.0),
        (5, 2, 2, 1, 300, "f64", True, True, "seqpos", 1.0),
        (4, 1, 3, 2, 10, "", False, False, "first", 1.0),
        (4, 1, 3, 2, 10, "", True, False, "seqpos", 0.5),
    ]
    for ndim, n_groups, Hq, Hkv, dim, internal_dtype, adjacents, dyn_on, posmode, linear_scale in configs:
        theta = 10000.0
        gshape = (n_groups,) if ndim == 5 else ()
        xq = torch.randn((1, nq) + gshape + (Hq, dim), requires_grad=True)
        xk = torch.randn((1, nq) + gshape + (Hkv, dim), requires_grad=True)
        xv = torch.randn((1, nq) + gshape + (Hkv, dim), requires_grad=True)
        cache_k = torch.randn((1, cache_length) + gshape + (Hkv, dim))
        cache_v = torch.randn((1, cache_length) + gshape + (Hkv, dim))
        first_seqpos = torch.tensor([3, 0, 11], dtype=torch.int32) if posmode == "first" else None
        seqpos = torch.tensor([5, 1, 0, 9, 2, 17], dtype=torch.int32) if posmode == "seqpos" else None
        # --- host code of rope_padded (xformers/ops/rope_padded.py)
        xq_stride, xk_stride, xv_stride = xq.stride(), xk.stride(), xv.stride()
        cache_k_stride, cache_v_stride = cache_k.stride(), cache_v.stride()
        n_kv_heads = xk.shape[-2]
        if ndim == 4:
            n_q_heads = xq.shape[2]
            out_q_stride = (0, n_q_heads * dim, dim, 1)
        else:
            n_q_heads = xq.shape[3]
            out_q_stride = (0, n_q_heads * dim * n_groups, n_q_heads * dim, dim, 1)
        n_total_heads = n_q_heads + 2 * n_kv_heads
        v_start = n_total_heads - n_kv_heads
        k_start = n_q_heads
        out_q = xq.new_empty(xq.shape)
        logical_bsz = B
        stride_seqpos = 0
        if first_seqpos is not None:
            stride_seqpos = first_seqpos.stride(0)
        elif seqpos is not None:
            stride_seqpos = seqpos.stride(0)
        MAX_FUSED_SIZE = 65536 // xq.element_size()
        BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(dim))
        BLOCK_SIZE = max(BLOCK_SIZE, 128)
        BLOCK_SIZE = min(BLOCK_SIZE, 4096)
        num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
        dyn = (8192.0, 16.0, 1.0, 32.0)
        res = mod._rope_padded_kernel[(max_q, logical_bsz, n_total_heads * n_groups)](
            xq, xk, xv, out_q, cache_k, cache_v, seqstartq, seqstartk, seqlenk, theta, linear_scale, dyn_on,
            dyn[0] if dyn_on else 0, dyn[1] if dyn_on else 0, dyn[2] if dyn_on else 0, dyn[3] if dyn_on else 0,
            first_seqpos, seqpos, k_start, v_start, n_groups, dim,
            xq_stride[1], xq_stride[2] if ndim == 5 else 0, xq_stride[-2],
            xk_stride[1], xk_stride[2] if ndim == 5 else 0, xk_stride[-2],
            xv_stride[1], xv_stride[2] if ndim == 5 else 0, xv_stride[-2],
            cache_k_stride[1], cache_k_stride[2] if ndim == 5 else 0, cache_k_stride[-2],
            cache_v_stride[1], cache_v_stride[2] if ndim == 5 else 0, cache_v_stride[-2],
            seqstartq.stride(0), seqstartk.stride(0), seqlenk.stride(0),
            out_q_stride[1], out_q_stride[2] if ndim == 5 else 0, out_q_stride[-2],
            stride_seqpos, internal_dtype, const_batch_strides=False, cache_padding_length=0, seqlenk_shift=0,
            BLOCK_SIZE=BLOCK_SIZE, adjacents=adjacents, num_warps=num_warps)
        pos = torch.tensor(cache_pos)
        oq = res.out_q
        ck = res.cache_k[0, pos]  # the rows the kernel writes (others are left unset by the op)
        cv = res.cache_v[0, pos]
        Wq, Wk, Wv = weights_like(oq), weights_like(ck), weights_like(cv)
        ((oq.double() * Wq).sum() + (ck.double() * Wk).sum() + (cv.double() * Wv).sum()).backward()
        # reference
        if seqpos is not None:
            sp = seqpos.double()
        else:
            sp = torch.tensor([cache_pos[q] - int(seqstartk[b]) for q, b in enumerate(qb)], dtype=torch.float64)
            if first_seqpos is not None:
                sp = sp + first_seqpos.double()[torch.tensor(qb)]
        q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (xq, xk, xv))
        flat = lambda t: t[0].reshape(nq, -1, dim)
        rq = rope_reference(flat(q64), sp, theta, linear_scale, dyn if dyn_on else None, adjacents).reshape(oq.shape)
        rk = rope_reference(flat(k64), sp, theta, linear_scale, dyn if dyn_on else None, adjacents).reshape(ck.shape)
        rv = v64[0]
        ((rq * Wq).sum() + (rk * Wk).sum() + (rv * Wv).sum()).backward()
        cfg = (f"ndim={ndim} G={n_groups} Hq={Hq} Hkv={Hkv} dim={dim} internal_dtype={internal_dtype!r} "
               f"adjacents={adjacents} dynamic={dyn_on} pos={posmode} linear_scale={linear_scale}")
        report(K, cfg, "out_q", oq, rq)
        report(K, cfg, "cache_k (written rows)", ck, rk)
        report(K, cfg, "cache_v (written rows)", cv, rv)
        report(K, cfg, "d xq", xq.grad, q64.grad)
        report(K, cfg, "d xk", xk.grad, k64.grad)
        report(K, cfg, "d xv", xv.grad, v64.grad)


CHECKS = [
    ("xf_index_select_cat_fwd_kernel_op", check_index_select_cat),
    ("xf_scaled_index_add_fwd_kernel_op", check_scaled_index_add),
    ("xfv__rms_norm_kernel_op", check_rms_norm),
    ("xfv__rope_padded_kernel_op", check_rope),
]

for modname, fn in CHECKS:
    mod = load(modname)
    if mod is None:
        print(f"skip  {modname}: not generated")
        continue
    try:
        fn(mod)
    except Exception as e:  # report and go on
        import traceback
        traceback.print_exc()
        results.append(False)
        print(f"FAIL  {modname}: exception {type(e).__name__}: {e}", flush=True)

print(f"{sum(results)} of {len(results)} pass")
