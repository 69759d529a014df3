import os
import triton
import triton.language as tl
from triton.language.extra import libdevice

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
