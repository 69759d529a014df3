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
