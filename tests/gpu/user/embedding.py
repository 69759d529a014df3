import triton
import triton.language as tl


@triton.jit
def embedding_kernel(ids_ptr, weight_ptr, pos_ptr, out_ptr, seq_len, hidden, scale,
                     BLOCK_H: tl.constexpr):
    # out[t, :] = weight[ids[t], :] * scale + pos[t % seq_len, :]
    tok = tl.program_id(0)
    token_id = tl.load(ids_ptr + tok)
    pos = tok % seq_len
    for h0 in range(0, hidden, BLOCK_H):
        cols = h0 + tl.arange(0, BLOCK_H)
        mask = cols < hidden
        w = tl.load(weight_ptr + token_id * hidden + cols, mask=mask, other=0.0)
        p = tl.load(pos_ptr + pos * hidden + cols, mask=mask, other=0.0)
        tl.store(out_ptr + tok * hidden + cols, w * scale + p, mask=mask)
