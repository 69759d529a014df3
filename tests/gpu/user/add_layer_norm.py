import triton
import triton.language as tl


@triton.jit
def add_layer_norm_kernel(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, res_out_ptr, N, eps, BLOCK: tl.constexpr):
    # h = x + residual (written out for the next block), y = LayerNorm(h) * w + b.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(res_out_ptr + row * N + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask)
    mean = tl.sum(h, axis=0) / N
    diff = tl.where(mask, h - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, (diff * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
