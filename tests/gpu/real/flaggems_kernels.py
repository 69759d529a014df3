# FlagGems' reduction, scan, normalization, loss, rotary-embedding and matmul kernels (FlagOpen/FlagGems,
# src/flag_gems/ops/*.py and fused/*.py, fetched, not committed) through the modules tgrad wrote, each launched as
# FlagGems' own host function launches it (its grids, block sizes, strides, eps and the like, the @libentry /
# @libtuner / @triton.autotune / @triton.heuristics decorators kept on the kernel), against a float64 PyTorch
# reference of the kernel's math written here. Every float output goes into a loss with random fp64 weights; outputs
# and input gradients are compared, max abs error over max(1, max|ref|) (2e-5 fp32, 6e-2 fp16/bf16).
# The kernels: the three-stage products (prod_kernel_mid, prod_kernel_result: tl.reduce with a product combine
# function, inputs with zeros), prod_kernel (a loop product), max/min partials and rows (tl.max(...,
# return_indices=True)), argmax's partials, the cumsum scans (scan_part_sum_kernel, the reduce-then-scan kernels),
# log_softmax (an online logsumexp over -inf-padded lanes) and softmax over the inner dimension (long rows: the
# online softmax, its loop bounds from a jit helper) and a non-inner one;
# the norms: layer norm's three kernels (layer_norm_persistent_kernel_multiline for N <= 128,
# layer_norm_persistent_kernel up to 4096, layer_norm_loop_kernel past it: a Welford loop and a reversed second
# sweep; mean and rstd stored too), rms_norm_kernel (and its inverse rms), skip_layer_norm_kernel,
# fused_add_rms_norm_kernel (in place into its input and residual: the module returns them as new tensors),
# group_norm_kernel (mean, rstd), weight_norm_kernel_first / _last (the norm too), l2_norm_kernel (vector_norm over
# a dimension), batch_norm_forward_kernel in training (a Welford loop; mean, inv_std and the running statistics it
# updates in place);
# the losses: nll_loss_forward_kernel (reduction=0, the module written with -D reduction=0) and
# celoss_indices_kernel (cross entropy with class indices: an online logsumexp, the weight of each target stored);
# apply_rotary_pos_emb_kernel (rotate-half and interleaved, with and without position ids); mm_kernel_general
# (@libtuner, GROUP_M=8, a row-major and a column-major A) and bmm_kernel (@libtuner + @triton.heuristics: the
# DIVISIBLE_M/N/K variants); general_interpolate_bicubic2d_aa_kernel (antialiased bicubic downsampling: runtime
# float scales, tgrad infers them as floats).
# Usage: python3 tests/gpu/real/flaggems_kernels.py [MODULES_DIR] [--only NAME] (default scratch/fg/mods), where
# MODULES_DIR holds K_op.py for each kernel K, written in FlagGems' src/ folder by
#   tgrad flag_gems/{ops,fused}/FILE.py -I . --kernel K --wrt <the float pointers it loads> --emit torch \
#       -o MODULES_DIR/K_op.py
# (nll_loss_forward_kernel with -D reduction=0 as well), and FlagGems' package is importable (PYTHONPATH=its src/
# folder: the modules import flag_gems' runtime).
import importlib.util
import math
import os
import sys
import traceback

import torch

ARGS = list(sys.argv[1:])
ONLY = None
if "--only" in ARGS:
    i = ARGS.index("--only")
    ONLY = ARGS[i + 1].split(",")
    del ARGS[i:i + 2]
FOLDER = ARGS[0] if ARGS else "scratch/fg/mods"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 2e-5, torch.float16: 6e-2, torch.bfloat16: 6e-2}
FAILS = CHECKS = 0


def load(name):
    spec = importlib.util.spec_from_file_location(name + "_op", os.path.join(FOLDER, name + "_op.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name + "_op"] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def next_pow2(n):
    return 1 << (n - 1).bit_length() if n > 0 else 1


def cdiv(a, b):
    return (a + b - 1) // b


def rel_err(got, ref):
    return (got.double() - ref).abs().max().item() / max(1.0, ref.abs().max().item())


def check(label, dtype, outputs, refs, inputs, ref_inputs):
    """outputs: tensors the module returned; refs: their float64 references computed from ref_inputs (leaves
    requiring grad, float64 copies of inputs). One weighted loss over all of them; compare outputs and gradients."""
    global FAILS, CHECKS
    weights = [torch.randn(r.shape, dtype=torch.float64, device=r.device) for r in refs]
    sum((o.double() * w).sum() for o, w in zip(outputs, weights)).backward()
    sum((r * w).sum() for r, w in zip(refs, weights)).backward()
    errs = [rel_err(o.detach(), r.detach()) for o, r in zip(outputs, refs)]
    errs += [rel_err(x.grad, rx.grad) for x, rx in zip(inputs, ref_inputs)]
    ok = all(e < TOL[dtype] for e in errs)  # (a NaN compares false: a failure)
    CHECKS += 1
    FAILS += not ok
    print(f"{label:58} {str(dtype)[6:]:9} errs {' '.join(f'{e:.1e}' for e in errs)} {'PASS' if ok else 'FAIL'}")


def leaf(t):
    return t.detach().double().requires_grad_()


def with_zeros(x, blocks, block):
    """Exact zeros: one in the first block, two in the second (the product's adjoint at zeros)."""
    x = x.clone()
    if blocks > 0 and x.numel() > 1:
        x.view(-1)[min(1, x.numel() - 1)] = 0
    if blocks > 1 and x.numel() > block + 3:
        x.view(-1)[block] = 0
        x.view(-1)[block + 3] = 0
    return x


def case_prod_mid(dtype):
    k = load("prod_kernel_mid")
    for M in (1000, 37):
        inp = with_zeros(1 + 0.05 * torch.randn(M, device="cuda"), 2, next_pow2(math.ceil(math.sqrt(M)))).to(dtype)
        inp.requires_grad_()
        bs = next_pow2(math.ceil(math.sqrt(M)))
        mid_size = cdiv(M, bs)
        mid = torch.empty(mid_size, dtype=dtype, device="cuda")
        out = k[(mid_size, 1, 1)](inp, mid, M, bs)
        x = leaf(inp)
        padded = torch.cat([x, torch.ones(mid_size * bs - M, dtype=x.dtype, device=x.device)])
        check(f"prod_kernel_mid M={M}", dtype, [out.mid], [padded.view(mid_size, bs).prod(1)], [inp], [x])


def case_prod_result(dtype):
    k = load("prod_kernel_result")
    for n in (31, 8):
        mid = with_zeros(1 + 0.1 * torch.randn(n, device="cuda"), 1, n).to(dtype).requires_grad_()
        out = torch.empty([], dtype=dtype, device="cuda")
        got = k[(1, 1, 1)](mid, out, n, next_pow2(n))
        x = leaf(mid)
        check(f"prod_kernel_result n={n}", dtype, [got.out], [x.prod()], [mid], [x])


def case_prod_rows(dtype):
    k = load("prod_kernel")
    for M, N in ((33, 70), (64, 16)):
        inp = (1 + 0.05 * torch.randn(M, N, device="cuda"))
        inp[3, 5] = 0
        inp[7, 2] = 0
        inp[7, 9] = 0
        inp = inp.to(dtype).requires_grad_()
        out = torch.empty(M, dtype=dtype, device="cuda")
        got = k[lambda meta: (cdiv(M, meta["BLOCK_M"]),)](inp, out, M, N)
        x = leaf(inp)
        check(f"prod_kernel (rows) M={M} N={N}", dtype, [got.out], [x.prod(1)], [inp], [x])


def case_extreme_partial(name, reduce):
    def run(dtype):
        k = load(name)
        for M in (1000, 50):
            inp = torch.randn(M, device="cuda").to(dtype).requires_grad_()
            bs = next_pow2(math.ceil(math.sqrt(M)))
            mid_size = cdiv(M, bs)
            mid = torch.empty(mid_size, dtype=dtype, device="cuda")
            got = k[(mid_size, 1, 1)](inp, mid, M, bs)
            x = leaf(inp)
            fill = -math.inf if reduce == "max" else math.inf
            padded = torch.cat([x, torch.full((mid_size * bs - M,), fill, dtype=x.dtype, device=x.device)])
            # (amax / amin: tied elements share the gradient evenly, as tgrad's adjoint of tl.max splits it.)
            ref = getattr(padded.view(mid_size, bs), "a" + reduce)(1)
            check(f"{name} M={M}", dtype, [got.mid], [ref], [inp], [x])
    return run


def case_extreme_rows(name, reduce):
    def run(dtype):
        k = load(name)
        for M, N in ((33, 300), (4, 7)):
            # Distinct values in each row, exact in every dtype (eighths of a permutation): FlagGems' running
            # maximum keeps the first of tied block maxima, torch's max(dim) another index.
            perm = torch.stack([torch.randperm(N, device="cuda") for _ in range(M)])
            inp = ((perm.float() - N // 2) / 8).to(dtype).requires_grad_()
            values = torch.empty(M, dtype=dtype, device="cuda")
            indices = torch.empty(M, dtype=torch.int64, device="cuda")
            got = k[lambda meta: (cdiv(M, meta["BLOCK_M"]),)](inp, values, indices, M, N)
            x = leaf(inp)
            ref = getattr(x, reduce)(1)
            ok_index = torch.equal(got.out_index.cpu(), ref.indices.cpu())
            check(f"{name} M={M} N={N} (indices {'equal' if ok_index else 'DIFFER'})", dtype, [got.out_value],
                  [ref.values], [inp], [x])
    return run


def case_argmax_partial(dtype):
    k = load("argmax_kernel_1")
    for M in (1000, 50):
        inp = torch.randn(M, device="cuda").to(dtype).requires_grad_()
        bs = next_pow2(math.ceil(math.sqrt(M)))
        mid_size = cdiv(M, bs)
        mid_value = torch.empty(mid_size, dtype=dtype, device="cuda")
        mid_index = torch.empty(mid_size, dtype=torch.int64, device="cuda")
        got = k[(mid_size, 1, 1)](inp, mid_value, mid_index, M, bs)
        x = leaf(inp)
        padded = torch.cat([x, torch.full((mid_size * bs - M,), -math.inf, dtype=x.dtype, device=x.device)])
        check(f"argmax_kernel_1 M={M}", dtype, [got.mid_value], [padded.view(mid_size, bs).amax(1)], [inp], [x])


def case_scan_part_sum(dtype):
    k = load("scan_part_sum_kernel")
    for n in (5000, 300):
        bs = 1024 if n > 4096 else next_pow2(n)
        part_num = cdiv(n, bs)
        inp = torch.randn(n, device="cuda").to(dtype).requires_grad_()
        out = torch.empty(n, dtype=dtype, device="cuda")
        partial = torch.empty(part_num, dtype=dtype, device="cuda")
        got = k[(part_num,)](inp, out, partial, n, part_num, bs)
        x = leaf(inp)
        pad = torch.cat([x, torch.zeros(part_num * bs - n, dtype=x.dtype, device=x.device)]).view(part_num, bs)
        check(f"scan_part_sum_kernel n={n}", dtype, [got.out, got.partial_sum],
              [pad.cumsum(1).reshape(-1)[:n], pad.sum(1)], [inp], [x])


def case_root_scan(dtype):
    k = load("reduce_then_scan_root_scan_kernel_row")
    for M, N in ((6, 1000), (3, 64)):
        x_in = torch.randn(M, N, device="cuda").to(dtype).requires_grad_()
        out = torch.empty(M, N, dtype=torch.float32, device="cuda")
        tile = next_pow2(N)
        got = k[(M, 1, 1)](x_in, out, N, tile, num_warps=8 if tile > 2048 else 4)
        x = leaf(x_in)
        check(f"reduce_then_scan_root_scan_kernel_row {M}x{N}", dtype, [got.out_ptr], [x.cumsum(1)], [x_in], [x])


def case_block_sum(dtype):
    k = load("reduce_then_scan_block_sum_kernel_row")
    for M, N, tile, ctas in ((3, 20000, 4096, 3), (2, 5000, 1024, 2)):
        tiles_per_cta = cdiv(cdiv(N, tile), ctas)
        x_in = torch.randn(M, N, device="cuda").to(dtype).requires_grad_()
        sums = torch.empty(M, ctas, dtype=torch.float32, device="cuda")
        got = k[(M, ctas, 1, 1)](x_in, sums, N, tiles_per_cta, tile)
        x = leaf(x_in)
        span = tiles_per_cta * tile
        ref = torch.stack([x[:, c * span:min((c + 1) * span, N)].sum(1) for c in range(ctas)], 1)
        check(f"reduce_then_scan_block_sum_kernel_row {M}x{N}", dtype, [got.block_sum_ptr], [ref], [x_in], [x])


def case_block_scan(dtype):
    k = load("reduce_then_scan_block_scan_kernel_row")
    for M, N, tile, ctas in ((3, 20000, 4096, 3), (2, 5000, 1024, 2)):
        tiles_per_cta = cdiv(cdiv(N, tile), ctas)
        x_in = torch.randn(M, N, device="cuda").to(dtype).requires_grad_()
        prefix = torch.randn(M, ctas, device="cuda", dtype=torch.float32).requires_grad_()
        out = torch.empty(M, N, dtype=torch.float32, device="cuda")
        got = k[(M, ctas, 1)](x_in, prefix, out, N, ctas, tiles_per_cta, tile)
        x, p = leaf(x_in), leaf(prefix)
        span = tiles_per_cta * tile
        parts = []
        for c in range(ctas):
            start = p[:, c - 1:c] if c > 0 else torch.zeros(M, 1, dtype=p.dtype, device=p.device)
            parts.append(start + x[:, c * span:min((c + 1) * span, N)].cumsum(1))
        check(f"reduce_then_scan_block_scan_kernel_row {M}x{N}", dtype, [got.out_ptr], [torch.cat(parts, 1)],
              [x_in, prefix], [x, p])


def case_log_softmax(dtype):
    k = load("log_softmax_kernel")
    for M, N, K in ((10, 1000, 1), (5, 37, 3), (3, 300, 2)):
        x_in = torch.randn(M, N, K, device="cuda").to(dtype).requires_grad_()
        out = torch.empty(M, N, K, dtype=dtype, device="cuda")
        got = k[lambda meta: (cdiv(M, meta["BLOCK_M"]), K)](out, x_in, M, N, K, num_warps=8)
        x = leaf(x_in)
        check(f"log_softmax_kernel {M}x{N}x{K}", dtype, [got.output_ptr], [torch.log_softmax(x, 1)], [x_in], [x])


def case_softmax_non_inner(dtype):
    k = load("softmax_kernel_non_inner")
    for M, N, K in ((4, 100, 3), (2, 1000, 17)):
        x_in = torch.randn(M, N, K, device="cuda").to(dtype).requires_grad_()
        out = torch.empty(M, N, K, dtype=dtype, device="cuda")
        got = k[lambda meta: (M, cdiv(K, meta["TILE_K"]), 1)](out, x_in, M, N, K)
        x = leaf(x_in)
        check(f"softmax_kernel_non_inner {M}x{N}x{K}", dtype, [got.output_ptr], [torch.softmax(x, 1)], [x_in], [x])


def case_softmax_inner(dtype):
    k = load("softmax_kernel_inner")
    # (FlagGems' heuristics: one tile per row up to N = 32768; past it, tiles of 4096 in the online softmax.)
    for M, N in ((6, 100), (4, 40000), (2, 70001)):
        x_in = torch.randn(M, N, device="cuda").to(dtype).requires_grad_()
        out = torch.empty(M, N, dtype=dtype, device="cuda")
        got = k[(M, 1, 1)](out, x_in, M, N)
        x = leaf(x_in)
        check(f"softmax_kernel_inner {M}x{N}", dtype, [got.output_ptr], [torch.softmax(x, 1)], [x_in], [x])


def kept(before, after):
    """Whether a buffer the caller passed is as it was: the module returns what the kernel stores to as new tensors
    and leaves the caller's alone, in-place kernels included."""
    return "kept" if torch.equal(before, after) else "CHANGED"


def layer_norm_ref(x, w, b, eps):
    """Layer norm over the last dimension as FlagGems' kernels compute it: biased variance, rsqrt(var + eps)."""
    mean = x.mean(-1)
    d = x - mean[..., None]
    rstd = ((d * d).mean(-1) + eps).rsqrt()
    return d * rstd[..., None] * w + b, mean, rstd


def rms_norm_ref(x, w, eps):
    rrms = 1 / ((x * x).mean(-1) + eps).sqrt()
    return x * rrms[..., None] * w, rrms


def case_layer_norm(name, shapes, tiles):
    """ops/layernorm.py's layer_norm: the kernel FlagGems picks for these N (multiline for N <= 128, persistent up
    to 4096, the loop past it), mean and rstd buffers in the input's dtype (FlagGems allocates them so)."""
    def run(dtype):
        k = load(name)
        eps = 1e-5
        for M, N in shapes:
            x_in = torch.randn(M, N, device="cuda").to(dtype).requires_grad_()
            w_in = torch.randn(N, device="cuda").to(dtype).requires_grad_()
            b_in = torch.randn(N, device="cuda").to(dtype).requires_grad_()
            y = torch.empty_like(x_in)
            mean = torch.empty(M, dtype=dtype, device="cuda")
            rstd = torch.empty(M, dtype=dtype, device="cuda")
            grid, constexprs = tiles(M, N)
            got = k[grid](x_in, y, w_in, b_in, mean, rstd, M, N, eps, *constexprs)
            x, w, b = leaf(x_in), leaf(w_in), leaf(b_in)
            check(f"{name} {M}x{N}", dtype, [got.out_ptr, got.out_mean_ptr, got.out_rstd_ptr],
                  list(layer_norm_ref(x, w, b, eps)), [x_in, w_in, b_in], [x, w, b])
    return run


def multiline_tiles(M, N):
    tile_n = next_pow2(N)
    tile_m = cdiv(1024, tile_n)
    return (cdiv(M, tile_m), 1, 1), (tile_m, tile_n)


def case_rms_norm(dtype):
    k = load("rms_norm_kernel")
    eps = 1e-5
    # (RmsNorm.forward: rows over all but the normalized (last) dimension, the inverse rms in float32 always.)
    for shape in ((2, 7, 300), (33, 1000), (3, 64)):
        N = shape[-1]
        M = math.prod(shape[:-1])
        x_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        w_in = torch.randn(N, device="cuda").to(dtype).requires_grad_()
        y = torch.empty_like(x_in)
        inv_rms = torch.empty((M,), device="cuda", dtype=torch.float32)
        got = k[M,](y, inv_rms, x_in, w_in, N, 1, N, 1, N, eps, next_pow2(N))
        x, w = leaf(x_in), leaf(w_in)
        ref_y, ref_rrms = rms_norm_ref(x, w, eps)
        check(f"rms_norm_kernel {'x'.join(map(str, shape))}", dtype, [got.out_ptr, got.INV_RMS],
              [ref_y, ref_rrms.reshape(M)], [x_in, w_in], [x, w])


def case_skip_layer_norm(dtype):
    k = load("skip_layer_norm_kernel")
    eps = 1e-5
    for shape in ((2, 7, 300), (33, 1000), (5, 100)):
        N = shape[-1]
        M = math.prod(shape[:-1])
        x_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        r_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        w_in = torch.randn(N, device="cuda").to(dtype).requires_grad_()
        b_in = torch.randn(N, device="cuda").to(dtype).requires_grad_()
        y = torch.empty_like(x_in)
        got = k[M,](y, x_in, r_in, w_in, b_in, N, 1, N, 1, N, 1, N, eps, next_pow2(N))
        x, r, w, b = leaf(x_in), leaf(r_in), leaf(w_in), leaf(b_in)
        check(f"skip_layer_norm_kernel {'x'.join(map(str, shape))}", dtype, [got.Y],
              [layer_norm_ref(x + r, w, b, eps)[0]], [x_in, r_in, w_in, b_in], [x, r, w, b])


def case_fused_add_rms_norm(dtype):
    k = load("fused_add_rms_norm_kernel")
    eps = 1e-5
    # The kernel writes x + residual into residual and the normalized sum into input, in place: the module returns
    # both as new tensors (and the caller's are checked to be as they were).
    for shape in ((2, 7, 300), (33, 1000), (4, 64)):
        N = shape[-1]
        M = math.prod(shape[:-1])
        x_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        r_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        w_in = torch.randn(N, device="cuda").to(dtype).requires_grad_()
        x_before, r_before = x_in.detach().clone(), r_in.detach().clone()
        got = k[M,](x_in, r_in, w_in, N, 1, N, 1, N, eps, next_pow2(N))
        untouched = f"{kept(x_before, x_in.detach())}/{kept(r_before, r_in.detach())}"
        x, r, w = leaf(x_in), leaf(r_in), leaf(w_in)
        check(f"fused_add_rms_norm_kernel {'x'.join(map(str, shape))} (inputs {untouched})", dtype,
              [got.input_ptr, got.residual_ptr], [rms_norm_ref(x + r, w, eps)[0], x + r], [x_in, r_in, w_in],
              [x, r, w])


def case_group_norm(dtype):
    k = load("group_norm_kernel")
    eps = 1e-5
    # Group sizes that are powers of two, or a single group: the kernel masks its padded channel rows with
    # `group * group_size + offset < C`, so for a group size of 3 (block 4) a group would read (and write) the next
    # group's first channel; FlagGems itself computes wrong values there.
    for N, C, H, W, G in ((3, 6, 7, 5, 3), (2, 5, 9, 1, 1), (4, 16, 3, 3, 4)):
        HW = H * W
        group_size = cdiv(C, G)
        x_in = torch.randn(N, C, H, W, device="cuda").to(dtype).requires_grad_()
        w_in = torch.randn(C, device="cuda").to(dtype).requires_grad_()
        b_in = torch.randn(C, device="cuda").to(dtype).requires_grad_()
        y = torch.empty_like(x_in)
        mean = torch.empty((N, G), dtype=dtype, device="cuda")
        rstd = torch.empty((N, G), dtype=dtype, device="cuda")
        got = k[(N * G,)](x_in, y, w_in, b_in, mean, rstd, group_size, C, HW, G, eps,
                          BLOCK_GROUP_SIZE=next_pow2(group_size), BLOCK_HW_SIZE=next_pow2(HW))
        x, w, b = leaf(x_in), leaf(w_in), leaf(b_in)
        xg = x.reshape(N, G, -1)
        ref_mean = xg.mean(-1)
        d = xg - ref_mean[..., None]
        ref_rstd = ((d * d).mean(-1) + eps).rsqrt()
        ref_y = (d * ref_rstd[..., None]).reshape(N, C, H, W) * w[:, None, None] + b[:, None, None]
        check(f"group_norm_kernel {N}x{C}x{H}x{W} groups={G}", dtype, [got.Y, got.Mean, got.Rstd],
              [ref_y, ref_mean, ref_rstd], [x_in, w_in, b_in], [x, w, b])


def case_weight_norm_first(dtype):
    k = load("weight_norm_kernel_first")
    tiny = torch.finfo(torch.float32).tiny  # (weight_norm_interface's eps)
    # dim=0: a norm per row of v (its first dimension), g shaped (rows, 1, ...) as torch's _weight_norm_interface.
    for shape in ((37, 3, 5), (6, 1000), (10, 2100)):
        M = shape[0]
        N = math.prod(shape[1:])
        g_shape = (M,) + (1,) * (len(shape) - 1)
        v_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        g_in = torch.randn(g_shape, device="cuda").to(dtype).requires_grad_()
        output = torch.empty_like(v_in)
        norm = torch.empty_like(g_in)
        got = k[lambda meta: (cdiv(M, meta["BLOCK_ROW_SIZE"]),)](output, norm, v_in, g_in, M, N, eps=tiny)
        v, g = leaf(v_in), leaf(g_in)
        ref_norm = ((v * v).sum(tuple(range(1, len(shape))), keepdim=True) + tiny).sqrt()
        check(f"weight_norm_kernel_first {'x'.join(map(str, shape))}", dtype, [got.output, got.norm],
              [v / ref_norm * g, ref_norm], [v_in, g_in], [v, g])


def case_weight_norm_last(dtype):
    k = load("weight_norm_kernel_last")
    tiny = torch.finfo(torch.float32).tiny
    # dim=ndim-1: a norm per column (the last dimension), g shaped (1, ..., N).
    for shape in ((3, 5, 37), (1000, 6), (2100, 10)):
        N = shape[-1]
        M = math.prod(shape[:-1])
        g_shape = (1,) * (len(shape) - 1) + (N,)
        v_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        g_in = torch.randn(g_shape, device="cuda").to(dtype).requires_grad_()
        output = torch.empty_like(v_in)
        norm = torch.empty_like(g_in)
        got = k[lambda meta: (cdiv(N, meta["BLOCK_COL_SIZE"]),)](output, norm, v_in, g_in, M, N, eps=tiny)
        v, g = leaf(v_in), leaf(g_in)
        ref_norm = ((v * v).sum(tuple(range(len(shape) - 1)), keepdim=True) + tiny).sqrt()
        check(f"weight_norm_kernel_last {'x'.join(map(str, shape))}", dtype, [got.output, got.norm],
              [v / ref_norm * g, ref_norm], [v_in, g_in], [v, g])


def case_l2_norm(dtype):
    k = load("l2_norm_kernel")
    # vector_norm(x, 2, dim) over some dimensions: dim_compress moves them last (a permuted contiguous copy, which
    # autograd differentiates here), out keeps the reduced dimensions as 1.
    for shape, dims in (((37, 1000), [1]), ((4, 300, 5), [1]), ((3, 4, 2049), [2])):
        x_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        order = [i for i in range(len(shape)) if i not in dims] + dims
        xc = x_in.permute(order).contiguous()
        N = math.prod(shape[i] for i in dims)
        M = x_in.numel() // N
        out_shape = [1 if i in dims else s for i, s in enumerate(shape)]
        out = torch.empty(out_shape, dtype=dtype, device="cuda")
        got = k[lambda meta: (cdiv(M, meta["BLOCK_M"]),)](xc, out, M, N)
        x = leaf(x_in)
        check(f"l2_norm_kernel {'x'.join(map(str, shape))} dim={dims}", dtype, [got.Out],
              [(x * x).sum(dims, keepdim=True).sqrt()], [x_in], [x])


def case_batch_norm(dtype):
    k = load("batch_norm_forward_kernel")
    momentum, eps = 0.1, 1e-5
    # ops/batch_norm.py's batch_norm with training=True and running statistics given (a module's default,
    # track_running_stats): the kernel stores mean and inv_std and updates running_mean / running_var in place
    # (unbiased variance there); all five outputs go into the loss. (300 x 50: one row step and two column steps of
    # the Welford loop, the last partial. Not more row steps: FlagGems' Welford divides by the step's index, not
    # by the count of the lane's own values, so a lane masked in one step and loaded in a later one gets a wrong
    # mean: at 2100 x 3 x 20 its forward's mean is off by 1e-4 in float32, measured 2026-11-28.)
    for shape in ((4, 3, 5, 7), (33, 6), (300, 3, 50)):
        x_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        x3_in = x_in.unsqueeze(-1) if x_in.ndim == 2 else x_in.flatten(2, -1) if x_in.ndim >= 4 else x_in
        B, C, S = x3_in.shape
        w_in = torch.randn(C, device="cuda").to(dtype).requires_grad_()
        b_in = torch.randn(C, device="cuda").to(dtype).requires_grad_()
        running_mean = (0.1 * torch.randn(C, device="cuda")).to(dtype)
        running_var = (1 + torch.rand(C, device="cuda")).to(dtype)
        rm_before, rv_before = running_mean.clone(), running_var.clone()
        output = torch.empty_like(x3_in)
        mean = torch.empty(C, device="cuda", dtype=dtype)
        inv_std = torch.empty(C, device="cuda", dtype=dtype)
        got = k[(C,)](x3_in, w_in, b_in, mean, inv_std, output, running_mean, running_var, B, S, *x3_in.stride(),
                      *output.stride(), momentum, eps, is_train=True)
        untouched = f"{kept(rm_before, running_mean)}/{kept(rv_before, running_var)}"
        x, w, b = leaf(x_in), leaf(w_in), leaf(b_in)
        x3 = x.reshape(B, C, S)
        ref_mean = x3.mean((0, 2))
        d = x3 - ref_mean[None, :, None]
        var = (d * d).mean((0, 2))
        ref_inv_std = (var + eps).rsqrt()
        ref_out = w[None, :, None] * d * ref_inv_std[None, :, None] + b[None, :, None]
        n = B * S
        ref_rm = (1 - momentum) * rm_before.double() + momentum * ref_mean
        ref_rv = (1 - momentum) * rv_before.double() + momentum * var * n / (n - 1)
        check(f"batch_norm_forward_kernel {'x'.join(map(str, shape))} (running stats {untouched})", dtype,
              [got.output_pointer, got.mean_pointer, got.inv_std_pointer, got.running_mean_pointer,
               got.running_var_pointer], [ref_out, ref_mean, ref_inv_std, ref_rm, ref_rv], [x_in, w_in, b_in],
              [x, w, b])


def case_nll_loss(dtype):
    k = load("nll_loss_forward_kernel")
    # nll_loss_forward with reduction=0 ('none', what the module was generated for): out[n] = -inp[n, t] * w[t],
    # zero where t == ignore_index. Targets int64, as torch gives class indices. The ignored class is a valid one
    # where targets hit it (the kernel asserts 0 <= t < C under TRITON_DEBUG), FlagGems' default -100 where none do.
    for N, C, ignore_index in ((300, 10, 1), (37, 1000, -100), (None, 17, -100)):
        shape = [C] if N is None else [N, C]
        inp_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        w_in = torch.rand(C, device="cuda").to(dtype).requires_grad_()
        rows = 1 if N is None else N
        target = torch.randint(0, C, (rows,), device="cuda")
        target = target.reshape([]) if N is None else target
        out = torch.empty(list(target.shape), dtype=dtype, device="cuda")
        got = k[lambda meta: (cdiv(rows, meta["BLOCK_N"]),)](inp_in, target, w_in, out, ignore_index, rows, C, 0)
        x, w = leaf(inp_in), leaf(w_in)
        t = target.reshape(rows)
        valid = (t != ignore_index).double()
        picked = x.reshape(rows, C).gather(1, t[:, None])[:, 0]
        ref = (-picked * w[t] * valid).reshape(target.shape)
        label = (f"nll_loss_forward_kernel {'x'.join(map(str, shape))} ignore={ignore_index} "
                 f"({int((1 - valid).sum())} ignored)")
        check(label, dtype, [got.out_ptr], [ref], [inp_in, w_in], [x, w])


def case_celoss_indices(dtype):
    k = load("celoss_indices_kernel")
    # CrossEntropyLoss.forward with class indices and no label smoothing: out and w_tgt in float32 whatever the
    # input's dtype, both float outputs in the loss. ignore_index: a valid class where targets hit it, -100 where none
    # do (an ignored target of -100 has the kernel load inp at a negative class, out of the row).
    for shape, ignore_index in (((37, 1000), -100), ((4, 10, 33), 1), ((300,), -100)):
        dim = len(shape)
        N = 1 if dim == 1 else shape[0]
        C = shape[0] if dim == 1 else shape[1]
        D = math.prod(shape) // N // C
        out_shape = list(shape)
        del out_shape[0 if dim == 1 else 1]
        inp_in = torch.randn(shape, device="cuda").to(dtype).requires_grad_()
        w_in = torch.rand(C, device="cuda").to(dtype).requires_grad_()
        target = torch.randint(0, C, out_shape, device="cuda")
        out = torch.empty(out_shape, dtype=torch.float32, device="cuda")
        w_tgt = torch.empty(out_shape, dtype=torch.float32, device="cuda")
        got = k[lambda meta: (cdiv(D, meta["BLOCK_D"]), N)](inp_in, target, w_in, out, w_tgt, ignore_index, C, D)
        x, w = leaf(inp_in), leaf(w_in)
        x3 = x.reshape(N, C, D)
        t = target.reshape(N, D)
        lse = torch.logsumexp(x3, 1)
        picked = x3.gather(1, t[:, None, :])[:, 0, :]
        ref_w = w[t] * (t != ignore_index).double()
        ref_out = ((lse - picked) * ref_w).reshape(out_shape)
        label = (f"celoss_indices_kernel {'x'.join(map(str, shape))} ignore={ignore_index} "
                 f"({int((t == ignore_index).sum())} ignored)")
        check(label, dtype, [got.out_ptr, got.w_tgt_ptr], [ref_out, ref_w.reshape(out_shape)], [inp_in, w_in], [x, w])


def rope_ref(x, c, s, interleaved):
    """x: (tokens, heads, head_dim); c, s: (tokens, head_dim // 2), the rows of cos / sin at each token's position."""
    c, s = c[:, None, :], s[:, None, :]
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).reshape(x.shape)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def case_rotary(dtype):
    k = load("apply_rotary_pos_emb_kernel")
    # apply_rotary_pos_emb(q, k, cos, sin, position_ids, rotary_interleaved, inplace=False). First shape: q and k
    # slices of one qkv tensor (strided, as a fused projection gives them), int64 position ids, head_dim 24 (padded to
    # 32), rotate-half; second: 4-d q / k without position ids (pos = token % seq_len: seq_len given, position_ids
    # None), interleaved; third: head_dim 10, padded to the host's minimum block of 16, interleaved, with position ids.
    for tokens, seq, hq, hk, hd, max_pos, interleaved, with_ids, fused in (
            (37, None, 4, 2, 24, 50, False, True, True),
            (2, 13, 3, 1, 64, 20, True, False, False),
            (29, None, 2, 2, 10, 40, True, True, False)):
        half = hd // 2
        cos_in = torch.randn(max_pos, half, device="cuda").to(dtype).requires_grad_()
        sin_in = torch.randn(max_pos, half, device="cuda").to(dtype).requires_grad_()
        if fused:
            qkv_in = torch.randn(tokens, hq + 2 * hk, hd, device="cuda").to(dtype).requires_grad_()
            q_full, k_full = qkv_in[:, :hq], qkv_in[:, hq:hq + hk]
            leaves = [qkv_in]
        elif seq is None:
            q_full = torch.randn(tokens, hq, hd, device="cuda").to(dtype).requires_grad_()
            k_full = torch.randn(tokens, hk, hd, device="cuda").to(dtype).requires_grad_()
            leaves = [q_full, k_full]
        else:  # (batch = tokens, seq)
            q_full = torch.randn(tokens, seq, hq, hd, device="cuda").to(dtype).requires_grad_()
            k_full = torch.randn(tokens, seq, hk, hd, device="cuda").to(dtype).requires_grad_()
            leaves = [q_full, k_full]
        position_ids = torch.randint(0, max_pos, q_full.shape[:-2], device="cuda") if with_ids else None
        seq_len = None if with_ids else q_full.shape[-3]
        pos_flat = position_ids.view(-1) if with_ids else None
        q = q_full.view(-1, q_full.shape[-2], q_full.shape[-1])
        kk = k_full.view(-1, k_full.shape[-2], k_full.shape[-1])
        n_tokens = q.shape[0]
        q_embed = torch.empty_like(q)
        k_embed = torch.empty_like(kk)
        got = k[(n_tokens,)](q_embed, k_embed, q, kk, cos_in, sin_in, pos_flat, q.stride(0), q.stride(1), q.stride(2),
                             kk.stride(0), kk.stride(1), kk.stride(2), q_embed.stride(0), q_embed.stride(1),
                             q_embed.stride(2), k_embed.stride(0), k_embed.stride(1), k_embed.stride(2),
                             pos_flat.stride(0) if with_ids else 0, cos_in.stride(0), sin_in.stride(0), seq_len,
                             q.shape[-2], kk.shape[-2], hd, max(next_pow2(hd), 16), interleaved,
                             MAX_POSITION_EMBEDDINGS=cos_in.shape[0])
        ref_leaves = [leaf(t) for t in leaves]
        if fused:
            rq, rk = ref_leaves[0][:, :hq], ref_leaves[0][:, hq:hq + hk]
        else:
            rq, rk = ref_leaves[0].reshape(n_tokens, hq, hd), ref_leaves[1].reshape(n_tokens, hk, hd)
        c, s = leaf(cos_in), leaf(sin_in)
        pos = pos_flat if with_ids else torch.arange(n_tokens, device="cuda") % seq_len
        check(f"apply_rotary_pos_emb_kernel tokens={n_tokens} heads={hq}/{hk} dim={hd} "
              f"{'interleaved' if interleaved else 'rotate-half'}{' ids' if with_ids else ''}{' qkv' if fused else ''}",
              dtype, [got.oq_ptr, got.ok_ptr], [rope_ref(rq, c[pos], s[pos], interleaved),
                                                rope_ref(rk, c[pos], s[pos], interleaved)],
              leaves + [cos_in, sin_in], ref_leaves + [c, s])


def case_mm(dtype):
    k = load("mm_kernel_general")
    # general_mm (mm's path on every GPU but sm80, where fp16/bf16 with K > 5M and K > 5N take streamk): the grid of
    # the libtuner's BLOCK_M x BLOCK_N tiles, GROUP_M=8. A column-major A (a transposed view) is launched as it is,
    # mm only copies an A strided in both dimensions.
    for M, N, K, a_column_major in ((300, 200, 130, False), (37, 1000, 77, True), (129, 65, 1000, False)):
        if a_column_major:
            a_in = torch.randn(K, M, device="cuda").to(dtype).t().requires_grad_()
        else:
            a_in = torch.randn(M, K, device="cuda").to(dtype).requires_grad_()
        b_in = torch.randn(K, N, device="cuda").to(dtype).requires_grad_()
        c = torch.empty((M, N), device="cuda", dtype=dtype)
        got = k[lambda meta: (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)](
            a_in, b_in, c, M, N, K, a_in.stride(0), a_in.stride(1), b_in.stride(0), b_in.stride(1), c.stride(0),
            c.stride(1), GROUP_M=8)
        a, b = leaf(a_in), leaf(b_in)
        check(f"mm_kernel_general {M}x{N}x{K}{' A column-major' if a_column_major else ''}", dtype, [got.C], [a @ b],
              [a_in, b_in], [a, b])


def case_bmm(dtype):
    k = load("bmm_kernel")
    # bmm: contiguous A, B; the heuristics' DIVISIBLE_M/N/K from the libtuner's tiles (the second shape divisible by
    # every config's tiles, the others by none of them along M, N or K).
    for batch, M, N, K in ((3, 100, 70, 45), (2, 128, 128, 64), (5, 33, 17, 300)):
        a_in = torch.randn(batch, M, K, device="cuda").to(dtype).requires_grad_()
        b_in = torch.randn(batch, K, N, device="cuda").to(dtype).requires_grad_()
        out = torch.empty((batch, M, N), dtype=dtype, device="cuda")
        got = k[lambda meta: (cdiv(meta["M"], meta["TILE_M"]), cdiv(meta["N"], meta["TILE_N"]), batch)](
            a_in, b_in, out, M, N, K)
        a, b = leaf(a_in), leaf(b_in)
        check(f"bmm_kernel {batch}x{M}x{N}x{K}", dtype, [got.O], [a @ b], [a_in, b_in], [a, b])


def case_bicubic_aa(dtype):
    k = load("general_interpolate_bicubic2d_aa_kernel")
    # _upsample_bicubic2d_aa's path for a downsampling along some axis (reciprocal scale >= 1): the grid of the
    # autotuner's BLOCK_X x BLOCK_Y output tiles, `ow % OW` wrapping the last tile's lanes onto the first columns
    # (their duplicate stores hold the same values). The reference: torch's antialiased bicubic interpolation.
    for N, C, IH, IW, OH, OW in ((2, 3, 37, 50, 16, 20), (1, 2, 20, 64, 25, 17)):
        x_in = torch.randn(N, C, IH, IW, device="cuda").to(dtype).requires_grad_()
        out = torch.empty((N, C, OH, OW), device="cuda", dtype=dtype)
        got = k[lambda meta: (cdiv(OW, meta["BLOCK_X"]), cdiv(OH, meta["BLOCK_Y"]))](
            out, x_in, N, C, OH, OW, IH, IW, IH / OH, IW / OW)
        x = leaf(x_in)
        ref = torch.nn.functional.interpolate(x, size=(OH, OW), mode="bicubic", antialias=True, align_corners=False)
        check(f"general_interpolate_bicubic2d_aa_kernel {N}x{C}x{IH}x{IW}->{OH}x{OW}", dtype, [got.ptr_o], [ref],
              [x_in], [x])


CASES = {
    "prod_kernel_mid": case_prod_mid,
    "prod_kernel_result": case_prod_result,
    "prod_kernel": case_prod_rows,
    "max_kernel_1": case_extreme_partial("max_kernel_1", "max"),
    "min_kernel_1": case_extreme_partial("min_kernel_1", "min"),
    "max_kernel": case_extreme_rows("max_kernel", "max"),
    "min_kernel": case_extreme_rows("min_kernel", "min"),
    "argmax_kernel_1": case_argmax_partial,
    "scan_part_sum_kernel": case_scan_part_sum,
    "reduce_then_scan_root_scan_kernel_row": case_root_scan,
    "reduce_then_scan_block_sum_kernel_row": case_block_sum,
    "reduce_then_scan_block_scan_kernel_row": case_block_scan,
    "log_softmax_kernel": case_log_softmax,
    "softmax_kernel_non_inner": case_softmax_non_inner,
    "softmax_kernel_inner": case_softmax_inner,
    # ops/layernorm.py: N <= 128 multiline (TILE_M rows of TILE_N per program), 128 < N <= 4096 persistent, past it
    # the loop (TILE_N from the autotuner, 1024 to 8192: N = 8192 a multiple of each, no masked lanes in the last
    # step, and at TILE_N 8192 a first loop that runs no step; 5000 and 10007 end in a partial tile).
    "layer_norm_persistent_kernel_multiline": case_layer_norm(
        "layer_norm_persistent_kernel_multiline", ((37, 100), (300, 7), (5, 128)), multiline_tiles),
    "layer_norm_persistent_kernel": case_layer_norm(
        "layer_norm_persistent_kernel", ((7, 1000), (16, 129), (3, 4096)),
        lambda M, N: ((M, 1, 1), (next_pow2(N),))),
    "layer_norm_loop_kernel": case_layer_norm(
        "layer_norm_loop_kernel", ((3, 5000), (2, 10007), (4, 8192)), lambda M, N: ((M, 1, 1), ())),
    "rms_norm_kernel": case_rms_norm,
    "skip_layer_norm_kernel": case_skip_layer_norm,
    "fused_add_rms_norm_kernel": case_fused_add_rms_norm,
    "group_norm_kernel": case_group_norm,
    "weight_norm_kernel_first": case_weight_norm_first,
    "weight_norm_kernel_last": case_weight_norm_last,
    "l2_norm_kernel": case_l2_norm,
    "batch_norm_forward_kernel": case_batch_norm,
    "nll_loss_forward_kernel": case_nll_loss,
    "celoss_indices_kernel": case_celoss_indices,
    "apply_rotary_pos_emb_kernel": case_rotary,
    "mm_kernel_general": case_mm,
    "bmm_kernel": case_bmm,
    "general_interpolate_bicubic2d_aa_kernel": case_bicubic_aa,
}

for name, run in CASES.items():
    if ONLY and name not in ONLY:
        continue
    for dtype in DTYPES:
        torch.manual_seed(hash(name) % 1000 + DTYPES.index(dtype))
        try:
            run(dtype)
        except Exception:  # a refusal or crash at launch counts as a failure of that kernel, and the others still run
            FAILS += 1
            CHECKS += 1
            print(f"{name:58} {str(dtype)[6:]:9} ERROR")
            traceback.print_exc()
print(f"checks: {CHECKS}, failures: {FAILS}")
sys.exit(1 if FAILS else 0)
