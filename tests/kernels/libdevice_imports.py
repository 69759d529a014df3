# Elementwise kernels that call libdevice and tl.math functions imported by
# name, with and without `as` aliases, and through module imports: each
# spelling must resolve to the same function (and adjoint rule) as
# `libdevice.NAME`. Every kernel computes y = f(x, g) over one block per
# program, with x and g loaded from X and G.
import triton
import triton.language as tl
from triton.language.extra.libdevice import tanh, rsqrt, erf, pow, exp2
from triton.language.extra.libdevice import tanh as ld_tanh, rsqrt as ld_rsqrt, erf as ld_erf
from triton.language.extra.libdevice import pow as ld_pow, exp2 as ld_exp2
from triton.language.extra.cuda import libdevice as cuda_libdevice
import triton.language.extra.libdevice as libdevice_module
from triton.language.math import rsqrt as math_rsqrt, erf as math_erf
from triton.language.math import exp2 as math_exp2


@triton.jit
def tanh_scale_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, tanh(x) * g, mask=mask)


@triton.jit
def tanh_alias_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, ld_tanh(x) * g, mask=mask)


@triton.jit
def rsqrt_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, rsqrt(x * x + 1.0) * g, mask=mask)


@triton.jit
def rsqrt_alias_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, ld_rsqrt(x * x + 1.0) * g, mask=mask)


@triton.jit
def erf_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, erf(x) * g, mask=mask)


@triton.jit
def erf_alias_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, ld_erf(x) * g, mask=mask)


@triton.jit
def pow_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, pow(x * x + 1.0, g), mask=mask)


@triton.jit
def pow_alias_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, ld_pow(x * x + 1.0, g), mask=mask)


@triton.jit
def exp2_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, exp2(x) * g, mask=mask)


@triton.jit
def exp2_alias_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, ld_exp2(x) * g, mask=mask)


@triton.jit
def module_spellings_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    y = cuda_libdevice.tanh(x) * g + libdevice_module.erf(x * g) + tl.extra.cuda.libdevice.pow(x * x + 1.0, g)
    tl.store(Y + offs, y, mask=mask)


@triton.jit
def tl_math_names_kernel(X, Y, G, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, math_rsqrt(x * x + 1.0) * g + math_erf(x) * math_exp2(g), mask=mask)
