import triton
import triton.language as tl


@triton.jit
def signed_rotation_kernel(X, C, S, YA, YB, n, INVERSE: tl.constexpr = False, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(X + 2 * offs, mask=mask, other=0.0)
    b = tl.load(X + 2 * offs + 1, mask=mask, other=0.0)
    c = tl.load(C + offs, mask=mask, other=0.0)
    s = tl.load(S + offs, mask=mask, other=0.0)
    if not INVERSE:
        ya = a * c - b * s
        yb = b * c + a * s
    else:
        ya = a * c + b * s
        yb = b * c - a * s
    tl.store(YA + offs, ya, mask=mask)
    tl.store(YB + offs, yb, mask=mask)


@triton.jit
def optional_activation_kernel(X, Y, n, ACT: tl.constexpr = None, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    if ACT is not None:
        if ACT == "relu":
            z = tl.maximum(x, 0.0)
        elif ACT == "softsign":
            z = x / (1.0 + tl.abs(x))
        y = z * 2.0
    else:
        y = x * 2.0
    tl.store(Y + offs, y, mask=mask)
