import triton
import triton.language as tl


@triton.jit
def rope_pos_kernel(x_ptr, pos_ptr, cos_ptr, sin_ptr, out_ptr, n_heads, stride_tok, HD: tl.constexpr):
    # Rotate-half rotary embedding, the angles' rows picked by each token's position id.
    tok = tl.program_id(0)
    head = tl.program_id(1)
    p = tl.load(pos_ptr + tok)
    half = tl.arange(0, HD // 2)
    base = x_ptr + tok * stride_tok + head * HD
    x1 = tl.load(base + half)
    x2 = tl.load(base + HD // 2 + half)
    c = tl.load(cos_ptr + p * (HD // 2) + half)
    s = tl.load(sin_ptr + p * (HD // 2) + half)
    o = out_ptr + tok * stride_tok + head * HD
    tl.store(o + half, x1 * c - x2 * s)
    tl.store(o + HD // 2 + half, x2 * c + x1 * s)
