// The NVPTX backend's entry point (DESIGN.md §4): one kernel, specialized by
// its tl.constexpr values and argument types, compiled to LLVM IR or PTX,
// with the metadata a launcher needs (the JSON sidecar).
//
// No LLVM type appears here: only src/codegen includes LLVM's headers, so
// the rest of tgrad builds without them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::codegen {

struct CompileOptions {
  std::string kernel;
  // Every parameter's type: tl.constexpr values (-D) and runtime types
  // (--arg X=*fp32, n=i32, eps=fp32).
  sema::ParamTypes params;
  int num_warps = 4;
  std::string arch = "sm_90";
  bool emit_ptx = true;  // else the optimized LLVM IR
};

// A parameter of the compiled kernel, in the order of the PTX entry's
// parameters (tl.constexpr parameters are compiled in, not passed).
struct KernelParam {
  std::string name;
  std::string type;  // Triton's signature notation: "*fp32", "i32", "fp32"
};

struct CompiledKernel {
  std::string name;
  std::vector<KernelParam> params;
  int num_warps = 4;
  int64_t shared_bytes = 0;  // dynamic shared memory the launch must give
  std::string arch;
  std::string text;  // PTX or LLVM IR
  // The sidecar: {"kernel", "params": [{"name", "type"}], "num_warps",
  // "threads_per_cta", "shared_bytes", "arch"}.
  std::string metadata_json() const;
};

// Compiles `options.kernel` of `module` (the module as read: helpers that
// access memory are inlined and block pointers lowered here, as for the
// interpreter). Nullopt with located errors in `diags` for what the backend
// does not support yet, or for parameters without a type.
std::optional<CompiledKernel> compile_kernel(const ast::Module &module, const CompileOptions &options,
                                             DiagEngine &diags);

}  // namespace tgrad::codegen
