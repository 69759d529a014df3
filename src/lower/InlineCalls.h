// Jit helpers that load or store memory, inlined into the kernel before
// differentiation (and those that read a program id, `tle.program_id(axis)`:
// the layout analysis needs to see the id their callers' addresses use).
//
// A helper that only computes on tiles is differentiated once per
// signature and called from the backward (readable, and what Tangent
// does). A helper that reads or writes memory (the tutorial attention's
// `_attn_fwd_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, ...)`, a
// library's `load_tile(ptr, ...)`) takes part in the kernel's memory
// adjoints: its loads' gradients are stores of the kernel's backward. Such
// a call is replaced by the helper's body, as Triton's compiler inlines it:
//
//   acc, l_i, m_i = _inner(acc, l_i, m_i, q, K_ptrs, ..., STAGE=4 - STAGE)
//     ==>
//   <the helper's body, its locals renamed where a kernel name would clash,
//    tl.constexpr parameters replaced by their arguments, other parameters
//    bound to theirs>
//   acc, l_i, m_i = <the returned values>
//
// A helper must return in tail position (its last statement, or the last
// of each branch of a final if: `if CONTIG: return tl.make_block_ptr(...)`),
// or not at all; a call of one inside a loop's range or a condition is a
// located error. Inlining comes before block pointers are lowered, so a
// helper may make and return one.
#pragma once

#include <memory>
#include <string>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::lower {

// A copy of the module whose function `kernel` has every call of a helper
// that accesses memory inlined (repeatedly: helpers of helpers). Null when
// the kernel calls none (use the module as it is), or, with located errors in
// `diags`, when a call cannot be inlined.
//
// In the inlined bodies, and in the kernel where it inlines anything, ifs and
// conditional expressions whose condition Triton decides when it compiles
// are reduced to the branch taken: conditions on literals (an inlined
// `if 2 == 2:`), on the tl.constexpr values in `known` (given with -D), on
// dtypes (`dtype == tl.float8e5`, with `dtype = tl.float16` assigned once),
// and `isinstance(x, tl.tensor_descriptor)` (false for a kernel parameter:
// tgrad differentiates the pointer path of such helpers). So one name is not
// given two block pointers of different block shapes by branches Triton
// never both compiles.
std::unique_ptr<ast::Module> inline_memory_helpers(const ast::Module &module, const std::string &kernel,
                                                   DiagEngine &diags, const sema::ParamTypes &known = {});

// A copy of the module whose function `kernel` has each conditional
// expression whose condition the tl.constexpr values in `known` decide
// replaced by the branch taken (a block pointer's shape chosen by a flag,
// `tl.arange(0, HEAD_DIM if FP8_OUTPUT else BLOCK_N)`: Triton needs the
// constexpr there, not a local the branch assigns); null when none is.
std::unique_ptr<ast::Module> fold_decided_conditionals(const ast::Module &module, const std::string &kernel,
                                                       const sema::ParamTypes &known);

}  // namespace tgrad::lower
