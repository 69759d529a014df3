import triton
import triton.language as tl


@triton.jit
def kl_div_kernel(logp_ptr, target_ptr, loss_ptr, n_cols, stride, LOG_TARGET: tl.constexpr, BLOCK: tl.constexpr):
    # Per row: sum_j KL(target_j || p_j), the loss summed over rows into one scalar with tl.atomic_add.
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        lp = tl.load(logp_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        t = tl.load(target_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG_TARGET:
            kl = tl.exp(t) * (t - lp)
        else:
            kl = tl.where(t > 0, t * (tl.log(t) - lp), 0.0)
        acc += tl.where(mask, kl, 0.0)
    tl.atomic_add(loss_ptr, tl.sum(acc, axis=0))
