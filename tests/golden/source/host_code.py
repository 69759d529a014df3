import os
import torch
import triton
import triton.language as tl
scale_rows = ScaleRows.apply
try:
    b = b.T
except (ImportError, AttributeError):
    pass


@triton.autotune(configs=configs, key=["n"])
@triton.jit
def scale_rows_kernel(A, B, C, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    a = tl.load(A + offsets, mask=inside, other=0.0)
    b = tl.load(B + offsets, mask=inside, other=0.0)
    tl.store(C + offsets, a * b + a, mask=inside)
