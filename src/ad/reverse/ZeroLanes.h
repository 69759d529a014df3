// Rows (or columns) of a gradient tile that are zero for certain, so that its
// flush may leave them out.
//
// The tutorial matmul reads A's rows through `offs_am = offs_cm % M`: the
// last program's rows past M wrap around to the first rows, which program 0
// reads too. Its owner-computes dA kernel therefore adds its tile with an
// atomic, though the wrapped rows add nothing: their upstream gradient comes
// from `tl.load(dc_ptrs, mask=(offs_cm[:, None] < M) & ..., other=0.0)`, zero
// in those rows, and a row of a product is its left operand's row times the
// right one. Left out of the flush (its mask and'ed with `offs_cm[:, None] <
// M`), the rows it stores are `offs_cm % M = offs_cm`: one program's each.
//
// A bound predicate R is a name assigned once, at the function's top level,
// to `i[:, None] < B` (rows, axis 0) or `i[None, :] < B` (columns, axis 1),
// the broadcast written there or through a name assigned once at the top
// level, with i assigned once at the top level and B a parameter or a number. A
// value is zero outside R when, lane by lane, it is 0 wherever R is false:
//   - a literal 0, tl.zeros;
//   - tl.load(..., mask=M, other=0) with R one of M's conjuncts (through
//     names whose definitions are `a & b`), by name or by equal definition;
//   - -x, x.to(...), a + b and a - b of such values, a * b where either is;
//     tl.where(c, a, b) where both a and b are;
//   - tl.dot(a, b[, acc]): rows (axis 0) where a (and acc) is, columns
//     (axis 1) where b (and acc) is;
//   - a name every assignment of which is such a value (a greatest fixed
//     point: a loop's accumulator reads itself). A name assigned otherwise
//     (a loop variable, a tuple, an augmented assignment other than += and
//     -= of such a value) is not.
// Division is left out (0 / 0 is not 0). A product with an infinite or NaN
// factor is not 0 in IEEE arithmetic; the rows left out are ones the forward
// discards, whose product with such a factor is no gradient PyTorch computes.
#pragma once

#include <optional>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad::reverse {

struct ZeroBound {
  std::string predicate;  // R's name
  std::string index;      // i
  std::string bound;      // B, as written
  int axis = 0;           // 0: rows (i[:, None]), 1: columns (i[None, :])
};

// A bound predicate of `fn` outside which the value of the name `tile` is zero, or nullopt.
std::optional<ZeroBound> zero_outside_bound(const ast::Function &fn, const std::string &tile);

// Whether `name` is assigned once, at the top level, in both functions, to the same value: equal definitions
// whose names are each the same value again, or the same parameter of both (an owner kernel's index against the
// forward's, where the owner replays it).
bool same_top_level_value(const ast::Function &a, const ast::Function &b, const std::string &name);

}  // namespace tgrad::ad::reverse
