// The module as the stages that type, differentiate and compile a kernel read it: calls into user modules imported
// as namespaces call the copies tgrad read (src/lower/ModuleNamespaces.h), then branches that raise are asserted
// away (src/lower/FailingBranches.h). `--emit source` and the interpreter read the code as written (the interpreter
// resolves the namespaces itself: it runs a raise only where it is reached).
#pragma once

#include <memory>

#include "tgrad/ast/Ast.h"

namespace tgrad::lower {

// The rewritten module; null where neither rewrite changes anything (use the module as it is).
std::unique_ptr<ast::Module> with_source_rewrites(const ast::Module &module);

}  // namespace tgrad::lower
