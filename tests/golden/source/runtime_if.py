import torch
import triton
import triton.language as tl


@triton.jit
def scaled_act_kernel(x_ptr, out_ptr, n_elements, mode, scale, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    if mode > 0:
        y = scale * (1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0))
    elif mode < 0:
        y = x * tl.sigmoid(x)
    else:
        y = x * scale
    tl.store(out_ptr + offsets, y, mask=mask)
