import triton
import triton.language as tl


@triton.jit
def decayed_sum_kernel(x_ptr, g_ptr, out_ptr, T, BLOCK: tl.constexpr):
    # out[t] = x[t] * prod_{s <= t} g[s]: a running product of gates (one row per program, T <= BLOCK).
    row = tl.program_id(0)
    ts = tl.arange(0, BLOCK)
    m = ts < T
    g = tl.load(g_ptr + row * T + ts, mask=m, other=1.0)
    x = tl.load(x_ptr + row * T + ts, mask=m, other=0.0)
    decay = tl.cumprod(g, 0)
    tl.store(out_ptr + row * T + ts, x * decay, mask=m)
