// Loops whose masks are all true in most iterations, split so that those
// iterations run without them.
//
// A backward loop over blocks masks every load and score with the bounds of
// a ragged size (`offs_n < N_CTX`) or a causal diagonal (`offs_m >= offs_n`),
// though only the last block, or the diagonal ones, need it: a hand-written
// FA2 backward assumes divisible sizes and masks only its diagonal blocks.
// Measured on the H100, the masks cost attention's dK/dV owner 13 % and its
// dQ kernel 10 %.
//
// A mask qualifies where it compares the loop's lanes with a loop-invariant
// bound or lanes:
//   lanes  v + tl.arange(0, W)      in `for v in range(lo, hi, W)`, or
//          v * W + tl.arange(0, W)  in `for v in range(lo, hi)`,
//          possibly broadcast (`[:, None]`, `[None, :]`);
//   bound  a scalar the loop does not change (N_CTX), or invariant lanes
//          c + tl.arange(0, W2) (the other side of a causal diagonal);
//   compared by <, <=, >, >=.
// The lanes of iteration v span [b, b + W - 1] (b = v or v * W), so each
// comparison is true in every lane exactly when b lies on one side of a
// bound computed before the loop (`X < Y` when b + W - 1 < min Y). The
// iterations with b inside all such bounds form one run; the loop becomes
// three with the same iterations in the same order: before the run, the
// run with those comparisons replaced by True (a load's mask and `other`
// dropped), and after it. Nothing else changes, so the result is the same
// value for value. The two masked loops run a few iterations each (a ragged
// tail, a causal diagonal's blocks) and are written `tl.range(..., num_stages=1)`:
// pipelined, each copy of a loop with several dots took shared-memory buffers
// of its own, and attention's dK/dV owner ran 16 % slower split than masked
// (H100: 0.367 -> 0.427 ms); unpipelined, 7 % faster (0.340 ms).
//
// Applied only to loops that compute a tl.dot (compute-bound, where the
// masks cost; a memory-bound loop's predicated loads cost next to nothing)
// at the top level of a kernel.
#pragma once

#include <set>
#include <string>

#include "tgrad/ast/Ast.h"
#include "src/ad/Anf.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad::reverse {

// Splits the qualifying top-level loops of `kernel` (typed by `types` in
// `context`); new names from `names`. Returns how many loops it split: none
// where the split kernel would not type as the written one does. A bound
// must be an integer for every representative type of the `generic`
// parameters (a tl.constexpr, or a parameter the kernel adds to a pointer or
// bounds a range() with), so that the split, and the backward, is the same
// for all of them.
int peel_masked_iterations(ast::Function &kernel, NameAllocator &names, const ast::Module &context,
                           const sema::ParamTypes &types, const std::set<std::string> &generic,
                           const SourceManager &sources);

}  // namespace tgrad::ad::reverse
