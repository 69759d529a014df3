# The attention forward as the Triton 3.6 tutorial writes it (06-fused-attention.py, written here
# anew): the kernel takes pointers (or host TensorDescriptors), makes tensor descriptors with a
# helper that keeps a descriptor it is given (isinstance(x, tl.tensor_descriptor)), rebinds the
# parameter's name to the descriptor, loads K transposed with `.T` inside a helper that loops over
# the key blocks, and picks dtypes by a flag (`dtype = tl.float8e5 if FP8 else tl.float16`; tgrad
# differentiates FP8=False: fp8 dtypes are not typed yet).
import triton
import triton.language as tl


@triton.jit
def _descriptor_or_make(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@triton.jit
def _attend_blocks(acc, l_i, m_i, q, desc_k, desc_v, row0, dtype: tl.constexpr, qk_scale,
                   N_CTX: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    offset_k = row0
    offset_v = row0
    for start_n in tl.range(0, N_CTX, BLOCK_N):
        k = desc_k.load([offset_k, 0]).T
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if dtype == tl.float8e5:
            v = desc_v.load([0, offset_v]).T
        else:
            v = desc_v.load([offset_v, 0])
        acc = tl.dot(p.to(dtype), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
        offset_k += BLOCK_N
        offset_v += BLOCK_N
    return acc, l_i, m_i


@triton.jit
def descriptor_attention_kernel(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX: tl.constexpr,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                FP8: tl.constexpr):
    dtype = tl.float8e5 if FP8 else tl.float16
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    rows = Z * H * N_CTX
    desc_q = _descriptor_or_make(desc_q, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    desc_k = _descriptor_or_make(desc_k, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_v = _descriptor_or_make(desc_v, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_o = _descriptor_or_make(desc_o, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    row0 = off_hz * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    acc, l_i, m_i = _attend_blocks(acc, l_i, m_i, q, desc_k, desc_v, row0, dtype, qk_scale, N_CTX, BLOCK_N, HEAD_DIM)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([row0 + start_m * BLOCK_M, 0], acc.to(dtype))
