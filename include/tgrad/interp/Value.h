// Values of the reference interpreter.
//
// A Value is what a name can hold while a kernel runs: a Python constant
// (constexpr int, float, bool, string, None, a dtype such as tl.float16), a
// tensor (a tile, or a 0-d Triton scalar such as tl.program_id(0)), a tuple,
// a jit function, or a reference into `tl`/`tl.math`/`triton`/`libdevice`.
// Tensors are immutable and shared: an assignment copies a pointer.
//
// Floats are stored as double and rounded to their dtype after every
// operation (fp32, fp16, bf16 emulated bit-exactly with round-to-nearest-
// even), except in float64 mode, where every float is kept in double: the
// mode gradient checks use. Integers, booleans and pointers are int64; a
// pointer is an address: (buffer index + 1) << 40 plus an element offset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/DType.h"

namespace tgrad::interp {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape &s);  // "[16, 32]"
int64_t numel(const Shape &s);

struct Tensor {
  sema::ElemType type;
  Shape shape;             // {} for a Triton scalar
  std::vector<double> f;   // float dtypes
  std::vector<int64_t> i;  // integers, int1, pointers

  bool is_float() const { return !type.is_pointer && sema::is_float(type.dtype); }
  int64_t size() const { return is_float() ? static_cast<int64_t>(f.size()) : static_cast<int64_t>(i.size()); }
  double as_double(int64_t k) const { return is_float() ? f[k] : static_cast<double>(i[k]); }
  std::string type_str() const;  // "fp32[16, 32]", "*fp16[16]", "int32"
};
using TensorRef = std::shared_ptr<const Tensor>;

struct Value {
  enum class Kind {
    None,
    Bool,       // Python bool (constexpr)
    Int,        // Python int (constexpr)
    Float,      // Python float (constexpr)
    Str,
    DType,      // tl.float16
    Tensor,
    Tuple,
    Function,   // a @triton.jit function
    Namespace,  // tl, tl.math, triton, libdevice
    Builtin,    // tl.exp, triton.cdiv, x.to (bound method: `self` set)
    Slice,      // `:` inside a subscript (only the full slice is supported)
  };

  Kind kind = Kind::None;
  bool b = false;
  long long n = 0;
  double x = 0;
  std::string s;  // Str contents, Namespace / Builtin qualified name
  sema::DType dtype = sema::DType::FP32;
  TensorRef t;
  std::shared_ptr<std::vector<Value>> elems;  // Tuple
  const ast::Function *fn = nullptr;
  std::shared_ptr<Value> self;  // bound method receiver

  static Value none() { return Value(); }
  static Value of_bool(bool v);
  static Value of_int(long long v);
  static Value of_float(double v);
  static Value of_str(std::string v);
  static Value of_dtype(sema::DType d);
  static Value of_tensor(TensorRef t);
  static Value of_tuple(std::vector<Value> v);
  static Value of_function(const ast::Function *f);
  static Value of_namespace(std::string name);
  static Value of_builtin(std::string name, std::shared_ptr<Value> self = nullptr);

  bool is_python_number() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  std::string describe() const;  // for messages: "a Python int", "tensor fp32[16]"
};

}  // namespace tgrad::interp
