import triton
import triton.language as tl


@triton.jit
def bias_act_kernel(X, B, Y, N, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0)
    if HAS_BIAS:
        b = tl.load(B + offs, mask=mask, other=0.0)
    y = x * 2.0
    if HAS_BIAS:
        y += b
    tl.store(Y + offs, y, mask=mask)


@triton.jit
def row_sum_kernel(X, Y, n_cols, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    d = 0.0
    for i in range(0, n_chunks):
        cols = i * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        d += tl.sum(x * x, axis=0)
    tl.store(Y + row, d)


@triton.jit
def pick_kernel(X, Y, mode, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(X + row * BLOCK + tl.arange(0, BLOCK))
    if mode > 0:
        s = tl.sum(x, axis=0)
    else:
        s = 0.0
    tl.store(Y + row, s)


@triton.jit
def centered_rows_kernel(X, W, Y, Mean, n_cols, IS_CENTERED: tl.constexpr, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    if IS_CENTERED:
        mean = tl.sum(x, axis=0) / n_cols
        x = tl.where(mask, x - mean, 0.0)
    if HAS_WEIGHT:
        w = tl.load(W + row)
    y = x * 2.0
    if HAS_WEIGHT:
        y = y * w
    tl.store(Y + row * n_cols + cols, y, mask=mask)
    if IS_CENTERED:
        tl.store(Mean + row, mean * mean)


@triton.jit
def gated_affine_kernel(X, W, B, Y, n_cols, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    if HAS_WEIGHT:
        w = tl.load(W + cols, mask=mask, other=0.0)
    if HAS_BIAS:
        b = tl.load(B + cols, mask=mask, other=0.0)
    y = x * x
    if HAS_WEIGHT:
        y = y * w
    if HAS_BIAS:
        y += b
    tl.store(Y + row * n_cols + cols, tl.sigmoid(y.to(tl.float32)), mask=mask)


@triton.jit
def optional_accumulator_kernel(X, W, Y, Z, n_chunks, HAS_Z: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc_z = tl.zeros([BLOCK], dtype=tl.float32) if HAS_Z else None
    for c in range(n_chunks):
        x = tl.load(X + (row * n_chunks + c) * BLOCK + cols)
        acc += x * x
        if HAS_Z:
            w = tl.load(W + c * BLOCK + cols)
            acc_z += x * w
    tl.store(Y + row * BLOCK + cols, acc)
    if HAS_Z:
        tl.store(Z + row * BLOCK + cols, tl.sigmoid(acc_z))


@triton.jit
def skip_rows_kernel(X, MASK, Y, n_rows, n_cols, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        process = 1
        if MASK is not None:
            process = tl.load(MASK + row)
        if process != 0:
            cols = tl.arange(0, BLOCK)
            x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
            tl.store(Y + row * n_cols + cols, x * x, mask=cols < n_cols)
