import triton
import triton.language as tl


@triton.jit
def softcap_attn_fwd(Q, K, V, O, LSE, N, sm_scale, softcap, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     CAUSAL: tl.constexpr):
    # One block of queries of one batch-head; scores capped by softcap * tanh(s / softcap) (Gemma 2), online softmax.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    base = bh * N * D
    q = tl.load(Q + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < N, other=0.0)
    m_i = tl.full([BM], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    hi = tl.minimum((pid_m + 1) * BM, N) if CAUSAL else N
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        k = tl.load(K + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < N, other=0.0)
        v = tl.load(V + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        s = softcap * (2.0 * tl.sigmoid(2.0 * s / softcap) - 1.0)
        keep = rn[None, :] < N
        if CAUSAL:
            keep = keep & (rm[:, None] >= rn[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(O + base + rm[:, None] * D + rd[None, :], acc.to(O.dtype.element_ty), mask=rm[:, None] < N)
    tl.store(LSE + bh * N + rm, m_i + tl.log(l_i), mask=rm < N)
