// Walks the source-level lowerings share.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::lower {

// Every name an expression / a block mentions (read or assigned), at any depth.
void collect_names(const ast::Expr &e, std::set<std::string> &out);
void collect_names(const ast::StmtList &block, std::set<std::string> &out);

}  // namespace tgrad::lower

namespace tgrad::lower {

// Calls `fn` on every expression node below `e` and on `e` itself, children
// first; `fn` may replace the node it is given. Assignment targets and loop
// variables are expressions too.
void rewrite_expr(ast::ExprPtr &e, const std::function<void(ast::ExprPtr &)> &fn);
// The same over every expression of a block, at any depth.
void rewrite_block(ast::StmtList &block, const std::function<void(ast::ExprPtr &)> &fn);

}  // namespace tgrad::lower
