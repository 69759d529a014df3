# A taped recurrence over the chunks of a sequence whose length, with IS_VARLEN, comes from offsets the kernel loads
# (flash-linear-attention's chunk_fwd_kernel_h shape): the tape's trip count is a launch expression only where the
# flag is given (-D IS_VARLEN=False): the protocol then reads the sequence length from the arguments.
import triton
import triton.language as tl


@triton.jit
def varlen_decay_kernel(X, G, OUT, offsets, T, BT: tl.constexpr, IS_VARLEN: tl.constexpr):
    seq = tl.program_id(0)
    if IS_VARLEN:
        start = tl.load(offsets + seq)
        T = tl.load(offsets + seq + 1) - start
    else:
        start = seq * T
    lanes = tl.arange(0, BT)
    state = tl.zeros([BT], dtype=tl.float32)
    for chunk in range(tl.cdiv(T, BT)):
        inside = chunk * BT + lanes < T
        g = tl.load(G + start + chunk * BT + lanes, mask=inside, other=0.0)
        x = tl.load(X + start + chunk * BT + lanes, mask=inside, other=0.0)
        state = state * g + x  # a decay that may be 0: the state before it is taped
    tl.store(OUT + seq * BT + lanes, state)
