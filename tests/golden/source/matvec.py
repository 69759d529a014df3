import triton
import triton.language as tl


@triton.jit
def matvec_kernel(A, X, W, Y, Z, n_rows, K: tl.constexpr, BM: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rk = tl.arange(0, K)
    mask = rm < n_rows
    a = tl.load(A + rm[:, None] * K + rk[None, :], mask=mask[:, None], other=0.0)
    x = tl.load(X + rk)
    y = tl.dot(a, tl.reshape(x, [K, 1]), input_precision="ieee")
    tl.store(Y + rm, tl.reshape(y, [BM]), mask=mask)
    w = tl.load(W + rk[:, None] * K + rk[None, :])
    row = tl.dot(tl.reshape(x * x, [1, K]), w, input_precision="ieee")
    tl.store(Z + tl.program_id(0) * K + rk, tl.reshape(row, [K]))
