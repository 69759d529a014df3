// Parsing a kernel file into a Module.
//
// The module scanner keeps the @triton.jit functions, the module-level
// tl.constexpr constants and the imports of an ordinary Python file; each is
// parsed with the TileLang grammar and built into the AST. Every problem is
// reported to `diags` with its location; several per run where the parser
// can recover (each function is parsed on its own, and unsupported constructs
// do not stop the build of the rest). The result is always a Module: when
// diags.has_errors(), it holds what could be built and must not be used
// further.
#pragma once

#include <memory>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"

namespace tgrad::parse {

std::unique_ptr<ast::Module> parse_module(const SourceManager &sources, int file_id, DiagEngine &diags);

}  // namespace tgrad::parse
