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

// `x = a if c else b` as `if c: x = a` / `else: x = b`, so that a condition
// computed at run time is reversed like a runtime if, and one on a
// tl.constexpr without a value like a constexpr if (Triton evaluates only
// the branch taken, and so does the if; a tl.where would differentiate the
// branch not taken too, where 0 * inf is NaN). A conditional inside a larger
// expression (`x - (lse if not SPLIT else 0.0)`) is first assigned to a name
// of its own (`choice`) just before its statement. One in a while loop's
// condition is left as written. Null if the function has no conditional.
std::unique_ptr<ast::Function> conditional_assignments_as_ifs(const ast::Function &fn);

}  // namespace tgrad::ad
