# Kernels that update a buffer in place, and an output written by two stores: rotary embeddings
# rotate the two halves of each head, where they are or into another buffer.
import triton
import triton.language as tl


# Each row of Q holds n_heads heads of 2 * HALF values; the first and second half of every head
# rotate by the row's angles (COS and SIN hold HALF values per row), in place.
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


# The same rotation written to OUT: two stores through one pointer, at the two halves.
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


# Squares the positive elements of X in place and leaves the others as they are: where no store
# writes, the contents pass through, and so does their gradient. (BLOCK has a default, as Liger's
# rope kernel's BACKWARD_PASS does: the backward's own parameters follow it.)
@triton.jit
def square_positive_inplace_kernel(X, n, BLOCK: tl.constexpr = 1024):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(X + offsets, mask=inside, other=0.0)
    tl.store(X + offsets, x * x, mask=inside & (x > 0))


# A residual sum kept in memory between two passes over a row (as fused add + RMS norm kernels do): the first
# loop stores S = X + R block by block and sums its squares, the second loads S back and scales it. The loads read
# what the stores wrote and no store follows them: S's final contents. Its gradient is the upstream gradient of S
# plus that of what the second loop reads.
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


# A block stored and read back in the same iteration, at the iteration's own columns: no later iteration
# writes what an earlier one read, so each load reads S's final contents too.
@triton.jit
def block_read_back_kernel(X, S, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        tl.store(S + row * n_cols + cols, tl.exp(tl.load(X + row * n_cols + cols, mask=mask, other=0.0)), mask=mask)
        s = tl.load(S + row * n_cols + cols, mask=mask, other=0.0)
        tl.store(Y + row * n_cols + cols, s * s, mask=mask)


# The residual sum in a grid-stride loop over rows (as NPU-minded fused add + RMS norm kernels launch a fixed number
# of programs): the row loop gives each iteration a row of its own, its first inner loop stores S, the second reads it
# back, and no later iteration writes that row again.
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


# An update in place inside two loops (as NPU-minded kernels scale a row of logits' gradients): a grid-stride loop
# over rows and, in it, a loop walking the row block by block. Each (row, block) iteration reads and writes
# addresses of its own, so every load reads what was there before the kernel.
@triton.jit
def strided_inplace_scale_kernel(X, W, n_rows, n_cols, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
            w = tl.load(W + cols, mask=mask, other=0.0)
            tl.store(X + row * n_cols + cols, x * x * w, mask=mask)


# A decaying state updated in place, its decay one number per row with SHARED (as mamba's selective state update
# ties its dt and A over a head's rows) or one per element without: S <- S * g + g, Y <- 3 S. Two specializations
# behind one launch protocol, both updating S in place: the gradient of S's new contents reaches the old ones. G is
# read through its strides, so that a caller may pass an expanded view (mamba's einops.repeat of A).
@triton.jit
def shared_decay_inplace_kernel(S, G, Y, n_cols, stride_g_row, stride_g_col, SHARED: tl.constexpr,
                                BLOCK: tl.constexpr):
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


# Rotary embedding in place over a group of heads per program, each head's two halves rotated by one loop iteration
# (the shape of unsloth's `_rope_embedding`): iteration k loads and stores columns k * HEAD_DIM + [0, HEAD_DIM / 2)
# and HEAD_DIM / 2 later, under a mask on the lanes (the block may be wider than the half). No iteration touches
# another's columns, since HEAD_DIM // 2 + HEAD_DIM // 2 <= HEAD_DIM: each reads what was there before the kernel.
@triton.jit
def head_group_rope_inplace_kernel(Q, COS, SIN, row_stride, n_heads, HEAD_DIM: tl.constexpr,
                                   GROUP: tl.constexpr, BLOCK: tl.constexpr):
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


# A running state over chunks kept in place (fla's chunk_h reductions): iteration t adds chunk t's [K, V] block of
# head h into the state and stores the state back there, at ((n * NT + t) * H + h) * K * V + k * V + v with
# h = nh % H and the lanes masked by k < K, v < V; the state then decays by exp(D). Each iteration's block is its own
# because the masked lanes and h stay below H * K * V, the step of t (src/ad/AccessBlocks.cpp).
@triton.jit
def chunk_state_reduction_kernel(S, D, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr,
                                 BV: tl.constexpr):
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


# The same with lanes masked by k < K + 1: a block's last row reaches into the next iteration's block, so the
# update is not shown to be in place and tgrad stops with a located error.
@triton.jit
def chunk_state_overlap_kernel(S, D, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr,
                               BV: tl.constexpr):
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
