// Removing work that code repeats: common subexpressions of a forward kernel
// in A-normal form (the one-pass version of a multi-pass kernel loads each
// row several times), and assignments of a loop body that do not change
// between iterations (the backward's loop over the forward's programs loads
// the weights once, not once per row).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/ad/Anf.h"
#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// Which assignments of a function compute a value and do nothing else.
class Purity {
 public:
  // `body`: the function's whole body; `pointer_params`: its pointer parameters.
  Purity(const ast::StmtList &body, std::set<std::string> pointer_params);
  // A body in several pieces, in order (code before a loop, then the loop's body).
  Purity(const std::vector<const ast::StmtList *> &blocks, std::set<std::string> pointer_params);

  // True if evaluating `value`, the right side of an assignment, has no
  // effect, and gives the same result anywhere in the function once its
  // operands are defined: no stores, atomics, barriers, prints or asserts,
  // no calls to other jit functions, and loads only from buffers that the
  // function never writes (traced through the pointer arithmetic to the
  // pointer parameters; a pointer that cannot be traced counts as written).
  bool pure(const ast::Expr &value) const;

 private:
  std::set<std::string> pointer_params_reached(const ast::Expr &e) const;
  void collect(const ast::StmtList &block);

  std::set<std::string> pointer_params_;
  std::map<std::string, std::vector<const ast::Expr *>> defs_;  // each name's defining expressions
  std::set<std::string> values_;                                // names that hold values: parameters and assigned names
  std::set<std::string> written_;                               // pointer parameters some store or atomic writes through
  bool writes_untraced_ = false;                                // a store through a pointer of unknown origin
};

// Common-subexpression elimination over the top-level statements of a
// function in A-normal form: an assignment whose value is pure and equal,
// after renaming, to an earlier one's is removed, and its name replaced by
// the earlier name everywhere (loop-carried initial values included). Only
// names assigned once take part. Where the earlier name is a temporary and
// the later one is in `user_names` (names the user's code assigns), the value
// keeps the user's name.
void eliminate_common_subexpressions(AnfFunction &anf, const std::set<std::string> &pointer_params,
                                     const std::set<std::string> &user_names);

// Moves the assignments of the body of a loop over `loop_variable` that are
// pure and read neither the loop variable nor a name the body assigns (moved
// assignments aside) to the end of `before`, the code before the loop, in
// their order. Only names assigned once, in the body, move. Returns how many.
size_t hoist_loop_invariants(ast::StmtList &body, ast::StmtList &before, const Purity &purity,
                             const std::string &loop_variable);

}  // namespace tgrad::ad
