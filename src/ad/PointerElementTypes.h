// `E.dtype.element_ty` of pointer arithmetic E on a pointer parameter P (`X
// + row * stride + cols`, through the names that hold it, a pointer a loop
// advances too) reads `P.dtype.element_ty`: an offset keeps a pointer's
// element type. The cast of a load's gradient back to the load's dtype then
// no longer keeps the load's address named (`bx.to(X.dtype.element_ty)`),
// and the readability fold (src/ad/Readability.h) writes the address in the
// load. Runs before that fold. Examples: tests/golden/backward/rms_norm_kernel.py.
#pragma once

#include <set>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// `pointers`: the pointer parameters.
void read_element_types_from_parameters(ast::Function &fn, const std::set<std::string> &pointers);

}  // namespace tgrad::ad
