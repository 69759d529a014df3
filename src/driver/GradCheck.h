// The gradient check behind `tgrad check`: differentiate a tile function,
// run forward and backward in the interpreter in float64, and compare each
// requested adjoint with central finite differences of
//   L(inputs) = sum over outputs o of sum(o * w_o)
// where the w_o are seeded random weights (the backward is given b<o> = w_o).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/ad/Differentiate.h"
#include "tgrad/interp/Interpreter.h"

namespace tgrad::driver {

struct GradCheckArg {
  std::string name;
  std::string type;        // "fp32[16]"
  double relative_error;   // ||ad - fd|| / max(||fd||, tiny)
  double max_abs_error;
  bool pass;
};

struct GradCheckResult {
  std::vector<GradCheckArg> args;
  bool pass = false;
  std::string backward_source;
};

struct GradCheckOptions {
  double rtol = 1e-6;
  double step = 1e-6;  // relative finite-difference step
  uint64_t seed = 0;
};

// `inputs` holds a value for every parameter of the function (tiles as
// float64 tensors, constexprs as Python values). Errors go to diags.
std::optional<GradCheckResult> grad_check(const ast::Module &module, const SourceManager &sources,
                                          const ad::BackwardRequest &request,
                                          const std::map<std::string, interp::Value> &inputs,
                                          const GradCheckOptions &options, DiagEngine &diags);

// The same for a kernel: `launch` and `memory` hold every argument (buffers
// for the pointers, the outputs' buffers included); L sums the weighted
// contents of every buffer the kernel stores a differentiated value to. The
// finite differences perturb at most `max_samples` elements of each --wrt
// buffer (chosen with the seed): each costs two runs of the whole grid.
std::optional<GradCheckResult> grad_check_kernel(const ast::Module &module, const SourceManager &sources,
                                                 const ad::BackwardRequest &request, const interp::Launch &launch,
                                                 const interp::Memory &memory, const GradCheckOptions &options,
                                                 DiagEngine &diags, int64_t max_samples = 256);

}  // namespace tgrad::driver
