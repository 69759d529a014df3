import triton
import triton.language as tl


@triton.jit
def qk_norm_rope_kernel(q_ptr, w_ptr, cos_ptr, sin_ptr, out_ptr, n_tokens, eps,
                        H: tl.constexpr, D: tl.constexpr, BLOCK_T: tl.constexpr):
    # Per token and head: RMS-normalize the head vector (weight w[D]), then rotate its halves (rotary, NeoX style).
    pid = tl.program_id(0)
    toks = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    hs = tl.arange(0, H)
    ds = tl.arange(0, D)
    offs = toks[:, None, None] * (H * D) + hs[None, :, None] * D + ds[None, None, :]
    tmask = toks[:, None, None] < n_tokens
    q = tl.load(q_ptr + offs, mask=tmask, other=0.0).to(tl.float32)
    var = tl.sum(q * q, axis=2) / D
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + ds).to(tl.float32)
    qn = q * rstd[:, :, None] * w[None, None, :]
    q2 = tl.reshape(qn, (BLOCK_T, H, 2, D // 2))
    q2 = tl.permute(q2, (0, 1, 3, 2))
    x1, x2 = tl.split(q2)
    half = tl.arange(0, D // 2)
    c = tl.load(cos_ptr + toks[:, None] * (D // 2) + half[None, :], mask=toks[:, None] < n_tokens, other=0.0)
    s = tl.load(sin_ptr + toks[:, None] * (D // 2) + half[None, :], mask=toks[:, None] < n_tokens, other=0.0)
    y1 = x1 * c[:, None, :] - x2 * s[:, None, :]
    y2 = x2 * c[:, None, :] + x1 * s[:, None, :]
    y = tl.join(y1, y2)
    y = tl.permute(y, (0, 1, 3, 2))
    y = tl.reshape(y, (BLOCK_T, H, D))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=tmask)
