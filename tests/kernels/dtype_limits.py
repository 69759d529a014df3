# A helper choosing a constant by the dtype's predicates under constexpr ifs, each returning (FlagGems' limits):
# Triton compiles the branch the dtype takes, and so does tgrad.
import triton
import triton.language as tl


@triton.jit
def get_dtype_min(dtype):
    dtype_ = dtype.value
    if dtype_.is_floating():
        value: tl.constexpr = float("-inf")
        return value
    if dtype_.is_int_signed():
        width: tl.constexpr = dtype_.int_bitwidth
        value: tl.constexpr = -1 * 2 ** (width - 1)
        return value
    if dtype_.is_int_unsigned():
        value: tl.constexpr = 0
        return value


@triton.jit
def masked_max_kernel(X, Y, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(X + o, mask=o < n, other=get_dtype_min(X.dtype.element_ty))
    tl.store(Y, tl.max(x))
