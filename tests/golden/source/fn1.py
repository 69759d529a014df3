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
    outer = x[:, None] * y[None, :]
    s = tl.sigmoid(outer)
    return tl.sum(s * outer, axis=1)


@triton.jit
def fn1_kernel(X, Y, Out, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    idx = rows[:, None] * BLOCK + cols[None, :]
    x = tl.load(X + idx)
    y = tl.load(Y + rows)
    tl.store(Out + idx, fn1(x, y))


@triton.jit
def fn2_kernel(X, Y, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    tl.store(Out + offs, fn2(x, y))
