import torch
import triton
import triton.language as tl


@triton.jit
def misc_ops_kernel(X, Y, Partial, n_elements, stride_xb, stride_yb, scale, clip, BLOCK: tl.constexpr, CLAMP: tl.constexpr, OUT_FP16: tl.constexpr):
    tl.static_assert(BLOCK >= 16)
    tl.static_assert(BLOCK % 16 == 0)
    NUM_COEFFS: tl.constexpr = 4
    pid = tl.program_id(axis=0)
    batch = tl.program_id(1)
    num_pid = tl.num_programs(0)
    n_blocks = tl.cdiv(n_elements, BLOCK)
    x_row = X + batch * stride_xb
    y_row = Y + batch * stride_yb
    lo, hi = -clip, clip
    bias = tl.full((BLOCK,), 0.25, tl.float32)
    partial = 0.
    block_id = pid
    while block_id < n_blocks:
        offs = block_id * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.device_assert(offs >= 0, "negative offset")
        x = tl.load(x_row + offs, mask=mask, other=0.).to(tl.float32)
        poly = tl.zeros([BLOCK], dtype=tl.float32)
        for i in tl.static_range(NUM_COEFFS):
            poly = poly * x + 1.0 / (NUM_COEFFS - i)
        y = tl.where(x > 0., poly, poly * 1e-2)
        y += (offs & 0xFF).to(tl.float32) * (1.0 / 256.0) + bias
        if scale != 1.0:
            y = y * scale
        y = tl.minimum(tl.maximum(y, lo), hi) if CLAMP else y
        y = tl.where(mask, y, 0.)
        partial += tl.sum(y, axis=0) * (1.0 + 1e-5)
        out = y.to(tl.float16) if OUT_FP16 else y
        tl.store(y_row + offs, out, mask=mask)
        block_id += num_pid
    tl.store(Partial + batch * num_pid + pid, partial)


@triton.jit
def mode_select_kernel(X, Y, n_elements, mode, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(X + offs, mask=mask, other=0.).to(tl.float32)
    y = x
    if mode == 0:
        y = tl.abs(x)
    elif mode == 2:
        y = x * x
    else:
        pass
    tl.store(Y + offs, y, mask=mask)
