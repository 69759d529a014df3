// Running a kernel over a grid, or a tile function once, in tgrad's reference
// interpreter on the CPU, with Triton 3.6's semantics (README.md, "The
// reference interpreter").
//
//   tgrad::LaunchRequest launch;
//   launch.kernel = "add_kernel";
//   launch.grid = "4";
//   launch.defines = {"BLOCK_SIZE=256"};
//   launch.args = {"x_ptr=fp32[1000]", "y_ptr=fp32[1000]", "out_ptr=fp32[1000]:zeros", "n_elements=1000"};
//   tgrad::Result<tgrad::RunResult> ran = tgrad::run(*file, launch);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"
#include "tgrad/sema/DType.h"

namespace tgrad {

// What to run: `tgrad run FILE ...` as a value. Exactly one of `kernel` and
// `function`; every parameter without a default needs a value in `defines`
// (tl.constexpr parameters) or `args` (the others).
struct LaunchRequest {
  std::string kernel = {};    // a kernel, launched over `grid`
  std::string function = {};  // or a tile function, called once
  std::string grid = {};      // kernels: "X[,Y[,Z]]"
  // tl.constexpr values, NAME=VALUE: 128, 0.5, True, None, tl.float16, 'relu'.
  std::vector<std::string> defines = {};
  // NAME=SPEC: a runtime scalar (1000 an int32, 0.5 an fp32) or a buffer (a
  // tile for a function) DTYPE[d0,d1,...], filled with seeded uniform values
  // in [-1, 1), or with a fill: `:uniform(A,B)`, `:zeros`, `:ones`, `:npy(PATH)`.
  std::vector<std::string> args = {};
  uint64_t seed = 0;      // each argument draws from its own stream of it
  bool float64 = false;   // compute every floating value in double (dtype rules still checked)
  int64_t max_iterations = 100'000'000;  // loop iterations one program may run
};

// A buffer or a tile result.
struct Tensor {
  std::string name;  // the buffer's parameter; for a function's results "result" (or "result0", "result1", ...)
  sema::DType dtype = sema::DType::FP32;
  std::vector<int64_t> shape;
  std::vector<double> values;  // row-major
  std::string type() const;    // "fp32[16, 4]"
};

struct RunResult {
  // Kernels: every buffer after the run, in the order of `args`.
  std::vector<Tensor> buffers;
  // Tile functions: each result, in order: a tensor, or another value
  // (a scalar, a Python value) described in words ("a Python int 3").
  struct Value {
    std::optional<Tensor> tensor;
    std::string name;         // as Tensor::name
    std::string description;  // where there is no tensor
  };
  std::vector<Value> results;
};

// The request's checks without running it (a caller may check it before it
// prepares where the results go): kind Request on the first problem.
Status validate_launch(const KernelFile &file, const LaunchRequest &request);

// Runs. An error the kernel hits (an access outside a buffer, a failed
// tl.device_assert, a loop past max_iterations): kind Input, located at the
// construct that failed, and in the file's log.
Result<RunResult> run(KernelFile &file, const LaunchRequest &request);

// Writes a tensor as a NumPy .npy file (bf16 as float32, which NumPy reads;
// int1 as bool). An Error of kind Output where the file cannot be written.
Status write_npy(const std::string &path, const Tensor &tensor);

}  // namespace tgrad
