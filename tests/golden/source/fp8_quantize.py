import triton
import triton.language as tl


@triton.jit
def fake_quant_rows_kernel(X, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), 0)
    scale = 448.0 / tl.maximum(amax, 1e-12)
    q = (x * scale).to(tl.float8e4nv)
    y = q.to(tl.float32) / scale
    tl.store(Y + row * n_cols + cols, y.to(Y.dtype.element_ty), mask=m)
