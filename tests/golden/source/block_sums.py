import triton
import triton.language as tl


@triton.jit
def block_sums_kernel(X, OUT, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0.0)
    tl.store(OUT + pid, tl.sum(x, axis=0))
