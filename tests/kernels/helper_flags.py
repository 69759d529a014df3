# A kernel whose tl.constexpr flags reach a jit helper under other names:
# the helper tests them (KIND, DOUBLE), so the kernel's ACT and TWICE need
# values, and one backward is made per value. The autotuner's configs come
# from a host function of this file, which the --emit torch module copies.
import triton
import triton.language as tl


def _warp_configs():
    return [triton.Config({}, num_warps=w) for w in (2, 4)]


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
