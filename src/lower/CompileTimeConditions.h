// Conditions Triton decides when it compiles a kernel, decided here too.
//
// Helpers a lowering inlines bring ifs and conditional expressions whose
// conditions are literals once their arguments are substituted (`if 2 == 2:`),
// test tl.constexpr values the user gave with -D (or a specialization fixed),
// compare dtypes (`dtype == tl.float8e5` with `dtype = tl.float16` assigned
// once) or ask `isinstance(x, tl.tensor_descriptor)` (the Triton tutorial's
// _maybe_make_tensor_desc). Triton compiles only the branch taken; so does
// tgrad, which keeps one block shape per name and the constexprs Triton's
// tl.arange needs (src/lower/InlineCalls.h, src/lower/BlockPointers.h).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::lower {

// A value Triton knows when it compiles: an integer (bools as 0 and 1), a
// string, None, or a dtype (by its name, "tl.float16").
struct CompileTimeValue {
  enum class Kind { Int, Str, None, DType } kind = Kind::Int;
  long long n = 0;
  std::string s;
  bool operator==(const CompileTimeValue &o) const {
    if (kind != o.kind) return false;
    return kind == Kind::Int ? n == o.n : kind == Kind::None ? true : s == o.s;
  }
};

class CompileTimeConditions {
 public:
  // `kernel` is read where a test needs it (which names it assigns a
  // descriptor), so it may change between calls (an inliner's rounds).
  CompileTimeConditions(const ast::Function &kernel, const sema::ParamTypes &known);

  // The value of an expression Triton computes when it compiles, or none.
  std::optional<CompileTimeValue> value_of(const ast::Expr &e) const;
  // `isinstance(x, tl.tensor_descriptor)`: false for a kernel parameter (a
  // pointer to tgrad: a host TensorDescriptor argument is not differentiated),
  // true for a name the kernel assigns a tl.make_tensor_descriptor; none else.
  std::optional<bool> descriptor_test(const ast::Expr &e) const;

  // `dtype = tl.float16` (or a conditional expression the values decide)
  // assigned once in the kernel becomes a value conditions may compare.
  void note_dtype_locals(ast::StmtList &body);
  // Conditional expressions with a decided condition replaced by the branch taken.
  void fold_expressions(ast::ExprPtr &e) const;
  // Ifs whose condition is decided reduced to the branch taken, at any depth.
  void fold_decided(ast::StmtList &body) const;
  // The conditional expressions between compile-time values (a block shape)
  // that the values decide, in every statement; whether any was.
  bool fold_static_conditionals(ast::StmtList &body) const;

 private:
  // Which branch a decided condition takes (true: the first); none where undecided.
  std::optional<bool> taken(const ast::Expr &cond) const;
  bool is_static(const ast::Expr &e) const;
  // `x` a conditional expression whose condition is decided (and, with
  // static_only, whose branches are compile-time values): replaced by the
  // branch taken; whether it was.
  bool choose_branch(ast::ExprPtr &x, bool static_only) const;

  const ast::Function &kernel_;
  std::map<std::string, CompileTimeValue> values_;  // tl.constexpr values given, dtypes assigned once
};

}  // namespace tgrad::lower
