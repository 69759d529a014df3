// While loops that step one variable, turned into counted for loops before
// differentiation.
//
// Persistent kernels walk their tiles with a while loop (unsloth's grouped
// GEMM: `while tidx >= done and tidx < done + tiles: ...; tidx += NUM_SMS`).
// Reverse mode needs a trip count to replay a loop; such a loop has one,
// computed from its bounds before it starts:
//
//   while lo <= v and v < hi:        v_start = v
//       body                         v_trips = <the number of steps from v_start that keep the condition>
//       v += step               ==>  for v_k in range(0, v_trips):
//                                        v = v_start + v_k * step
//                                        body
//                                    v = v_start + v_trips * step
//
// which runs the body with the same values of v, in the same order, and
// leaves v as the while loop does. The rewrite applies where:
// - the condition is a conjunction (`and`, or a chained comparison) of
//   comparisons of v with expressions the body does not change, and of
//   conditions that do not read v and that the body does not change;
// - the body's last statement is `v += step` (or `v -= step`, `v = v + step`),
//   step an integer expression the body does not change (no float literal in
//   it), and v is assigned nowhere else in the body;
// - the direction the step takes has a bound: an upper bound of v for a
//   positive step, a lower one for a negative step. Where the step's sign is
//   known only at run time, the count follows it; a step of zero, or one
//   away from the only bound there is, runs the forward forever once entered
//   (or until v overflows, its addresses far outside any tensor): the count
//   is zero for it.
// The bounds are read once, before the loop, as the body does not change
// them; they may not load from memory (the body may store to it). Other while
// loops are left for A-normal form, which refuses them with a located error.
#pragma once

#include <memory>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// The function with each while loop of the form above a counted for loop, or
// null if it has none.
std::unique_ptr<ast::Function> while_loops_as_counted_fors(const ast::Function &fn);

}  // namespace tgrad::ad
