# Scans written with tl.associative_scan and tl.cumsum. The backward of a
# scan is a scan the other way: the adjoint of a running sum is a running
# sum from the end; the adjoint of a first-order linear recurrence
# h[t] = a[t] * h[t-1] + x[t] is the recurrence run backwards, with each
# step's coefficient taken from the step after it.
import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _first_order(a_left, h_left, a_right, h_right):
    # Composing two steps of h = a * h_prev + x: coefficients multiply.
    return a_left * a_right, h_left * a_right + h_right


# Running sums of each row, with a user combine function, scaled by a
# per-column weight shared by all rows.
@triton.jit
def running_sum_kernel(X, W, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(W + cols, mask=mask, other=0.0)
    s = tl.associative_scan(x * w, 0, _add)
    tl.store(Y + row * n_cols + cols, s, mask=mask)


# A decaying average along the time axis of a [BLOCK_ROWS, BLOCK_T] tile:
# h[t] = sigmoid(g[t]) * h[t-1] + x[t], per row; also the suffix sums of x
# (tl.cumsum with reverse=True) added to the output.
@triton.jit
def decay_scan_kernel(X, G, H, n_rows, T, BLOCK_ROWS: tl.constexpr, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    steps = tl.arange(0, BLOCK_T)
    mask = (rows[:, None] < n_rows) & (steps[None, :] < T)
    offsets = rows[:, None] * T + steps[None, :]
    x = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + offsets, mask=mask, other=0.0).to(tl.float32)
    decay = tl.sigmoid(g)
    _, h = tl.associative_scan((decay, x), 1, _first_order, reverse=REVERSE)
    suffix = tl.cumsum(x, 1, reverse=True)
    tl.store(H + offsets, h + 0.5 * suffix, mask=mask)


@triton.jit
def chunked_cumsum_kernel(X, Y, T, BT: tl.constexpr):
    # Per row, the running sum within each chunk of BT steps (a chunked scan's local pass). The store sits in a
    # loop whose iterations write apart (`i_t * BT + tl.arange(0, BT)` under `o < T`): the backward loads each
    # chunk's upstream gradient, masked on the ragged last chunk (a masked-off lane's value would be carried into the
    # lanes that count by the backward's reversed cumsum).
    row = tl.program_id(0)
    for i_t in range(tl.cdiv(T, BT)):
        o = i_t * BT + tl.arange(0, BT)
        m = o < T
        x = tl.load(X + row * T + o, mask=m, other=0.0)
        tl.store(Y + row * T + o, tl.cumsum(x, 0), mask=m)


# Discounted returns minus a baseline, one row per program (T <= BLOCK): out[t] = sum_{s >= t} gamma^(s - t) r[s]
# - v[t], as a suffix sum written with tl.flip around tl.cumsum. gamma is a Python float at the call (tl.log needs
# one), which tgrad infers without --arg.
@triton.jit
def discounted_returns_kernel(R, V, Out, T, gamma, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    ts = tl.arange(0, BLOCK)
    m = ts < T
    r = tl.load(R + row * T + ts, mask=m, other=0.0).to(tl.float32)
    v = tl.load(V + row * T + ts, mask=m, other=0.0).to(tl.float32)
    scale = tl.exp(ts.to(tl.float32) * tl.log(gamma))
    tail = tl.flip(tl.cumsum(tl.flip(r * scale, 0), 0), 0)
    tl.store(Out + row * T + ts, (tail / scale - v).to(Out.dtype.element_ty), mask=m)
