import os
import triton
import triton.language as tl
from triton.language.extra import libdevice
try:
    exp_fn = tl.extra.intel.libdevice.exp
except (ImportError, AttributeError):
    try:
        exp_fn = libdevice.exp
    except (ImportError, AttributeError):
        pass
try:
    make_tensor_descriptor = triton.language._experimental_make_tensor_descriptor
except (ImportError, AttributeError):
    try:
        make_tensor_descriptor = triton.language.make_tensor_descriptor
    except (ImportError, AttributeError):
        pass

SOFTPLUS_THRESHOLD = tl.constexpr(20.0)
THRESHOLD_NOTE: tl.constexpr = tl.constexpr(_threshold_note(_SCALE))


@triton.jit
def _log1p_exp(x):
    return libdevice.log1p(tl.exp(x))


@triton.jit
def softplus(x):
    return tl.where(x > SOFTPLUS_THRESHOLD, x, _log1p_exp(x))


@triton.jit
def activation(x):
    return tl.where(x > SOFTPLUS_THRESHOLD, x, _log1p_exp(x))


@triton.jit
def tanh_fast(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", constraints="=f,f", args=[x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def make_tensor_descriptor(base, shape, strides, block_shape, _builder=None):
    return None
