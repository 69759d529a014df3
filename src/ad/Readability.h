// The backward as a person would write it: A-normal form undone where it
// only adds names.
//
// Reverse mode works on A-normal form (one operation per statement), and its
// output keeps it: `row_times_stride = row * stride`, `X_plus_row = X +
// row_times_stride`, `t = tl.load(X_plus_row + cols, ...)`, `x = t.to(...)`,
// each a name used once. This pass folds such a temporary back into its one
// use (`x = tl.load(X + row * stride + cols, ...).to(...)`), keeping a name
// where the user had one (`keep`), where a value is used more than once, or
// where the line it would join would grow past kMaxLineColumns. A name
// assigned once per replayed loop, each assignment read once, folds too.
//
// What moves is pure: arithmetic, Triton's math and shape builtins, casts.
// Loads, stores, atomics and calls of other functions stay where they are,
// and a temporary moves only within its block, into the expressions of a
// later statement of that block, past no statement that assigns a name it
// reads (a load: past none that writes memory). Into a nested block (a loop,
// where it would be computed once per iteration) moves only cheap pointer or
// index arithmetic whose operands are assigned once.
//
// Then, each exact in floating point: `v = a` followed by `v op= c` is `v =
// a op c` (`a + a` written `a * 2`); short integer and boolean index
// arithmetic (`index_values`) read several times is written out at each
// read, as the user wrote it in the load and again in the gradient's store;
// a loop carrying a copy of a user's value (`acc_2 = acc`) carries the
// user's name. Examples: tests/golden/backward/*.py.
#pragma once

#include <set>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

inline constexpr size_t kMaxLineColumns = 100;

// Folds the single-use temporaries of `fn` into their uses. `keep`: names
// that stay (the user's names, their adjoints, names the launch protocol or
// the explanations refer to); parameters always stay.
// `index_values`: the names that hold integers or booleans (index
// arithmetic, masks), which may be written out again at each of their reads.
void fold_single_use_temporaries(ast::Function &fn, const std::set<std::string> &keep,
                                 const std::set<std::string> &index_values = {});

}  // namespace tgrad::ad
