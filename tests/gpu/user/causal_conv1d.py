import triton
import triton.language as tl


@triton.jit
def causal_conv1d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, T, D,
                         stride_xb, stride_xt, stride_yb, stride_yt,
                         KW: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, SILU: tl.constexpr):
    # y[b, t, d] = act(bias[d] + sum_k w[d, k] * x[b, t - (KW - 1) + k, d]), zero padding on the left.
    pid_b = tl.program_id(0)
    pid_t = tl.program_id(1)
    pid_d = tl.program_id(2)
    ts = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    ds = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = ds < D
    acc = tl.zeros([BLOCK_T, BLOCK_D], dtype=tl.float32)
    acc += tl.load(b_ptr + ds, mask=d_mask, other=0.0)[None, :]
    for k in tl.static_range(KW):
        src = ts - (KW - 1) + k
        m = (src[:, None] >= 0) & (src[:, None] < T) & d_mask[None, :]
        xv = tl.load(x_ptr + pid_b * stride_xb + src[:, None] * stride_xt + ds[None, :], mask=m, other=0.0)
        wv = tl.load(w_ptr + ds * KW + k, mask=d_mask, other=0.0)
        acc += xv.to(tl.float32) * wv[None, :]
    if SILU:
        acc = acc * tl.sigmoid(acc)
    out_mask = (ts[:, None] < T) & d_mask[None, :]
    tl.store(y_ptr + pid_b * stride_yb + ts[:, None] * stride_yt + ds[None, :], acc.to(y_ptr.dtype.element_ty), mask=out_mask)
