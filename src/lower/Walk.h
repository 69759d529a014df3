// Walks over whole blocks that the source-level lowerings share: unlike
// the A-normal-form walks (src/ad/AnfWalk.h), they reach assignment
// targets and loop variables too, since a lowering renames or rewrites
// names wherever they stand.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::lower {

// Calls `fn` on every expression node of a block's statements (targets,
// loop variables, conditions, values), at any depth, children first.
void visit_block(const ast::StmtList &block, const std::function<void(const ast::Expr &)> &fn);
// The same; `fn` may replace the node it is given.
void rewrite_block(ast::StmtList &block, const std::function<void(ast::ExprPtr &)> &fn);

// `tl.NAME(...)` (or triton.language.NAME, or a name the module's imports bind
// to it: `from triton.language import make_tensor_descriptor`, or fla's
// `make_tensor_descriptor = triton.language.make_tensor_descriptor`).
bool is_tl_call(const ast::Module &module, const ast::Expr *e, const char *name);

// Every name an expression / a block mentions (read or assigned), at any depth.
void collect_names(const ast::Expr &e, std::set<std::string> &out);
void collect_names(const ast::StmtList &block, std::set<std::string> &out);

}  // namespace tgrad::lower
