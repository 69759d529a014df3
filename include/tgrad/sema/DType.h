// Element types of Triton values, and Triton's rules for combining them.
//
// The rules are Triton 3.6's (python/triton/language/semantic.py,
// computation_type_impl and integer_promote_impl), as measured on the H100
// where TRITON.md records it. Sema (static types) and the interpreter
// (dynamic values) both use these functions, so they cannot disagree.
#pragma once

#include <optional>
#include <string>

namespace tgrad::sema {

enum class DType {
  Int1,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  // Triton's 8-bit floats (tl.float8e4nv is torch.float8_e4m3fn, tl.float8e5 torch.float8_e5m2; the b8/b16
  // variants are the fnuz ones; e4b15 is Triton's own), in Triton's order.
  FP8E4B15,
  FP8E4NV,
  FP8E4B8,
  FP8E5,
  FP8E5B16,
  FP16,
  BF16,
  FP32,
  FP64,
};

// Triton's kinds, in promotion order: bool < uint < int < float.
enum class DKind { Bool = 0, UInt = 1, Int = 2, Float = 3 };

DKind kind(DType t);
int bits(DType t);
bool is_float(DType t);
bool is_integer(DType t);  // Int1 included
bool is_signed(DType t);   // signed integers and floats
// A tl.dtype's predicate (`is_floating()`, `is_int_signed()`, `is_fp16()`, ...) on `t`; none for a name that is
// not one (FlagGems' limits pick a value by them).
std::optional<bool> dtype_predicate(const std::string &method, DType t);
// A float dtype's `fp_mantissa_width` (fp16 10, bf16 7, fp32 23, fp64 52); none for the others.
std::optional<int> fp_mantissa_width(DType t);
// The integer dtype of 8, 16, 32 or 64 bits (tl.core.get_int_dtype); none for another width.
std::optional<DType> integer_dtype(long long bits, bool is_signed);

// Triton's short names: "fp32", "bf16", "int32", "int1".
const char *short_name(DType t);
// The `tl.` attribute naming the type: "float32", "bfloat16", "int32", "int1".
const char *tl_name(DType t);
// Accepts both spellings ("fp32" or "float32"), with or without "tl.".
std::optional<DType> parse_dtype(const std::string &name);
bool is_fp8(DType t);
// The exponent bias of a float dtype (fp8e4nv 7, fp16 15, fp32 127, ...).
int exponent_bias(DType t);
// A dtype `tl.<attr>` names.
bool is_dtype_name(const std::string &attr);

// The element type of a value: a dtype, or a pointer to one.
struct ElemType {
  DType dtype = DType::FP32;
  bool is_pointer = false;

  bool operator==(const ElemType &o) const { return dtype == o.dtype && is_pointer == o.is_pointer; }
  bool operator!=(const ElemType &o) const { return !(*this == o); }
  std::string str() const;  // "fp32", "*fp16"
};

// The dtype Triton gives a Python number when it meets a tensor
// (semantic.to_tensor): int -> int32, uint32, int64 or uint64 by range;
// float -> fp32 unless out of fp32's range; bool -> int1.
DType python_int_dtype(long long v);
DType python_float_dtype(double v);

// Result type of an arithmetic binary operation between two element types.
// A `*_is_python` operand is a Python number (a constexpr), which does not
// take part in promotion when its kind is no higher than the tensor's.
// `div_or_mod` is set for `/` and `%` (fp16 and bf16 then compute in fp32).
// Returns nullopt with `error` set when Triton rejects the combination.
std::optional<DType> computation_type(DType a, bool a_is_python, DType b, bool b_is_python, bool div_or_mod,
                                      std::string &error);

// Result dtype of a reduction ("sum", "max", "min", "argmax", "argmin") of an
// input of dtype `in`, without an explicit dtype= (measured on the H100,
// TRITON.md): sum keeps floats and widens integers narrower than 32 bits to
// int32; max and min compute floats narrower than 32 bits in fp32 and
// integers narrower in int32 (with indices, bf16 alone widens: measured on an
// H200, tests/gpu/REAL_REPOS.md, FlagGems); argmax and argmin give int32.
// `with_indices`: tl.max / tl.min with return_indices=True, which promote only bf16 (Triton's standard.py).
DType reduction_dtype(const std::string &op, DType in, bool with_indices = false);
// Result dtype of tl.cumsum / tl.cumprod without dtype=: bf16 -> fp32,
// integers narrower than 32 bits -> int32, anything else kept.
DType scan_dtype(DType in);

// Integer promotion of two integer types (wider wins; with equal widths and
// different signedness, unsigned wins).
DType integer_promote(DType a, DType b);

}  // namespace tgrad::sema
