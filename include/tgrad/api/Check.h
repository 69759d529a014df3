// The gradient check (`tgrad check`): differentiate, run the forward and the
// backward in the interpreter in float64, and compare each requested adjoint
// with central finite differences of
//   L = sum over outputs o of sum(o * w_o), the w_o seeded random weights.
// For a kernel, L sums every float buffer the kernel writes, so a backward
// that leaves an output out fails; at most 256 elements of each --wrt buffer
// are perturbed (each costs two runs of the grid).
#pragma once

#include <string>
#include <vector>

#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"
#include "tgrad/api/Run.h"

namespace tgrad {

struct CheckRequest {
  // The function or kernel and every argument: the --wrt parameters need
  // floating-point buffers (tiles for a function). Always run in float64:
  // `launch.float64` and `launch.max_iterations` do not apply.
  LaunchRequest launch = {};
  std::vector<std::string> wrt = {};      // as GradientRequest::wrt
  std::vector<std::string> no_grad = {};  // as GradientRequest::no_grad
  double rtol = 1e-6;                // the largest relative error that passes
  // Check the generic backward (differentiated with the defines only, as
  // without types), run with the launch's buffers.
  bool generic = false;
  bool deterministic = false;        // as GradientRequest::deterministic
};

struct GradientCheck {
  struct Argument {
    std::string name;
    std::string type;             // "fp32[16]"
    double relative_error = 0;    // ||ad - fd|| / max(||fd||, tiny)
    double max_abs_error = 0;
    bool pass = false;
  };
  std::vector<Argument> arguments;  // in --wrt order
  bool pass = false;
  std::string backward_source;      // the backward checked
};

// A request that does not fit (kind Request, as validate_launch and
// differentiate), errors in the kernel or its backward (kind Input, in the
// file's log); otherwise the comparison, passed or not.
Result<GradientCheck> check_gradient(KernelFile &file, const CheckRequest &request);

}  // namespace tgrad
