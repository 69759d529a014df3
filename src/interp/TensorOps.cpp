#include "src/interp/TensorOps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace tgrad::interp {

using sema::DType;
using sema::ElemType;

std::string shape_str(const Shape &s) {
  std::ostringstream out;
  out << '[';
  for (size_t k = 0; k < s.size(); ++k) out << (k ? ", " : "") << s[k];
  out << ']';
  return out.str();
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string Tensor::type_str() const { return type.str() + (shape.empty() ? "" : shape_str(shape)); }

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16, round to nearest even, from a float.
double to_fp16(double v) {
  float f = static_cast<float>(v);  // fp32 first: Triton converts through fp32
  if (std::isnan(f)) return f;
  const float max_half = 65504.0f;
  float a = std::fabs(f);
  // Values at or beyond the rounding boundary of the largest half overflow to inf.
  if (a >= 65520.0f) return std::copysign(INFINITY, f);
  if (a < std::ldexp(1.0f, -25)) {
    // Below half the smallest subnormal: rounds to (signed) zero, except the
    // exact midpoint, which rounds to even (zero).
    return std::copysign(0.0, f);
  }
  int exp;
  std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  // Spacing of half values around a: 2^(exp-11) for normals, 2^-24 for subnormals.
  int e = std::max(exp - 11, -24);
  double q = std::ldexp(1.0, e);
  double r = std::nearbyint(a / q) * q;  // default rounding mode: to nearest even
  if (r > max_half) return std::copysign(INFINITY, f);
  return std::copysign(r, f);
}

// bfloat16: the upper 16 bits of an fp32, round to nearest even.
double to_bf16(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f)) return f;
  uint32_t u = float_bits(f);
  uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  u = (u + rounding) & 0xFFFF0000u;
  return bits_float(u);
}

template <class T>
int64_t saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return static_cast<int64_t>(std::numeric_limits<T>::min());
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
    if (std::is_same<T, uint64_t>::value) return static_cast<int64_t>(std::numeric_limits<uint64_t>::max());
    return static_cast<int64_t>(std::numeric_limits<T>::max());
  }
  if (std::is_same<T, uint64_t>::value) return static_cast<int64_t>(static_cast<uint64_t>(v));
  return static_cast<int64_t>(std::trunc(v));
}

int64_t float_to_int(DType t, double v) {
  switch (t) {
    case DType::Int1: return v != 0 ? 1 : 0;
    case DType::Int8: return saturate<int8_t>(v);
    case DType::Int16: return saturate<int16_t>(v);
    case DType::Int32: return saturate<int32_t>(v);
    case DType::Int64: return saturate<int64_t>(v);
    case DType::UInt8: return saturate<uint8_t>(v);
    case DType::UInt16: return saturate<uint16_t>(v);
    case DType::UInt32: return saturate<uint32_t>(v);
    case DType::UInt64: return saturate<uint64_t>(v);
    default: return 0;
  }
}

// An integer's value as a double, honouring unsignedness of 64-bit values.
double int_to_double(DType t, int64_t v) {
  if (t == DType::UInt64) return static_cast<double>(static_cast<uint64_t>(v));
  return static_cast<double>(v);
}

std::vector<int64_t> strides_of(const Shape &s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t k = s.size(); k-- > 0;) {
    st[k] = acc;
    acc *= s[k];
  }
  return st;
}

std::shared_ptr<Tensor> like(ElemType type, const Shape &shape) {
  auto t = std::make_shared<Tensor>();
  t->type = type;
  t->shape = shape;
  if (t->is_float())
    t->f.resize(numel(shape));
  else
    t->i.resize(numel(shape));
  return t;
}

}  // namespace

int normalize_axis(int axis, size_t rank) {
  int r = static_cast<int>(rank);
  if (axis < -r || axis >= r)
    throw OpError{"axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(r)};
  return axis < 0 ? axis + r : axis;
}

// An 8-bit float: nearest even at its mantissa's bits, subnormals below 2^(1 - bias), saturated at the largest
// finite value (Triton's conversions to fp8 on NVIDIA GPUs are cvt.rn.satfinite); NaN stays NaN.
static double to_fp8(double v, DType t, double largest) {
  if (std::isnan(v) || v == 0) return v;
  const int mantissa = *sema::fp_mantissa_width(t), bias = sema::exponent_bias(t);
  const double a = std::fabs(v);
  const int e = std::max(static_cast<int>(std::floor(std::log2(a))), 1 - bias);
  const double quantum = std::ldexp(1.0, e - mantissa);
  const double r = std::min(std::nearbyint(a / quantum) * quantum, largest);
  return v < 0 ? -r : r;
}

double round_float(DType t, double v, bool float64) {
  if (float64) return v;
  switch (t) {
    case DType::FP8E4NV: return to_fp8(v, t, 448.0);
    case DType::FP8E4B8: return to_fp8(v, t, 240.0);
    case DType::FP8E4B15: return to_fp8(v, t, 1.875);
    case DType::FP8E5: return to_fp8(v, t, 57344.0);
    case DType::FP8E5B16: return to_fp8(v, t, 57344.0);
    case DType::FP16: return to_fp16(v);
    case DType::BF16: return to_bf16(v);
    case DType::FP32: return static_cast<double>(static_cast<float>(v));
    default: return v;
  }
}

double round_tf32(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f) || std::isinf(f)) return f;
  uint32_t u = float_bits(f);
  uint32_t rounding = 0xFFF + ((u >> 13) & 1);  // keep 10 mantissa bits, nearest even
  u = (u + rounding) & 0xFFFFE000u;
  return bits_float(u);
}

int64_t wrap_int(DType t, int64_t v) {
  switch (t) {
    case DType::Int1: return v != 0 ? 1 : 0;
    case DType::Int8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::Int16: return static_cast<int16_t>(static_cast<uint16_t>(v));
    case DType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::UInt8: return static_cast<uint8_t>(v);
    case DType::UInt16: return static_cast<uint16_t>(v);
    case DType::UInt32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

TensorRef make_scalar(ElemType type, double fval, int64_t ival, bool float64) { return make_full(type, {}, fval, ival, float64); }

TensorRef make_full(ElemType type, const Shape &shape, double fval, int64_t ival, bool float64) {
  auto t = like(type, shape);
  if (t->is_float())
    std::fill(t->f.begin(), t->f.end(), round_float(type.dtype, fval, float64));
  else
    std::fill(t->i.begin(), t->i.end(), type.is_pointer ? ival : wrap_int(type.dtype, ival));
  return t;
}

TensorRef convert(const Tensor &t, ElemType to, bool float64) {
  if (t.type == to) return std::make_shared<Tensor>(t);
  if (to.is_pointer || t.type.is_pointer) {
    if (to.is_pointer && t.type.is_pointer) {  // pointer to pointer: same addresses, new element type
      auto out = std::make_shared<Tensor>(t);
      out->type = to;
      return out;
    }
    throw OpError{"cannot cast " + t.type.str() + " to " + to.str()};
  }
  auto out = like(to, t.shape);
  const int64_t n = numel(t.shape);
  const bool from_float = t.is_float(), to_float = out->is_float();
  for (int64_t k = 0; k < n; ++k) {
    if (from_float && to_float)
      out->f[k] = round_float(to.dtype, t.f[k], float64);
    else if (from_float)
      out->i[k] = float_to_int(to.dtype, t.f[k]);
    else if (to_float)
      out->f[k] = round_float(to.dtype, int_to_double(t.type.dtype, t.i[k]), float64);
    else
      out->i[k] = wrap_int(to.dtype, t.i[k]);
  }
  return out;
}

TensorRef bitcast(const Tensor &t, DType to) {
  if (t.type.is_pointer || sema::bits(t.type.dtype) != sema::bits(to))
    throw OpError{std::string("bitcast needs types of one width: ") + t.type.str() + " and " + sema::short_name(to)};
  auto out = like(ElemType{to, false}, t.shape);
  const int64_t n = numel(t.shape);
  for (int64_t k = 0; k < n; ++k) {
    uint64_t bits = 0;
    if (t.type.dtype == DType::FP32) bits = float_bits(static_cast<float>(t.f[k]));
    else if (t.type.dtype == DType::FP64) std::memcpy(&bits, &t.f[k], 8);
    else if (sema::is_float(t.type.dtype)) throw OpError{"bitcast of fp16/bf16 is not supported by the interpreter"};
    else bits = static_cast<uint64_t>(t.i[k]);
    if (to == DType::FP32) out->f[k] = bits_float(static_cast<uint32_t>(bits));
    else if (to == DType::FP64) std::memcpy(&out->f[k], &bits, 8);
    else if (sema::is_float(to)) throw OpError{"bitcast to fp16/bf16 is not supported by the interpreter"};
    else out->i[k] = wrap_int(to, static_cast<int64_t>(bits));
  }
  return out;
}

std::optional<Shape> broadcast_shape(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

TensorRef broadcast_to(const TensorRef &t, const Shape &shape) {
  if (t->shape == shape) return t;
  if (shape.size() < t->shape.size())
    throw OpError{"cannot broadcast " + shape_str(t->shape) + " to " + shape_str(shape)};
  const size_t pad = shape.size() - t->shape.size();
  Shape src(pad, 1);
  src.insert(src.end(), t->shape.begin(), t->shape.end());
  for (size_t k = 0; k < shape.size(); ++k)
    if (src[k] != shape[k] && src[k] != 1)
      throw OpError{"cannot broadcast " + shape_str(t->shape) + " to " + shape_str(shape)};
  std::vector<int64_t> src_strides = strides_of(src);
  for (size_t k = 0; k < shape.size(); ++k)
    if (src[k] == 1) src_strides[k] = 0;
  auto out = like(t->type, shape);
  const int64_t n = numel(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t src_off = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (out->is_float()) out->f[k] = t->f[src_off];
    else out->i[k] = t->i[src_off];
    // Advance the multi-index (last axis fastest) and the source offset.
    for (size_t d = shape.size(); d-- > 0;) {
      ++idx[d];
      src_off += src_strides[d];
      if (idx[d] < shape[d]) break;
      src_off -= src_strides[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

TensorRef reshape(const Tensor &t, const Shape &shape) {
  if (numel(shape) != numel(t.shape))
    throw OpError{"cannot reshape " + shape_str(t.shape) + " (" + std::to_string(numel(t.shape)) + " elements) to " +
                  shape_str(shape)};
  auto out = std::make_shared<Tensor>(t);
  out->shape = shape;
  return out;
}

TensorRef permute(const Tensor &t, const std::vector<int> &order) {
  if (order.size() != t.shape.size())
    throw OpError{"permutation of length " + std::to_string(order.size()) + " for a tensor of rank " +
                  std::to_string(t.shape.size())};
  std::vector<bool> seen(order.size(), false);
  Shape shape(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k] < 0 || order[k] >= static_cast<int>(order.size()) || seen[order[k]])
      throw OpError{"invalid permutation"};
    seen[order[k]] = true;
    shape[k] = t.shape[order[k]];
  }
  auto out = like(t.type, shape);
  std::vector<int64_t> src_strides = strides_of(t.shape), out_strides = strides_of(shape);
  const int64_t n = numel(shape);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k, src = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t id = rem / out_strides[d];
      rem %= out_strides[d];
      src += id * src_strides[order[d]];
    }
    if (out->is_float()) out->f[k] = t.f[src];
    else out->i[k] = t.i[src];
  }
  return out;
}

TensorRef expand_dims(const Tensor &t, int axis) {
  int rank = static_cast<int>(t.shape.size()) + 1;
  if (axis < -rank || axis >= rank)
    throw OpError{"expand_dims axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank - 1)};
  if (axis < 0) axis += rank;
  Shape shape = t.shape;
  shape.insert(shape.begin() + axis, 1);
  return reshape(t, shape);
}

TensorRef map_float(const Tensor &a, ElemType out, bool float64, const std::function<double(double)> &fn) {
  auto r = like(out, a.shape);
  const int64_t n = numel(a.shape);
  for (int64_t k = 0; k < n; ++k) r->f[k] = round_float(out.dtype, fn(a.as_double(k)), float64);
  return r;
}

TensorRef zip_float(const Tensor &a, const Tensor &b, ElemType out, bool float64,
                    const std::function<double(double, double)> &fn) {
  auto r = like(out, a.shape);
  const int64_t n = numel(a.shape);
  for (int64_t k = 0; k < n; ++k) r->f[k] = round_float(out.dtype, fn(a.as_double(k), b.as_double(k)), float64);
  return r;
}

TensorRef zip_int(const Tensor &a, const Tensor &b, ElemType out, const std::function<int64_t(int64_t, int64_t)> &fn) {
  auto r = like(out, a.shape);
  const int64_t n = numel(a.shape);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = fn(a.i[k], b.i[k]);
    r->i[k] = out.is_pointer ? v : wrap_int(out.dtype, v);
  }
  return r;
}

TensorRef compare(const Tensor &a, const Tensor &b, const std::function<bool(double, double)> &float_cmp,
                  const std::function<bool(int64_t, int64_t)> &int_cmp) {
  auto r = like(ElemType{DType::Int1, false}, a.shape);
  const int64_t n = numel(a.shape);
  const bool unsigned64 = a.type.dtype == DType::UInt64 && !a.type.is_pointer;
  for (int64_t k = 0; k < n; ++k) {
    if (a.is_float())
      r->i[k] = float_cmp(a.f[k], b.f[k]);
    else if (unsigned64)  // compare as unsigned
      r->i[k] = int_cmp(static_cast<int64_t>(static_cast<uint64_t>(a.i[k]) ^ (1ull << 63)),
                        static_cast<int64_t>(static_cast<uint64_t>(b.i[k]) ^ (1ull << 63)));
    else
      r->i[k] = int_cmp(a.i[k], b.i[k]);
  }
  return r;
}

TensorRef select(const Tensor &c, const Tensor &a, const Tensor &b) {
  auto r = like(a.type, a.shape);
  const int64_t n = numel(a.shape);
  for (int64_t k = 0; k < n; ++k) {
    bool take_a = c.is_float() ? c.f[k] != 0 : c.i[k] != 0;
    if (r->is_float()) r->f[k] = take_a ? a.f[k] : b.f[k];
    else r->i[k] = take_a ? a.i[k] : b.i[k];
  }
  return r;
}

TensorRef reduce(const Tensor &t, std::optional<int> axis_opt, bool keep_dims, ReduceKind kind, ElemType out,
                 bool float64, bool tie_break_left) {
  if (t.shape.empty() && axis_opt) throw OpError{"cannot reduce a scalar along an axis"};
  // Reducing every axis is reducing the flattened tensor along axis 0.
  Shape shape = t.shape;
  int axis;
  if (!axis_opt) {
    shape = {numel(t.shape)};
    axis = 0;
  } else {
    axis = normalize_axis(*axis_opt, shape.size());
  }
  const AxisLayout layout(shape, axis);
  const int64_t outer = layout.outer, inner = layout.inner, len = layout.len;
  if (len == 0) throw OpError{"cannot reduce an empty axis"};

  Shape out_shape;
  if (!axis_opt) {
    if (keep_dims) out_shape = Shape(t.shape.size(), 1);
  } else {
    out_shape = shape;
    if (keep_dims) out_shape[axis] = 1;
    else out_shape.erase(out_shape.begin() + axis);
  }
  auto r = like(out, out_shape);
  const bool is_arg = kind == ReduceKind::ArgMax || kind == ReduceKind::ArgMin;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return t.as_double(layout.at(o, k, in)); };
      double acc = at(0);
      int64_t best = 0;
      for (int64_t k = 1; k < len; ++k) {
        double v = at(k);
        switch (kind) {
          case ReduceKind::Sum: acc += v; break;
          // NaN propagates through max and min, as on the GPU.
          case ReduceKind::Max:
            if (!std::isnan(acc) && (std::isnan(v) || v > acc)) acc = v;
            break;
          case ReduceKind::Min:
            if (!std::isnan(acc) && (std::isnan(v) || v < acc)) acc = v;
            break;
          case ReduceKind::ArgMax:
            if (v > acc || (!tie_break_left && v == acc)) acc = v, best = k;
            break;
          case ReduceKind::ArgMin:
            if (v < acc || (!tie_break_left && v == acc)) acc = v, best = k;
            break;
        }
      }
      int64_t dst = o * inner + in;
      if (is_arg) r->i[dst] = best;
      else if (r->is_float()) r->f[dst] = round_float(out.dtype, acc, float64);
      else r->i[dst] = wrap_int(out.dtype, static_cast<int64_t>(acc));
    }
  // Integer sums must not go through double when they could exceed 2^53:
  // recompute them exactly.
  if (!is_arg && !r->is_float() && !t.is_float() && kind == ReduceKind::Sum)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        int64_t acc = 0;
        for (int64_t k = 0; k < len; ++k) acc += t.i[layout.at(o, k, in)];
        r->i[o * inner + in] = wrap_int(out.dtype, acc);
      }
  return r;
}

AxisLayout::AxisLayout(const Shape &shape, int axis) : len(shape[axis]) {
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
}

TensorRef slice_along(const Tensor &t, int axis, int64_t k) {
  const AxisLayout layout(t.shape, axis);
  auto s = std::make_shared<Tensor>();
  s->type = t.type;
  s->shape = t.shape;
  s->shape.erase(s->shape.begin() + axis);
  for (int64_t o = 0; o < layout.outer; ++o)
    for (int64_t i = 0; i < layout.inner; ++i) {
      if (t.is_float()) s->f.push_back(t.f[layout.at(o, k, i)]);
      else s->i.push_back(t.i[layout.at(o, k, i)]);
    }
  return s;
}

void put_along(Tensor &t, int axis, int64_t k, const Tensor &slice) {
  const AxisLayout layout(t.shape, axis);
  for (int64_t o = 0; o < layout.outer; ++o)
    for (int64_t i = 0; i < layout.inner; ++i) {
      if (t.is_float()) t.f[layout.at(o, k, i)] = slice.f[o * layout.inner + i];
      else t.i[layout.at(o, k, i)] = slice.i[o * layout.inner + i];
    }
}

TensorRef flip(const Tensor &t, int axis_in) {
  const AxisLayout layout(t.shape, normalize_axis(axis_in, t.shape.size()));
  auto r = std::make_shared<Tensor>(t);
  for (int64_t o = 0; o < layout.outer; ++o)
    for (int64_t k = 0; k < layout.len; ++k)
      for (int64_t in = 0; in < layout.inner; ++in) {
        const int64_t from = layout.at(o, k, in), to = layout.at(o, layout.len - 1 - k, in);
        if (t.is_float()) r->f[to] = t.f[from];
        else r->i[to] = t.i[from];
      }
  return r;
}

TensorRef scan(const Tensor &t, int axis_in, bool reverse, ScanKind kind, ElemType out, bool float64) {
  const AxisLayout layout(t.shape, normalize_axis(axis_in, t.shape.size()));
  const int64_t len = layout.len;
  auto r = like(out, t.shape);
  for (int64_t o = 0; o < layout.outer; ++o)
    for (int64_t in = 0; in < layout.inner; ++in) {
      double acc = kind == ScanKind::Sum ? 0.0 : 1.0;
      for (int64_t s = 0; s < len; ++s) {
        int64_t k = reverse ? len - 1 - s : s;
        int64_t idx = layout.at(o, k, in);
        acc = kind == ScanKind::Sum ? acc + t.as_double(idx) : acc * t.as_double(idx);
        // Each partial result is a value of the result type, as in a hardware scan.
        if (r->is_float()) {
          acc = round_float(out.dtype, acc, float64);
          r->f[idx] = acc;
        } else {
          r->i[idx] = wrap_int(out.dtype, static_cast<int64_t>(acc));
          acc = static_cast<double>(r->i[idx]);
        }
      }
    }
  return r;
}

TensorRef dot(const Tensor &a, const Tensor &b, const Tensor *acc, ElemType out, bool tf32, bool float64) {
  const size_t rank = a.shape.size();
  if ((rank != 2 && rank != 3) || b.shape.size() != rank)
    throw OpError{"tl.dot needs two 2-D (or two 3-D) tensors, got " + shape_str(a.shape) + " and " + shape_str(b.shape)};
  const int64_t batch = rank == 3 ? a.shape[0] : 1;
  if (rank == 3 && b.shape[0] != batch) throw OpError{"tl.dot batch dimensions differ: " + shape_str(a.shape) + " and " + shape_str(b.shape)};
  const int64_t M = a.shape[rank - 2], K = a.shape[rank - 1], N = b.shape[rank - 1];
  if (b.shape[rank - 2] != K)
    throw OpError{"tl.dot inner dimensions differ: " + shape_str(a.shape) + " and " + shape_str(b.shape)};
  Shape shape = rank == 3 ? Shape{batch, M, N} : Shape{M, N};
  if (acc && acc->shape != shape)
    throw OpError{"tl.dot accumulator has shape " + shape_str(acc->shape) + ", the product " + shape_str(shape)};
  auto r = like(out, shape);
  // Operands as plain doubles (tf32-rounded where asked), b transposed so
  // the inner loop walks both contiguously.
  auto operand = [&](const Tensor &t) {
    std::vector<double> v(t.size());
    for (int64_t k = 0; k < t.size(); ++k) v[k] = (tf32 && !float64) ? round_tf32(t.as_double(k)) : t.as_double(k);
    return v;
  };
  const std::vector<double> av = operand(a), bv = operand(b);
  std::vector<double> bt(bv.size());
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) bt[(p * N + n) * K + k] = bv[(p * K + k) * N + n];
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t m = 0; m < M; ++m) {
      const double *row = &av[(p * M + m) * K];
      for (int64_t n = 0; n < N; ++n) {
        const double *col = &bt[(p * N + n) * K];
        const int64_t o = (p * M + m) * N + n;
        double s = acc ? acc->as_double(o) : 0.0;
        for (int64_t k = 0; k < K; ++k) s += row[k] * col[k];
        if (r->is_float()) r->f[o] = round_float(out.dtype, s, float64);
        else r->i[o] = wrap_int(out.dtype, static_cast<int64_t>(s));
      }
    }
  return r;
}

}  // namespace tgrad::interp
