import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _first_order(a_left, h_left, a_right, h_right):
    return a_left * a_right, h_left * a_right + h_right


@triton.jit
def running_sum_kernel(X, W, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(W + cols, mask=mask, other=0.0)
    s = tl.associative_scan(x * w, 0, _add)
    tl.store(Y + row * n_cols + cols, s, mask=mask)


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
    row = tl.program_id(0)
    for i_t in range(tl.cdiv(T, BT)):
        o = i_t * BT + tl.arange(0, BT)
        m = o < T
        x = tl.load(X + row * T + o, mask=m, other=0.0)
        tl.store(Y + row * T + o, tl.cumsum(x, 0), mask=m)


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
