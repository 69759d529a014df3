# Loops whose carried values are neither recomputed nor additive: a running
# max over chunks, and a linear recurrence (an RNN-style scan). Their
# backward tapes each iteration's incoming value.
import triton
import triton.language as tl


@triton.jit
def running_max_kernel(X, Y, n_chunks, BLOCK: tl.constexpr):
    # Y[row] is the elementwise max of the row's n_chunks chunks of X.
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    for i in range(0, n_chunks):
        x = tl.load(X + (row * n_chunks + i) * BLOCK + lanes)
        m = tl.maximum(m, x)
    tl.store(Y + row * BLOCK + lanes, m)


@triton.jit
def linear_scan_kernel(X, A, H, n_steps, BLOCK: tl.constexpr):
    # h_t = a_t * h_{t-1} + x_t over n_steps steps; stores the final h.
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.zeros([BLOCK], dtype=tl.float32)
    for t in range(0, n_steps):
        offs = (row * n_steps + t) * BLOCK + lanes
        h = tl.load(A + offs) * h + tl.load(X + offs)
    tl.store(H + row * BLOCK + lanes, h)
@triton.jit
def nested_scan_kernel(X, Y, n_outer, n_inner, BLOCK: tl.constexpr):
    # A taped loop inside a loop with an additive accumulator.
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
    # A taped loop inside a runtime if.
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
    # A taped loop inside a taped loop.
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
    # h_t = a_t * h_{t+1} + x_t from the last step down (the backward recurrences over chunks of
    # linear-attention kernels count down), storing every h_t.
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.zeros([BLOCK], dtype=tl.float32)
    for t in range(n_steps - 1, -1, -1):
        offs = (row * n_steps + t) * BLOCK + lanes
        h = tl.load(A + offs) * h + tl.load(X + offs)
        tl.store(H + offs, h)


@triton.jit
def weighted_running_max_kernel(X, W, Y, n_chunks, BLOCK: tl.constexpr):
    # A taped loop (the running max) and a weight every program loads, whose
    # gradient is a partial sum: each program of the backward replays several
    # forward programs, each with its own rows of the tape.
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    w = tl.load(W + lanes).to(tl.float32)
    m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    for i in range(0, n_chunks):
        x = tl.load(X + (row * n_chunks + i) * BLOCK + lanes).to(tl.float32)
        m = tl.maximum(m, x * w)  # exact in fp32 for fp16 and bf16 inputs: no ties moved by rounding
    tl.store(Y + row * BLOCK + lanes, m)


@triton.jit
def offset_recurrence_kernel(X, Y, n_cols, SKIP: tl.constexpr, BLOCK: tl.constexpr):
    # A taped recurrence over the columns SKIP + 1, 2 * SKIP, ... of each row: bounds and a step that are sums
    # of constexprs, which the backward's trip count and tape index must keep whole (n - (SKIP + 1), not
    # n - SKIP + 1).
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    h = tl.load(X + row * n_cols + lanes, mask=lanes < n_cols, other=0.0)
    for i in range(SKIP + 1, n_cols - 1, SKIP - 1):
        x = tl.load(X + row * n_cols + i)
        h = tl.sin(h) * x + x
    tl.store(Y + row * BLOCK + lanes, h)


@triton.jit
def projected_state_kernel(X, P, G, Y, GS, n_steps, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                           USE_GATE: tl.constexpr):
    # A state made [BT, K] and kept [BT, BK] by a dot with a [BK, BK] tile: Triton compiles it only where
    # K == BK, which the code assumes (fla's path attention). The loop's state is taped; beside it a gate
    # sum that is None without USE_GATE, which the loop carries unchanged.
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


# Causal linear attention per batch-head, chunk by chunk: o_t = scale * sum_{s <= t} (q_t . k_s) v_s, the chunk's
# own pairs through a masked score tile and the earlier chunks' through a running state S = sum k_s^T v_s (taped by
# the backward). The rows of a chunk are the major index of the address (`ts[:, None] * D + d[None, :]`, the mask
# `m[:, None]` of `m = ts < T`): each chunk stores its own block of O and each program its own rows of dQ, dK, dV.
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
