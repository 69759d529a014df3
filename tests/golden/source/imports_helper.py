import triton
import triton.language as tl
from .helper_module import softplus as act
from .helper_module import activation
from .helper_module import tanh_fast, exp_fn
from .helper_module import make_tensor_descriptor


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


@triton.jit
def approx_gelu_kernel(X, Y, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    gelu = 0.5 * x * (1.0 + tanh_fast(inner))
    wave = tl.inline_asm_elementwise("sin.approx.f32 $0, $1;", "=f,f", [2.0 * x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + offsets, gelu * exp_fn(-0.5 * x * x) + 0.25 * wave, mask=mask)


@triton.jit
def descriptor_scale_kernel(X, W, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    x_desc = make_tensor_descriptor(X, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    y_desc = make_tensor_descriptor(Y, [M, N], [N, 1], [BM, BN])
    x = x_desc.load([pid * BM, 0]).to(tl.float32)
    w = tl.load(W + tl.arange(0, BN), mask=tl.arange(0, BN) < N, other=0.0).to(tl.float32)
    y = x * w[None, :]
    y_desc.store([pid * BM, 0], (y * tl.sigmoid(y)).to(y_desc.dtype))
