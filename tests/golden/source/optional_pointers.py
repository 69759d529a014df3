import triton
import triton.language as tl


@triton.jit
def optional_affine_norm_kernel(X, W, B, Y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, 0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(xc * xc, 0) / n_cols + eps)
    if W is None:
        w = 1
    else:
        w = tl.load(W + cols, mask=mask, other=0.0)
    b = 0.0 if B is None else tl.load(B + cols, mask=mask, other=0.0)
    tl.store(Y + row * n_cols + cols, xc * rstd * w + b, mask=mask)
