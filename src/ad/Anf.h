// ANF normalisation: every intermediate value of a jit function gets a name.
//
// After this pass a function body is a list of assignments `t = op(v, ...)`
// whose operands are names or values known before the kernel runs (literals,
// dtypes, axes, shapes), followed by `return` of names. Temporaries are named
// after their expression (`tl_dot_c_c`, `a_times_b`); the user's own names
// are kept. Every name is assigned once (a reassigned name gets a suffix:
// `x_2`), so the backward can replay the primal statements and still read
// every value an adjoint needs. Constexpr `if`s are resolved.
//
// In a kernel, runtime control flow stays structured:
// - `for v in range(a, b, c)`: a value the loop reassigns (a loop-carried
//   value) gets one name of its own for the whole loop, `acc_2`, set before
//   the loop from its incoming value (`acc_2 = acc`) and at the end of the
//   body from the iteration's result (`acc_2 = acc_3`); inside the body every
//   other name is assigned once.
// - `if c:` with a runtime condition: a value either branch assigns gets a
//   merged name, set at the end of both branches.
// In a tile function runtime control flow is rejected with a located error.
// Each output statement remembers the user statement it came from, for the
// backward's "Grad of:" comments. Examples: tests/ad/AnfTest.cpp.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

// A loop-carried value of a runtime loop.
struct LoopCarried {
  std::string name;  // its name inside the loop and after it
  std::string init;  // the value it enters the loop with
};

struct AnfFunction {
  std::unique_ptr<ast::Function> fn;
  std::map<const ast::Stmt *, const ast::Stmt *> origin;  // ANF statement (any depth) -> user statement
  std::map<const ast::For *, std::vector<LoopCarried>> carried;
  const ast::Stmt *origin_of(const ast::Stmt *s) const {
    auto it = origin.find(s);
    return it == origin.end() ? nullptr : it->second;
  }
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
  // `base` if unused, else the first of base_2, base_3, ... that is unused.
  std::string fresh(const std::string &base);
  bool used(const std::string &name) const { return used_.count(name) > 0; }

 private:
  std::unordered_set<std::string> used_;
  // Names are never released, so the first free suffix of a base only grows:
  // the search resumes where the last one for that base ended (linear in the
  // number of names over a whole function, not quadratic).
  std::unordered_map<std::string, int> next_suffix_;
};

}  // namespace tgrad::ad
