import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_in = in_ptr + row * in_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(row_in + cols, mask=mask, other=-float('inf')).to(tl.float32)
    x_max = tl.max(x, axis=0)
    shifted = x - x_max
    num = tl.exp(shifted)
    denom = tl.sum(num, axis=0)
    y = num / denom
    row_out = out_ptr + row * out_row_stride
    tl.store(row_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
