// The AST dumper behind `tgrad FILE --dump-ast`: one node per line, indented
// by depth, each with its location as @line:col (the file is named once at
// the top). Stable output, for golden tests and for reading.
#pragma once

#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::emit {

std::string dump_ast(const ast::Module &m, const SourceManager &sources);
std::string dump_ast(const ast::Function &f);

}  // namespace tgrad::emit
