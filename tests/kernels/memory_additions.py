# Additive updates of memory whose addresses move with an inner loop, as Liger's tiled rms norm backward keeps its
# per-program dW rows: each program walks its rows (a grid-stride loop) and, column block by column block, adds
# x * w * x to its own row of P, reading the row back, adding and storing it again. tgrad differentiates such a
# load-add-store as tl.atomic_add (src/ad/MemoryAccumulators.h).
import triton
import triton.language as tl


@triton.jit
def tiled_partial_sums_kernel(X, W, P, n_rows, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for row in tl.range(pid, n_rows, tl.num_programs(0)):
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
            partial = tl.load(P + pid * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
            partial += x * w * x
            tl.store(P + pid * n_cols + cols, partial, mask=mask)


# Not an addition only: the row is also read back to scale x, so the values in memory between the updates matter
# and tgrad keeps its located error.
@triton.jit
def partial_sums_read_back_kernel(X, P, n_rows, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for row in tl.range(pid, n_rows, tl.num_programs(0)):
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
            partial = tl.load(P + pid * n_cols + cols, mask=mask, other=0.0)
            new = partial + x * partial
            tl.store(P + pid * n_cols + cols, new, mask=mask)
