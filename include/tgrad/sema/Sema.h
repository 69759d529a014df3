// Semantic analysis: static types of a jit function's expressions.
//
// Every expression gets an SType: a tensor's element type and symbolic
// shape (tl.arange(0, BLOCK) is [BLOCK]; x[:, None] is [N, 1]), or a value
// known before the kernel runs (a tl.constexpr int, float, bool, string or
// dtype, with its value when known), or a tuple, function or module. Names
// resolve to locals, parameters, module constants, jit functions, tl,
// tl.math, triton and libdevice. Constexpr parameters given with -D are
// known values; others are symbols. Type promotion is Triton's
// (sema/DType.h), shared with the interpreter.
//
// Parameters without a given type are Unknown, and Unknown propagates
// without errors: analysis reports only definite mistakes (shapes that
// cannot broadcast, tl.exp on fp16, a loop-carried variable that changes
// type, a name not defined on every path, ...), each at the offending
// expression. Where two symbolic dimensions must be equal for an operation
// (BLOCK_M against BLOCK_N), the analysis records the assumption instead of
// failing; the AD stages turn such assumptions into tl.static_assert lines.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/DType.h"

namespace tgrad::sema {

// A dimension: a known size, or an expression over constexpr names.
struct Dim {
  std::optional<int64_t> value;
  std::string symbol;
  static Dim known(int64_t v) { return Dim{v, ""}; }
  static Dim symbolic(std::string s) { return Dim{std::nullopt, std::move(s)}; }
  bool operator==(const Dim &o) const { return value ? (o.value && *value == *o.value) : (!o.value && symbol == o.symbol); }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  std::string str() const { return value ? std::to_string(*value) : symbol; }
};
using SymShape = std::vector<Dim>;
std::string shape_str(const SymShape &s);

struct SType {
  enum class Kind { Unknown, None, Bool, Int, Float, Str, DType, Tensor, Tuple, Function, Namespace, Builtin, Slice };
  Kind kind = Kind::Unknown;

  // Bool, Int, Float, Str, DType: values known before the kernel runs.
  bool known = false;
  bool b = false;
  long long n = 0;
  double x = 0;
  std::string s;    // Str contents; Namespace / Builtin qualified name
  std::string sym;  // an Int of unknown value: its expression ("BLOCK", "BLOCK * 2")
  DType dtype = DType::FP32;
  // Tensor: a pointer argument known to be a tensor, not None (an optional pointer's tensor specialization,
  // src/ad/SpecializationFlags.h): `p is None` is decided for it. Unknown: the same said of a parameter not typed
  // yet (the generic trials give it its types).
  bool not_none = false;
  bool dtype_is_pointer = false;
  bool dtype_is_tensor_type = false;  // `x.type` rather than `x.dtype`

  ElemType elem;   // Tensor
  SymShape shape;  // Tensor; empty for a Triton scalar
  std::vector<SType> elems;  // Tuple
  const ast::Function *fn = nullptr;
  std::shared_ptr<SType> self;  // bound method receiver

  static SType unknown() { return SType(); }
  static SType none();
  static SType of_int(long long v);
  static SType int_symbol(std::string sym);
  static SType of_float(double v, bool known = true);
  static SType of_bool(bool v, bool known = true);
  static SType of_str(std::string v);
  static SType of_dtype(DType d, bool pointer = false);
  static SType tensor(ElemType e, SymShape shape);
  static SType tuple(std::vector<SType> elems);
  static SType namespace_(std::string name);
  static SType builtin(std::string name, std::shared_ptr<SType> self = nullptr);

  bool is_tensor() const { return kind == Kind::Tensor; }
  bool is_constexpr_number() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  // "fp32[BLOCK_M, BLOCK_N]", "*fp16", "constexpr int 128", "constexpr int BLOCK", "tuple(...)".
  std::string str() const;
};

// The truth value of a value known when Triton compiles, as Python's bool();
// none where it is not known (None's kind carries no value: test it apart).
std::optional<bool> known_truth(const SType &t);

// A shape equality the analysed code relies on but that sema could not
// prove (symbolic dimensions).
struct ShapeAssumption {
  SourceSpan span;
  Dim a, b;
};

// The type of each expression node sema typed. A long backward has hundreds
// of thousands of nodes, typed once per representative type: the types lie
// in one array in the order sema met them, found through an open-addressing
// table of node addresses (no allocation and no free per node, and a lookup
// probes an array). Only sema adds types; a pointer find() returns stays
// valid while none is added.
class ExprTypes {
 public:
  void reserve(size_t n) {
    values_.reserve(n);
    if (2 * n > keys_.size()) rehash(table_size_for(n));
  }
  // The type of `e`, replacing any it had (sema types a loop's body again).
  void insert_or_assign(const ast::Expr *e, const SType &t) {
    if (2 * (values_.size() + 1) > keys_.size()) rehash(table_size_for(values_.size() + 1));
    const size_t i = slot(e);
    if (keys_[i] == e) {
      values_[index_[i]] = t;
      return;
    }
    keys_[i] = e;
    index_[i] = values_.size();
    values_.push_back(t);
  }
  const SType *find(const ast::Expr *e) const {
    if (keys_.empty()) return nullptr;
    const size_t i = slot(e);
    return keys_[i] == e ? &values_[index_[i]] : nullptr;
  }
  size_t size() const { return values_.size(); }
  // Calls fn(node, type) for each typed node (in no particular order).
  template <class Fn>
  void for_each(Fn &&fn) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i]) fn(keys_[i], values_[index_[i]]);
  }

 private:
  // A power of two at least twice `n` (the table stays at most half full).
  static size_t table_size_for(size_t n) {
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
  }
  // The slot that holds `e`, or the empty one where it would go.
  size_t slot(const ast::Expr *e) const {
    const size_t mask = keys_.size() - 1;
    uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(e)) * 0x9E3779B97F4A7C15ull;
    for (size_t i = static_cast<size_t>(h ^ (h >> 29)) & mask;; i = (i + 1) & mask)
      if (keys_[i] == e || !keys_[i]) return i;
  }
  void rehash(size_t size) {
    std::vector<const ast::Expr *> keys = std::move(keys_);
    std::vector<size_t> index = std::move(index_);
    keys_.assign(size, nullptr);
    index_.assign(size, 0);
    for (size_t k = 0; k < keys.size(); ++k)
      if (keys[k]) {
        const size_t i = slot(keys[k]);
        keys_[i] = keys[k];
        index_[i] = index[k];
      }
  }
  std::vector<const ast::Expr *> keys_;  // the table: a node, or null for an empty slot
  std::vector<size_t> index_;            // for each slot, its node's type in values_
  std::vector<SType> values_;
};

struct TypeInfo {
  ExprTypes types;
  std::vector<ShapeAssumption> assumptions;
  SType result;  // the analysed function's return type
  // Ifs on a tl.constexpr without a value after which a name has a
  // different type on each path (`T = eos - bos`, int64, where the other
  // path keeps the int32 parameter): the name's type is Unknown after the
  // if; with the condition's value it is exact. By the condition's node.
  std::unordered_map<const ast::Expr *, std::vector<std::string>> divergent_names;
  // The same for conditional expressions (`tl.zeros(...) if USE_DW else
  // None`): the conditions whose two values differ in type, in the order
  // sema met them.
  std::vector<const ast::Expr *> divergent_conditions;

  const SType *type_of(const ast::Expr *e) const { return types.find(e); }
};

// Parameter types: for each parameter name, its type (a tensor, a pointer
// scalar, a constexpr value). Unlisted parameters are Unknown, or symbols
// for tl.constexpr parameters.
using ParamTypes = std::map<std::string, SType>;

// The helper a backward with unknown shapes calls to sum a gradient back to
// an operand's shape (emitted by src/ad, written in Triton): sema types a
// call to it as the operand's shape with the gradient's dtype.
inline constexpr const char kUnbroadcastHelper[] = "_tgrad_unbroadcast";
// The helper a backward with unknown shapes calls to select a contribution
// under a forward's mask (NaN safety, src/ad/reverse/LaneMasks.cpp): typed
// as its second argument.
inline constexpr const char kSelectLanesHelper[] = "_tgrad_select_lanes";

// Analyses `fn` and the jit functions it calls. Returns nullopt after
// reporting errors to `diags`.
std::optional<TypeInfo> analyze(const ast::Module &module, const ast::Function &fn, const ParamTypes &params,
                                DiagEngine &diags);

}  // namespace tgrad::sema
