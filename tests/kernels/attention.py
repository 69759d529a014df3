# Flash-attention style forward pass with an online (streaming) softmax and optional causal mask.
import math

import torch
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(
    Q, K, V, sm_scale, M, Out,
    stride_qz, stride_qh, stride_qm, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_om, stride_ok,
    H, N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    # Axis 0: which block of queries; axis 1: flattened (batch, head).
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H

    # Base pointers of this (batch, head) slice; 64-bit to avoid overflow.
    q_base = Q + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = K + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = V + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = Out + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)

    # Running row max (log2 domain), running denominator, and output accumulator.
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # Fold log2(e) into the scale so we can use exp2 instead of exp.
    qk_scale = sm_scale * 1.44269504

    q_ptrs = q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)

    # With a causal mask, keys past the last query of this block are never visible.
    hi = (start_m + 1) * BLOCK_M if IS_CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk
        k = tl.load(k_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        qk = qk * qk_scale
        if IS_CAUSAL:
            visible = (offs_m[:, None] >= offs_n[None, :]) & (offs_n[None, :] < N_CTX)
            qk = tl.where(visible, qk, float("-inf"))
        else:
            qk = tl.where(offs_n[None, :] < N_CTX, qk, float("-inf"))

        # Online softmax update: rescale previous partial results by alpha.
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)

        v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk
        v = tl.load(v_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij

    # Final normalization.
    acc = acc / l_i[:, None]
    # Natural-log logsumexp of the scaled scores: (m + log2 l) * ln(2).
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    tl.store(M + off_hz * N_CTX + offs_m, lse, mask=offs_m < N_CTX)
    o_ptrs = o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok
    tl.store(o_ptrs, acc.to(Out.type.element_ty), mask=offs_m[:, None] < N_CTX)


def attention(q, k, v, causal=False, sm_scale=None):
    """q, k, v: (Z, H, N_CTX, HEAD_DIM) fp16. Returns (out, lse)."""
    assert q.dtype == torch.float16 and k.dtype == torch.float16 and v.dtype == torch.float16
    Z, H, N_CTX, HEAD_DIM = q.shape
    assert HEAD_DIM in (16, 32, 64, 128)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(HEAD_DIM)
    out = torch.empty_like(q)
    lse = torch.empty((Z, H, N_CTX), device=q.device, dtype=torch.float32)
    BLOCK_M, BLOCK_N = 64, 64
    grid = (triton.cdiv(N_CTX, BLOCK_M), Z * H)
    attn_fwd_kernel[grid](
        q, k, v, sm_scale, lse, out,
        q.stride(0), q.stride(1), q.stride(2), q.stride(3),
        k.stride(0), k.stride(1), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), v.stride(2), v.stride(3),
        out.stride(0), out.stride(1), out.stride(2), out.stride(3),
        H, N_CTX,
        HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, IS_CAUSAL=causal,
        num_warps=4, num_stages=2,
    )
    return out, lse


if __name__ == "__main__":
    torch.manual_seed(0)
    Z, H, N, D = 2, 3, 333, 64
    q = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    k = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    v = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    for causal in (False, True):
        out, lse = attention(q, k, v, causal=causal)
        s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.ones(N, N, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        ref = torch.softmax(s, dim=-1) @ v.float()
        print("causal" if causal else "full",
              "out diff:", (out.float() - ref).abs().max().item(),
              "lse diff:", (lse - torch.logsumexp(s, dim=-1)).abs().max().item())
