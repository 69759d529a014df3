# Grab-bag kernel exercising many Triton language features (loops, casts, branches, asserts).
import torch
import triton
import triton.language as tl


@triton.jit
def misc_ops_kernel(
    X, Y, Partial,
    n_elements, stride_xb, stride_yb,
    scale, clip,
    BLOCK: tl.constexpr,
    CLAMP: tl.constexpr,
    OUT_FP16: tl.constexpr,
):
    # Compile-time checks on the block size (one comparison each).
    tl.static_assert(BLOCK >= 16)
    tl.static_assert(BLOCK % 16 == 0)
    NUM_COEFFS: tl.constexpr = 4

    # Axis 0 strides over blocks of a row, axis 1 selects the row (batch).
    pid = tl.program_id(axis=0)
    batch = tl.program_id(1)
    num_pid = tl.num_programs(0)
    n_blocks = tl.cdiv(n_elements, BLOCK)

    x_row = X + batch * stride_xb
    y_row = Y + batch * stride_yb

    # Tuple assignment of the clamp bounds.
    lo, hi = -clip, clip
    bias = tl.full((BLOCK,), 0.25, tl.float32)
    partial = 0.

    # Grid-stride loop: a program keeps going while blocks remain.
    block_id = pid
    while block_id < n_blocks:
        offs = block_id * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.device_assert(offs >= 0, "negative offset")
        x = tl.load(x_row + offs, mask=mask, other=0.).to(tl.float32)

        # Horner evaluation of x^3/4 + x^2/3 + x/2 + 1, unrolled at compile time.
        poly = tl.zeros([BLOCK], dtype=tl.float32)
        for i in tl.static_range(NUM_COEFFS):
            poly = poly * x + 1.0 / (NUM_COEFFS - i)

        # Leaky gate, then add a small index-dependent bias (low byte of the index).
        y = tl.where(x > 0., poly, poly * 1e-2)
        y += (offs & 0xFF).to(tl.float32) * (1.0 / 256.0) + bias

        # Runtime branch on a scalar argument.
        if scale != 1.0:
            y = y * scale

        # Compile-time conditional expression.
        y = tl.minimum(tl.maximum(y, lo), hi) if CLAMP else y
        y = tl.where(mask, y, 0.)
        partial += tl.sum(y, axis=0) * (1.0 + 1e-5)

        out = y.to(tl.float16) if OUT_FP16 else y
        tl.store(y_row + offs, out, mask=mask)
        block_id += num_pid

    # One partial sum per (batch, program).
    tl.store(Partial + batch * num_pid + pid, partial)


@triton.jit
def mode_select_kernel(X, Y, n_elements, mode, BLOCK: tl.constexpr):
    # Runtime if/elif/else chain selecting an element-wise op.
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


def misc_ops(x: torch.Tensor, scale=1.0, clip=4.0, clamp=True, out_fp16=False):
    """x: (B, N) float tensor. Returns (y, row_sums)."""
    B, N = x.shape
    BLOCK = 256
    y = torch.empty((B, N), device=x.device,
                    dtype=torch.float16 if out_fp16 else torch.float32)
    n_prog = min(triton.cdiv(N, BLOCK), 8)
    partial = torch.empty((B, n_prog), device=x.device, dtype=torch.float32)
    misc_ops_kernel[(n_prog, B)](
        x, y, partial,
        N, x.stride(0), y.stride(0),
        scale, clip,
        BLOCK=BLOCK, CLAMP=clamp, OUT_FP16=out_fp16,
    )
    return y, partial.sum(dim=1)


def misc_ops_ref(x, scale=1.0, clip=4.0, clamp=True):
    xf = x.float()
    poly = torch.zeros_like(xf)
    for i in range(4):
        poly = poly * xf + 1.0 / (4 - i)
    y = torch.where(xf > 0, poly, poly * 1e-2)
    idx = torch.arange(x.shape[1], device=x.device)
    y = y + (idx & 0xFF).float() / 256.0 + 0.25
    y = y * scale
    if clamp:
        y = y.clamp(-clip, clip)
    return y


if __name__ == "__main__":
    torch.manual_seed(0)
    inp = torch.randn(3, 5000, device="cuda")
    out, sums = misc_ops(inp, scale=0.5)
    ref = misc_ops_ref(inp, scale=0.5)
    print("max abs diff:", (out - ref).abs().max().item())
    print("sum rel diff:", ((sums - ref.sum(1) * (1 + 1e-5)).abs() / ref.sum(1).abs()).max().item())
    sel = torch.empty_like(inp[0])
    mode_select_kernel[(triton.cdiv(inp.shape[1], 1024),)](inp[0], sel, inp.shape[1], 0, BLOCK=1024)
    print("abs mode diff:", (sel - inp[0].abs()).abs().max().item())
