// ANF normalisation: every intermediate value of a jit function gets a name.
//
// After this pass a function body is a list of assignments `t = op(v, ...)`
// whose operands are names or values known before the kernel runs (literals,
// dtypes, axes, shapes), followed by `return` of names. Temporaries are named
// after their expression (`tl_dot_c_c`, `a_times_b`); the user's own names
// are kept. Every name is assigned once (a reassigned name gets a suffix:
// `x_2`), so the backward can replay the primal statements and still read
// every value an adjoint needs. Constexpr `if`s are resolved; runtime control
// flow is rejected with a located error (whole-kernel reverse mode handles
// it). Each output statement remembers the user statement it came from, for
// the backward's "Grad of:" comments. Examples: tests/ad/AnfTest.cpp.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct AnfFunction {
  std::unique_ptr<ast::Function> fn;
  std::vector<const ast::Stmt *> origin;  // per statement of fn->body: the user statement
};

// `kernel`: a kernel, which returns nothing (its results are its stores).
std::optional<AnfFunction> to_anf(const ast::Module &module, const ast::Function &fn, const sema::TypeInfo &types,
                                  DiagEngine &diags, bool kernel = false);

// A fresh identifier derived from an expression: `tl_dot_c_c`, `a_times_b`.
std::string name_for(const ast::Expr &e);

// Names a jit function's body and module can see: generated names avoid them.
class NameAllocator {
 public:
  void reserve(const std::string &name) { used_.insert(name); }
  void reserve_all(const ast::Module &module, const ast::Function &fn);
  // `base` if unused, else base_2, base_3, ...
  std::string fresh(const std::string &base);
  bool used(const std::string &name) const { return used_.count(name) > 0; }

 private:
  std::set<std::string> used_;
};

}  // namespace tgrad::ad
