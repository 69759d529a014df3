# Gradient check of tgrad's --emit torch modules for fla's norm forward kernels
# (fla/modules/{l2norm,layernorm,fused_norm_gate,layernorm_gated}.py), against float64 PyTorch references.
# Run: PYTHONPATH=/tmp/torchsite TRITON_INTERPRET=1 python3 /work/main/tests/gpu/real/cpu/fla_norms.py
import importlib.util
import itertools
import os
import sys
import types

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
MODS = os.environ.get("MODS") or os.path.join(HERE, "mods")

# The corpus checkout lacks fla/utils.py and fla/ops/utils/cache.py, which the generated modules import
# (only for the decorators' arguments). Stand-ins: fla_cache_autotune is an Autotuner subclass in fla.
for name in ["fla", "fla.ops", "fla.ops.utils"]:
    sys.modules.setdefault(name, types.ModuleType(name))
_utils = types.ModuleType("fla.utils")
_utils.autotune_cache_kwargs = {}
_utils.IS_AMD = False
_utils.input_guard = lambda f: f
_utils.get_multiprocessor_count = lambda *a, **k: 1
sys.modules["fla.utils"] = _utils
_cache = types.ModuleType("fla.ops.utils.cache")
_cache.fla_cache_autotune = triton.autotune
sys.modules["fla.ops.utils.cache"] = _cache


def load(name):
    path = os.path.join(MODS, name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def interpreter_range(mod):
    """Interpreter only: Triton's interpreter runs `for i in range(tl.program_id(0), n, tl.num_programs(0))` with
    Python's range, so `i` is an int and tgrad's `i_t = forward_pid.to(tl.int64)` fails (compiled Triton gives a
    tensor). Within this module, a range whose start is a tensor yields int32 scalar tensors, as compiled Triton."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp
    import builtins

    def _range(*args):
        if args and isinstance(args[0], tl.core.tensor):
            for i in builtins.range(*[int(a) for a in args]):
                yield tl.core.tensor(interp.TensorHandle(np.array([i], dtype=np.int32), tl.int32), tl.int32)
        else:
            yield from builtins.range(*args)
    mod.range = _range


def one_config(kernel, config):
    """The interpreter does not benchmark: a single config (one of fla's own)."""
    kernel._autotuner.configs = [config]


RESULTS = []
TOL = 2e-5
GEN = torch.Generator().manual_seed(0)


def rnd(*shape, scale=1.0, offset=0.0):
    return (torch.rand(*shape, generator=GEN, dtype=torch.float64) * 2 - 1) * scale + offset


def report(kernel, cfg, what, got, ref):
    if got is None or ref is None:
        ok = got is None and ref is None
        err = 0.0 if ok else float("inf")
    else:
        got = got.detach().double()
        ref = ref.detach().double()
        if got.shape != ref.shape:
            ok, err = False, float("inf")
        else:
            err = (got - ref).abs().max().item() / max(1.0, ref.abs().max().item())
            ok = err <= TOL and torch.isfinite(got).all().item()
    RESULTS.append(ok)
    print(f"{'ok' if ok else 'FAIL'}  {kernel}  [{cfg}]  {what}  err={err:.3e}", flush=True)


def check(kernel, cfg, inputs, run_tgrad, run_ref):
    """inputs: dict name -> float64 tensor or None. run_tgrad(fp32 leaves) -> dict name -> output tensor (or None);
    run_ref(float64 leaves) -> dict of the same names. Loss = sum over outputs of <out, random weights>."""
    leaves32 = {k: (v.float().requires_grad_() if v is not None else None) for k, v in inputs.items()}
    leaves64 = {k: (v.clone().requires_grad_() if v is not None else None) for k, v in inputs.items()}
    try:
        outs = run_tgrad(leaves32)
    except Exception as e:  # a launch error is a failed check, reported
        import traceback
        traceback.print_exc()
        RESULTS.append(False)
        print(f"FAIL  {kernel}  [{cfg}]  launch  {type(e).__name__}: {str(e)[:300]}", flush=True)
        return
    refs = run_ref(leaves64)
    weights = {k: rnd(*r.shape) for k, r in refs.items() if r is not None}
    loss = sum((outs[k].double() * weights[k]).sum() for k in weights)
    loss_ref = sum((refs[k] * weights[k]).sum() for k in weights)
    for k in refs:
        report(kernel, cfg, "out " + k, outs[k], refs[k])
    try:
        grads = torch.autograd.grad(loss, [v for v in leaves32.values() if v is not None], allow_unused=True)
    except Exception as e:
        RESULTS.append(False)
        print(f"FAIL  {kernel}  [{cfg}]  backward  {type(e).__name__}: {str(e)[:300]}", flush=True)
        return
    grads_ref = torch.autograd.grad(loss_ref, [v for v in leaves64.values() if v is not None], allow_unused=True)
    names = [k for k, v in leaves32.items() if v is not None]
    for n, g, r in zip(names, grads, grads_ref):
        if g is None:
            g = torch.zeros_like(leaves32[n])
        if r is None:
            r = torch.zeros_like(leaves64[n])
        report(kernel, cfg, "grad " + n, g, r)


# --------------------------------------------------------------------------------------------- l2norm.py
def l2norm_ref(x, eps):
    rstd = 1 / torch.sqrt((x * x).sum(-1) + eps)
    return {"y": x * rstd[:, None], "rstd": rstd}


def test_l2norm():
    m0 = load("fla_l2norm_fwd_kernel_op")
    m1 = load("fla_l2norm_fwd_kernel1_op")
    one_config(m1.l2norm_fwd_kernel1, triton.Config({}, num_warps=1))
    eps = 1e-6
    for T, D, BT in [(19, 37, 8), (7, 100, 8), (19, 37, 16), (5, 600, 8)]:
        one_config(m0.l2norm_fwd_kernel, triton.Config({"BT": BT}, num_warps=1))
        m0.l2norm_fwd_kernel._configs.clear()
        def run0(L):
            x = L["x"]
            y = torch.empty_like(x)
            rstd = torch.empty((T,), dtype=torch.float32)
            BD = triton.next_power_of_2(D)
            NB = triton.cdiv(T, 2048 * 32)

            def grid(meta):
                return (triton.cdiv(T, meta["BT"]),)
            o = m0.l2norm_fwd_kernel[grid](x=x, y=y, rstd=rstd, eps=eps, T=T, D=D, BD=BD, NB=NB)
            return {"y": o.y, "rstd": o.rstd}

        def run1(L):
            x = L["x"]
            y = torch.empty_like(x)
            rstd = torch.empty((T,), dtype=torch.float32)
            BD = triton.next_power_of_2(D)
            o = m1.l2norm_fwd_kernel1[(T,)](x=x, y=y, rstd=rstd, eps=eps, D=D, BD=BD)
            return {"y": o.y, "rstd": o.rstd}

        inputs = {"x": rnd(T, D)}
        if D <= 512:  # fla's dispatch: the blocked kernel for D <= 512, kernel1 above
            check("l2norm_fwd_kernel", f"T={T} D={D} BT={BT}", inputs, run0, lambda L: l2norm_ref(L["x"], eps))
        if BT == 8:
            check("l2norm_fwd_kernel1", f"T={T} D={D}", inputs, run1, lambda L: l2norm_ref(L["x"], eps))


# ------------------------------------------------------------------------------------------ layernorm.py
def ln_ref(x, w, b, res, store_res, eps, rms, G, act=None, g=None):
    T, D = x.shape
    xs = x + res if res is not None else x
    out = {}
    if store_res:
        out["res_out"] = xs
    if not rms:
        mean = xs.mean(-1)
        out["mean"] = mean
        xc = xs - mean[:, None]
    else:
        xc = xs
    var = (xc * xc).mean(-1)
    rstd = 1 / torch.sqrt(var + eps)
    out["rstd"] = rstd
    xhat = xc * rstd[:, None]
    grp = torch.arange(T) % G
    y = xhat
    if w is not None:
        y = y * w.view(G, D)[grp]
    if b is not None:
        y = y + b.view(G, D)[grp]
    if act in ("swish", "silu"):
        y = y * g * torch.sigmoid(g)
    elif act == "sigmoid":
        y = y * torch.sigmoid(g)
    out["y"] = y
    return out


def test_layernorm():
    m0 = load("fla_layer_norm_fwd_kernel_op")
    m1 = load("fla_layer_norm_fwd_kernel1_op")
    one_config(m0.layer_norm_fwd_kernel, triton.Config({"BT": 32}, num_warps=2))
    one_config(m1.layer_norm_fwd_kernel1, triton.Config({}, num_warps=2))
    eps = 1e-5
    # (has weight, has bias): fla's LayerNorm/RMSNorm give (w, b), (w, None) [bias=False], (None, None)
    # [elementwise_affine=False]; layer_norm(x, None, b) gives (None, b).
    wb = [(True, True), (True, False), (False, False), (False, True)]
    # (residual given, res_out stored): fla stores res_out iff residual is given or residual_in_fp32 with a
    # low-precision x (here fp32 x: the flags only).
    resc = [(False, False), (True, True), (False, True)]
    cases = [(w, c) for w, c in itertools.product(["kernel", "kernel1"], itertools.product([False, True], wb, resc, [1, 3]))]
    cases += [("kernel1_600", (rms, (True, True), (True, True), G)) for rms in [False, True] for G in [1, 2]]
    for which, (rms, (hw, hb), (hr, sr), G) in cases:
        if G == 3 and not (hw or hb):
            continue
        T, D = (37, 37) if which == "kernel" else (7, 100) if which == "kernel1" else (5, 600)
        which = which[:7]
        # group norm: fla reshapes x (B, G*D) to (B*G, D); row t is in group t % G
        inputs = {"x": rnd(T, D, offset=0.3), "w": rnd(G * D, offset=1.0) if hw else None,
                  "b": rnd(G * D) if hb else None, "res": rnd(T, D) if hr else None}

        def run(L, which=which, rms=rms, hr=hr, sr=sr, G=G, T=T, D=D):
            x, w, b, res = L["x"], L["w"], L["b"], L["res"]
            y = torch.empty_like(x)
            res_out = torch.empty(T, D, dtype=torch.float32) if sr else None
            mean = torch.empty((T,), dtype=torch.float) if not rms else None
            rstd = torch.empty((T,), dtype=torch.float)
            BD = triton.next_power_of_2(D)
            flags = dict(IS_RMS_NORM=rms, HAS_RESIDUAL=res is not None, STORE_RESIDUAL_OUT=res_out is not None,
                         HAS_WEIGHT=w is not None, HAS_BIAS=b is not None)
            if which == "kernel":
                NB = triton.cdiv(T, 2048)

                def grid(meta): return (triton.cdiv(T, meta['BT']), )
                o = m0.layer_norm_fwd_kernel[grid](x, y, w, b, res, res_out, mean, rstd, eps, T=T, G=G, D=D,
                                                   BD=BD, NB=NB, **flags)
            else:
                o = m1.layer_norm_fwd_kernel1[(T,)](x, y, w, b, res, res_out, mean, rstd, eps, G=G, D=D, BD=BD,
                                                    **flags)
            out = {"y": o.y, "rstd": o.rstd}
            if sr:
                out["res_out"] = o.res_out
            if not rms:
                out["mean"] = o.mean
            return out

        cfg = (f"T={T} D={D} G={G} rms={int(rms)} w={int(hw)} b={int(hb)} res={int(hr)} res_out={int(sr)}"
               + (" BT=32" if which == "kernel" else ""))
        check("layer_norm_fwd_" + which, cfg, inputs, run,
              lambda L, rms=rms, sr=sr, G=G: ln_ref(L["x"], L["w"], L["b"], L["res"], sr, eps, rms, G))


# ------------------------------------------------------------------------------------- fused_norm_gate.py
def test_fused_norm_gate():
    m0 = load("fla_layer_norm_gated_fwd_kernel_op")
    m1 = load("fla_layer_norm_gated_fwd_kernel1_op")
    one_config(m0.layer_norm_gated_fwd_kernel, triton.Config({"BT": 16}, num_warps=4))
    one_config(m1.layer_norm_gated_fwd_kernel1, triton.Config({}, num_warps=2))
    interpreter_range(m0)
    interpreter_range(m1)
    eps = 1e-6

    # The blocked kernel exactly as fla launches it: @triton.heuristics (outer) sets STORE_RESIDUAL_OUT,
    # HAS_RESIDUAL, HAS_WEIGHT, HAS_BIAS from the arguments before @triton.autotune runs.
    T, D = 37, 37
    x, g = rnd(T, D).float().requires_grad_(), rnd(T, D).float().requires_grad_()
    try:
        m0.layer_norm_gated_fwd_kernel[lambda meta: (triton.cdiv(T, meta["BT"]),)](
            x=x, g=g, y=torch.empty_like(x), w=None, b=None, residual=None, residual_out=None,
            mean=torch.empty(T), rstd=torch.empty(T), eps=eps, T=T, D=D, BD=64, NB=1, ACTIVATION="swish",
            IS_RMS_NORM=False)
        RESULTS.append(True)
        print("ok  layer_norm_gated_fwd_kernel  [launch as fla: heuristics' flags not passed]", flush=True)
    except Exception as e:
        RESULTS.append(False)
        print(f"FAIL  layer_norm_gated_fwd_kernel  [launch as fla: heuristics' flags not passed]  launch  "
              f"{type(e).__name__}: {str(e)[:200]}", flush=True)
    # Below, the blocked kernel gets the heuristics' flags passed explicitly (the values they compute).
    wb = [(True, True), (True, False), (False, False), (False, True)]
    resc = [(False, False), (True, True), (False, True)]
    cases = list(itertools.product(["kernel", "kernel1"], ["swish", "silu", "sigmoid"], [False, True], wb, resc))
    cases += [("kernel1_600", act, rms, (True, True), (True, True)) for act in ["swish", "sigmoid"] for rms in [False, True]]
    for which, act, rms, (hw, hb), (hr, sr) in cases:
        if act == "silu" and not (hw and hb and not hr):
            continue  # silu is swish's other name: one configuration
        T, D = (37, 37) if which == "kernel" else (7, 100) if which == "kernel1" else (5, 600)
        which = which[:7]
        inputs = {"x": rnd(T, D, offset=0.3), "g": rnd(T, D, scale=2.0), "w": rnd(D, offset=1.0) if hw else None,
                  "b": rnd(D) if hb else None, "residual": rnd(T, D) if hr else None}

        def run(L, which=which, act=act, rms=rms, sr=sr, T=T, D=D):
            x, g, w, b, res = L["x"], L["g"], L["w"], L["b"], L["residual"]
            y = torch.empty_like(x)
            residual_out = torch.empty(T, D, dtype=torch.float32) if sr else None
            mean = torch.empty((T,), dtype=torch.float) if not rms else None
            rstd = torch.empty((T,), dtype=torch.float)
            BD = triton.next_power_of_2(D)
            if which == "kernel":
                NB = triton.cdiv(T, 2048 * 32)

                def grid(meta):
                    return (triton.cdiv(T, meta["BT"]),)
                o = m0.layer_norm_gated_fwd_kernel[grid](
                    x=x, g=g, y=y, w=w, b=b, residual=res, residual_out=residual_out, mean=mean, rstd=rstd,
                    eps=eps, T=T, D=D, BD=BD, NB=NB, ACTIVATION=act, IS_RMS_NORM=rms,
                    STORE_RESIDUAL_OUT=residual_out is not None, HAS_RESIDUAL=res is not None,
                    HAS_WEIGHT=w is not None, HAS_BIAS=b is not None)
            else:
                o = m1.layer_norm_gated_fwd_kernel1[(T,)](
                    x=x, g=g, y=y, w=w, b=b, residual=res, residual_out=residual_out, mean=mean, rstd=rstd,
                    eps=eps, D=D, BD=BD, ACTIVATION=act, IS_RMS_NORM=rms)
            out = {"y": o.y, "rstd": o.rstd}
            if sr:
                out["res_out"] = o.residual_out
            if not rms:
                out["mean"] = o.mean
            return out

        cfg = (f"T={T} D={D} act={act} rms={int(rms)} w={int(hw)} b={int(hb)} res={int(hr)} res_out={int(sr)}"
               + (" BT=16" if which == "kernel" else ""))
        check("layer_norm_gated_fwd_" + which, cfg, inputs, run,
              lambda L, act=act, rms=rms, sr=sr: ln_ref(L["x"], L["w"], L["b"], L["residual"], sr, eps, rms, 1,
                                                         act=act, g=L["g"]))


# ------------------------------------------------------------------------------------ layernorm_gated.py
def gated_ref(x, w, b, z, eps, group_size, norm_before_gate, rms):
    M, N = x.shape
    ng = N // group_size
    if z is not None and not norm_before_gate:
        x = x * z * torch.sigmoid(z)
    xg = x.view(M, ng, group_size)
    out = {}
    if not rms:
        mean = xg.mean(-1)
        out["Mean"] = mean.t().reshape(-1)  # [group * M + row]
        xc = xg - mean[..., None]
    else:
        xc = xg
    rstd = 1 / torch.sqrt((xc * xc).mean(-1) + eps)
    out["Rstd"] = rstd.t().reshape(-1)
    y = (xc * rstd[..., None]).reshape(M, N) * w
    if b is not None:
        y = y + b
    if z is not None and norm_before_gate:
        y = y * z * torch.sigmoid(z)
    out["Y"] = y
    return out


def test_layernorm_gated():
    m = load("fla_gated_layer_norm_fwd_kernel_op")
    eps = 1e-6
    M, N = 7, 74
    for hz, nbg, rms, hb, gs, strided in itertools.product(
            [False, True], [True, False], [False, True], [False, True], [None, 37], [False, True]):
        if not hz and not nbg:
            continue  # norm_before_gate matters only with z
        if strided and not (hz and hb and gs is None):
            continue
        inputs = {"X": rnd(M, N, offset=0.3), "W": rnd(N, offset=1.0), "B": rnd(N) if hb else None,
                  "Z": rnd(M, N, scale=2.0) if hz else None}

        def run(L, hz=hz, nbg=nbg, rms=rms, gs=gs, strided=strided):
            x, w, b, z = L["X"], L["W"], L["B"], L["Z"]
            if strided:  # a row-strided view (fla keeps it: only stride(-1) != 1 is made contiguous)
                big = torch.zeros(M, N + 11, dtype=x.dtype)
                big = big.index_put((torch.arange(M)[:, None], torch.arange(N)[None, :]), x)
                x = big[:, :N]
            group_size = N if gs is None else gs
            ngroups = N // group_size
            out = torch.empty_like(x)
            mean = torch.empty((ngroups * M, ), dtype=torch.float32) if not rms else None
            rstd = torch.empty((ngroups * M, ), dtype=torch.float32)
            BLOCK_N = triton.next_power_of_2(group_size)
            num_warps = min(max(BLOCK_N // 256, 1), 8)
            o = m.layer_norm_fwd_kernel[(M, ngroups)](
                x, out, w, b, z, mean, rstd, x.stride(0), out.stride(0), z.stride(0) if z is not None else 0,
                M, group_size, eps, BLOCK_N=BLOCK_N, NORM_BEFORE_GATE=nbg, IS_RMS_NORM=rms, num_warps=num_warps)
            r = {"Y": o.Y, "Rstd": o.Rstd}
            if not rms:
                r["Mean"] = o.Mean
            return r

        cfg = (f"M={M} N={N} group_size={gs} z={int(hz)} norm_before_gate={int(nbg)} rms={int(rms)} b={int(hb)}"
               f" x_row_stride={N + 11 if strided else N}")
        check("layernorm_gated.layer_norm_fwd_kernel", cfg, inputs, run,
              lambda L, nbg=nbg, rms=rms, gs=gs: gated_ref(L["X"], L["W"], L["B"], L["Z"], eps,
                                                             N if gs is None else gs, nbg, rms))


if __name__ == "__main__":
    only = sys.argv[1:]
    for name, fn in [("l2norm", test_l2norm), ("layernorm", test_layernorm),
                     ("fused_norm_gate", test_fused_norm_gate), ("layernorm_gated", test_layernorm_gated)]:
        if not only or name in only:
            fn()
    print(f"{sum(RESULTS)} of {len(RESULTS)} pass")
