#!/usr/bin/env python3
# On the GPU machine: python3 tools/ptx_check/reduction_order.py DIR (bench/PTX.md, the two centered_rows mismatches).
# Triton's layout for centered_rows_kernel (bf16, BLOCK=512, 4 warps) at n_cols 300 and 304, and its Mean against
# two emulated orders of the bf16 sum: sizePerThread 1 (Triton's at 300) and 4 (tgrad's), each with the lanes'
# butterfly and the warps' butterfly (w0 + w2) + (w1 + w3).
import importlib.util, json, os, re, sys
import numpy as np, torch
here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
chk = sys.argv[1]  # a directory `ptx_check.py prepare` wrote
spec = importlib.util.spec_from_file_location("merges", os.path.join(here, "tests/kernels/merges.py"))
merges = importlib.util.module_from_spec(spec); spec.loader.exec_module(merges)
man = {c["name"]: c for c in json.load(open(os.path.join(chk, "manifest.json")))}
def bf(x): return torch.tensor(x, dtype=torch.float64).to(torch.bfloat16).double().item()
def emulate(row, spt, n):
    pt = []
    for t in range(128):
        idx = [rep * 128 * spt + t * spt + j for rep in range(512 // (128 * spt)) for j in range(spt)]
        acc = row[idx[0]]
        for i in idx[1:]: acc = bf(acc + row[i])
        pt.append(acc)
    wv = []
    for w in range(4):
        lanes = pt[w * 32:(w + 1) * 32]; k = 16
        while k >= 1:
            lanes = [bf(lanes[l] + lanes[l ^ k]) for l in range(32)]; k //= 2
        wv.append(lanes[0])
    s = bf(bf(wv[0] + wv[2]) + bf(wv[1] + wv[3]))
    mu = torch.tensor(s, dtype=torch.float32) / torch.tensor(float(n), dtype=torch.float32)
    return (mu * mu).item()
for n in (300, 304):
    x = torch.randn(7, n, device="cuda").to(torch.bfloat16)
    k = merges.centered_rows_kernel[(7,)](x, x[:, 0].contiguous(), torch.zeros_like(x), torch.zeros(7, device="cuda"),
                                          n, IS_CENTERED=True, HAS_WEIGHT=True, BLOCK=512, num_warps=4)
    print("n_cols", n, re.findall(r"#blocked\d* = .*", k.asm["ttgir"]))
for name in ("centered_rows_c1w1_bf16", "centered_rows_c1w0_bf16"):
    c = man[name]; d = os.path.join(chk, name)
    X = np.load(os.path.join(d, c["inputs"]["X"])).astype(np.float64)
    W = np.load(os.path.join(d, c["inputs"]["W"])) if "W" in c["inputs"] else np.zeros(7)
    xt = torch.from_numpy(X).cuda().to(torch.bfloat16); mean = torch.zeros(7, device="cuda")
    merges.centered_rows_kernel[(7,)](xt, torch.from_numpy(W).float().cuda().to(torch.bfloat16), torch.zeros_like(xt),
                                      mean, 300, IS_CENTERED=True, HAS_WEIGHT=("w1" in name), BLOCK=512, num_warps=4)
    got = mean.cpu().numpy()
    for spt in (1, 4):
        em = np.array([emulate(list(X[r]) + [0.0] * 212, spt, 300) for r in range(7)], dtype=np.float32)
        print(name, f"emulated sizePerThread={spt}: bitwise equal to Triton's Mean in {int((em == got).sum())}/7 rows,"
              f" max_abs_err {np.abs(em - got).max():.3g}")
