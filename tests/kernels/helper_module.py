# Helpers another test kernel imports (tests/kernels/imports_helper.py): a
# jit function that calls another one and libdevice, and a module constant.
import triton
import triton.language as tl
from triton.language.extra import libdevice

SOFTPLUS_THRESHOLD: tl.constexpr = 20.0


@triton.jit
def _log1p_exp(x):
    return libdevice.log1p(tl.exp(x))


@triton.jit
def softplus(x):
    return tl.where(x > SOFTPLUS_THRESHOLD, x, _log1p_exp(x))
