// The AST dumper behind `tgrad FILE --dump-ast`: one node per line, indented
// by depth, each with its location as @line:col (the file is named once at
// the top). Stable output, for golden tests and for reading.
#pragma once

#include <functional>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::emit {

// Text to show after an expression's line (its type), or "" for none.
using ExprAnnotator = std::function<std::string(const ast::Expr &)>;

std::string dump_ast(const ast::Module &m, const SourceManager &sources, const ExprAnnotator &annotate = nullptr);
std::string dump_ast(const ast::Function &f, const ExprAnnotator &annotate = nullptr);

}  // namespace tgrad::emit
