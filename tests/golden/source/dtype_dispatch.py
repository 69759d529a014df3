import triton
import triton.language as tl


@triton.jit
def rms_scale_kernel(X, W, Y, n_cols, eps, BLOCK: tl.constexpr):
    if tl.constexpr(X.dtype.element_ty == tl.float16) or tl.constexpr(X.dtype.element_ty == tl.bfloat16):
        cdtype = tl.float32
    else:
        cdtype = X.dtype.element_ty
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(cdtype)
    w = tl.load(W + cols, mask=mask, other=0.0)
    rrms = 1 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    y = (x * rrms).to(Y.dtype.element_ty) * w
    tl.store(Y + row * n_cols + cols, y, mask=mask)


@triton.jit
def energy_cumsum_kernel(X, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    if x.dtype.is_fp16() or x.dtype.is_bf16():
        x = x.to(tl.float32)
    e = x * x
    y = tl.cumsum(e, 0) / (tl.sum(e, 0) + 1.0)
    tl.store(Y + row * n_cols + cols, y, mask=mask)


@triton.jit
def mixed_matmul_kernel(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(A + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(B + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if a.dtype != b.dtype:
            a = a.to(C.dtype.element_ty)
            b = b.to(C.dtype.element_ty)
        acc += tl.dot(a, b, allow_tf32=False)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.constexpr_function
def accumulation_type(dtype):
    if dtype.is_fp16() or dtype.is_bf16():
        return tl.float32
    return dtype


@tl.constexpr
def output_type(dtype):
    if dtype.is_fp64():
        return tl.float64
    else:
        return tl.float32


@triton.jit
def accumulated_cumsum_kernel(X, Y, n_cols, BLOCK: tl.constexpr):
    acc_dtype: tl.constexpr = accumulation_type(X.dtype.element_ty)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(acc_dtype)
    y = tl.cumsum(x * x, 0).to(output_type(Y.dtype.element_ty))
    tl.store(Y + row * n_cols + cols, y, mask=mask)


@triton.jit
def running_row_max_kernel(X, Out, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    elem = X.type.element_ty
    keep_type = tl.float32 if elem is tl.bfloat16 else elem
    best = tl.full([BLOCK_R], float("-inf"), dtype=keep_type)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        inside = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(X + rows[:, None] * n_cols + cols[None, :], mask=inside, other=float("-inf"))
        block_best, block_arg = tl.max(x, axis=1, return_indices=True)
        best = tl.where(block_best > best, block_best, best)
    tl.store(Out + rows, best, mask=rows < n_rows)
