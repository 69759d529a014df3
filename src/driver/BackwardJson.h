// `tgrad ... --wrt ... --emit json`: the backward's calling convention as
// JSON, for launchers and build rules: each parameter's role, the kernels to
// launch and their grids, scratch buffers, and the memory-adjoint decisions.
#pragma once

#include <string>

#include "tgrad/ad/Differentiate.h"

namespace tgrad::driver {

std::string backward_json(const ast::Module &module, const ad::BackwardRequest &request, const ad::Backward &bwd);

}  // namespace tgrad::driver
