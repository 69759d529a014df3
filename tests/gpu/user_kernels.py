#!/usr/bin/env python3
"""A new user's kernels, from `tgrad FILE --wrt ...` to `loss.backward()` (tests/gpu/user/*.py).

Kernels written the way people write them (an embedding lookup with repeated ids, a depthwise causal conv1d over
tl.static_range taps, SwiGLU on a packed input, QK RMS norm with rotary through reshape/permute/split/join, a masked
mean pool with an early return and atomic partial means, a KL divergence summed atomically into one scalar, residual
add + layer norm with weights in their own dtype, a running product of gates with zeros, softcapped flash attention
with its logsumexp, rotary embeddings whose angle rows a position id picks, attention with a learned bias and an int8
keep-mask, a softmax-weighted combination of experts over tl.static_range): each module is written by the command a user types, with no --arg and no -D, and launched as
the kernel; every output goes into a loss with random float64 weights, compared with torch.autograd in float64.

    python3 tests/gpu/user_kernels.py --write DIR [--tgrad bazel-bin/tools/cli/tgrad]   # here: writes the modules
    python3 tests/gpu/user_kernels.py --run DIR                                         # GPU machine: runs them
    TRITON_INTERPRET=1 python3 tests/gpu/user_kernels.py --run DIR --device cpu        # or Triton's interpreter

Tolerance: 1e-5 of max(1, max |reference|) in fp32, 5e-3 where a tl.dot runs at Triton's default tf32 on the GPU,
5e-2 for fp16 / bf16 data. Prints one line per case and the count of failures (exit 1 if any).
"""
import argparse
import importlib.util
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# file (tests/gpu/user/F.py), the --wrt the user types
COMMANDS = {
    "embedding": "1,2",
    "causal_conv1d": "0,1,2",
    "swiglu": "0",
    "qk_norm_rope": "0,1,2,3",
    "masked_mean_pool": "0",
    "kl_div": "0,1",
    "add_layer_norm": "0,1,2,3",
    "decayed_sum": "0,1",
    "softcap_attention": "0,1,2 --no-grad LSE",
    "rope_position_ids": "0,2,3",
    "bias_mask_attention": "0,1,2,3",
    "combine_experts": "0,1",
}


def write(folder, tgrad):
    os.makedirs(folder, exist_ok=True)
    failures = 0
    for name, wrt in COMMANDS.items():
        command = [tgrad, os.path.join(HERE, "user", name + ".py"), "--wrt"] + wrt.split() + [
            "--emit", "torch", "-o", os.path.join(folder, name + "_op.py")]
        done = subprocess.run(command, capture_output=True, text=True)
        print(f"{name:20} {'written' if done.returncode == 0 else 'FAILED: ' + done.stderr.strip()[:300]}")
        failures += done.returncode != 0
    return failures


def run(folder, device):
    import torch
    torch.set_default_device(device)
    on_gpu = device == "cuda"
    failures = 0

    def load(name):
        spec = importlib.util.spec_from_file_location(name + "_op", os.path.join(folder, name + "_op.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name + "_op"] = module
        spec.loader.exec_module(module)
        return module

    def rel(a, b):
        return (a.detach().double() - b.detach()).abs().max().item() / max(1.0, b.detach().abs().max().item())

    def leaves(*tensors):
        return [t.detach().double().requires_grad_() for t in tensors]

    def report(label, errors, tolerance):
        nonlocal failures
        worst = max(errors)
        ok = worst < tolerance  # (a NaN compares false: a failure)
        failures += not ok
        print(f"{label:44} {worst:.1e} {'PASS' if ok else 'FAIL'}")

    dot_tolerance = 5e-3 if on_gpu else 1e-5
    torch.manual_seed(0)

    m = load("embedding").embedding_kernel
    n_tok, vocab, hidden, seq = 13, 7, 70, 5
    ids = torch.randint(0, vocab, (n_tok,), dtype=torch.int32)
    w, pos = torch.randn(vocab, hidden, requires_grad=True), torch.randn(seq, hidden, requires_grad=True)
    out = m[(n_tok,)](ids, w, pos, torch.empty(n_tok, hidden), seq, hidden, 0.7, BLOCK_H=32).out_ptr
    g = torch.randn(n_tok, hidden, dtype=torch.float64)
    (out.double() * g).sum().backward()
    wd, pd = leaves(w, pos)
    ref = wd[ids.long()] * 0.7 + pd[torch.arange(n_tok) % seq]
    (ref * g).sum().backward()
    report("embedding (repeated ids)", [rel(out, ref), rel(w.grad, wd.grad), rel(pos.grad, pd.grad)], 1e-5)

    m = load("causal_conv1d").causal_conv1d_kernel
    for silu in (False, True):
        B, T, D, KW = 2, 19, 21, 4
        x, wt, bias = torch.randn(B, T, D, requires_grad=True), torch.randn(D, KW, requires_grad=True), \
            torch.randn(D, requires_grad=True)
        y = torch.empty(B, T, D)
        out = m[(B, (T + 7) // 8, (D + 15) // 16)](x, wt, bias, y, T, D, x.stride(0), x.stride(1), y.stride(0),
                                                   y.stride(1), KW=KW, BLOCK_T=8, BLOCK_D=16, SILU=silu).y_ptr
        g = torch.randn(B, T, D, dtype=torch.float64)
        (out.double() * g).sum().backward()
        xd, wdd, bd = leaves(x, wt, bias)
        ref = torch.nn.functional.conv1d(torch.nn.functional.pad(xd.transpose(1, 2), (KW - 1, 0)), wdd[:, None, :],
                                         bd, groups=D).transpose(1, 2)
        ref = torch.nn.functional.silu(ref) if silu else ref
        (ref * g).sum().backward()
        report(f"causal conv1d (SILU={silu})",
               [rel(out, ref), rel(x.grad, xd.grad), rel(wt.grad, wdd.grad), rel(bias.grad, bd.grad)], 1e-5)

    m = load("swiglu").swiglu_kernel
    rows, H = 6, 45
    x = torch.randn(rows, 2 * H, requires_grad=True)
    out = m[(rows,)](x, torch.empty(rows, H), rows, H, BLOCK=16).out_ptr
    g = torch.randn(rows, H, dtype=torch.float64)
    (out.double() * g).sum().backward()
    (xd,) = leaves(x)
    ref = torch.nn.functional.silu(xd[:, :H]) * xd[:, H:]
    (ref * g).sum().backward()
    report("swiglu (packed gate and up)", [rel(out, ref), rel(x.grad, xd.grad)], 1e-5)

    m = load("qk_norm_rope").qk_norm_rope_kernel
    n_tok, H, D = 10, 4, 16
    q, w = torch.randn(n_tok, H, D, requires_grad=True), torch.randn(D, requires_grad=True)
    ang = torch.randn(n_tok, D // 2)
    cos, sin = ang.cos().requires_grad_(), ang.sin().requires_grad_()
    out = m[((n_tok + 3) // 4,)](q, w, cos, sin, torch.empty(n_tok, H, D), n_tok, 1e-6, H=H, D=D, BLOCK_T=4).out_ptr
    g = torch.randn(n_tok, H, D, dtype=torch.float64)
    (out.double() * g).sum().backward()
    qd, wd, cd, sd = leaves(q, w, cos, sin)
    qn = qd * torch.rsqrt((qd * qd).mean(-1, keepdim=True) + 1e-6) * wd
    x1, x2 = qn[..., : D // 2], qn[..., D // 2:]
    ref = torch.cat([x1 * cd[:, None] - x2 * sd[:, None], x2 * cd[:, None] + x1 * sd[:, None]], -1)
    (ref * g).sum().backward()
    report("QK RMS norm + rotary (reshape, split, join)",
           [rel(out, ref), rel(q.grad, qd.grad), rel(w.grad, wd.grad), rel(cos.grad, cd.grad),
            rel(sin.grad, sd.grad)], 1e-5)

    m = load("masked_mean_pool").masked_mean_pool_kernel
    B, T, D = 3, 21, 10
    x = torch.randn(B, T, D, requires_grad=True)
    lens = torch.tensor([21, 5, 12], dtype=torch.int32)
    out = m[(B, (T + 7) // 8, (D + 7) // 8)](x, lens, torch.zeros(B, D), x.stride(0), x.stride(1), D, BLOCK_T=8,
                                             BLOCK_D=8).out_ptr
    g = torch.randn(B, D, dtype=torch.float64)
    (out.double() * g).sum().backward()
    (xd,) = leaves(x)
    ref = torch.stack([xd[i, : lens[i]].mean(0) for i in range(B)])
    (ref * g).sum().backward()
    report("masked mean pool (early return, atomics)", [rel(out, ref), rel(x.grad, xd.grad)], 1e-5)

    m = load("kl_div").kl_div_kernel
    for log_target in (False, True):
        R, C = 5, 70
        lp = torch.log_softmax(torch.randn(R, C), 1).requires_grad_()
        t = torch.softmax(torch.randn(R, C), 1)
        t = (t.log() if log_target else t).requires_grad_()
        out = m[(R,)](lp, t, torch.zeros(1), C, C, LOG_TARGET=log_target, BLOCK=32).loss_ptr
        g = torch.randn(1, dtype=torch.float64)
        (out.double() * g).sum().backward()
        lpd, td = leaves(lp, t)
        ref = torch.nn.functional.kl_div(lpd, td, reduction="sum", log_target=log_target).reshape(1)
        (ref * g).sum().backward()
        report(f"KL divergence (LOG_TARGET={log_target})", [rel(out, ref), rel(lp.grad, lpd.grad),
                                                            rel(t.grad, td.grad)], 1e-5)

    m = load("add_layer_norm").add_layer_norm_kernel
    R, N = 6, 50
    g1, g2 = torch.randn(R, N, dtype=torch.float64), torch.randn(R, N, dtype=torch.float64)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, r = (torch.randn(R, N).to(dtype).requires_grad_() for _ in range(2))
        w, b = (torch.randn(N).to(dtype).requires_grad_() for _ in range(2))
        out = m[(R,)](x, r, w, b, torch.empty(R, N, dtype=dtype), torch.empty(R, N, dtype=dtype), N, 1e-5, BLOCK=64)
        ((out.y_ptr.double() * g1).sum() + (out.res_out_ptr.double() * g2).sum()).backward()
        xd, rd, wd, bd = leaves(x, r, w, b)
        h = xd + rd
        ref = torch.nn.functional.layer_norm(h, (N,), wd, bd, 1e-5)
        ((ref * g1).sum() + (h * g2).sum()).backward()
        report(f"residual add + layer norm ({str(dtype)[6:]})",
               [rel(out.y_ptr, ref), rel(out.res_out_ptr, h), rel(x.grad, xd.grad), rel(r.grad, rd.grad),
                rel(w.grad, wd.grad), rel(b.grad, bd.grad)], 1e-5 if dtype == torch.float32 else 5e-2)

    m = load("decayed_sum").decayed_sum_kernel
    R, T = 4, 13
    x = torch.randn(R, T, requires_grad=True)
    gates = torch.rand(R, T) + 0.5
    gates[1, 3] = gates[2, 2] = gates[2, 7] = gates[3, 12] = 0.0  # one zero, two, one at the end
    gates.requires_grad_()
    out = m[(R,)](x, gates, torch.empty(R, T), T, BLOCK=16).out_ptr
    g = torch.randn(R, T, dtype=torch.float64)
    (out.double() * g).sum().backward()
    xd, gd = leaves(x, gates)
    ref = xd * torch.cumprod(gd, 1)
    (ref * g).sum().backward()
    report("running product of gates (zeros)", [rel(out, ref), rel(x.grad, xd.grad), rel(gates.grad, gd.grad)], 1e-5)

    m = load("softcap_attention").softcap_attn_fwd
    BH, N, D = 2, 37, 16
    for causal in (False, True):
        q, k, v = (torch.randn(BH, N, D, requires_grad=True) for _ in range(3))
        out = m[((N + 15) // 16, BH)](q, k, v, torch.empty(BH, N, D), torch.empty(BH, N), N, 0.25, 5.0, D=D, BM=16,
                                      BN=16, CAUSAL=causal).O
        g = torch.randn(BH, N, D, dtype=torch.float64)
        (out.double() * g).sum().backward()
        qd, kd, vd = leaves(q, k, v)
        s = 5.0 * torch.tanh((qd @ kd.transpose(1, 2)) * 0.25 / 5.0)
        if causal:
            s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
        ref = torch.softmax(s, -1) @ vd
        (ref * g).sum().backward()
        report(f"softcapped attention (CAUSAL={causal})",
               [rel(out, ref), rel(q.grad, qd.grad), rel(k.grad, kd.grad), rel(v.grad, vd.grad)], dot_tolerance)
    m = load("rope_position_ids").rope_pos_kernel
    if on_gpu:  # (its two stores' upstream gradients are taken by tl.atomic_xchg, which Triton's interpreter lacks)
        n_tok, H, HD, P = 6, 3, 16, 9
        x = torch.randn(n_tok, H * HD, requires_grad=True)
        pos = torch.tensor([0, 3, 3, 8, 1, 3], dtype=torch.int32)
        ang = torch.randn(P, HD // 2)
        cos, sin = ang.cos().requires_grad_(), ang.sin().requires_grad_()
        out = m[(n_tok, H)](x, pos, cos, sin, torch.empty(n_tok, H * HD), H, H * HD, HD=HD).out_ptr
        g = torch.randn(n_tok, H * HD, dtype=torch.float64)
        (out.double() * g).sum().backward()
        xd, cd, sd = leaves(x, cos, sin)
        c, s = cd[pos.long()][:, None], sd[pos.long()][:, None]
        xv = xd.view(n_tok, H, HD)
        x1, x2 = xv[..., : HD // 2], xv[..., HD // 2:]
        ref = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).reshape(n_tok, H * HD)
        (ref * g).sum().backward()
        report("rotary with position ids (repeated rows)",
               [rel(out, ref), rel(x.grad, xd.grad), rel(cos.grad, cd.grad), rel(sin.grad, sd.grad)], 1e-5)

    m = load("bias_mask_attention").masked_bias_attn_fwd
    BH, N, D = 2, 37, 16
    q, k, v = (torch.randn(BH, N, D, requires_grad=True) for _ in range(3))
    bias = torch.randn(N, N, requires_grad=True)
    keep = (torch.rand(N, N) > 0.3).to(torch.int8)
    keep[:, 0] = 1
    out = m[((N + 15) // 16, BH)](q, k, v, bias, keep, torch.empty(BH, N, D), N, 0.25, D=D, BM=16, BN=16).O
    g = torch.randn(BH, N, D, dtype=torch.float64)
    (out.double() * g).sum().backward()
    qd, kd, vd, bd = leaves(q, k, v, bias)
    scores = ((qd @ kd.transpose(1, 2)) * 0.25 + bd).masked_fill(keep == 0, float("-inf"))
    ref = torch.softmax(scores, -1) @ vd
    (ref * g).sum().backward()
    report("attention with a bias and a keep-mask",
           [rel(out, ref), rel(q.grad, qd.grad), rel(k.grad, kd.grad), rel(v.grad, vd.grad), rel(bias.grad, bd.grad)],
           dot_tolerance)

    m = load("combine_experts").combine_experts_kernel
    E, n_tok, H = 4, 5, 40
    x, w = torch.randn(E, n_tok, H, requires_grad=True), torch.randn(n_tok, E, requires_grad=True)
    out = m[(n_tok,)](x, w, torch.empty(n_tok, H), n_tok, H, E=E, BLOCK_H=16).out_ptr
    g = torch.randn(n_tok, H, dtype=torch.float64)
    (out.double() * g).sum().backward()
    xd, wd = leaves(x, w)
    ref = torch.einsum("te,eth->th", torch.softmax(wd, -1), xd)
    (ref * g).sum().backward()
    report("experts combined by softmax weights", [rel(out, ref), rel(x.grad, xd.grad), rel(w.grad, wd.grad)], 1e-5)
    print(f"failures: {failures}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="DIR", help="write each kernel's module with tgrad into DIR")
    parser.add_argument("--tgrad", default="bazel-bin/tools/cli/tgrad")
    parser.add_argument("--run", metavar="DIR", help="run the modules in DIR against torch.autograd")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu under TRITON_INTERPRET=1")
    args = parser.parse_args()
    if not args.write and not args.run:
        parser.error("give --write DIR or --run DIR")
    failures = write(args.write, args.tgrad) if args.write else 0
    if args.run:
        failures += run(args.run, args.device)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
