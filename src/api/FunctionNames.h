// The lists of function names that request errors quote. Internal to src/api/.
#pragma once

#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"

namespace tgrad::api_internal {

// "a, b, c": the module's jit functions, or "none".
std::string function_names(const ast::Module &m);
// The same for `only`, or for the whole module where `only` is empty.
std::string function_names(const ast::Module &m, const std::vector<const ast::Function *> &only);

}  // namespace tgrad::api_internal
