// `tgrad ... --wrt ... --emit json`: the backward's calling convention as
// JSON, for launchers and build rules: each parameter's role, the kernels to
// launch and their grids, scratch buffers, and the memory-adjoint decisions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tgrad/ad/Differentiate.h"

namespace tgrad::driver {

// The launch protocol as a JSON value (what --emit torch writes out as Python)...
nlohmann::json launch_protocol(const ast::Module &module, const ad::BackwardRequest &request, const ad::Backward &bwd);
// ...and as the text --emit json prints.
std::string backward_json(const ast::Module &module, const ad::BackwardRequest &request, const ad::Backward &bwd);

}  // namespace tgrad::driver
