// tgrad's public C++ API: parse a kernel file, inspect and print its AST.
// Later stages (sema, AD, codegen) add their entry points here. Errors are
// values: every call reports to a DiagEngine, nothing throws across the API.
#pragma once

#include "tgrad/ast/Ast.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/emit/AstDump.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/parse/Parser.h"

namespace tgrad {

inline constexpr const char *kVersion = "0.1.0";

}  // namespace tgrad
