# Patterns of real sequence kernels (state-space and linear-attention libraries): variable-length
# batches where a tl.constexpr flag decides whether a sequence's bounds come from an offsets buffer
# (int64, loaded) or from the fixed length T (the int32 argument), and a causal filter whose taps are a
# tl.static_range over a tl.constexpr count.
import triton
import triton.language as tl


@triton.jit
def varlen_gate_kernel(X, G, Y, cu_seqlens, T, D, IS_VARLEN: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    # One program per (chunk of BT positions, sequence).
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
    # y[t] = sum_i w[i] * x[t - i], zero before the start; one program per BT positions.
    o_t = tl.program_id(0) * BT + tl.arange(0, BT)
    acc = tl.zeros([BT], dtype=tl.float32)
    for i in tl.static_range(NTAPS):
        w = tl.load(W + i).to(tl.float32)
        src = o_t - i
        x = tl.load(X + src, mask=(src >= 0) & (src < T), other=0.0).to(tl.float32)
        acc += w * x
    tl.store(Y + o_t, acc.to(Y.dtype.element_ty), mask=o_t < T)


# A flag decides whether `offsets` is a number added to the rows or a pointer
# to per-program offsets (fla's rotary embedding: seq_offsets with
# IS_SEQLEN_OFFSETS_TENSOR): each specialization types it its own way, and the
# launch protocol serves both.
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


# Two flags, one behind the other: with IS_VARLEN a sequence's bounds are int64, and until it has a
# value every address after it has an unknown type, which hides that `g` is a tensor with USE_G and
# None without (tgrad specializes USE_G once IS_VARLEN has a value). The chunk's last valid position
# comes from a conditional expression whose values agree (int32) only without IS_VARLEN: Triton does
# not compile IS_VARLEN=True (fla's ttt kernels), and the backward refuses it in a static assertion.
@triton.jit
def varlen_tail_gate_kernel(X, G, Y, cu_seqlens, T, D, IS_VARLEN: tl.constexpr, USE_G: tl.constexpr,
                            BT: tl.constexpr, BD: tl.constexpr):
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
    i_last = (BT - 1) if (i_t * BT + BT) <= T else (T % BT - 1)
    if USE_G:
        g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
    else:
        g = None
    y = x * x
    if USE_G:
        g_last = tl.sum(tl.where((tl.arange(0, BT) == i_last)[:, None], g, 0.0), 0)
        y = y * tl.sigmoid(g_last)[None, :]
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=m)
