# tgrad's adjoint rules: one function per differentiable operation, written
# in tile language and read by tgrad's own parser at start-up (embedded at
# build time, src/ad/BUILD). This file is not a Triton kernel.
#
# Conventions (Tangent's): a rule's name is the operation it differentiates
# ("mul", "exp", "sum"); its parameters are the forward output `y`, then the
# forward inputs in call order, then `by`, the adjoint of y; keyword
# parameters list the forward keywords the rule supports (any other keyword
# is an error), with their defaults. The body assigns `b<input>` for each
# input: the adjoint contribution to that input before unbroadcasting (the
# engine sums it back to the input's shape, so no rule unbroadcasts by hand).
# An input without an assignment has no gradient through this operation.
# A constexpr `if` on a keyword is resolved when the rule is instantiated.
# Every rule starts with its derivative as a comment.
#
# NaN-safety: rules that pick between lanes select with tl.where, never
# multiply by a 0/1 mask (0 * inf is NaN).
import triton
import triton.language as tl


# ---------------------------------------------------------------- arithmetic

@triton.jit
def add(y, a, b, by):
    # d(a + b) = da + db
    ba = by
    bb = by


@triton.jit
def sub(y, a, b, by):
    # d(a - b) = da - db
    ba = by
    bb = -by


@triton.jit
def mul(y, a, b, by):
    # d(a * b) = b da + a db
    ba = by * b
    bb = by * a


@triton.jit
def truediv(y, a, b, by):
    # d(a / b) = da / b - a / b^2 db = da / b - y / b db
    ba = by / b
    bb = -by * y / b


@triton.jit
def neg(y, x, by):
    # d(-x) = -dx
    bx = -by


@triton.jit
def pos(y, x, by):
    # d(+x) = dx
    bx = by


# ------------------------------------------------------------- elementwise math

@triton.jit
def exp(y, x, by):
    # d exp(x) = exp(x) dx = y dx
    bx = by * y


@triton.jit
def exp2(y, x, by):
    # d 2^x = ln(2) 2^x dx
    bx = by * y * 0.6931471805599453


@triton.jit
def log(y, x, by):
    # d log(x) = dx / x
    bx = by / x


@triton.jit
def log2(y, x, by):
    # d log2(x) = dx / (x ln 2)
    bx = by / (x * 0.6931471805599453)


@triton.jit
def sqrt(y, x, by):
    # d sqrt(x) = dx / (2 sqrt(x)) = 0.5 dx / y
    bx = by * 0.5 / y


@triton.jit
def rsqrt(y, x, by):
    # d x^(-1/2) = -1/2 x^(-3/2) dx = -0.5 y^3 dx
    bx = -0.5 * by * y * y * y


@triton.jit
def sin(y, x, by):
    # d sin(x) = cos(x) dx
    bx = by * tl.cos(x)


@triton.jit
def cos(y, x, by):
    # d cos(x) = -sin(x) dx
    bx = -by * tl.sin(x)


@triton.jit
def tanh(y, x, by):
    # d tanh(x) = (1 - tanh(x)^2) dx = (1 - y^2) dx
    bx = by * (1.0 - y * y)


@triton.jit
def sigmoid(y, x, by):
    # d sigmoid(x) = sigmoid(x) (1 - sigmoid(x)) dx = y (1 - y) dx
    bx = by * y * (1.0 - y)


@triton.jit
def erf(y, x, by):
    # d erf(x) = 2 / sqrt(pi) exp(-x^2) dx
    bx = by * 1.1283791670955126 * tl.exp(-x * x)


@triton.jit
def abs(y, x, by):
    # d |x| = sign(x) dx; at x = 0 the gradient is 0 (the subgradient's midpoint)
    bx = tl.where(x > 0, by, tl.where(x < 0, -by, 0.0))


@triton.jit
def maximum(y, a, b, by, propagate_nan=None):
    # d max(a, b) = da where a > b, db where b > a; a tie splits the gradient evenly (propagate_nan changes the
    # value only where an operand is NaN)
    ba = tl.where(a > b, by, tl.where(a == b, by * 0.5, 0.0))
    bb = tl.where(b > a, by, tl.where(a == b, by * 0.5, 0.0))


@triton.jit
def gather(y, src, index, by, axis=None):
    # y = src[index] along axis: d src[n] = the sum of dy over the lanes that read n. Triton has no scatter
    # within registers, so the sum is a one-hot product over the gathered axis (ranks 1 and 2).
    if len(src.shape) == 1:
        bsrc = tl.sum(tl.where(index[:, None] == tl.arange(0, src.shape[0])[None, :], by[:, None].to(tl.float32), 0.0),
                      axis=0)
    elif axis == 0 or axis == -2:
        bsrc = tl.sum(tl.where(index[:, None, :] == tl.arange(0, src.shape[0])[None, :, None],
                               by[:, None, :].to(tl.float32), 0.0), axis=0)
    else:
        bsrc = tl.sum(tl.where(index[:, :, None] == tl.arange(0, src.shape[1])[None, None, :],
                               by[:, :, None].to(tl.float32), 0.0), axis=1)


@triton.jit
def clamp(y, x, min, max, by, propagate_nan=None):
    # d clamp(x, min, max) = dx where min <= x <= max (torch.clamp's convention at the bounds), dmin where x < min,
    # dmax where x > max
    bx = tl.where((x >= min) & (x <= max), by, 0.0)
    bmin = tl.where(x < min, by, 0.0)
    bmax = tl.where(x > max, by, 0.0)


@triton.jit
def minimum(y, a, b, by, propagate_nan=None):
    # d min(a, b) = da where a < b, db where b < a; a tie splits the gradient evenly (propagate_nan changes the
    # value only where an operand is NaN)
    ba = tl.where(a < b, by, tl.where(a == b, by * 0.5, 0.0))
    bb = tl.where(b < a, by, tl.where(a == b, by * 0.5, 0.0))


@triton.jit
def fma(y, a, b, c, by):
    # d (a b + c) = b da + a db + dc
    ba = by * b
    bb = by * a
    bc = by


@triton.jit
def pow(y, a, b, by):
    # d a^b = b a^(b-1) da + a^b ln(a) db
    ba = by * b * libdevice.pow(a, b - 1.0)
    bb = by * y * tl.log(a)


@triton.jit
def div_rn(y, a, b, by):
    # division rounded to nearest: d(a / b) = da / b - y / b db
    ba = by / b
    bb = -by * y / b


@triton.jit
def fdiv(y, a, b, by, ieee_rounding=False):
    # d(a / b) = da / b - y / b db
    ba = by / b
    bb = -by * y / b


@triton.jit
def sqrt_rn(y, x, by):
    # d sqrt(x) = 0.5 dx / y
    bx = by * 0.5 / y


@triton.jit
def exp10(y, x, by):
    # d 10^x = ln(10) 10^x dx
    bx = by * y * 2.302585092994046


@triton.jit
def log10(y, x, by):
    # d log10(x) = dx / (x ln 10)
    bx = by / (x * 2.302585092994046)


@triton.jit
def log1p(y, x, by):
    # d log(1 + x) = dx / (1 + x)
    bx = by / (1.0 + x)


@triton.jit
def expm1(y, x, by):
    # d (e^x - 1) = e^x dx = (y + 1) dx
    bx = by * (y + 1.0)


@triton.jit
def cbrt(y, x, by):
    # d x^(1/3) = dx / (3 x^(2/3)) = dx / (3 y^2)
    bx = by / (3.0 * y * y)


@triton.jit
def tan(y, x, by):
    # d tan(x) = (1 + tan(x)^2) dx
    bx = by * (1.0 + y * y)


@triton.jit
def asin(y, x, by):
    # d asin(x) = dx / sqrt(1 - x^2)
    bx = by * tl.math.rsqrt(1.0 - x * x)


@triton.jit
def acos(y, x, by):
    # d acos(x) = -dx / sqrt(1 - x^2)
    bx = -by * tl.math.rsqrt(1.0 - x * x)


@triton.jit
def atan(y, x, by):
    # d atan(x) = dx / (1 + x^2)
    bx = by / (1.0 + x * x)


@triton.jit
def atan2(y, a, b, by):
    # d atan2(a, b) = (b da - a db) / (a^2 + b^2)
    ba = by * b / (a * a + b * b)
    bb = -by * a / (a * a + b * b)


@triton.jit
def sinh(y, x, by):
    # d sinh(x) = cosh(x) dx
    bx = by * libdevice.cosh(x)


@triton.jit
def cosh(y, x, by):
    # d cosh(x) = sinh(x) dx
    bx = by * libdevice.sinh(x)


@triton.jit
def asinh(y, x, by):
    # d asinh(x) = dx / sqrt(x^2 + 1)
    bx = by * tl.math.rsqrt(x * x + 1.0)


@triton.jit
def acosh(y, x, by):
    # d acosh(x) = dx / sqrt(x^2 - 1)
    bx = by * tl.math.rsqrt(x * x - 1.0)


@triton.jit
def atanh(y, x, by):
    # d atanh(x) = dx / (1 - x^2)
    bx = by / (1.0 - x * x)


@triton.jit
def erfc(y, x, by):
    # d erfc(x) = -2 / sqrt(pi) exp(-x^2) dx
    bx = by * -1.1283791670955126 * tl.exp(-x * x)


@triton.jit
def where(y, cond, a, b, by):
    # where(c, a, b): da where c, db elsewhere; c carries no gradient. Selects, never multiplies.
    ba = tl.where(cond, by, 0.0)
    bb = tl.where(cond, 0.0, by)


@triton.jit
def cast(y, x, by, dtype=None, fp_downcast_rounding=None):
    # d x.to(T) = dx, cast back to x's dtype
    bx = by.to(x.dtype)


# ----------------------------------------------------------------- shapes

@triton.jit
def expand_dims(y, x, by, axis=None):
    # expand_dims inserts size-1 axes: the adjoint removes them
    bx = tl.reshape(by, x.shape)


@triton.jit
def reshape(y, x, by, shape=None, can_reorder=False):
    # a reshape keeps the elements in order: the adjoint is the reverse reshape
    bx = tl.reshape(by, x.shape)


@triton.jit
def trans(y, x, by):
    # the adjoint of a 2-D transpose is the transpose (with dims: the inverse permutation, in the engine)
    bx = tl.trans(by)


@triton.jit
def index(y, x, by):
    # x[:, None] and x[None, :] insert size-1 axes: the adjoint removes them
    bx = tl.reshape(by, x.shape)


@triton.jit
def broadcast_to(y, x, by, shape=None):
    # broadcasting copies x: its adjoint sums the copies (the engine's unbroadcast)
    bx = by


# ----------------------------------------------------------------- reductions

@triton.jit
def join(y, a, b, by):
    # y[..., 0] = a, y[..., 1] = b: the halves of the adjoint
    halves = tl.split(by)
    ba = halves[0]
    bb = halves[1]


@triton.jit
def interleave(y, a, b, by):
    # y = reshape(join(a, b)): the adjoint in pairs, then its halves
    halves = tl.split(tl.reshape(by, tl.join(a, b).shape))
    ba = halves[0]
    bb = halves[1]


@triton.jit
def split(y, x, by):
    # (y0, y1) = (x[..., 0], x[..., 1]): the halves' adjoints side by side
    bx = tl.join(by[0], by[1].to(by[0].dtype))


@triton.jit
def sum(y, x, by, axis=None, keep_dims=False):
    # d sum(x) = sum(dx): every element receives the adjoint of its sum
    if axis is None:
        bx = tl.broadcast_to(by, x.shape)
    elif keep_dims:
        bx = tl.broadcast_to(by, x.shape)
    else:
        bx = tl.broadcast_to(tl.expand_dims(by, axis), x.shape)


@triton.jit
def max(y, x, by, axis=None, keep_dims=False, propagate_nan=None):
    # d max(x) flows to the lanes equal to the maximum; k tied lanes get 1/k each (a NaN maximum, propagate_nan=ALL:
    # no lane equals it, and its gradient is NaN)
    if axis is None:
        hit = x == y
        bx = tl.where(hit, by / tl.sum(hit.to(tl.float32)), 0.0)
    elif keep_dims:
        hit = x == y
        bx = tl.where(hit, by / tl.sum(hit.to(tl.float32), axis, keep_dims=True), 0.0)
    else:
        hit = x == tl.expand_dims(y, axis)
        bx = tl.where(hit, tl.expand_dims(by / tl.sum(hit.to(tl.float32), axis), axis), 0.0)


@triton.jit
def min(y, x, by, axis=None, keep_dims=False, propagate_nan=None):
    # d min(x) flows to the lanes equal to the minimum; k tied lanes get 1/k each (a NaN minimum, propagate_nan=ALL:
    # no lane equals it, and its gradient is NaN)
    if axis is None:
        hit = x == y
        bx = tl.where(hit, by / tl.sum(hit.to(tl.float32)), 0.0)
    elif keep_dims:
        hit = x == y
        bx = tl.where(hit, by / tl.sum(hit.to(tl.float32), axis, keep_dims=True), 0.0)
    else:
        hit = x == tl.expand_dims(y, axis)
        bx = tl.where(hit, tl.expand_dims(by / tl.sum(hit.to(tl.float32), axis), axis), 0.0)


@triton.jit
def reduce_product(y, x, by, axis=None, combine_fn=None, keep_dims=False):
    # d prod(x) / dx_i = the product of the other lanes: prod(x) / x_i where no lane is 0; at the one 0 lane where
    # there is exactly one, the others' product (0 at the rest); 0 where two or more are. Computed from the nonzero
    # lanes' product (tl.reduce with the forward's combine function) and the count of zeros: no division by 0
    zero = x == 0
    nonzero = tl.where(zero, 1.0, x)
    if axis is None:
        zeros = tl.sum(zero.to(tl.int32), axis, keep_dims=keep_dims)
        others = by * tl.reduce(nonzero, axis, combine_fn, keep_dims=keep_dims)
        bx = tl.where(zeros == 0, others / nonzero, tl.where(zero & (zeros == 1), others, 0.0))
    elif keep_dims:
        zeros = tl.sum(zero.to(tl.int32), axis, keep_dims=True)
        others = by * tl.reduce(nonzero, axis, combine_fn, keep_dims=True)
        bx = tl.where(zeros == 0, others / nonzero, tl.where(zero & (zeros == 1), others, 0.0))
    else:
        zeros = tl.expand_dims(tl.sum(zero.to(tl.int32), axis), axis)
        others = tl.expand_dims(by * tl.reduce(nonzero, axis, combine_fn), axis)
        bx = tl.where(zeros == 0, others / nonzero, tl.where(zero & (zeros == 1), others, 0.0))


@triton.jit
def extract_slice(y, ful, by, offsets=None, sizes=None, strides=None):
    # y = the elements offsets + j * strides of ful (triton-ascend): their adjoints go back there, 0 elsewhere
    bful = tl.insert_slice(tl.zeros(ful.shape, dtype=by.dtype), by, offsets, sizes, strides)


@triton.jit
def insert_slice(y, ful, sub, by, offsets=None, sizes=None, strides=None):
    # y = ful with the slice replaced by sub (triton-ascend): sub takes the slice's adjoints, ful the others
    bful = tl.insert_slice(by, tl.zeros(sub.shape, dtype=by.dtype), offsets, sizes, strides)
    bsub = tl.extract_slice(by, offsets, sizes, strides)


@triton.jit
def cumsum(y, x, by, axis=0, reverse=False):
    # y_i = sum_{j <= i} x_j, so bx_j = sum_{i >= j} by_i: a cumsum in the other direction
    bx = tl.cumsum(by, axis, reverse=not reverse)


@triton.jit
def cumprod(y, x, by, axis=0, reverse=False):
    # y_i = prod_{k <= i} x_k (from the other end with reverse), so bx_j = sum_{i >= j} by_i prod_{k <= i, k != j} x_k:
    # before the first 0 of the scan, the running sum of by * y from the end divided by x_j; at the first 0, the sum
    # from there of by_i times the running product with that 0 left out; after it, 0 (each product holds that 0).
    # No division by 0
    zero = x == 0
    if reverse:
        seen = tl.cumsum(zero.to(tl.int32), axis, reverse=True)
    else:
        seen = tl.cumsum(zero.to(tl.int32), axis)
    before = seen == 0
    first = zero & (seen == 1)
    if reverse:
        tail = tl.cumsum(tl.where(before, by * y, 0.0), axis)
        skipped = tl.cumprod(tl.where(first, 1.0, x), axis, reverse=True)
    else:
        tail = tl.cumsum(tl.where(before, by * y, 0.0), axis, reverse=True)
        skipped = tl.cumprod(tl.where(first, 1.0, x), axis)
    at_zero = tl.sum(tl.where(seen >= 1, by * skipped, 0.0), axis, keep_dims=True)
    bx = tl.where(before, tail / tl.where(before, x, 1.0), tl.where(first, at_zero, 0.0))


@triton.jit
def flip(y, x, by, dim=None):
    # y_i = x_{n-1-i} along dim: the adjoint reverses by along the same dim (Triton 3.6 needs dim given)
    bx = tl.flip(by, dim)


@triton.jit
def softmax(y, x, by, dim=None, keep_dims=False, ieee_rounding=False):
    # d softmax: bx = y (by - sum(by y)) along the softmax axis
    if dim is None:
        bx = y * (by - tl.sum(by * y, 0, keep_dims=keep_dims))
    else:
        bx = y * (by - tl.sum(by * y, dim, keep_dims=keep_dims))


@triton.jit
def dot(y, a, b, by, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None, out_dtype=None):
    # d (a @ b + acc) = da @ b + a @ db + dacc; the backward products keep the forward's precision.
    # tl.dot takes M and N from 1 but an inner dimension K of at least 16 (measured on the H100, Triton 3.6):
    # where the forward's N (or M), the inner dimension of a backward product, is below 16 (a matrix-vector
    # product written as [K, 1]), that product is a sum of broadcast products, in fp32.
    if b.shape[-1] < 16:
        ba = tl.sum(tl.expand_dims(by.to(tl.float32), -2) * tl.expand_dims(b.to(tl.float32), -3), axis=-1)
    else:
        ba = tl.dot(by.to(b.dtype), tl.trans(b), input_precision=input_precision, allow_tf32=allow_tf32)
    if a.shape[-2] < 16:
        bb = tl.sum(tl.expand_dims(a.to(tl.float32), -1) * tl.expand_dims(by.to(tl.float32), -2), axis=-3)
    else:
        bb = tl.dot(tl.trans(a), by.to(a.dtype), input_precision=input_precision, allow_tf32=allow_tf32)
    bacc = by
