import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, n_rows, H, BLOCK: tl.constexpr):
    # x is [n_rows, 2 * H]: gate in the first half, up in the second; out = silu(gate) * up.
    row = tl.program_id(0)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        gate = tl.load(x_ptr + row * 2 * H + cols, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(x_ptr + row * 2 * H + H + cols, mask=mask, other=0.0).to(tl.float32)
        out = gate * tl.sigmoid(gate) * up
        tl.store(out_ptr + row * H + cols, out.to(out_ptr.dtype.element_ty), mask=mask)
