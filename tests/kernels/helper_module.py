# Helpers another test kernel imports (tests/kernels/imports_helper.py): a
# jit function that calls another one and libdevice, a module constant, a
# constant computed on the host and a jit function bound to another name.
import os

import triton
import triton.language as tl
from triton.language.extra import libdevice

SOFTPLUS_THRESHOLD = tl.constexpr(20.0)


@triton.jit
def _log1p_exp(x):
    return libdevice.log1p(tl.exp(x))


@triton.jit
def softplus(x):
    return tl.where(x > SOFTPLUS_THRESHOLD, x, _log1p_exp(x))


# A constant the host computes with a function and a variable of this file:
# tgrad reads the file without knowing its value (no kernel here needs it).
def _threshold_note(scale):
    return "softplus is linear above " + str(20 * scale)


_SCALE = 1  # a plain host variable
THRESHOLD_NOTE: tl.constexpr = tl.constexpr(_threshold_note(_SCALE))

# A jit function bound to another name in a module-level if: Python takes one
# branch on the host (here the else, without the variable set); tgrad cannot
# tell which, warns, and uses the later binding.
if os.environ.get("HELPER_MODULE_PLAIN_LOG1P") == "1":
    activation = _log1p_exp
else:
    activation = softplus


# A one-instruction PTX approximation (as kernels that trade accuracy for
# speed write them): tgrad differentiates it as the function it approximates.
@triton.jit
def tanh_fast(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", constraints="=f,f", args=[x], dtype=tl.float32,
                                     is_pure=True, pack=1)


# A Triton function under another name, chosen in a module-level if as
# libraries choose a libdevice spelling by platform: tgrad takes the first
# alternative it knows (the else here; the first is Intel's).
if os.environ.get("HELPER_MODULE_INTEL_XPU") == "1":
    exp_fn = tl.extra.intel.libdevice.exp
else:
    exp_fn = libdevice.exp


# Tensor descriptors where this Triton has them, under either of the names
# Tritons have used, and a placeholder for Tritons without them (libraries
# keep such a shim so that their module imports everywhere). Triton 3.6 takes
# the elif; tgrad takes the alternative that binds a function it knows, over
# the jit fallback in the else.
if hasattr(triton.language, "_experimental_make_tensor_descriptor"):
    make_tensor_descriptor = triton.language._experimental_make_tensor_descriptor
elif hasattr(triton.language, "make_tensor_descriptor"):
    make_tensor_descriptor = triton.language.make_tensor_descriptor
else:

    @triton.jit
    def make_tensor_descriptor(base, shape, strides, block_shape, _builder=None):
        return None
