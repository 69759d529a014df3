import triton
import triton.language as tl


@triton.jit
def masked_bias_attn_fwd(Q, K, V, Bias, Mask, O, N, sm_scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Attention with an additive bias [N, N] (learned, relative positions) and a boolean keep-mask [N, N] (int8).
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    base = bh * N * D
    q = tl.load(Q + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < N, other=0.0)
    m_i = tl.full([BM], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    for start in range(0, N, BN):
        rn = start + tl.arange(0, BN)
        inb = (rm[:, None] < N) & (rn[None, :] < N)
        k = tl.load(K + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < N, other=0.0)
        v = tl.load(V + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < N, other=0.0)
        bias = tl.load(Bias + rm[:, None] * N + rn[None, :], mask=inb, other=0.0)
        keep = tl.load(Mask + rm[:, None] * N + rn[None, :], mask=inb, other=0).to(tl.int1)
        s = tl.dot(q, tl.trans(k)) * sm_scale + bias
        s = tl.where(keep & inb, s, -1.0e30)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(O + base + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty), mask=rm[:, None] < N)
