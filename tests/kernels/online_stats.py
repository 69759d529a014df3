# Integers carried by a loop beside floats that reverse mode must tape: a
# running count (data-dependent, so not an induction variable) that scales
# the running mean's update, and the running argmax, as Liger's cross entropy
# tracks it beside its online softmax. The backward tapes both with their own
# integer types.
import triton
import triton.language as tl


@triton.jit
def online_stats_kernel(X, MEAN, LSE, ARGMAX, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    mean = 0.0
    count = 0
    m = float("-inf")
    d = 0.0
    best = 0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
        # Welford's running mean: the update's weight is this block's share of the count so far.
        n = tl.sum(mask.to(tl.int32))
        count += n
        mean += (tl.sum(x) - n * mean) / count
        # The online logsumexp, and where the maximum is.
        xm = tl.where(mask, x, float("-inf"))
        block_max = tl.max(xm)
        block_arg = tl.min(tl.where(xm == block_max, cols, n_cols))
        best = tl.where(block_max > m, block_arg, best)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(xm - m_new))
        m = m_new
    tl.store(MEAN + row, mean)
    tl.store(LSE + row, m + tl.log(d))
    tl.store(ARGMAX + row, best)


# A decaying state passed from chunk to chunk, reset where a new sequence
# starts, as mamba's state passing does: `seq = 0` before the loop makes it an
# int32 tensor, so what the loop loads into it (SEQ) must be integers; the
# reversed loop reads each iteration's incoming `seq` from an int32 tape.
@triton.jit
def segment_decay_kernel(X, DECAY, SEQ, Y, n_chunks, dim, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < dim
    state = tl.zeros([BLOCK], dtype=tl.float32)
    seq = 0
    for c in range(n_chunks):
        x = tl.load(X + c * dim + offs, mask=mask, other=0.0)
        scale = tl.exp(tl.load(DECAY + c))
        seq_new = tl.load(SEQ + c)
        scale = tl.where(seq_new == seq, scale, 0.0)
        seq = seq_new
        state = scale * state + x
        tl.store(Y + c * dim + offs, state, mask=mask)


# A running max taken along rows or along columns by a flag: the state the
# loop tapes is [BR] for one value and [BC] for the other, and the one launch
# protocol of both backwards sizes its tape entries for the larger (fla's
# chunk_abc_fwd_kernel_h, NORMK).
@triton.jit
def running_norm_kernel(X, Y, n_steps, BR: tl.constexpr, BC: tl.constexpr, BY_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.arange(0, BR)
    c = tl.arange(0, BC)
    base = X + pid * n_steps * BR * BC
    if BY_ROWS:
        m = tl.full([BR], float("-inf"), tl.float32)
    else:
        m = tl.full([BC], float("-inf"), tl.float32)
    acc = tl.zeros([BR, BC], dtype=tl.float32)
    for t in range(n_steps):
        x = tl.load(base + t * BR * BC + r[:, None] * BC + c[None, :])
        if BY_ROWS:
            m_new = tl.maximum(m, tl.max(x, 1))
            acc = acc * tl.exp(m - m_new)[:, None] + x * tl.exp(x - m_new[:, None])
        else:
            m_new = tl.maximum(m, tl.max(x, 0))
            acc = acc * tl.exp(m - m_new)[None, :] + x * tl.exp(x - m_new[None, :])
        m = m_new
    tl.store(Y + pid * BR * BC + r[:, None] * BC + c[None, :], acc)
