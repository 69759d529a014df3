// Selections in rows a kernel computes and then throws away, dropped.
//
// An owner-computes kernel holds rows of its own (attention's dK/dV owner:
// the key block `offs_n`) and writes what it sums for them through the mask
// of their ragged bound: `tl.atomic_add(dk_ptrs, dK_tile, mask=offs_n[:, None]
// < N_CTX)`. Its loop still carries the forward's selections by that bound,
// `tl.where(offs_n[:, None] < N_CTX, qk * qk_scale, float("-inf"))`, over a
// [BLOCK_N, BLOCK_M] tile per iteration, though every value they choose in
// the rows outside the bound ends in a row the write discards. Measured on
// the H100 (attention 4x16x2048x64 fp16): the owner 0.360 -> 0.333 ms.
//
// A row predicate R is the mask of a store or atomic, a [n, 1] tile whose
// names are each assigned once, at the kernel's top level (or are
// parameters), so that R is the same value wherever it is written. A name's
// rows outside R are discarded when every read of it is
//   - the value written by a store or atomic whose mask is R, or R and more
//     (`R & c`);
//   - on a row-wise path of an assignment to a name whose rows outside R are
//     discarded: through operations whose lane (r, c) depends only on their
//     operands' lanes (r, ...): lane-wise arithmetic, comparisons and math,
//     tl.where, casts, tl.broadcast_to, and the first operand of tl.dot
//     (row r of a product is row r of its left operand times the right one),
//     each a [n, *] tile;
//   - a read of its .shape or .dtype.
// (A greatest fixed point: a loop's accumulator reads itself.) A
// `tl.where(R, a, b)` on a row-wise path of an assignment to such a name is
// then `a`, where `a` has the where's type: the two differ only in rows no
// one reads. Loads keep their masks (they guard memory, not values); a mask
// that is not R, such as a causal diagonal or the bound of the rows a loop
// sums over (their lanes meet in a dot's contraction), is kept.
#pragma once

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad::reverse {

// Drops the selections of `kernel` (typed by `types` in `context`) that choose
// only in discarded rows; returns how many it dropped.
int drop_discarded_row_selections(ast::Function &kernel, const ast::Module &context, const sema::ParamTypes &types,
                                  const SourceManager &sources);

}  // namespace tgrad::ad::reverse
