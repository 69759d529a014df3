import triton
import triton.language as tl


@triton.jit
def masked_mean_pool_kernel(x_ptr, len_ptr, out_ptr, stride_b, stride_t, D,
                            BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    # out[b, d] = mean over t < len[b] of x[b, t, d]; programs over (batch, time chunk, feature block) add partial
    # means atomically.
    b = tl.program_id(0)
    tc = tl.program_id(1)
    dc = tl.program_id(2)
    n = tl.load(len_ptr + b)
    ts = tc * BLOCK_T + tl.arange(0, BLOCK_T)
    ds = dc * BLOCK_D + tl.arange(0, BLOCK_D)
    if tc * BLOCK_T >= n:
        return
    m = (ts[:, None] < n) & (ds[None, :] < D)
    x = tl.load(x_ptr + b.to(tl.int64) * stride_b + ts[:, None].to(tl.int64) * stride_t + ds[None, :], mask=m, other=0.0)
    part = tl.sum(x.to(tl.float32), axis=0) / n.to(tl.float32)
    tl.atomic_add(out_ptr + b * D + ds, part, mask=ds < D)
