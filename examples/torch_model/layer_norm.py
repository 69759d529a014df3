# A layer norm forward kernel as a model author writes it: one program per row,
# the whole row in one block (BLOCK_SIZE >= N), mean and 1/std saved for a
# backward. tgrad writes the backward (examples/torch_model/train.py says how).
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(X, Y, W, B, Mean, Rstd, stride_row, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = centered * rstd * w + b
    tl.store(Y + row * stride_row + cols, y.to(Y.dtype.element_ty), mask=mask)
