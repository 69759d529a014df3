import triton
import triton.language as tl


@triton.jit
def running_max_kernel(X, Y, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    for i in range(0, n_chunks):
        x = tl.load(X + (row * n_chunks + i) * BLOCK + lanes)
        m = tl.maximum(m, x)
    tl.store(Y + row * BLOCK + lanes, m)


@triton.jit
def linear_scan_kernel(X, A, H, n_steps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.zeros([BLOCK], dtype=tl.float32)
    for t in range(0, n_steps):
        offs = (row * n_steps + t) * BLOCK + lanes
        h = tl.load(A + offs) * h + tl.load(X + offs)
    tl.store(H + row * BLOCK + lanes, h)


@triton.jit
def nested_scan_kernel(X, Y, n_outer, n_inner, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(0, n_outer):
        h = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(0, n_inner):
            x = tl.load(X + ((row * n_outer + j) * n_inner + i) * BLOCK + lanes)
            h = h * x + x
        total += h * h
    tl.store(Y + row * BLOCK + lanes, total)


@triton.jit
def branch_scan_kernel(X, Y, n, mode, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.zeros([BLOCK], dtype=tl.float32)
    if mode > 0:
        for i in range(0, n):
            x = tl.load(X + (row * n + i) * BLOCK + lanes)
            h = h * x + x
    else:
        h = tl.load(X + row * n * BLOCK + lanes) * 2.0
    tl.store(Y + row * BLOCK + lanes, h)


@triton.jit
def nested_taped_kernel(X, Y, n_outer, n_inner, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(0, n_outer):
        m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
        for i in range(0, n_inner):
            m = tl.maximum(m, tl.load(X + ((row * n_outer + j) * n_inner + i) * BLOCK + lanes))
        h = h * m + m
    tl.store(Y + row * BLOCK + lanes, h)


@triton.jit
def reverse_scan_kernel(X, A, H, n_steps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.zeros([BLOCK], dtype=tl.float32)
    for t in range(n_steps - 1, -1, -1):
        offs = (row * n_steps + t) * BLOCK + lanes
        h = tl.load(A + offs) * h + tl.load(X + offs)
        tl.store(H + offs, h)


@triton.jit
def weighted_running_max_kernel(X, W, Y, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    w = tl.load(W + lanes).to(tl.float32)
    m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    for i in range(0, n_chunks):
        x = tl.load(X + (row * n_chunks + i) * BLOCK + lanes).to(tl.float32)
        m = tl.maximum(m, x * w)
    tl.store(Y + row * BLOCK + lanes, m)


@triton.jit
def offset_recurrence_kernel(X, Y, n_cols, SKIP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.load(X + row * n_cols + lanes, mask=lanes < n_cols, other=0.0)
    for i in range(SKIP + 1, n_cols - 1, SKIP - 1):
        x = tl.load(X + row * n_cols + i)
        h = tl.sin(h) * x + x
    tl.store(Y + row * BLOCK + lanes, h)


@triton.jit
def projected_state_kernel(X, P, G, Y, GS, n_steps, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, USE_GATE: tl.constexpr):
    row = tl.program_id(0)
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    state = tl.zeros([BT, K], dtype=tl.float32) + 1.0
    gate = tl.zeros([BT], dtype=tl.float32) if USE_GATE else None
    for s in range(n_steps):
        p = tl.load(P + s * BK * BK + o_k[:, None] * BK + o_k[None, :])
        x = tl.load(X + ((row * n_steps + s) * BT + o_t[:, None]) * BK + o_k[None, :])
        state = state - tl.dot(state, p, input_precision="ieee") * 0.1 + x
        if USE_GATE:
            g = tl.load(G + (row * n_steps + s) * BT + o_t)
            gate += tl.sum(state, axis=1) * g
    tl.store(Y + (row * BT + o_t[:, None]) * BK + o_k[None, :], state)
    if USE_GATE:
        tl.store(GS + row * BT + o_t, gate)


@triton.jit
def chunk_linear_attn_kernel(Q, K, V, O, T, scale, D: tl.constexpr, BT: tl.constexpr):
    bh = tl.program_id(0)
    d = tl.arange(0, D)
    t_in = tl.arange(0, BT)
    state = tl.zeros([D, D], dtype=tl.float32)
    for c in range(0, tl.cdiv(T, BT)):
        ts = c * BT + t_in
        m = ts < T
        off = bh * T * D + ts[:, None] * D + d[None, :]
        q = tl.load(Q + off, mask=m[:, None], other=0.0)
        k = tl.load(K + off, mask=m[:, None], other=0.0)
        v = tl.load(V + off, mask=m[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(t_in[:, None] >= t_in[None, :], s, 0.0)
        o = tl.dot(s.to(v.dtype), v) + tl.dot(q, state.to(q.dtype)) * scale
        tl.store(O + off, o.to(O.dtype.element_ty), mask=m[:, None])
        state += tl.dot(tl.trans(k), v)
