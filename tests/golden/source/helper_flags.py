import triton
import triton.language as tl


@triton.jit
def _gate(x, KIND: tl.constexpr, DOUBLE: tl.constexpr):
    if KIND == "square":
        y = x * x
    elif KIND == "exp":
        y = tl.exp(x)
    if DOUBLE:
        y = y * 2.0
    return y


@triton.autotune(configs=_warp_configs(), key=["n"])
@triton.jit
def helper_flag_kernel(X, Y, n, ACT: tl.constexpr, TWICE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask, other=0.0)
    tl.store(Y + offsets, _gate(x, ACT, DOUBLE=TWICE), mask=mask)
