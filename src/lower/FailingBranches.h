// Branches that cannot compile, turned into assertions of the condition that avoids them.
//
// `raise ValueError(...)` (read as `tl.static_assert(False, "raise ...")`, src/parse/AstBuilder.cpp) and a user's
// `tl.static_assert(False, ...)` fail Triton's compilation where its code generator visits them, which under a
// tl.constexpr condition is only the branch the condition takes:
//
//   if ACT == "relu": y = tl.maximum(x, 0.0)
//   elif ACT == "gelu": y = gelu(x)
//   else: raise ValueError(f"unsupported {ACT}")
//
// compiles for ACT "relu" and "gelu", and for no other value. tgrad types a constexpr without a value by both of
// an if's branches, and the failing one would fail it (and leave `y` unassigned). So, for every specialization
// that compiles, the if is its other branch after an assertion:
//
//   if ACT == "relu": y = tl.maximum(x, 0.0)
//   else:
//       tl.static_assert(ACT == "gelu", 'raise ValueError(f"unsupported {ACT}")')
//       y = gelu(x)
//
// (`if c: <fails>` without an else becomes `tl.static_assert(not c, ...)`.) A value given with -D that takes the
// failing branch fails the assertion, with the raise's text, as Triton fails. Under a condition known only when the
// kernel runs, Triton fails to compile either branch; so does the assertion (its condition is not constexpr).
// The stages that type and differentiate the kernel see the rewrite; `--emit source` prints the code as written.
#pragma once

#include <memory>

#include "tgrad/ast/Ast.h"

namespace tgrad::lower {

// The module with every if one of whose branches fails unconditionally rewritten as above, in every jit function;
// null where no function has one.
std::unique_ptr<ast::Module> with_failing_branches_asserted(const ast::Module &module);

}  // namespace tgrad::lower
