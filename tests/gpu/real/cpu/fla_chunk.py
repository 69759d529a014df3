# Checks tgrad's --emit torch modules of fla's chunked linear-attention forward kernels (chunk_fwd_kernel_o, and
# chunk_fwd_kernel_h through a variant file: see variant/chunk_h_variant.py) against float64 PyTorch references.
# Run: cd /work/main && PYTHONPATH=/tmp/torchsite:/tmp/corpus/fla-org+flash-linear-attention TRITON_INTERPRET=1 \
#        python3 /tmp/wl2/run_shim.py tests/gpu/real/cpu/fla_chunk.py [substring-filter]
import os, sys, types, importlib.util, itertools
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ["TGRAD_TUNE_BACKWARD"] = "0"
import torch, triton

SHIMS = os.path.dirname(os.path.abspath(__file__))
exec(open(os.path.join(SHIMS, "interp_mask_shim.py")).read())
exec(open(os.path.join(SHIMS, "interp_poison_masked_atomics.py")).read())

HERE = os.path.dirname(os.path.abspath(__file__))
FILTER = sys.argv[1] if len(sys.argv) > 1 else ""

# Stubs for the modules the checkout lacks (fla's values on NVIDIA); fla_cache_autotune -> triton.autotune.
_u = types.ModuleType("fla.utils")
_u.IS_AMD = False
_u.IS_INTEL = False
_u.IS_NVIDIA_HOPPER = False
_u.autotune_cache_kwargs = {}
_u.check_shared_mem = lambda *a, **k: True
sys.modules["fla.utils"] = _u
_c = types.ModuleType("fla.ops.utils.cache")
_c.fla_cache_autotune = lambda configs, key=None, **kw: triton.autotune(configs=configs, key=key or [], **kw)
sys.modules["fla.ops.utils.cache"] = _c

MODS = {}


def load(name):
    if name in MODS:
        return MODS[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.environ.get("MODS") or os.path.join(HERE, "mods"), name + ".py"))
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    MODS[name] = m
    return m


def kern(modname, kname, **cfg):
    """The module's kernel, its autotuner reduced to one config (cfg: BK, BV)."""
    K = getattr(load(modname), kname)
    if K._autotuner is not None:
        K._autotuner.configs = [triton.Config(cfg, num_warps=2, num_stages=1)]
        K._configs.clear()
        K._config_objects.clear()
    return K


PASS = [0, 0]
TOL = 1e-4


def report(kname, conf, tname, got, want):
    got = got.detach().double()
    want = want.detach().double()
    if got.shape != want.shape:
        ok, msg = False, f"shape {tuple(got.shape)} vs {tuple(want.shape)}"
    else:
        err = (got - want).abs().max().item() / max(1.0, want.abs().max().item()) if got.numel() else 0.0
        if not torch.isfinite(got).all():
            err = float("nan")
        ok = err <= TOL
        msg = f"{err:.2e}"
    PASS[0] += ok
    PASS[1] += 1
    print(("ok  " if ok else "FAIL"), kname, conf, tname, msg, flush=True)


def check(kname, conf, outs, ins, ref_fn, sel=None):
    """outs: name -> output tensor of the module; ins: name -> fp32 leaf; ref_fn(float64 leaves) -> name -> ref;
    sel: name -> boolean mask of the elements the kernel stores (the others are unset: left out of the loss)."""
    sel = sel or {}
    torch.manual_seed(1234)
    ws = {n: torch.randn(o.shape, dtype=torch.float64) for n, o in outs.items()}
    for t in ins.values():
        t.grad = None
    pick = lambda n, x: x[sel[n]] if n in sel else x
    loss = sum((pick(n, outs[n].double()) * pick(n, ws[n])).sum() for n in outs)
    loss.backward()
    rins = {n: t.detach().double().requires_grad_(True) for n, t in ins.items()}
    refs = ref_fn(rins)
    rloss = sum((pick(n, refs[n]) * pick(n, ws[n])).sum() for n in outs)
    rloss.backward()
    for n in outs:
        report(kname, conf, n, pick(n, outs[n]), pick(n, refs[n]))
    for n in ins:
        g = ins[n].grad if ins[n].grad is not None else torch.zeros_like(ins[n])
        rg = rins[n].grad if rins[n].grad is not None else torch.zeros_like(rins[n])
        report(kname, conf, "d" + n, g, rg)


def safe(kname, conf, fn):
    try:
        fn()
    except Exception as e:
        import traceback
        traceback.print_exc(limit=3)
        PASS[1] += 1
        print("FAIL", kname, conf, "exception", repr(e)[:400].replace("\n", " "), flush=True)


def rnd(*shape, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).requires_grad_(True)


def gates(shape, seed, dim_t=1):
    """log2-space decays as fla feeds them: a within-chunk cumsum of negative values (chunk_local_cumsum), here a
    plain cumsum of small negatives over time (any values are valid inputs to the kernels)."""
    g = torch.Generator().manual_seed(seed)
    x = -torch.rand(*shape, generator=g) * 0.1
    return x.cumsum(dim_t).requires_grad_(True)


def seqs_of(B, T, cu):
    """(batch index, start, length) of each sequence."""
    if cu is None:
        return [(b, 0, T) for b in range(B)]
    return [(0, int(cu[i]), int(cu[i + 1] - cu[i])) for i in range(len(cu) - 1)]


def chunk_indices_of(cu, BT):  # fla's prepare_chunk_indices
    lens = (cu[1:] - cu[:-1]).tolist()
    rows = [(i, j) for i, n in enumerate(lens) for j in range((n + BT - 1) // BT)]
    return torch.tensor(rows, dtype=cu.dtype).reshape(-1, 2)


def chunk_offsets_of(cu, BS):  # fla's prepare_chunk_offsets
    lens = (cu[1:] - cu[:-1])
    return torch.nn.functional.pad(triton.cdiv(lens, BS), (1, 0), value=0).cumsum(-1).to(cu.dtype)


# ------------------------------------------------------------------ chunk_fwd_kernel_h
def chunk_h_ref(d, B, T, H, K, V, BT, BS, cu, flags):
    k, v = d["k"], d["v"]
    NTS = BS // BT
    seqs = seqs_of(B, T, cu)
    if cu is None:
        NS = triton.cdiv(T, BS)
        boh = [b * NS for b in range(B)]
        hshape = (B, NS, H, K, V)
    else:
        so = chunk_offsets_of(cu, BS)
        boh = [int(so[i]) for i in range(len(seqs))]
        hshape = (B, int(so[-1]), H, K, V)
    hs = {}
    hts = []
    for n, (b, bos, L) in enumerate(seqs):
        per_head = []
        for ih in range(H):
            st = d["h0"][n, ih] if flags["h0"] else torch.zeros(K, V, dtype=torch.float64)
            if flags["h0"] and flags["vfirst"]:
                st = st.transpose(0, 1)
            for c in range(triton.cdiv(L, BT)):
                if c % NTS == 0:
                    hs[(boh[n] + c // NTS, ih)] = st  # the kernel's slot ((boh + i_s) * H + i_h) of h
                r0, r1 = bos + c * BT, min(bos + (c + 1) * BT, bos + L)
                kc, vc = k[b, r0:r1, ih], v[b, r0:r1, ih]
                if flags["g"]:
                    gl = d["g"][b, r0:r1, ih]
                    st = st * torch.exp2(gl[-1])
                    vc = vc * torch.exp2(gl[-1] - gl)[:, None]
                if flags["gamma"]:
                    gam = d["g_gamma"][ih]
                    gl = gam * torch.arange(1, r1 - r0 + 1, dtype=torch.float64)
                    st = st * torch.exp2(gl[-1])
                    vc = vc * torch.exp2(gl[-1] - gl)[:, None]
                if flags["gk"]:
                    gk = d["gk"][b, r0:r1, ih]
                    st = st * torch.exp2(gk[-1])[:, None]
                    kc = kc * torch.exp2(gk[-1][None, :] - gk)
                if flags["gv"]:
                    gv = d["gv"][b, r0:r1, ih]
                    st = st * torch.exp2(gv[-1])[None, :]
                    vc = vc * torch.exp2(gv[-1][None, :] - gv)
                st = st + kc.transpose(0, 1) @ vc
            per_head.append(st)
        hts.append(torch.stack(per_head))
    out = {}
    zero = torch.zeros(K, V, dtype=torch.float64)
    h = torch.stack([torch.stack([hs.get((s, ih), zero) for ih in range(H)])
                     for s in range(hshape[0] * hshape[1])]).reshape(hshape)
    out["h"] = h.transpose(-1, -2) if flags["vfirst"] else h
    if flags["ht"]:
        ht = torch.stack(hts)
        out["ht"] = ht.transpose(-1, -2) if flags["vfirst"] else ht
    return out


def run_chunk_h():
    kname = "chunk_fwd_kernel_h"
    H = 2
    cases = []
    # (B, T, K, V, BK, BV, BS/BT, varlen lens, flags)
    base = dict(g=False, gamma=False, gk=False, gv=False, h0=False, ht=False, vfirst=False)
    for fl in [dict(), dict(g=True), dict(gk=True), dict(gv=True), dict(gk=True, gv=True), dict(g=True, gk=True),
               dict(gamma=True), dict(h0=True, ht=True), dict(g=True, h0=True, ht=True),
               dict(gk=True, gv=True, h0=True, ht=True), dict(g=True, h0=True, ht=True, vfirst=True),
               dict(gamma=True, h0=True, ht=True, vfirst=True), dict(ht=True)]:
        cases.append((2, 37, 32, 32, 32, 32, 1, None, {**base, **fl}))
    # block sizes below K/V (several programs along K and V), split size 2*BT, K != V
    cases.append((2, 50, 32, 16, 16, 16, 1, None, {**base, "g": True, "gk": True, "gv": True, "h0": True, "ht": True}))
    cases.append((1, 50, 16, 32, 32, 16, 2, None, {**base, "g": True, "h0": True, "ht": True}))
    cases.append((2, 37, 32, 32, 16, 32, 2, None, {**base, "gk": True, "h0": True, "ht": True, "vfirst": True}))
    # varlen
    for fl in [dict(), dict(g=True, h0=True, ht=True), dict(gk=True, gv=True, h0=True, ht=True),
               dict(gamma=True, ht=True), dict(g=True, h0=True, ht=True, vfirst=True)]:
        cases.append((1, None, 32, 32, 32, 32, 1, [13, 37, 20], {**base, **fl}))
    cases.append((1, None, 32, 16, 16, 16, 2, [40, 5, 33], {**base, "g": True, "gk": True, "h0": True, "ht": True}))
    for i, (B, T, K, V, BK, BV, ns, lens, fl) in enumerate(cases):
        BT = 16
        BS = BT * ns
        conf = (f"B={B} T={T if lens is None else lens} K={K} V={V} BK={BK} BV={BV} BS={BS} "
                + "+".join(n for n, on in fl.items() if on))
        if FILTER and FILTER not in kname + " " + conf:
            continue
        safe(kname, conf, lambda: one_chunk_h(kname, conf, i, B, T, H, K, V, BK, BV, BT, BS, lens, fl))


def one_chunk_h(kname, conf, seed, B, T, H, K, V, BK, BV, BT, BS, lens, fl):
    if lens is not None:
        cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32)
        T = int(cu[-1])
        N = len(lens)
        split_offsets = chunk_offsets_of(cu, BS)
        NS = int(split_offsets[-1])
    else:
        cu, split_offsets, N, NS = None, None, B, triton.cdiv(T, BS)
    k = rnd(B, T, H, K, seed=seed * 10 + 1)
    v = rnd(B, T, H, V, seed=seed * 10 + 2)
    g = gates((B, T, H), seed * 10 + 3) if fl["g"] else None
    g_gamma = (-torch.rand(H, generator=torch.Generator().manual_seed(seed)) * 0.2).requires_grad_(True) \
        if fl["gamma"] else None
    gk = gates((B, T, H, K), seed * 10 + 4) if fl["gk"] else None
    gv = gates((B, T, H, V), seed * 10 + 5) if fl["gv"] else None
    sshape = (V, K) if fl["vfirst"] else (K, V)
    h0 = rnd(N, H, *sshape, seed=seed * 10 + 6) if fl["h0"] else None
    h = k.new_empty(B, NS, H, *sshape).detach()
    ht = k.new_empty(N, H, *sshape, dtype=torch.float).detach() if fl["ht"] else None
    Kern = kern("fla_chunk_fwd_kernel_h_variant_op", kname, BK=BK, BV=BV)

    def grid(meta): return (triton.cdiv(K, meta['BK']), triton.cdiv(V, meta['BV']), N * H)
    r = Kern[grid](k=k, v=v, h=h, g=g, g_gamma=g_gamma, gk=gk, gv=gv, h0=h0, ht=ht, cu_seqlens=cu,
                   split_offsets=split_offsets, T=T, H=H, K=K, V=V, BT=BT, BS=BS, USE_G=g is not None,
                   USE_G_GAMMA=g_gamma is not None, USE_GK=gk is not None, USE_GV=gv is not None,
                   STATE_V_FIRST=fl["vfirst"])
    outs = {"h": r.h}
    if fl["ht"]:
        outs["ht"] = r.ht
    ins = {n: t for n, t in dict(k=k, v=v, g=g, g_gamma=g_gamma, gk=gk, gv=gv, h0=h0).items() if t is not None}
    check(kname, conf, outs, ins, lambda d: chunk_h_ref(d, B, T, H, K, V, BT, BS, cu, fl))


# ------------------------------------------------------------------ chunk_fwd_kernel_o
def chunk_o_ref(d, B, T, H, HV, K, V, BT, cu, scale, fl):
    q, k, v, h = d["q"], d["k"], d["v"], d["h"]
    o = torch.zeros(v.shape, dtype=torch.float64)
    seqs = seqs_of(B, T, cu)
    NT = triton.cdiv(T, BT)
    tg = 0
    for n, (b, bos, L) in enumerate(seqs):
        for c in range(triton.cdiv(L, BT)):
            i_tg = tg if cu is not None else b * NT + c
            tg += 1
            r0, r1 = bos + c * BT, min(bos + (c + 1) * BT, bos + L)
            nr = r1 - r0
            for ih in range(HV):
                hq = ih // (HV // H)
                qc, kc, vc = q[b, r0:r1, hq], k[b, r0:r1, hq], v[b, r0:r1, ih]
                hc = h.flatten(0, 1)[i_tg, ih]  # the kernel's h + (i_tg * HV + i_h) * K*V
                if fl["vfirst"]:
                    hc = hc.transpose(0, 1)
                oc = qc @ hc
                A = qc @ kc.transpose(0, 1)
                if fl["g"]:
                    gl = d["g"][b, r0:r1, ih]
                    oc = oc * torch.exp2(gl)[:, None]
                    A = A * torch.exp2(gl[:, None] - gl[None, :])
                if fl["gamma"]:
                    gl = d["g_gamma"][ih] * torch.arange(1, nr + 1, dtype=torch.float64)
                    oc = oc * torch.exp2(gl)[:, None]
                    A = A * torch.exp2(gl[:, None] - gl[None, :])
                A = torch.tril(A)
                o[b, r0:r1, ih] = oc * scale + (A @ vc) * scale
    return {"o": o}


def run_chunk_o():
    kname = "chunk_fwd_kernel_o"
    base = dict(g=False, gamma=False, vfirst=False)
    cases = []
    # (B, T, H, HV, K, V, BK, BV, lens, flags)
    for fl in [dict(), dict(g=True), dict(gamma=True), dict(vfirst=True), dict(g=True, vfirst=True)]:
        cases.append((2, 37, 2, 2, 32, 32, 32, 32, None, {**base, **fl}))
    cases.append((2, 50, 2, 4, 32, 32, 32, 32, None, {**base, "g": True}))          # GQA: HV = 2H
    cases.append((1, 50, 2, 2, 32, 16, 16, 16, None, {**base, "g": True}))          # several K blocks, V blocks
    cases.append((2, 37, 2, 2, 16, 32, 32, 16, None, {**base, "gamma": True, "vfirst": True}))
    for fl in [dict(), dict(g=True), dict(gamma=True, vfirst=True)]:
        cases.append((1, None, 2, 2, 32, 32, 32, 32, [13, 37, 20], {**base, **fl}))
    cases.append((1, None, 2, 4, 32, 16, 16, 16, [40, 5, 33], {**base, "g": True, "vfirst": True}))
    for i, (B, T, H, HV, K, V, BK, BV, lens, fl) in enumerate(cases):
        BT = 16
        conf = (f"B={B} T={T if lens is None else lens} H={H} HV={HV} K={K} V={V} BK={BK} BV={BV} "
                + "+".join(n for n, on in fl.items() if on))
        if FILTER and FILTER not in kname + " " + conf:
            continue
        safe(kname, conf, lambda: one_chunk_o(kname, conf, 100 + i, B, T, H, HV, K, V, BK, BV, BT, lens, fl))


def one_chunk_o(kname, conf, seed, B, T, H, HV, K, V, BK, BV, BT, lens, fl):
    if lens is not None:
        cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32)
        T = int(cu[-1])
        chunk_indices = chunk_indices_of(cu, BT)
        NT = len(chunk_indices)
    else:
        cu, chunk_indices, NT = None, None, triton.cdiv(T, BT)
    scale = K ** -0.5
    q = rnd(B, T, H, K, seed=seed * 10 + 1)
    k = rnd(B, T, H, K, seed=seed * 10 + 2)
    v = rnd(B, T, HV, V, seed=seed * 10 + 3)
    sshape = (V, K) if fl["vfirst"] else (K, V)
    h = rnd(B, NT, HV, *sshape, seed=seed * 10 + 4)
    g = gates((B, T, HV), seed * 10 + 5) if fl["g"] else None
    g_gamma = (-torch.rand(HV, generator=torch.Generator().manual_seed(seed)) * 0.2).requires_grad_(True) \
        if fl["gamma"] else None
    o = torch.empty_like(v).detach()
    Kern = kern("fla_chunk_fwd_kernel_o_op", kname, BK=BK, BV=BV)

    def grid(meta): return (triton.cdiv(V, meta['BV']), NT, B * HV)
    r = Kern[grid](q=q, k=k, v=v, h=h, g=g, g_gamma=g_gamma, o=o, cu_seqlens=cu, chunk_indices=chunk_indices,
                   scale=scale, T=T, H=H, HV=HV, K=K, V=V, BT=BT, STATE_V_FIRST=fl["vfirst"])
    ins = {n: t for n, t in dict(q=q, k=k, v=v, h=h, g=g, g_gamma=g_gamma).items() if t is not None}
    check(kname, conf, {"o": r.o}, ins, lambda d: chunk_o_ref(d, B, T, H, HV, K, V, BT, cu, scale, fl))


# ------------------------------------------------------------------ GLA intra-chunk A and output
def gla_A_chunks(d, B, T, H, K, BT, cu, scale, k_lo=0, k_hi=None):
    """(b, row start, rows, head, A_chunk [n, n] tril) of every chunk: scale * sum_k q k exp2(g_t - g_s)."""
    q, k, g = d["q"], d["k"], d["g"]
    k_hi = K if k_hi is None else k_hi
    for (b, bos, L) in seqs_of(B, T, cu):
        for c in range(triton.cdiv(L, BT)):
            r0, r1 = bos + c * BT, min(bos + (c + 1) * BT, bos + L)
            for ih in range(H):
                Q, Kc, G = (x[b, r0:r1, ih, k_lo:k_hi] for x in (q, k, g))
                A = torch.einsum("ik,jk,ijk->ij", Q, Kc, torch.exp2(G[:, None, :] - G[None, :, :])) * scale
                yield b, r0, r1 - r0, ih, torch.tril(A)


def gla_A_ref(d, B, T, H, K, BT, cu, scale):
    A = torch.zeros(B, T, H, BT, dtype=torch.float64)
    for b, r0, n, ih, Ac in gla_A_chunks(d, B, T, H, K, BT, cu, scale):
        A[b, r0:r0 + n, ih, :n] = Ac
    return A


def gla_A_sel(B, T, H, BT, BC, cu, part):
    """Elements sub_inter ('inter': sub-blocks below the diagonal) or sub_intra ('intra': diagonal sub-blocks) store."""
    m = torch.zeros(B, T, H, BT, dtype=torch.bool)
    cols = torch.arange(BT) // BC
    for (b, bos, L) in seqs_of(B, T, cu):
        for t in range(L):
            ii = (t % BT) // BC
            m[b, bos + t, :, :] = (cols < ii) if part == "inter" else (cols == ii)
    return m


def run_gla():
    base_cases = [  # (B, T, H, K, BT, lens)
        (2, 50, 2, 32, 32, None),
        (1, 37, 2, 16, 32, None),
        (1, 80, 2, 32, 64, None),
        (1, None, 2, 32, 32, [13, 37, 20]),
        (1, None, 2, 16, 64, [70, 5, 33]),
    ]
    for kname in ["chunk_gla_fwd_A_kernel_intra_sub_inter", "chunk_gla_fwd_A_kernel_intra_sub_intra"]:
        for i, (B, T, H, K, BT, lens) in enumerate(base_cases):
            conf = f"B={B} T={T if lens is None else lens} H={H} K={K} BT={BT}"
            if FILTER and FILTER not in kname + " " + conf:
                continue
            safe(kname, conf, lambda: one_gla_A(kname, conf, 200 + i, B, T, H, K, BT, lens))
    kname = "chunk_gla_fwd_A_kernel_intra_sub_intra_split"
    for i, (B, T, H, K, BK, BT, lens) in enumerate([(2, 50, 2, 40, 16, 32, None), (1, 37, 2, 320, 128, 32, None),
                                                    (1, None, 2, 48, 16, 32, [13, 37, 20])]):
        conf = f"B={B} T={T if lens is None else lens} H={H} K={K} BK={BK} BT={BT}"
        if FILTER and FILTER not in kname + " " + conf:
            continue
        safe(kname, conf, lambda: one_gla_split(kname, conf, 300 + i, B, T, H, K, BK, BT, lens))
    kname = "chunk_gla_fwd_A_kernel_intra_sub_intra_merge"
    for i, (B, T, H, NK, BT, lens) in enumerate([(2, 50, 2, 3, 32, None), (1, None, 2, 2, 64, [70, 5, 33])]):
        conf = f"B={B} T={T if lens is None else lens} H={H} NK={NK} BT={BT}"
        if FILTER and FILTER not in kname + " " + conf:
            continue
        safe(kname, conf, lambda: one_gla_merge(kname, conf, 400 + i, B, T, H, NK, BT, lens))
    kname = "chunk_gla_fwd_kernel_o"
    for i, (B, T, H, HV, K, V, BK, BV, BT, vfirst, lens) in enumerate([
            (2, 50, 2, 2, 32, 32, 32, 32, 32, False, None), (2, 37, 2, 2, 32, 16, 16, 16, 16, True, None),
            (1, 50, 2, 4, 16, 32, 32, 16, 32, False, None),
            (1, None, 2, 2, 32, 32, 32, 32, 32, False, [13, 37, 20]),
            (1, None, 2, 4, 32, 16, 16, 16, 16, True, [40, 5, 33])]):
        conf = f"B={B} T={T if lens is None else lens} H={H} HV={HV} K={K} V={V} BK={BK} BV={BV} BT={BT}" + \
            (" vfirst" if vfirst else "")
        if FILTER and FILTER not in kname + " " + conf:
            continue
        safe(kname, conf, lambda: one_gla_o(kname, conf, 500 + i, B, T, H, HV, K, V, BK, BV, BT, vfirst, lens))


def varlen_of(lens, BT):
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32)
    return cu, int(cu[-1]), chunk_indices_of(cu, BT)


def one_gla_A(kname, conf, seed, B, T, H, K, BT, lens):
    cu, ci = None, None
    if lens is not None:
        cu, T, ci = varlen_of(lens, BT)
    NT = triton.cdiv(T, BT) if cu is None else len(ci)
    BC = min(16, BT)
    NC = triton.cdiv(BT, BC)
    scale = K ** -0.5
    q, k = rnd(B, T, H, K, seed=seed * 10 + 1), rnd(B, T, H, K, seed=seed * 10 + 2)
    g = gates((B, T, H, K), seed * 10 + 3)
    A = q.new_empty(B, T, H, BT).detach()
    if kname.endswith("sub_inter"):
        Kern = kern(f"fla_{kname}_op", kname, BK=32)
        r = Kern[(NT, NC * NC, B * H)](q=q, k=k, g=g, A=A, cu_seqlens=cu, chunk_indices=ci, scale=scale, T=T, H=H,
                                       K=K, BT=BT, BC=BC, NC=NC)
        part = "inter"
    else:
        Kern = kern(f"fla_{kname}_op", kname)
        BK = max(triton.next_power_of_2(K), 16)
        r = Kern[(NT, NC, B * H)](q=q, k=k, g=g, A=A, cu_seqlens=cu, chunk_indices=ci, scale=scale, T=T, H=H,
                                  K=K, BT=BT, BC=BC, BK=BK)
        part = "intra"
    check(kname, conf, {"A": r.A}, dict(q=q, k=k, g=g), lambda d: {"A": gla_A_ref(d, B, T, H, K, BT, cu, scale)},
          sel={"A": gla_A_sel(B, T, H, BT, BC, cu, part)})


def one_gla_split(kname, conf, seed, B, T, H, K, BK, BT, lens):
    cu, ci = None, None
    if lens is not None:
        cu, T, ci = varlen_of(lens, BT)
    NT = triton.cdiv(T, BT) if cu is None else len(ci)
    BC = min(16, BT)
    NC = triton.cdiv(BT, BC)
    NK = triton.cdiv(K, BK)
    scale = K ** -0.5
    q, k = rnd(B, T, H, K, seed=seed * 10 + 1), rnd(B, T, H, K, seed=seed * 10 + 2)
    g = gates((B, T, H, K), seed * 10 + 3)
    A_intra = q.new_empty(NK, B, T, H, BC).detach()
    Kern = kern(f"fla_{kname}_op", kname)
    r = Kern[(NK, NT * NC, B * H)](q=q, k=k, g=g, A=A_intra, cu_seqlens=cu, chunk_indices=ci, scale=scale, T=T,
                                   B=B, H=H, K=K, BT=BT, BC=BC, BK=BK, NC=NC)

    def ref(d):
        out = torch.zeros(NK, B, T, H, BC, dtype=torch.float64)
        for ik in range(NK):
            for b, r0, n, ih, Ac in gla_A_chunks(d, B, T, H, K, BT, cu, scale, ik * BK, min(K, ik * BK + BK)):
                for i in range(n):
                    ii = i // BC
                    cols = Ac[i, ii * BC:min(n, ii * BC + BC)]
                    out[ik, b, r0 + i, ih, :cols.shape[0]] = cols
        return {"A": out}
    check(kname, conf, {"A": r.A}, dict(q=q, k=k, g=g), ref)


def one_gla_merge(kname, conf, seed, B, T, H, NK, BT, lens):
    cu, ci = None, None
    if lens is not None:
        cu, T, ci = varlen_of(lens, BT)
    NT = triton.cdiv(T, BT) if cu is None else len(ci)
    BC = min(16, BT)
    NC = triton.cdiv(BT, BC)
    A_intra = rnd(NK, B, T, H, BC, seed=seed)
    A2 = A_intra.new_empty(B, T, H, BT).detach()
    Kern = kern(f"fla_{kname}_op", kname)
    r = Kern[(NT, NC, B * H)](A=A_intra, A2=A2, cu_seqlens=cu, chunk_indices=ci, T=T, B=B, H=H, BT=BT, BC=BC, NK=NK)

    def ref(d):
        s = d["A"].sum(0)  # [B, T, H, BC]
        out = torch.zeros(B, T, H, BT, dtype=torch.float64)
        for (b, bos, L) in seqs_of(B, T, cu):
            for t in range(L):
                ii = (t % BT) // BC
                out[b, bos + t, :, ii * BC:ii * BC + BC] = s[b, bos + t]
        return {"A2": out}
    check(kname, conf, {"A2": r.A2}, dict(A=A_intra), ref, sel={"A2": gla_A_sel(B, T, H, BT, BC, cu, "intra")})


def one_gla_o(kname, conf, seed, B, T, H, HV, K, V, BK, BV, BT, vfirst, lens):
    cu, ci = None, None
    if lens is not None:
        cu, T, ci = varlen_of(lens, BT)
    NT = triton.cdiv(T, BT) if cu is None else len(ci)
    scale = K ** -0.5
    q = rnd(B, T, H, K, seed=seed * 10 + 1)
    v = rnd(B, T, HV, V, seed=seed * 10 + 2)
    g = gates((B, T, HV, K), seed * 10 + 3)
    sshape = (V, K) if vfirst else (K, V)
    h = rnd(B, NT, HV, *sshape, seed=seed * 10 + 4)
    A = rnd(B, T, HV, BT, seed=seed * 10 + 5)
    o = torch.zeros_like(v).detach()
    Kern = kern(f"fla_{kname}_op", kname, BK=BK, BV=BV)

    def grid(meta): return (triton.cdiv(V, meta['BV']), NT, B * HV)
    r = Kern[grid](q=q, v=v, g=g, h=h, o=o, A=A, cu_seqlens=cu, chunk_indices=ci, scale=scale, T=T, H=H, HV=HV,
                   K=K, V=V, BT=BT, STATE_V_FIRST=vfirst)

    def ref(d):
        out = torch.zeros(B, T, HV, V, dtype=torch.float64)
        tg = 0
        for (b, bos, L) in seqs_of(B, T, cu):
            for c in range(triton.cdiv(L, BT)):
                i_tg = tg if cu is not None else b * NT + c
                tg += 1
                r0, r1 = bos + c * BT, min(bos + (c + 1) * BT, bos + L)
                n = r1 - r0
                for iv in range(HV):
                    ih = iv // (HV // H)
                    hc = d["h"].flatten(0, 1)[i_tg, iv]
                    hc = hc.transpose(0, 1) if vfirst else hc
                    qg = d["q"][b, r0:r1, ih] * torch.exp2(d["g"][b, r0:r1, iv])
                    Ac = torch.tril(d["A"][b, r0:r1, iv, :n])
                    out[b, r0:r1, iv] = scale * (qg @ hc) + Ac @ d["v"][b, r0:r1, iv]
        return {"o": out}
    check(kname, conf, {"o": r.o}, dict(q=q, v=v, g=g, h=h, A=A), ref)


if __name__ == "__main__":
    for fn in (run_chunk_o, run_chunk_h, run_gla):
        fn()
    print(f"{PASS[0]} of {PASS[1]} pass")
