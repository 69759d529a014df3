// Numeric kernels of the interpreter: rounding to a dtype, casts,
// broadcasting, elementwise maps, reshapes, reductions, scans and dot.
// Typing (which dtype a result has) is decided by the caller with
// sema::computation_type; these functions only compute. They throw OpError
// with a message; the interpreter adds the source location.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "tgrad/interp/Value.h"

namespace tgrad::interp {

struct OpError {
  std::string message;
};

// A float rounded to the dtype (fp32, fp16, bf16: round to nearest even).
// In float64 mode nothing is rounded.
double round_float(sema::DType t, double v, bool float64);
// tf32: fp32 with a 10-bit mantissa (what tl.dot's default precision uses for fp32 inputs).
double round_tf32(double v);
// An integer wrapped to the dtype's width, as the hardware would.
int64_t wrap_int(sema::DType t, int64_t v);

TensorRef make_scalar(sema::ElemType type, double fval, int64_t ival, bool float64);
TensorRef make_full(sema::ElemType type, const Shape &shape, double fval, int64_t ival, bool float64);

// Value conversion, with C semantics: float -> int truncates toward zero
// (saturating at the integer's range; NaN becomes 0), int -> int wraps, to
// int1 compares with zero.
TensorRef convert(const Tensor &t, sema::ElemType to, bool float64);
// Reinterpretation of the bits (same width only).
TensorRef bitcast(const Tensor &t, sema::DType to);

// Triton's broadcasting: left-pad the shorter shape with 1s, then each
// dimension must be equal or 1.
std::optional<Shape> broadcast_shape(const Shape &a, const Shape &b);
TensorRef broadcast_to(const TensorRef &t, const Shape &shape);

TensorRef reshape(const Tensor &t, const Shape &shape);
TensorRef permute(const Tensor &t, const std::vector<int> &order);
TensorRef expand_dims(const Tensor &t, int axis);

// Elementwise maps over operands of one shape (broadcast first).
TensorRef map_float(const Tensor &a, sema::ElemType out, bool float64, const std::function<double(double)> &fn);
TensorRef zip_float(const Tensor &a, const Tensor &b, sema::ElemType out, bool float64,
                    const std::function<double(double, double)> &fn);
TensorRef zip_int(const Tensor &a, const Tensor &b, sema::ElemType out,
                  const std::function<int64_t(int64_t, int64_t)> &fn);
// Comparison of two operands of one computation type: an int1 tensor.
TensorRef compare(const Tensor &a, const Tensor &b, const std::function<bool(double, double)> &float_cmp,
                  const std::function<bool(int64_t, int64_t)> &int_cmp);
// where(c, a, b): all three of one shape, a and b of one type.
TensorRef select(const Tensor &c, const Tensor &a, const Tensor &b);

// A row-major shape seen along one axis: `outer` blocks before it, `len`
// positions on it, `inner` elements after it; element (o, k, i) is at
// (o * len + k) * inner + i.
struct AxisLayout {
  AxisLayout(const Shape &shape, int axis);
  int64_t outer = 1, len = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * len + k) * inner + i; }
};

// `axis` of a tensor of rank `rank` counted from 0 (a negative one from the end); OpError where it is out of range.
int normalize_axis(int axis, size_t rank);

// The elements at position k of `axis` (a tensor without that axis), and
// the reverse: write such a slice into position k of `t`.
TensorRef slice_along(const Tensor &t, int axis, int64_t k);
void put_along(Tensor &t, int axis, int64_t k, const Tensor &slice);

enum class ReduceKind { Sum, Max, Min, ArgMax, ArgMin };
// Reduce along `axis` (or all axes when axis is nullopt), in the result type
// `out`. ArgMax/ArgMin return int32 indices (the first of equal values, or the
// last when tie_break_left is false).
TensorRef reduce(const Tensor &t, std::optional<int> axis, bool keep_dims, ReduceKind kind, sema::ElemType out,
                 bool float64, bool tie_break_left = true);

// The elements reversed along `axis` (tl.flip).
TensorRef flip(const Tensor &t, int axis);

enum class ScanKind { Sum, Prod };
TensorRef scan(const Tensor &t, int axis, bool reverse, ScanKind kind, sema::ElemType out, bool float64);

// a[M,K] @ b[K,N] (or batched [B,M,K] @ [B,K,N]) plus acc, in `out`.
// Products accumulate in double; the result is rounded once to `out`.
TensorRef dot(const Tensor &a, const Tensor &b, const Tensor *acc, sema::ElemType out, bool tf32, bool float64);

}  // namespace tgrad::interp
