import triton
import triton.language as tl
try:
    from triton.language.extra.libdevice import tanh
except ImportError:
    try:
        from triton.language.extra.cuda.libdevice import tanh
    except ImportError:
        pass


@triton.jit
def gelu_tanh_kernel(X, Y, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + tanh(inner))
    tl.store(Y + offsets, y.to(Y.dtype.element_ty), mask=mask)
