import triton
import triton.language as tl


@triton.jit
def rotary_inplace_kernel(Q, COS, SIN, n_heads, HEADS: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0)
    h = tl.arange(0, HEADS)
    d = tl.arange(0, HALF)
    mask = (h[:, None] < n_heads) & (d[None, :] < HALF)
    first = Q + row * n_heads * 2 * HALF + h[:, None] * 2 * HALF + d[None, :]
    cos = tl.load(COS + row * HALF + d)[None, :]
    sin = tl.load(SIN + row * HALF + d)[None, :]
    a = tl.load(first, mask=mask, other=0.0)
    b = tl.load(first + HALF, mask=mask, other=0.0)
    tl.store(first, a * cos - b * sin, mask=mask)
    tl.store(first + HALF, b * cos + a * sin, mask=mask)


@triton.jit
def rotary_kernel(Q, COS, SIN, OUT, n_heads, HEADS: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0)
    h = tl.arange(0, HEADS)
    d = tl.arange(0, HALF)
    mask = (h[:, None] < n_heads) & (d[None, :] < HALF)
    offsets = row * n_heads * 2 * HALF + h[:, None] * 2 * HALF + d[None, :]
    cos = tl.load(COS + row * HALF + d)[None, :]
    sin = tl.load(SIN + row * HALF + d)[None, :]
    a = tl.load(Q + offsets, mask=mask, other=0.0)
    b = tl.load(Q + offsets + HALF, mask=mask, other=0.0)
    tl.store(OUT + offsets, a * cos - b * sin, mask=mask)
    tl.store(OUT + offsets + HALF, b * cos + a * sin, mask=mask)


@triton.jit
def square_positive_inplace_kernel(X, n, BLOCK: tl.constexpr = 1024):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(X + offsets, mask=inside, other=0.0)
    tl.store(X + offsets, x * x, mask=inside & (x > 0))
