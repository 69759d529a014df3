import triton
import triton.language as tl


@triton.jit
def _attn_inner(acc, l_i, m_i, q, K_ptrs, V_ptrs, start_m, qk_scale, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr, offs_m, offs_n):
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    else:
        lo, hi = 0, N_CTX
    K_ptrs = tl.advance(K_ptrs, (0, lo))
    V_ptrs = tl.advance(V_ptrs, (lo, 0))
    for start_n in range(lo, hi, BLOCK_N):
        k = tl.load(K_ptrs, boundary_check=(1,), padding_option="zero")
        qk = tl.dot(q, k) * qk_scale
        cols = start_n + offs_n
        if STAGE == 2:
            qk = tl.where((offs_m[:, None] >= cols[None, :]) & (cols[None, :] < N_CTX), qk, float("-inf"))
        else:
            qk = tl.where(cols[None, :] < N_CTX, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V_ptrs, boundary_check=(0,), padding_option="zero")
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_ij
        K_ptrs = tl.advance(K_ptrs, (0, BLOCK_N))
        V_ptrs = tl.advance(V_ptrs, (BLOCK_N, 0))
    return acc, l_i, m_i


@triton.jit
def attn_fwd_block_ptr_kernel(Q, K, V, sm_scale, M, Out, stride_qz, stride_qh, stride_qm, stride_qk, stride_kz, stride_kh, stride_kn, stride_kk, stride_vz, stride_vh, stride_vn, stride_vk, stride_oz, stride_oh, stride_om, stride_ok, H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_offset = off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    kv_offset = off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_offset = off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_offset = off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh
    Q_block = tl.make_block_ptr(base=Q + q_offset, shape=(N_CTX, HEAD_DIM), strides=(stride_qm, stride_qk), offsets=(start_m * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
    K_block = tl.make_block_ptr(base=K + kv_offset, shape=(HEAD_DIM, N_CTX), strides=(stride_kk, stride_kn), offsets=(0, 0), block_shape=(HEAD_DIM, BLOCK_N), order=(0, 1))
    V_block = tl.make_block_ptr(base=V + v_offset, shape=(N_CTX, HEAD_DIM), strides=(stride_vn, stride_vk), offsets=(0, 0), block_shape=(BLOCK_N, HEAD_DIM), order=(1, 0))
    O_block = tl.make_block_ptr(base=Out + o_offset, shape=(N_CTX, HEAD_DIM), strides=(stride_om, stride_ok), offsets=(start_m * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = tl.load(Q_block, boundary_check=(0,), padding_option="zero")
    if STAGE & 1:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_block, V_block, start_m, qk_scale, N_CTX, BLOCK_M, BLOCK_N, 4 - STAGE, offs_m, offs_n)
    if STAGE & 2:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_block, V_block, start_m, qk_scale, N_CTX, BLOCK_M, BLOCK_N, 2, offs_m, offs_n)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i * 0.6931471805599453, mask=offs_m < N_CTX)
    tl.store(O_block, acc.to(Out.type.element_ty), boundary_check=(0,))
