import triton
import triton.language as tl
from .helper_module import softplus as act
from .helper_module import activation


@triton.jit
def softplus_scale_kernel(X, W, Y, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask, other=0.0)
    w = tl.load(W + offsets, mask=mask, other=0.0)
    tl.store(Y + offsets, act(x) * w, mask=mask)


@triton.jit
def activation_cast_kernel(X, Y, n_elements, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
    y = (activation(x) * x).to(OUT_DTYPE)
    tl.store(Y + offsets, y, mask=mask)
