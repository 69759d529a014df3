import triton
import triton.language as tl


@triton.jit
def rotary_inplace_kernel(Q, COS, SIN, n_heads, HEADS: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0)
    h = tl.arange(0, HEADS)
    d = tl.arange(0, HALF)
    mask = (h[:, None] < n_heads) & (d[None, :] < HALF)
    first = Q + row * n_heads * 2 * HALF + h[:, None] * 2 * HALF + d[None, :]
    cos = tl.load(COS + row * HALF + d)[None, :]
    sin = tl.load(SIN + row * HALF + d)[None, :]
    a = tl.load(first, mask=mask, other=0.0)
    b = tl.load(first + HALF, mask=mask, other=0.0)
    tl.store(first, a * cos - b * sin, mask=mask)
    tl.store(first + HALF, b * cos + a * sin, mask=mask)


@triton.jit
def rotary_kernel(Q, COS, SIN, OUT, n_heads, HEADS: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0)
    h = tl.arange(0, HEADS)
    d = tl.arange(0, HALF)
    mask = (h[:, None] < n_heads) & (d[None, :] < HALF)
    offsets = row * n_heads * 2 * HALF + h[:, None] * 2 * HALF + d[None, :]
    cos = tl.load(COS + row * HALF + d)[None, :]
    sin = tl.load(SIN + row * HALF + d)[None, :]
    a = tl.load(Q + offsets, mask=mask, other=0.0)
    b = tl.load(Q + offsets + HALF, mask=mask, other=0.0)
    tl.store(OUT + offsets, a * cos - b * sin, mask=mask)
    tl.store(OUT + offsets + HALF, b * cos + a * sin, mask=mask)


@triton.jit
def square_positive_inplace_kernel(X, n, BLOCK: tl.constexpr = 1024):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(X + offsets, mask=inside, other=0.0)
    tl.store(X + offsets, x * x, mask=inside & (x > 0))


@triton.jit
def residual_norm_kernel(X, R, W, S, Y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    squares = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        s = tl.load(X + row * n_cols + cols, mask=mask, other=0.0) + tl.load(R + row * n_cols + cols, mask=mask, other=0.0)
        tl.store(S + row * n_cols + cols, s, mask=mask)
        squares += tl.sum(s * s)
    rstd = 1.0 / tl.sqrt(squares / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        s = tl.load(S + row * n_cols + cols, mask=mask, other=0.0)
        w = tl.load(W + cols, mask=mask, other=0.0)
        tl.store(Y + row * n_cols + cols, s * rstd * w, mask=mask)


@triton.jit
def block_read_back_kernel(X, S, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        tl.store(S + row * n_cols + cols, tl.exp(tl.load(X + row * n_cols + cols, mask=mask, other=0.0)), mask=mask)
        s = tl.load(S + row * n_cols + cols, mask=mask, other=0.0)
        tl.store(Y + row * n_cols + cols, s * s, mask=mask)


@triton.jit
def strided_residual_norm_kernel(X, R, S, Y, n_rows, n_cols, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        squares = 0.0
        for start in range(0, n_cols, BLOCK):
            cols = start + offs
            mask = cols < n_cols
            s = tl.load(X + row * n_cols + cols, mask=mask, other=0.0) + tl.load(R + row * n_cols + cols, mask=mask, other=0.0)
            tl.store(S + row * n_cols + cols, s, mask=mask)
            squares += tl.sum(s * s)
        rstd = 1.0 / tl.sqrt(squares / n_cols + 1e-5)
        for start in range(0, n_cols, BLOCK):
            cols = start + offs
            mask = cols < n_cols
            s = tl.load(S + row * n_cols + cols, mask=mask, other=0.0)
            tl.store(Y + row * n_cols + cols, s * rstd, mask=mask)


@triton.jit
def strided_inplace_scale_kernel(X, W, n_rows, n_cols, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
            w = tl.load(W + cols, mask=mask, other=0.0)
            tl.store(X + row * n_cols + cols, x * x * w, mask=mask)


@triton.jit
def shared_decay_inplace_kernel(S, G, Y, n_cols, stride_g_row, stride_g_col, SHARED: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    s = tl.load(S + row * n_cols + cols, mask=inside, other=0.0)
    if SHARED:
        g = tl.load(G + row * stride_g_row)
    else:
        g = tl.load(G + row * stride_g_row + cols * stride_g_col, mask=inside, other=0.0)
    s = s * g + g
    tl.store(S + row * n_cols + cols, s, mask=inside)
    tl.store(Y + row * n_cols + cols, 3.0 * s, mask=inside)


@triton.jit
def head_group_rope_inplace_kernel(Q, COS, SIN, row_stride, n_heads, HEAD_DIM: tl.constexpr, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    group = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    half = HEAD_DIM // 2
    inside = cols < half
    c = tl.load(COS + row * half + cols, mask=inside, other=0.0)
    s = tl.load(SIN + row * half + cols, mask=inside, other=0.0)
    first_head = group * GROUP
    last_head = min(first_head + GROUP, n_heads)
    for k in range(first_head, last_head):
        lo = row * row_stride + k * HEAD_DIM + cols
        hi = row * row_stride + k * HEAD_DIM + cols + half
        q1 = tl.load(Q + lo, mask=inside, other=0.0)
        q2 = tl.load(Q + hi, mask=inside, other=0.0)
        tl.store(Q + lo, q1 * c - q2 * s, mask=inside)
        tl.store(Q + hi, q2 * c + q1 * s, mask=inside)


@triton.jit
def chunk_state_reduction_kernel(S, D, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_k, i_v, i_nh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_h = i_nh // H, i_nh % H
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_kv = (o_k[:, None] < K) & (o_v[None, :] < V)
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(NT):
        p_s = S + ((i_n * NT + i_t) * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
        b_h += tl.load(p_s, mask=m_kv, other=0.0).to(tl.float32)
        tl.store(p_s, b_h, mask=m_kv)
        d = tl.load(D + (i_n * NT + i_t) * H + i_h).to(tl.float32)
        b_h *= tl.exp(d)


@triton.jit
def chunk_state_overlap_kernel(S, D, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_k, i_v, i_nh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_h = i_nh // H, i_nh % H
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_kv = (o_k[:, None] < K + 1) & (o_v[None, :] < V)
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(NT):
        p_s = S + ((i_n * NT + i_t) * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
        b_h += tl.load(p_s, mask=m_kv, other=0.0).to(tl.float32)
        tl.store(p_s, b_h, mask=m_kv)
        d = tl.load(D + (i_n * NT + i_t) * H + i_h).to(tl.float32)
        b_h *= tl.exp(d)
