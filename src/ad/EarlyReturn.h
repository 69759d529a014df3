// Early returns in kernels, turned into ifs before differentiation.
//
// A program that stops early (`if row >= n_rows: return`, 10 % of real
// kernels) runs the rest of the kernel only where the condition is false:
//
//   if c:                         if c:
//       tl.store(...)       ==>       tl.store(...)
//       return                    else:
//   rest                              rest
//
// so the existing reversal of runtime ifs differentiates it. A bare
// `return` ending a branch of an if whose enclosing statements are ifs (at
// any depth) is handled; one inside a loop is left for A-normal form to
// refuse with a located error.
#pragma once

#include <memory>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// The kernel with its early returns turned into ifs, or null if it has none
// this rewrite handles.
std::unique_ptr<ast::Function> guard_early_returns(const ast::Function &fn);

// `x = a if c else b` (the whole value of an assignment to one name) as
// `if c: x = a` / `else: x = b`, so that a condition computed at run time is
// reversed like a runtime if (Triton evaluates only the branch taken, and so
// does the if). Null if the function has no such assignment.
std::unique_ptr<ast::Function> conditional_assignments_as_ifs(const ast::Function &fn);

}  // namespace tgrad::ad
