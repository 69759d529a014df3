# A kernel file with the host code around its kernel that tutorials and libraries write at module level: an
# autograd Function bound to a name (`scale = ScaleRows.apply`, as 05-layer-norm's `layer_norm =
# LayerNorm.apply`), autotune configs read from a name an if statement binds and rebound by a later if (the
# tutorial attention's NUM_STAGES_OPTIONS), and a module-level name the kernel also uses for a local (the tutorial
# matmul's `b = b.T` under an if, its kernel's `b = tl.load(...)`). The module `--emit torch` writes must import on
# its own: it carries the host code the kernel's decorators read, and nothing the kernel does not.
import os

import torch
import triton
import triton.language as tl

if os.environ.get("TGRAD_TEST_FEW_STAGES"):
    STAGE_OPTIONS = [1]
else:
    STAGE_OPTIONS = [2, 3]

configs = [triton.Config({"BLOCK": block}, num_stages=s, num_warps=4) for block in (64, 128) for s in STAGE_OPTIONS]

if "TGRAD_TEST_ONE_CONFIG" in os.environ:
    configs = [triton.Config({"BLOCK": 64}, num_stages=2, num_warps=4)]


@triton.autotune(configs=configs, key=["n"])
@triton.jit
def scale_rows_kernel(A, B, C, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    a = tl.load(A + offsets, mask=inside, other=0.0)
    b = tl.load(B + offsets, mask=inside, other=0.0)
    tl.store(C + offsets, a * b + a, mask=inside)


class ScaleRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        c = torch.empty_like(a)
        scale_rows_kernel[lambda meta: (triton.cdiv(a.numel(), meta["BLOCK"]),)](a, b, c, a.numel())
        return c


scale_rows = ScaleRows.apply

if torch.cuda.is_available():
    b = torch.ones(4, device="cuda")
    b = b.T
