// Compiling a kernel to PTX (or LLVM IR) with tgrad's NVPTX backend
// (`tgrad compile`, DESIGN.md §4).
//
//   tgrad::CompileRequest request;
//   request.kernel = "add_kernel";
//   request.defines = {"BLOCK_SIZE=1024"};
//   request.types = {"x_ptr=*fp32", "y_ptr=*fp32", "out_ptr=*fp32", "n_elements=i32"};
//   tgrad::Result<tgrad::CompiledKernel> ptx = tgrad::compile(*file, request);
//   // ptx->text: the PTX; ptx->metadata_json: the sidecar a launcher reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tgrad/api/Gradient.h"
#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"

namespace tgrad {

struct CompileRequest {
  std::string kernel = {};
  // tl.constexpr values, NAME=VALUE (`-D`); every one without a default.
  std::vector<std::string> defines = {};
  // Every other parameter's type, NAME=TYPE in Triton's signature notation
  // (`--arg`): `*fp32` a pointer, `i32` / `i64` / `fp32` a scalar.
  std::vector<std::string> types = {};
  int num_warps = 4;         // a power of two, 1 to 32: the CTA has num_warps*32 threads
  std::string emit = "ptx";  // "ptx" or "llvm" (the optimized LLVM IR)
  std::string arch = "sm_90";
};

struct CompiledKernel {
  std::string name;
  std::string text;          // PTX or LLVM IR
  int64_t shared_bytes = 0;  // dynamic shared memory a launch gives
  // {"kernel", "params": [{"name", "type"}...] (the entry's parameters, in
  // order: tl.constexpr ones are compiled in), "num_warps",
  // "threads_per_cta", "shared_bytes", "arch"}.
  std::string metadata_json;
};

// Compiles. What the backend does not support yet, and parameters without
// a type or value: kind Input, located, in the file's log. A malformed
// request (num_warps, emit, a -D that does not read): kind Request.
Result<CompiledKernel> compile(KernelFile &file, const CompileRequest &request);

// Every kernel of a backward (`tgrad FILE --wrt ... --emit ptx`), in its
// launch protocol's order, specialized by the forward's request: `types` and
// `defines` are the forward's (request.kernel is not read). A gradient takes
// its parameter's type; scratch buffers and sizes take the protocol's; a
// reduction kernel's constexprs are the protocol's values. A parameter no
// type reaches: kind Request, naming it.
Result<std::vector<CompiledKernel>> compile_backward(const Gradient &gradient, const CompileRequest &request);

}  // namespace tgrad
