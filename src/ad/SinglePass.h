// The one-pass version of a multi-pass kernel.
//
// Row kernels written for rows of any length pass over each row several
// times in blocks (layer norm: `for start in range(0, N, BLOCK_SIZE)` once for
// the mean, once for the variance, once to normalise). When the row fits in
// one block every such loop runs exactly once, and the kernel is the same as
// its body run once, in order. Its backward then keeps the row in registers:
// each row is loaded once (the repeated loads are common subexpressions),
// its gradient is stored once, and the weights' gradients are summed in
// registers. differentiate() emits both backwards and a dispatching kernel
// that picks one at run time by `condition`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

struct SinglePassVersion {
  std::unique_ptr<ast::Function> forward;  // the kernel with those loops replaced by their bodies
  ast::ExprPtr condition;                  // true when each replaced loop runs exactly once
  std::string range;                       // the loops' range, as written: "range(0, N, BLOCK_SIZE)"
  size_t loops = 0;                        // how many loops were replaced
};

// The one-pass version of `kernel`, or nullopt if it has none: at least two
// of its top-level loops must run over the same `range(start, stop, step)`,
// whose operands are literals or parameters the kernel never reassigns. The
// loops over that range are replaced: `for v in range(a, b, c): body` by
// `v = a` and the body; `condition` is `(a < b) & (b <= a + c)`, which holds
// exactly when such a loop runs once, whatever the sign of c.
std::optional<SinglePassVersion> single_pass_version(const ast::Function &kernel);

}  // namespace tgrad::ad
