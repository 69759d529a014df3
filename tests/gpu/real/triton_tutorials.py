# The official Triton tutorials' forward kernels (python/tutorials/*.py, fetched, not committed) through their generated
# modules, each launched as the tutorial's own host code launches it (grid, strides, constexprs, num_warps, the
# autotuner where the tutorial autotunes), against a float64 PyTorch reference of the kernel's math written here. Every
# output the kernel writes (layer norm's Mean and Rstd, attention's M too) goes into a loss with random fp64 weights;
# the outputs and the input gradients are compared, max abs error over max(1, max|ref|) (2e-5 fp32, 6e-2 bf16, 2e-2
# fp16; the reference's upstream gradient is the weight rounded to the output's dtype, as the module's is).
# Sources (SRC = scratch/tutorials/src):
#   triton-lang/triton at the stored versions: 01-vector-add.py @545699290b85 (its first 82 lines: kernel and host),
#   02-fused-softmax.py @fd237c7cf9a7, 03-matrix-multiplication.py @7649d87cce6c, 04-low-memory-dropout.py
#   @7fd4724371b3, 05-layer-norm.py @545699290b85, 12-Fused-Rotary-Positional-Embedding.py @45f97d33bf79;
#   06-fused-attention.py from triton-lang/Triton-to-tile-IR @09deb2ab438b (a late-2025 fork of Triton main: the
#   descriptor-based _attn_fwd with warp_specialize / IS_HOPPER / FP8_OUTPUT that Triton 3.6 ships; the stored
#   triton-lang/triton versions are older, with triton.tools.experimental_descriptor, gone from 3.6), its first 273
#   lines (the forward kernel, its helpers and configs). 06.5-cosine-sim is not in the tutorials any more.
# Usage: python3 tests/gpu/real/triton_tutorials.py [MODULES_DIR] [--only NAME] (default scratch/tutorials/mods), where
# MODULES_DIR holds tut_NAME_op.py for each kernel, written by
#   tgrad SRC/01-vector-add.py --kernel add_kernel --wrt x_ptr,y_ptr --emit torch -o DIR/tut_add_kernel_op.py
#   tgrad SRC/02-fused-softmax.py --kernel softmax_kernel --wrt input_ptr --emit torch -o DIR/tut_softmax_kernel_op.py
#   tgrad SRC/03-matrix-multiplication.py --kernel matmul_kernel --wrt a_ptr,b_ptr --emit torch \
#         -o DIR/tut_matmul_kernel_op.py
#   tgrad SRC/04-low-memory-dropout.py --kernel _dropout --wrt x_ptr --emit torch -o DIR/tut_dropout_op.py
#   tgrad SRC/04-low-memory-dropout.py --kernel _seeded_dropout --wrt x_ptr --emit torch -o DIR/tut_seeded_dropout_op.py
#   tgrad SRC/05-layer-norm.py --kernel _layer_norm_fwd_fused --wrt X,W,B --emit torch \
#         -o DIR/tut_layer_norm_fwd_fused_op.py
#   tgrad SRC/06-fused-attention.py --kernel _attn_fwd --wrt desc_q,desc_k,desc_v --emit torch -o DIR/tut_attn_fwd_op.py
#   tgrad SRC/12-Fused-Rotary-Positional-Embedding.py --kernel _rope_kernel --wrt x_ptr,c_ptr,s_ptr --emit torch \
#         -o DIR/tut_rope_kernel_op.py
# (no -D, no --arg: ACTIVATION, STAGE, warp_specialize, IS_HOPPER, FP8_OUTPUT are constexprs tgrad specializes or
# branches on itself; it warns that _attn_fwd has no backward with FP8_OUTPUT=True, not run here: the tutorial's
# backward is fp16 only too.)
# What is run (TUT_CPU=0, the GPU):
#   add_kernel       fp32/fp16/bf16, n = 98432 (the tutorial's), 1000, 2**20 + 3; BLOCK_SIZE=1024, grid lambda.
#   softmax_kernel   fp32 (the tutorial's) and fp16/bf16; (1823, 781) (the tutorial's test), (4096, 1024), (300, 3000)
#                    and a strided view (row stride 1024, 781 columns); persistent grid of min(n_rows, 4 * SMs)
#                    programs (the tutorial computes it from the compiled kernel's occupancy) and of 5 programs (each
#                    program loops over many rows); num_stages 4 (H100's shared memory), num_warps 8.
#   matmul_kernel    fp16 (the tutorial's), bf16 and fp32 (its tl.dot runs fp32 as tf32: tolerance 2e-2); ACTIVATION
#                    "" and "leaky_relu"; M, N, K = 512^3 and ragged ones (the grouped ordering's min() with a last
#                    group of fewer than GROUP_SIZE_M rows of blocks, the modulo wrap of rows and columns); autotuned.
#                    The leaky relu's slope is taken from the sign of the kernel's own output (a pre-activation
#                    within rounding of 0 may land on either side).
#   _dropout         x_keep int32 as the tutorial makes it, p 0.5 and 0.2; fp32/fp16/bf16.
#   _seeded_dropout  the kept elements taken from the tutorial's kernel itself (the module's .jit) with the same
#                    seed, p 0.5 and 0.2; fp32/fp16/bf16.
#   _layer_norm_fwd_fused  (1151, 8192) fp16 (the tutorial's test), fp32/bf16 others, 3-D input; BLOCK_SIZE and
#                    num_warps as the host computes them, num_ctas=1 as the host passes it (its own check: the module
#                    refused it in the first run; the other cases then launch without it); and BLOCK_SIZE forced
#                    below N (256 for N = 1000), not the host's choice, so the kernel's three loops run several times.
#   _attn_fwd        fp16, causal and not, HEAD_DIM 64 and 128, N_CTX 128 to 512, Z and H > 1; warp_specialize=False
#                    and True (causal with True on Hopper skipped: the tutorial's forward itself fails to compile
#                    there, PassManager::run failed in NVGPUWarpSpecialization, and the tutorial tests
#                    warp_specialize on Blackwell only); host TensorDescriptors where the tutorial makes them (the
#                    module checks once per layout that the kernel computes the same from their base tensors), and
#                    once a descriptor over half of Q's rows, which the module must refuse; autotuned; O and M in
#                    the loss; tgrad specializes on STAGE, IS_HOPPER, warp_specialize itself (no tape).
#   _rope_kernel     fp32 (the tutorial's) and fp16/bf16; (256, 64) (the tutorial's test), (2, 37, 4, 96) (half 48 under
#                    a block of 64), (100, 128); dX, dcos, dsin.
# TUT_CPU=1: the same script on the CPU under TRITON_INTERPRET=1 (set here if not set): fp32 only (attention in fp16,
# the kernel is fp16 only), small shapes, autotuned kernels launched with explicit block sizes (the interpreter cannot
# benchmark), the active driver replaced by a stub (the tutorials read driver.active at import), one kernel at a time.
# Each kernel runs in a process of its own; --only K runs one; TUT_JOBS processes at a time (default: all; 1 on the
# CPU), TUT_TIMEOUT seconds for the whole run (default 900; 3600 on the CPU). The last line says `N of M pass`, M the
# checks (a kernel whose module does not import, or whose process died, counts one failed check).
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
FOLDER = ARGS[0] if ARGS else "scratch/tutorials/mods"
CPU = os.environ.get("TUT_CPU") == "1"
if CPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import triton

DEV = "cpu" if CPU else "cuda"
f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
TOL = {f32: 2e-5, bf16: 6e-2, f16: 2e-2}
FAILS = 0
CHECKS = 0

if CPU:
    # The tutorials call triton.runtime.driver.active at import (is_cuda(), the autotune configs); a CPU machine has
    # no active driver. A stub that says "cuda" (the matmul's CUDA configs, whose names the CPU cases give), and a
    # capability of (9, 0) for the attention's config filter at import; the kernels run in the interpreter.
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)

    class _StubTarget:
        backend = "cuda"
        arch = 0
        warp_size = 32

    class _StubDriver:
        def get_current_target(self):
            return _StubTarget()

        def get_active_torch_device(self):
            return torch.device("cpu")

    triton.runtime.driver.set_active(_StubDriver())

    # Triton's interpreter has no atomic_xchg of floats ("Unsupported data type"); a backward that takes its upstream
    # gradient by exchanging it for 0.0 (a store whose rows may overlap, as the rope kernel's) needs one. Added here,
    # element by element: the interpreter runs one program at a time, so a plain read-then-write is atomic.
    import ctypes
    import numpy as np
    from triton.runtime import interpreter as _interp

    _rmw = _interp.InterpreterBuilder.create_atomic_rmw

    def _create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        if rmwOp != _interp._ir.ATOMIC_OP.XCHG or val.data.dtype.kind != "f":
            return _rmw(self, rmwOp, ptr, val, mask, sem, scope)
        shape = np.broadcast_shapes(ptr.data.shape, val.data.shape, mask.data.shape)
        ptrs = np.broadcast_to(ptr.data, shape)
        vals = np.broadcast_to(val.data, shape)
        masks = np.broadcast_to(mask.data, shape)
        old = np.zeros(shape, dtype=vals.dtype)
        size = vals.dtype.itemsize
        for idx in np.ndindex(*shape):
            if masks[idx]:
                address = int(ptrs[idx])
                old[idx] = np.frombuffer(ctypes.string_at(address, size), dtype=vals.dtype)[0]
                ctypes.memmove(address, np.asarray(vals[idx], dtype=vals.dtype).tobytes(), size)
        return _interp.TensorHandle(old, val.dtype.scalar)

    _interp.InterpreterBuilder.create_atomic_rmw = _create_atomic_rmw

    # Nor a load or store of a block under a scalar mask ("mask has unsupported dtype"), which compiled Triton
    # broadcasts (tgrad's tapes store under `mask=iteration < tape_trips`): the mask made a bool array of the
    # pointers' shape first.
    def _full_mask(ptrs, mask):
        data = np.ascontiguousarray(np.broadcast_to(np.asarray(mask.data).astype(bool), ptrs.data.shape))
        return _interp.TensorHandle(data, mask.dtype)

    _store = _interp.InterpreterBuilder.create_masked_store
    _load = _interp.InterpreterBuilder.create_masked_load
    _interp.InterpreterBuilder.create_masked_store = lambda self, ptrs, value, mask, *a, **k: _store(
        self, ptrs, value, _full_mask(ptrs, mask), *a, **k)
    _interp.InterpreterBuilder.create_masked_load = lambda self, ptrs, mask, *a, **k: _load(
        self, ptrs, _full_mask(ptrs, mask), *a, **k)


def cdiv(a, b):
    return (a + b - 1) // b


def rnd(*shape, dtype, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device=DEV) * scale + shift).to(dtype).requires_grad_()


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


def run_case(tag, leaves, launch, ref, tol, tols=None):
    """leaves: name -> leaf tensor (requires grad); launch() -> {output name: tensor} through the module;
    ref({name: fp64 leaf}, outs) -> {output name: fp64 tensor} laid out as launch's outputs (outs: the module's
    outputs, detached, for a reference that takes a branch from them)."""
    tols = tols or {}
    try:
        outs = launch()
    except Exception as e:
        report(False, f"{tag}: {first_line(e)}")
        traceback.print_exc(limit=4)
        return
    try:
        gen = torch.Generator(device=DEV).manual_seed(1234)
        weights = {n: torch.randn(o.shape, dtype=torch.float64, device=DEV, generator=gen) for n, o in outs.items()}
        sum((o.double() * weights[n]).sum() for n, o in outs.items()).backward()
        ref_leaves = {n: t.detach().double().requires_grad_() for n, t in leaves.items()}
        want = ref(ref_leaves, {n: o.detach() for n, o in outs.items()})
        # the module's upstream gradient is the weight rounded to the output's dtype (autograd's cast of .double())
        sum((want[n] * weights[n].to(outs[n].dtype).double()).sum() for n in outs).backward()
        checks = [(n, outs[n], want[n]) for n in outs] + [("d" + n, leaves[n].grad, ref_leaves[n].grad) for n in leaves]
        for name, got, w in checks:
            t = tols.get(name, tol)
            if got is None or w is None:
                report(False, f"{tag} {name}: {'no gradient from the module' if got is None else 'reference has none'}")
                continue
            if got.shape != w.shape:
                report(False, f"{tag} {name}: shape {tuple(got.shape)}, reference {tuple(w.shape)}")
                continue
            note = ""
            if name.startswith("d") and got.dtype != leaves[name[1:]].dtype:
                note = f" (gradient dtype {dname(got.dtype)}, input {dname(leaves[name[1:]].dtype)})"
            err = (got.double() - w).abs().max().item() / max(1.0, w.abs().max().item())
            ok = err <= t and not note  # a NaN fails
            report(ok, f"{tag} {name}: {err:.2e}" + (f" (tol {t:g})" if t != tol else "") + note)
    except Exception as e:
        report(False, f"{tag}: {first_line(e)}")
        traceback.print_exc(limit=4)


# ------------------------------------------------------------------------------------------------ 01-vector-add.py
def t_add_kernel(K):
    # add(): output = empty_like(x); grid = lambda meta: (cdiv(n_elements, meta['BLOCK_SIZE']),); BLOCK_SIZE=1024
    dtypes = (f32,) if CPU else (f32, f16, bf16)
    sizes = (1000, 2049) if CPU else (98432, 1000, 2 ** 20 + 3)
    for dtype in dtypes:
        for n in sizes:
            x = rnd(n, dtype=dtype)
            y = rnd(n, dtype=dtype)

            def launch(x=x, y=y):
                output = torch.empty_like(x)
                n_elements = output.numel()
                grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
                o = K[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
                return {"output": o.output_ptr}

            run_case(f"{dname(dtype)} n={n}", {"x": x, "y": y}, launch, lambda v, _: {"output": v["x"] + v["y"]},
                     TOL[dtype])


# --------------------------------------------------------------------------------------------- 02-fused-softmax.py
def t_softmax_kernel(K):
    # softmax(): y = empty_like(x); BLOCK_SIZE = next_power_of_2(n_cols); num_warps 8; num_stages 4 if the shared
    # memory is > 200000 bytes (H100) else 2; kernel[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows,
    # n_cols, BLOCK_SIZE, num_stages) with num_programs = min(NUM_SM * occupancy, n_rows)
    if CPU:
        cases = [(f32, (37, 100), None, 5), (f32, (8, 257), None, 8), (f32, (10, 50), 64, 3)]
    else:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        cases = []
        for d in (f32, f16, bf16):
            for shape, row_stride in (((1823, 781), None), ((4096, 1024), None), ((300, 3000), None),
                                      ((1823, 781), 1024)):
                for programs in (min(shape[0], 4 * sms), 5):
                    cases.append((d, shape, row_stride, programs))
    num_stages = 2 if CPU else 4
    for dtype, (n_rows, n_cols), row_stride, programs in cases:
        if row_stride:  # a view of every row's first n_cols of a wider buffer
            base = torch.randn(n_rows, row_stride, device=DEV).to(dtype)
            x = base[:, :n_cols].detach().requires_grad_()
        else:
            x = rnd(n_rows, n_cols, dtype=dtype, scale=3.0)

        def launch(x=x, programs=programs):
            n_rows, n_cols = x.shape
            BLOCK_SIZE = triton.next_power_of_2(n_cols)
            y = torch.empty_like(x)
            o = K[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE, num_stages,
                                    num_warps=8)
            return {"y": o.output_ptr}

        run_case(f"{dname(dtype)} shape={(n_rows, n_cols)} row_stride={x.stride(0)} programs={programs}", {"x": x},
                 launch, lambda v, _: {"y": torch.softmax(v["x"], -1)}, TOL[dtype])


# --------------------------------------------------------------------------------------- 03-matrix-multiplication.py
def t_matmul_kernel(K):
    # matmul(a, b, activation): c = empty((M, N), fp16); grid = lambda META: (cdiv(M, BLOCK_SIZE_M) * cdiv(N,
    # BLOCK_SIZE_N),); matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
    # c.stride(0), c.stride(1), ACTIVATION=activation) -- autotuned (explicit blocks on the CPU)
    if CPU:
        shapes = [((45, 37, 29), dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=16, GROUP_SIZE_M=2)),
                  ((20, 70, 33), dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, GROUP_SIZE_M=8))]
        dtypes = (f32,)
    else:
        shapes = [((512, 512, 512), {}), ((300, 200, 150), {}), ((1000, 260, 77), {}), ((1300, 700, 515), {})]
        dtypes = (f16, bf16, f32)
    for dtype in dtypes:
        for (M, N, Kd), blocks in shapes:
            for activation in ("", "leaky_relu"):
                a = rnd(M, Kd, dtype=dtype)
                b = rnd(Kd, N, dtype=dtype)

                def launch(a=a, b=b, activation=activation, blocks=blocks):
                    M, Kd = a.shape
                    Kd, N = b.shape
                    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
                    grid = lambda META: (triton.cdiv(M, META['BLOCK_SIZE_M']) * triton.cdiv(N, META['BLOCK_SIZE_N']), )
                    o = K[grid](a, b, c, M, N, Kd, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                c.stride(1), ACTIVATION=activation, **blocks)
                    return {"c": o.c_ptr}

                def ref(v, outs, activation=activation):
                    pre = v["a"] @ v["b"]
                    if activation == "leaky_relu":
                        pre = torch.where(outs["c"] >= 0, pre, 0.01 * pre)
                    return {"c": pre}

                # c is fp16 whatever the inputs; fp32 inputs: tl.dot in tf32 on the GPU
                tol = 1e-3 if CPU else (2e-2 if dtype != bf16 else TOL[bf16])
                tols = {"c": max(tol, 1e-3)}
                run_case(f"{dname(dtype)} M,N,K={(M, N, Kd)} ACTIVATION={activation!r}" +
                         (f" {blocks}" if blocks else ""), {"a": a, "b": b}, launch, ref,
                         TOL[f32] if CPU else tol, tols)


# ------------------------------------------------------------------------------------------ 04-low-memory-dropout.py
def t_dropout(K):
    # dropout(x, x_keep, p): output = empty_like(x); grid lambda; _dropout[grid](x, x_keep, output, n_elements, p,
    # BLOCK_SIZE=1024); x_keep = (rand > p).to(int32)
    dtypes = (f32,) if CPU else (f32, f16, bf16)
    sizes = (10, 2500) if CPU else (10, 98432, 3 * 4097)
    for dtype in dtypes:
        for n in sizes:
            for p in (0.5, 0.2):
                x = rnd(n, dtype=dtype)
                x_keep = (torch.rand(n, device=DEV) > p).to(torch.int32)

                def launch(x=x, x_keep=x_keep, p=p):
                    output = torch.empty_like(x)
                    n_elements = x.numel()
                    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
                    o = K[grid](x, x_keep, output, n_elements, p, BLOCK_SIZE=1024)
                    return {"output": o.output_ptr}

                run_case(f"{dname(dtype)} n={n} p={p}", {"x": x}, launch,
                         lambda v, _, k=x_keep, p=p: {"output": torch.where(k != 0, v["x"] / (1 - p), 0.0)},
                         TOL[dtype])


def t_seeded_dropout(K):
    # seeded_dropout(x, p, seed): output = empty_like(x); _seeded_dropout[grid](x, output, n_elements, p, seed,
    # BLOCK_SIZE=1024)
    dtypes = (f32,) if CPU else (f32, f16, bf16)
    sizes = (10, 2500) if CPU else (10, 98432, 3 * 4097)
    for dtype in dtypes:
        for n in sizes:
            for p, seed in ((0.5, 123), (0.2, 512)):
                x = rnd(n, dtype=dtype)
                # the kept elements, from the tutorial's own kernel with the same seed
                raw = torch.empty_like(x.detach())
                grid = lambda meta, n=n: (triton.cdiv(n, meta['BLOCK_SIZE']), )
                K.jit[grid](x.detach(), raw, n, p, seed, BLOCK_SIZE=1024)
                keep = raw != 0

                def launch(x=x, p=p, seed=seed):
                    output = torch.empty_like(x)
                    n_elements = x.numel()
                    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
                    o = K[grid](x, output, n_elements, p, seed, BLOCK_SIZE=1024)
                    return {"output": o.output_ptr}

                run_case(f"{dname(dtype)} n={n} p={p} seed={seed} kept={int(keep.sum())}", {"x": x}, launch,
                         lambda v, _, k=keep, p=p: {"output": torch.where(k, v["x"] / (1 - p), 0.0)}, TOL[dtype])


# ------------------------------------------------------------------------------------------------ 05-layer-norm.py
NUM_CTAS_REFUSED = []


def t_layer_norm_fwd_fused(K):
    # LayerNorm.forward: y = empty_like(x); x_arg = x.reshape(-1, N); mean, rstd fp32 [M]; MAX_FUSED_SIZE = 65536 //
    # element_size; BLOCK_SIZE = min(MAX_FUSED_SIZE, next_power_of_2(N)); num_warps = min(max(BLOCK_SIZE // 256, 1),
    # 8); _layer_norm_fwd_fused[(M,)](x_arg, y, weight, bias, mean, rstd, x_arg.stride(0), N, eps,
    # BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps, num_ctas=1)
    eps = 1e-5
    if CPU:
        cases = [(f32, (5, 37), None), (f32, (3, 4, 100), None), (f32, (6, 300), 64)]
    else:
        cases = [(f16, (1151, 8192), None), (f32, (1151, 8192), None), (f32, (4, 37, 300), None),
                 (bf16, (64, 1000), None), (f32, (16, 4096), None), (f16, (7, 3000), None), (f32, (9, 1000), 256),
                 (bf16, (9, 1000), 256)]
    for dtype, shape, forced_block in cases:
        N = shape[-1]
        x = rnd(*shape, dtype=dtype, scale=0.5, shift=-2.3)
        w = (torch.rand(N, device=DEV)).to(dtype).requires_grad_()
        b = (torch.rand(N, device=DEV)).to(dtype).requires_grad_()

        def launch(x=x, w=w, b=b, forced_block=forced_block):
            y = torch.empty_like(x)
            x_arg = x.reshape(-1, x.shape[-1])
            M, N = x_arg.shape
            mean = torch.empty((M, ), dtype=torch.float32, device=x.device)
            rstd = torch.empty((M, ), dtype=torch.float32, device=x.device)
            MAX_FUSED_SIZE = 65536 // x.element_size()
            BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
            if N > BLOCK_SIZE:
                raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
            if forced_block:
                BLOCK_SIZE = forced_block
            num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
            extra = {} if NUM_CTAS_REFUSED else {"num_ctas": 1}
            o = K[(M, )](x_arg, y, w, b, mean, rstd, x_arg.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE,
                         num_warps=num_warps, **extra)
            return {"Y": o.Y, "Mean": o.Mean, "Rstd": o.Rstd}

        def ref(v, _, shape=shape):
            X = v["X"].reshape(-1, shape[-1])
            mean = X.mean(-1, keepdim=True)
            var = ((X - mean) ** 2).mean(-1, keepdim=True)
            rstd = 1 / torch.sqrt(var + eps)
            y = (X - mean) * rstd * v["W"] + v["B"]
            return {"Y": y.reshape(shape), "Mean": mean[:, 0], "Rstd": rstd[:, 0]}

        if not NUM_CTAS_REFUSED:  # the host's launch, num_ctas=1 included: its own check, once
            try:
                launch()
                report(True, "launch with num_ctas=1, as the tutorial's LayerNorm.forward")
            except TypeError as e:
                if "num_ctas" not in str(e):
                    raise
                report(False, f"launch with num_ctas=1, as the tutorial's LayerNorm.forward: {first_line(e)} "
                       "(the other cases launch without it)")
                NUM_CTAS_REFUSED.append(True)
        run_case(f"{dname(dtype)} shape={shape} BLOCK_SIZE=" + (f"{forced_block} (forced)" if forced_block else
                                                                 "host's"), {"X": x, "W": w, "B": b}, launch, ref,
                 TOL[dtype])


# ------------------------------------------------------------------------------------------ 06-fused-attention.py
def t_attn_fwd(K):
    # _attention.forward(q, k, v, causal, sm_scale, warp_specialize): o = empty_like(q); stage = 3 if causal else 1;
    # M = empty((Z, H, N_CTX), fp32); host TensorDescriptors ([y_dim, HEAD_DIM], block [1, 1], the pre-hook sets the
    # block) if supports_host_descriptor() and not (is_hopper() and warp_specialize), else the tensors themselves;
    # triton.set_allocator; grid(META) = (cdiv(N_CTX, BLOCK_M), Z * H, 1); _attn_fwd[grid](sm_scale, M, Z, H, desc_q,
    # desc_k, desc_v, desc_o, N_CTX=, HEAD_DIM=, FP8_OUTPUT=, STAGE=, warp_specialize=, IS_HOPPER=) -- autotuned
    from triton.tools.tensor_descriptor import TensorDescriptor
    if CPU:
        shapes = [(1, 2, 128, 32, dict(BLOCK_M=64, BLOCK_N=32)), (2, 1, 128, 64, dict(BLOCK_M=32, BLOCK_N=32))]
        wss = (False,)
        cap = (0, 0)
    else:
        shapes = [(1, 2, 128, 64, {}), (2, 3, 256, 64, {}), (1, 2, 512, 128, {})]
        wss = (False, True)
        cap = torch.cuda.get_device_capability()
    is_hopper = cap[0] == 9
    host_desc_ok = (not CPU) and cap[0] >= 9
    sm_scale = 0.5
    half_rows = 1  # (2 in the one launch that must be refused)
    for Z, H, N_CTX, D, blocks in shapes:
        # causal first: the autotuner's key (N_CTX, HEAD_DIM, FP8_OUTPUT, warp_specialize) leaves STAGE out, and its
        # pruning keeps BLOCK_M >= BLOCK_N for causal only; a config tuned for causal serves both, not the reverse
        for causal in (True, False):
            for ws in wss:
                if causal and ws and is_hopper:
                    continue  # the forward itself does not compile there (below)
                q = (torch.empty((Z, H, N_CTX, D), dtype=f16, device=DEV).normal_(mean=0.0, std=0.5).requires_grad_())
                k = (torch.empty((Z, H, N_CTX, D), dtype=f16, device=DEV).normal_(mean=0.0, std=0.5).requires_grad_())
                v = (torch.empty((Z, H, N_CTX, D), dtype=f16, device=DEV).normal_(mean=0.0, std=0.5).requires_grad_())

                def launch(q=q, k=k, v=v, causal=causal, ws=ws, blocks=blocks):
                    HEAD_DIM_K = k.shape[-1]
                    o = torch.empty_like(q)
                    stage = 3 if causal else 1
                    M = torch.empty((q.shape[0], q.shape[1], q.shape[2]), device=q.device, dtype=torch.float32)
                    # Host TensorDescriptors where the tutorial makes them (the module checks on the first launch
                    # that the kernel computes the same from their base tensors, and differentiates that); once
                    # (below) with a descriptor that shows only half of Q's rows, which the module must refuse.
                    if host_desc_ok and not (is_hopper and ws):
                        y_dim = q.shape[0] * q.shape[1] * q.shape[2]
                        dummy_block = [1, 1]
                        desc_q = TensorDescriptor(q, shape=[y_dim // half_rows, HEAD_DIM_K], strides=[HEAD_DIM_K, 1],
                                                  block_shape=dummy_block)
                        desc_v = TensorDescriptor(v, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1],
                                                  block_shape=dummy_block)
                        desc_k = TensorDescriptor(k, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1],
                                                  block_shape=dummy_block)
                        desc_o = TensorDescriptor(o, shape=[y_dim, HEAD_DIM_K], strides=[HEAD_DIM_K, 1],
                                                  block_shape=dummy_block)
                    else:
                        desc_q, desc_v, desc_k, desc_o = q, v, k, o

                    def alloc_fn(size: int, align: int, _):
                        return torch.empty(size, dtype=torch.int8, device=DEV)

                    triton.set_allocator(alloc_fn)

                    def grid(META):
                        return (triton.cdiv(q.shape[2], META["BLOCK_M"]), q.shape[0] * q.shape[1], 1)

                    out = K[grid](sm_scale, M, q.shape[0], q.shape[1], desc_q, desc_k, desc_v, desc_o,
                                  N_CTX=q.shape[2], HEAD_DIM=HEAD_DIM_K, FP8_OUTPUT=q.dtype == torch.float8_e5m2,
                                  STAGE=stage, warp_specialize=ws, IS_HOPPER=is_hopper, **blocks)
                    O = out.desc_o
                    if isinstance(O, TensorDescriptor):
                        O = O.base
                    return {"O": O, "M": out.M}

                def ref(x, _, causal=causal, N_CTX=N_CTX):
                    s = (x["q"] @ x["k"].transpose(-1, -2)) * sm_scale
                    if causal:
                        keep = torch.tril(torch.ones(N_CTX, N_CTX, dtype=torch.bool, device=DEV))
                        s = s.masked_fill(~keep, float("-inf"))
                    return {"O": torch.softmax(s, -1) @ x["v"], "M": torch.logsumexp(s, -1) / math.log(2)}

                run_case(f"fp16 Z={Z} H={H} N_CTX={N_CTX} HEAD_DIM={D} causal={causal} warp_specialize={ws}" +
                         (f" {blocks}" if blocks else ""), {"q": q, "k": k, "v": v}, launch, ref, TOL[f16])
                if host_desc_ok and not (is_hopper and ws) and (Z, H, N_CTX, D, causal) == shapes[0][:4] + (True,):
                    half_rows = 2
                    try:
                        launch()
                        report(False, "a host TensorDescriptor over half of Q's rows: the module took it")
                    except TypeError as e:
                        report("computes other values" in str(e),
                               f"a host TensorDescriptor over half of Q's rows refused: {first_line(e)}")
                    half_rows = 1


# ----------------------------------------------------------------------------- 12-Fused-Rotary-Positional-Embedding.py
def t_rope_kernel(K):
    # rope(x, cos, sin): n_rows = numel // shape[-1]; half_dim = shape[-1] // 2; y = empty_like(x); BLOCK_SIZE =
    # next_power_of_2(half_dim); _rope_kernel[(n_rows,)](x, y, cos, sin, x.stride(0) if x.ndim == 2 else
    # x.stride(-2), half_dim, BLOCK_SIZE=BLOCK_SIZE)
    dtypes = (f32,) if CPU else (f32, f16, bf16)
    shapes = ((10, 64), (2, 5, 3, 12)) if CPU else ((256, 64), (2, 37, 4, 96), (100, 128))
    for dtype in dtypes:
        for shape in shapes:
            D = shape[-1]
            x = rnd(*shape, dtype=dtype)
            cos = rnd(D // 2, dtype=dtype)
            sin = rnd(D // 2, dtype=dtype)

            def launch(x=x, cos=cos, sin=sin):
                n_rows = x.numel() // x.shape[-1]
                half_dim = x.shape[-1] // 2
                y = torch.empty_like(x)
                BLOCK_SIZE = triton.next_power_of_2(half_dim)
                o = K[(n_rows, )](x, y, cos, sin, x.stride(0) if x.ndim == 2 else x.stride(-2), half_dim,
                                  BLOCK_SIZE=BLOCK_SIZE)
                return {"y": o.y_ptr}

            def ref(v, _, D=D):
                h = D // 2
                x1, x2 = v["x"][..., :h], v["x"][..., h:]
                c, s = v["cos"], v["sin"]
                return {"y": torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), -1)}

            run_case(f"{dname(dtype)} shape={shape}", {"x": x, "cos": cos, "sin": sin}, launch, ref, TOL[dtype])


# name -> (the jit function's name in the module, the test); the module is tut_NAME_op.py
KERNELS = {
    "add_kernel": ("add_kernel", t_add_kernel),
    "softmax_kernel": ("softmax_kernel", t_softmax_kernel),
    "matmul_kernel": ("matmul_kernel", t_matmul_kernel),
    "dropout": ("_dropout", t_dropout),
    "seeded_dropout": ("_seeded_dropout", t_seeded_dropout),
    "layer_norm_fwd_fused": ("_layer_norm_fwd_fused", t_layer_norm_fwd_fused),
    "attn_fwd": ("_attn_fwd", t_attn_fwd),
    "rope_kernel": ("_rope_kernel", t_rope_kernel),
}


def load_module(name):
    """tut_NAME_op.py from FOLDER, imported on its own, as a user imports it."""
    spec = importlib.util.spec_from_file_location(f"tut_{name}_op", os.path.join(FOLDER, f"tut_{name}_op.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_one(name):
    torch.manual_seed(0)
    attr, test = KERNELS[name]
    try:
        K = getattr(load_module(name), attr)
    except Exception as e:
        report(False, f"{name}: the module does not import: {first_line(e)}")
        traceback.print_exc(limit=2)
    else:
        test(K)
    print(f"{name}: {CHECKS} checks, {FAILS} failures", flush=True)


def run_all():
    # One process per kernel, several at a time on the GPU machine: Triton compiles on the CPU, one kernel at a time
    # per process.
    jobs = int(os.environ.get("TUT_JOBS", "1" if CPU else str(len(KERNELS))))
    limit = float(os.environ.get("TUT_TIMEOUT", "3600" if CPU else "900"))
    names = list(KERNELS)
    procs, results, pending = {}, {}, list(names)
    start = time.time()
    while pending or procs:
        while pending and len(procs) < jobs:
            name = pending.pop(0)
            # the child's output goes to a file, not a pipe (a pipe nobody reads would stop a child that prints more
            # than it holds)
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
    print("\nkernel                          checks  failures  seconds")
    for name in names:
        rc, out, secs = results[name]
        last = [l for l in out.splitlines() if l.startswith(f"{name}: ") and " checks, " in l]
        if rc == 0 and last:
            parts = last[-1].split()
            checks, fails = int(parts[1]), int(parts[3])
        else:
            checks, fails = 1, 1
            print(f"FAIL {name}: its process ended with {rc} (killed at the time limit, or crashed) before finishing")
        total_checks += checks
        total_fails += fails
        print(f"{name:30s} {checks:7d} {fails:9d} {secs:8.0f}")
    print(f"{total_checks - total_fails} of {total_checks} pass")


if __name__ == "__main__":
    if ONLY:
        run_one(ONLY)
    else:
        run_all()
