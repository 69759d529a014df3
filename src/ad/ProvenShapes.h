// Shape bookkeeping that semantic analysis proves unnecessary, removed from
// a backward before it is printed.
//
// Reverse mode writes `tl.static_assert(bx.shape == x.shape)` after every
// sum that undid a broadcast (DESIGN.md §3: an adjoint states the shapes it
// relies on), and the adjoint of a reduction to a scalar broadcasts it back
// to its operand's shape: `tl.broadcast_to(tl.expand_dims(s, 0), x.shape)`.
// Where sema, run on the backward, gives both sides of an assertion the same
// shape (the same constants and the same constexpr symbols, so Triton finds
// it true for every specialization), the assertion checks nothing and goes;
// where a shape is unknown or only equal for some values of its symbols it
// stays. A broadcast of a scalar that only feeds elementwise arithmetic
// with an operand of the broadcast's shape is the scalar itself: the
// arithmetic broadcasts it to the same lanes (`bnum += s` for `bnum +=
// tl.broadcast_to(tl.expand_dims(s, 0), num.shape)`), with the same dtype.
//
// Runs before the readability fold (src/ad/Readability.h), on the
// function sema typed: `types` holds the types of `fn`'s nodes.
// Examples: tests/golden/backward/softmax_kernel.py, rms_norm_kernel.py.
#pragma once

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

// Whether anything changed.
bool drop_proven_shape_checks(ast::Function &fn, const sema::TypeInfo &types);

}  // namespace tgrad::ad
