# Code Triton accepts that a stricter reading would reject: a definition and
# its use guarded by the same tl.constexpr flag, a Python number that becomes
# a tensor when a loop adds to it, and a runtime if that yields a number on
# one branch and a tensor on the other.
import triton
import triton.language as tl


@triton.jit
def bias_act_kernel(X, B, Y, N, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0)
    if HAS_BIAS:
        b = tl.load(B + offs, mask=mask, other=0.0)
    y = x * 2.0
    if HAS_BIAS:
        y += b
    tl.store(Y + offs, y, mask=mask)


@triton.jit
def row_sum_kernel(X, Y, n_cols, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    d = 0.0
    for i in range(0, n_chunks):
        cols = i * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        d += tl.sum(x * x, axis=0)
    tl.store(Y + row, d)


@triton.jit
def pick_kernel(X, Y, mode, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(X + row * BLOCK + tl.arange(0, BLOCK))
    if mode > 0:
        s = tl.sum(x, axis=0)
    else:
        s = 0.0
    tl.store(Y + row, s)
