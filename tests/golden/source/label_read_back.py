import triton
import triton.language as tl


@triton.jit
def label_logprob_kernel(X, LogP, Labels, Loss, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, 0)
    logp = z - tl.log(tl.sum(tl.exp(z), 0))
    row_start = LogP + row * n_cols
    tl.store(row_start + cols, logp, mask=cols < n_cols)
    label = tl.load(Labels + row)
    tl.store(Loss + row, -tl.load(row_start + label))
