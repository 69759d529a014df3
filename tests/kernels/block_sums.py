# Sums of consecutive blocks: OUT[p] = X[p * BLOCK : (p + 1) * BLOCK].sum(), one program per block. What it
# computes depends on BLOCK (another block size sums other elements into other outputs), so BLOCK does not only
# tile the computation: a module written with `--tiling BLOCK` must find that out at its tuning and keep the
# forward's value (tests/gpu/tiling_module.py).
import triton
import triton.language as tl


@triton.jit
def block_sums_kernel(X, OUT, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0.0)
    tl.store(OUT + pid, tl.sum(x, axis=0))
