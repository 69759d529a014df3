// Block pointers lowered to pointer arithmetic, before typing.
//
// `tl.make_block_ptr(base, shape, strides, offsets, block_shape, order)`
// describes a tile of a strided tensor; `tl.advance` moves its offsets; a
// load or store through it checks the dimensions `boundary_check` names.
// Triton lowers them the same way (its RewriteTensorPointer pass): a block
// pointer is its base, shape, strides and offsets, and an access is a
// masked access of a tile of pointers:
//
//   p = tl.make_block_ptr(X, (M, N), (sm, sn), (r, 0), (BM, BN), (1, 0))
//   x = tl.load(p, boundary_check=(0, 1), padding_option="zero")
//     ==>
//   p_base = X; p_shape0 = M; p_shape1 = N; p_stride0 = sm; ...
//   p_offset0 = r; p_offset1 = 0
//   x = tl.load(p_base + (p_offset0 + tl.arange(0, BM))[:, None] * p_stride0
//               + (p_offset1 + tl.arange(0, BN))[None, :] * p_stride1,
//               mask=<0 <= row < p_shape0 and 0 <= col < p_shape1>, other=0.0)
//
// `tl.advance(p, (a, b))` adds to the offsets; `p.dtype` is the base's.
// A jit helper that takes a block pointer takes its parts instead (and the
// block shape as tl.constexpr parameters). The `order` argument is a layout
// hint with no effect on values. What the rewrite cannot express (a block
// pointer returned from a helper, stored in a tuple, compared, ...) is a
// located error.
//
// Every stage that computes (sema for differentiation, the reverse mode,
// the interpreter) sees the lowered module; `--emit source` and the
// forward kernel of `--emit torch` print the user's code as written.
#pragma once

#include <memory>
#include <string>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"

namespace tgrad::lower {

// Whether a jit function of the module calls tl.make_block_ptr.
bool uses_block_pointers(const ast::Module &module);

// A copy of the module with every block pointer lowered in `root` and the
// functions it calls (every function where `root` is empty); null, with
// located errors in `diags`, when one cannot be. Call only where
// uses_block_pointers.
std::unique_ptr<ast::Module> lower_block_pointers(const ast::Module &module, DiagEngine &diags,
                                                  const std::string &root = "");

// The module to run or differentiate `root` of: `module` itself where no
// function makes a block pointer, else its lowered copy, owned by `holder`;
// null (errors in `diags`) where lowering fails.
const ast::Module *with_block_pointers_lowered(const ast::Module &module, const std::string &root, DiagEngine &diags,
                                              std::unique_ptr<ast::Module> &holder);

}  // namespace tgrad::lower
