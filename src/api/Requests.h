// The parts of requests that several stages read the same way: --wrt lists,
// and parameter types from -D values and --arg types. Internal to src/api/.
#pragma once

#include <string>
#include <vector>

#include "tgrad/api/Result.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::api_internal {

// The parameters of `fn` that `wrt` lists (names or indices; an entry may
// hold several, comma-separated), as names, in order. A Request error names
// the first that is not a parameter, a constexpr, or given twice.
Status resolve_wrt(const std::vector<std::string> &wrt, const ast::Function &fn, std::vector<std::string> &names);

// Adds to `types` the type of each NAME=VALUE in `defines` (a tl.constexpr's
// value), then of each NAME=TYPE in `signature` (Triton's signature
// notation). A Request error for the first that does not read.
Status add_param_types(const std::vector<std::string> &defines, const std::vector<std::string> &signature,
                       sema::ParamTypes &types);

}  // namespace tgrad::api_internal
