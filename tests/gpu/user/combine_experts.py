import triton
import triton.language as tl


@triton.jit
def combine_experts_kernel(x_ptr, w_ptr, out_ptr, n_tok, H, E: tl.constexpr, BLOCK_H: tl.constexpr):
    # out[t] = sum_e w[t, e] * x[e, t], the routing weights softmax-normalized over the experts first.
    t = tl.program_id(0)
    es = tl.arange(0, E)
    logits = tl.load(w_ptr + t * E + es).to(tl.float32)
    w = tl.softmax(logits)
    for h0 in range(0, H, BLOCK_H):
        hs = h0 + tl.arange(0, BLOCK_H)
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for e in tl.static_range(E):
            xe = tl.load(x_ptr + (e * n_tok + t) * H + hs, mask=hs < H, other=0.0).to(tl.float32)
            we = tl.sum(tl.where(es == e, w, 0.0), 0)
            acc += we * xe
        tl.store(out_ptr + t * H + hs, acc.to(out_ptr.dtype.element_ty), mask=hs < H)
