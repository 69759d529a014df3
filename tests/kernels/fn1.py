# Pure tile functions (no pointers) for autodiff tests, plus tiny kernels that evaluate them.
import torch
import triton
import triton.language as tl


@triton.jit
def fn1(x, y):
    a = tl.exp(x)
    b = tl.log(tl.expand_dims(y, 1))
    c = a + b
    return a * b + tl.dot(c, c)


@triton.jit
def fn2(x, y):
    # Outer product via broadcasting, squashed by a sigmoid, reduced over columns.
    outer = x[:, None] * y[None, :]
    s = tl.sigmoid(outer)
    return tl.sum(s * outer, axis=1)


@triton.jit
def fn1_kernel(X, Y, Out, BLOCK: tl.constexpr):
    # Evaluate fn1 on one BLOCK x BLOCK fp32 tile (row-major, contiguous).
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    idx = rows[:, None] * BLOCK + cols[None, :]
    x = tl.load(X + idx)
    y = tl.load(Y + rows)
    tl.store(Out + idx, fn1(x, y))


@triton.jit
def fn2_kernel(X, Y, Out, BLOCK: tl.constexpr):
    # Evaluate fn2 on two length-BLOCK fp32 vectors.
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    tl.store(Out + offs, fn2(x, y))


if __name__ == "__main__":
    torch.manual_seed(0)
    n = 32
    x = torch.randn(n, n, device="cuda") * 0.1
    y = torch.rand(n, device="cuda") + 0.5  # log needs y > 0
    out = torch.empty_like(x)
    fn1_kernel[(1,)](x, y, out, BLOCK=n)
    a = torch.exp(x)
    b = torch.log(y[:, None])
    c = a + b
    ref = a * b + c @ c
    print("fn1 max rel diff:", ((out - ref).abs() / ref.abs().clamp_min(1.0)).max().item())

    u = torch.randn(n, device="cuda")
    w = torch.randn(n, device="cuda")
    out2 = torch.empty_like(u)
    fn2_kernel[(1,)](u, w, out2, BLOCK=n)
    o = u[:, None] * w[None, :]
    print("fn2 max abs diff:", (out2 - (torch.sigmoid(o) * o).sum(1)).abs().max().item())
