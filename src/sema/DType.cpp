#include "tgrad/sema/DType.h"

#include <cmath>
#include <limits>

namespace tgrad::sema {

DKind kind(DType t) {
  switch (t) {
    case DType::Int1: return DKind::Bool;
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: return DKind::UInt;
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return DKind::Int;
    case DType::FP8E4B15:
    case DType::FP8E4NV:
    case DType::FP8E4B8:
    case DType::FP8E5:
    case DType::FP8E5B16:
    case DType::FP16:
    case DType::BF16:
    case DType::FP32:
    case DType::FP64: return DKind::Float;
  }
  return DKind::Float;
}

std::optional<DType> integer_dtype(long long width, bool is_signed) {
  switch (width) {
    case 8: return is_signed ? DType::Int8 : DType::UInt8;
    case 16: return is_signed ? DType::Int16 : DType::UInt16;
    case 32: return is_signed ? DType::Int32 : DType::UInt32;
    case 64: return is_signed ? DType::Int64 : DType::UInt64;
    default: return std::nullopt;
  }
}

int bits(DType t) {
  switch (t) {
    case DType::Int1: return 1;
    case DType::Int8:
    case DType::UInt8:
    case DType::FP8E4B15:
    case DType::FP8E4NV:
    case DType::FP8E4B8:
    case DType::FP8E5:
    case DType::FP8E5B16: return 8;
    case DType::Int16:
    case DType::UInt16:
    case DType::FP16:
    case DType::BF16: return 16;
    case DType::Int32:
    case DType::UInt32:
    case DType::FP32: return 32;
    case DType::Int64:
    case DType::UInt64:
    case DType::FP64: return 64;
  }
  return 32;
}

bool is_float(DType t) { return kind(t) == DKind::Float; }
bool is_fp8(DType t) { return is_float(t) && bits(t) == 8; }
bool is_integer(DType t) { return !is_float(t); }
bool is_signed(DType t) { return kind(t) == DKind::Int || kind(t) == DKind::Float; }

const char *short_name(DType t) {
  switch (t) {
    case DType::Int1: return "int1";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
    case DType::UInt16: return "uint16";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::FP8E4B15: return "fp8e4b15";
    case DType::FP8E4NV: return "fp8e4nv";
    case DType::FP8E4B8: return "fp8e4b8";
    case DType::FP8E5: return "fp8e5";
    case DType::FP8E5B16: return "fp8e5b16";
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::FP32: return "fp32";
    case DType::FP64: return "fp64";
  }
  return "?";
}

const char *tl_name(DType t) {
  switch (t) {
    case DType::FP16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::FP32: return "float32";
    case DType::FP64: return "float64";
    case DType::FP8E4B15: return "float8e4b15";
    case DType::FP8E4NV: return "float8e4nv";
    case DType::FP8E4B8: return "float8e4b8";
    case DType::FP8E5: return "float8e5";
    case DType::FP8E5B16: return "float8e5b16";
    default: return short_name(t);
  }
}

std::optional<DType> parse_dtype(const std::string &raw) {
  std::string name = raw.rfind("tl.", 0) == 0 ? raw.substr(3) : raw;
  for (DType t : {DType::Int1, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16,
                  DType::UInt32, DType::UInt64, DType::FP8E4B15, DType::FP8E4NV, DType::FP8E4B8, DType::FP8E5,
                  DType::FP8E5B16, DType::FP16, DType::BF16, DType::FP32, DType::FP64})
    if (name == short_name(t) || name == tl_name(t)) return t;
  return std::nullopt;
}

bool is_dtype_name(const std::string &attr) { return parse_dtype(attr).has_value(); }

int exponent_bias(DType t) {
  switch (t) {
    case DType::FP8E4B15: return 15;
    case DType::FP8E4NV: return 7;
    case DType::FP8E4B8: return 8;
    case DType::FP8E5: return 15;
    case DType::FP8E5B16: return 16;
    case DType::FP16: return 15;
    case DType::BF16:
    case DType::FP32: return 127;
    case DType::FP64: return 1023;
    default: return 0;
  }
}

std::string ElemType::str() const { return std::string(is_pointer ? "*" : "") + short_name(dtype); }

DType python_int_dtype(long long v) {
  if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) return DType::Int32;
  if (v >= 0 && v <= static_cast<long long>(std::numeric_limits<uint32_t>::max())) return DType::UInt32;
  return DType::Int64;
}

DType python_float_dtype(double v) {
  if (std::isnan(v) || std::isinf(v) || std::fabs(v) <= std::numeric_limits<float>::max()) return DType::FP32;
  return DType::FP64;
}

DType reduction_dtype(const std::string &op, DType in, bool with_indices) {
  if (op == "argmax" || op == "argmin") return DType::Int32;
  if (op == "sum") return is_integer(in) && bits(in) < 32 ? DType::Int32 : in;
  // max, min: values narrower than 32 bits reduce in float32 / int32; with their indices, only bf16 is widened
  // (fp16 and int8 keep their type: `tl.max(x, 0, return_indices=True)` of fp16 is fp16).
  if (with_indices) return in == DType::BF16 ? DType::FP32 : in;
  if (bits(in) >= 32) return in;
  return is_float(in) ? DType::FP32 : is_integer(in) ? DType::Int32 : in;
}

DType scan_dtype(DType in) {
  if (in == DType::BF16) return DType::FP32;
  return is_integer(in) && bits(in) < 32 ? DType::Int32 : in;
}

DType integer_promote(DType a, DType b) {
  if (a == b) return a;
  const bool sa = kind(a) == DKind::Int, sb = kind(b) == DKind::Int;
  if (sa == sb) return bits(a) >= bits(b) ? a : b;
  // Different signedness: the unsigned type wins unless it is narrower.
  DType u = sa ? b : a, s = sa ? a : b;
  return bits(u) >= bits(s) ? u : s;
}

std::optional<DType> computation_type(DType a, bool a_is_python, DType b, bool b_is_python, bool div_or_mod,
                                      std::string &error) {
  // 0) A Python number of a kind no higher than the tensor's does not promote.
  if (a_is_python != b_is_python) {
    DType scalar = a_is_python ? a : b, tensor = a_is_python ? b : a;
    if (static_cast<int>(kind(scalar)) <= static_cast<int>(kind(tensor))) {
      if (div_or_mod && (tensor == DType::FP16 || tensor == DType::BF16)) return DType::FP32;
      return tensor;
    }
  }
  // 1) fp64 wins; 2) then fp32.
  if (a == DType::FP64 || b == DType::FP64) return DType::FP64;
  if (a == DType::FP32 || b == DType::FP32) return DType::FP32;
  // 3) fp16 with anything narrower is fp16 (fp32 for / and %): fp16 + bf16 is fp16.
  if (a == DType::FP16 || b == DType::FP16) return div_or_mod ? DType::FP32 : DType::FP16;
  // 4) bf16 stays bf16 only with bf16.
  if (a == DType::BF16 && b == DType::BF16) return div_or_mod ? DType::FP32 : DType::BF16;
  if (a == DType::BF16 || b == DType::BF16) return DType::FP32;
  // 5) fp8 with the same fp8 stays; two different fp8 types compute in fp16.
  if (is_fp8(a) && is_fp8(b)) return a == b ? a : DType::FP16;
  if (is_fp8(a) || is_fp8(b)) {
    error = std::string("unexpected types ") + short_name(a) + " and " + short_name(b) + " (Triton computes with an fp8 "
            "tensor only beside another fp8 or a wider float; cast the integer first)";
    return std::nullopt;
  }
  // 6) integers.
  if (div_or_mod && is_signed(a) != is_signed(b) && a != DType::Int1 && b != DType::Int1) {
    error = std::string("cannot use / or % between ") + short_name(a) + " and " + short_name(b) +
            " because they have different signedness; cast one of them first";
    return std::nullopt;
  }
  return integer_promote(a, b);
}

// A tl.dtype's predicate (`is_floating()`, `is_int_signed()`, ...) on a dtype of tgrad's: its value; none for a
// name that is not one.
std::optional<bool> dtype_predicate(const std::string &m, DType d) {
  const DKind k = kind(d);
  if (m == "is_floating") return k == DKind::Float;
  if (m == "is_int") return k == DKind::Int || k == DKind::UInt || k == DKind::Bool;
  if (m == "is_int_signed") return k == DKind::Int;
  if (m == "is_int_unsigned") return k == DKind::UInt || k == DKind::Bool;
  if (m == "is_bool" || m == "is_int1") return d == DType::Int1;
  if (m == "is_fp16") return d == DType::FP16;
  if (m == "is_bf16") return d == DType::BF16;
  if (m == "is_fp32") return d == DType::FP32;
  if (m == "is_fp64") return d == DType::FP64;
  if (m == "is_fp8") return is_fp8(d);
  if (m == "is_fp8e4nv") return d == DType::FP8E4NV;
  if (m == "is_fp8e4b8") return d == DType::FP8E4B8;
  if (m == "is_fp8e4b15") return d == DType::FP8E4B15;
  if (m == "is_fp8e5") return d == DType::FP8E5;
  if (m == "is_fp8e5b16") return d == DType::FP8E5B16;
  if (m == "is_standard_floating") return d == DType::FP16 || d == DType::BF16 || d == DType::FP32 || d == DType::FP64;
  if (m == "is_int8") return d == DType::Int8;
  if (m == "is_int16") return d == DType::Int16;
  if (m == "is_int32") return d == DType::Int32;
  if (m == "is_int64") return d == DType::Int64;
  if (m == "is_uint8") return d == DType::UInt8;
  if (m == "is_uint16") return d == DType::UInt16;
  if (m == "is_uint32") return d == DType::UInt32;
  if (m == "is_uint64") return d == DType::UInt64;
  if (m == "is_ptr" || m == "is_block") return false;
  return std::nullopt;
}


std::optional<int> fp_mantissa_width(DType d) {
  switch (d) {
    case DType::FP16: return 10;
    case DType::BF16: return 7;
    case DType::FP32: return 23;
    case DType::FP64: return 52;
    case DType::FP8E4B15:
    case DType::FP8E4NV:
    case DType::FP8E4B8: return 3;
    case DType::FP8E5:
    case DType::FP8E5B16: return 2;
    default: return std::nullopt;
  }
}

}  // namespace tgrad::sema
