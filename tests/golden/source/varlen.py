import triton
import triton.language as tl


@triton.jit
def varlen_gate_kernel(X, G, Y, cu_seqlens, T, D, IS_VARLEN: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    i_t, i_n = tl.program_id(0), tl.program_id(1).to(tl.int64)
    if IS_VARLEN:
        bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        T = eos - bos
    else:
        bos = i_n * T
    o_t = i_t * BT + tl.arange(0, BT)
    o_d = tl.arange(0, BD)
    m = (o_t[:, None] < T) & (o_d[None, :] < D)
    offs = (bos + o_t[:, None]) * D + o_d[None, :]
    x = tl.load(X + offs, mask=m, other=0.0).to(tl.float32)
    g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + offs, (x * tl.sigmoid(g)).to(Y.dtype.element_ty), mask=m)


@triton.jit
def causal_taps_kernel(X, W, Y, T, NTAPS: tl.constexpr, BT: tl.constexpr):
    o_t = tl.program_id(0) * BT + tl.arange(0, BT)
    acc = tl.zeros([BT], dtype=tl.float32)
    for i in tl.static_range(NTAPS):
        w = tl.load(W + i).to(tl.float32)
        src = o_t - i
        x = tl.load(X + src, mask=(src >= 0) & (src < T), other=0.0).to(tl.float32)
        acc += w * x
    tl.store(Y + o_t, acc.to(Y.dtype.element_ty), mask=o_t < T)


@triton.jit
def shifted_rows_kernel(X, TABLE, Y, offsets, n_rows, D: tl.constexpr, BR: tl.constexpr, OFFSETS_TENSOR: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    if not OFFSETS_TENSOR:
        src = rows + offsets
    else:
        src = rows + tl.load(offsets + tl.program_id(0))
    cols = tl.arange(0, D)
    mask = rows < n_rows
    x = tl.load(X + rows[:, None] * D + cols[None, :], mask=mask[:, None], other=0.0)
    t = tl.load(TABLE + src[:, None] * D + cols[None, :], mask=mask[:, None], other=0.0)
    tl.store(Y + rows[:, None] * D + cols[None, :], x * t, mask=mask[:, None])


@triton.jit
def varlen_tail_gate_kernel(X, G, Y, cu_seqlens, T, D, IS_VARLEN: tl.constexpr, USE_G: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    i_t, i_n = tl.program_id(0), tl.program_id(1).to(tl.int64)
    if IS_VARLEN:
        bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        T = eos - bos
    else:
        bos = i_n * T
    o_t = i_t * BT + tl.arange(0, BT)
    o_d = tl.arange(0, BD)
    m = (o_t[:, None] < T) & (o_d[None, :] < D)
    offs = (bos + o_t[:, None]) * D + o_d[None, :]
    x = tl.load(X + offs, mask=m, other=0.0).to(tl.float32)
    i_last = BT - 1 if i_t * BT + BT <= T else T % BT - 1
    if USE_G:
        g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
    else:
        g = None
    y = x * x
    if USE_G:
        g_last = tl.sum(tl.where((tl.arange(0, BT) == i_last)[:, None], g, 0.0), 0)
        y = y * tl.sigmoid(g_last)[None, :]
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=m)
