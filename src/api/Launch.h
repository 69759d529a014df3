// A LaunchRequest checked and read into the interpreter's launch: shared by
// running (src/api/Run.cpp) and the gradient check (src/api/Check.cpp).
// Internal to src/api/.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "src/driver/LaunchSpec.h"
#include "tgrad/api/Result.h"
#include "tgrad/api/Run.h"
#include "tgrad/interp/Interpreter.h"

namespace tgrad::api_internal {

struct PreparedLaunch {
  const ast::Function *fn = nullptr;
  std::vector<std::pair<std::string, interp::Value>> defines;
  std::vector<std::pair<std::string, driver::ArgSpec>> args;
  std::array<int64_t, 3> grid{1, 1, 1};
};

// Every value read and checked against the function's parameters; a
// Request error for the first problem.
Result<PreparedLaunch> prepare_launch(const ast::Module &m, const LaunchRequest &request);

// A kernel launch: buffers filled from the seed (rounded to their dtype
// unless float64), scalars, constexprs.
void build_launch(const LaunchRequest &request, const PreparedLaunch &p, bool float64, interp::Launch &launch,
                  interp::Memory &memory);

}  // namespace tgrad::api_internal
