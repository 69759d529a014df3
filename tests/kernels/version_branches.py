# A helper defined once per Triton version, in the branches of a module-level if (mamba's softplus.py): Triton 2's
# tl.math held libdevice's functions (tl.math.log1p), Triton 3's does not. tgrad cannot evaluate the condition; it
# uses the definition whose code Triton 3 has functions for.
import triton
import triton.language as tl

TRITON3 = int(triton.__version__.split(".")[0]) >= 3

if TRITON3:
    @triton.jit
    def softplus(x):
        return tl.math.log(tl.math.exp(x) + 1)
else:
    @triton.jit
    def softplus(x):
        return tl.math.log1p(tl.exp(x))


@triton.jit
def softplus_rows_kernel(X, Y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(X + offsets, mask=inside, other=0.0)
    tl.store(Y + offsets, softplus(x), mask=inside)
