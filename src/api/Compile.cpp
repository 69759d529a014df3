// Compiling a kernel through the API: the request checked, then the backend
// (src/codegen/Codegen.h).
#include "tgrad/api/Compile.h"

#include "src/api/Requests.h"
#include "src/api/State.h"
#include "src/codegen/Codegen.h"

namespace tgrad {

using api_internal::Access;
using api_internal::FileState;

Result<CompiledKernel> compile(KernelFile &file, const CompileRequest &request) {
  FileState &state = Access::state(file);
  Result<const ast::Function *> fn = file.function(request.kernel);
  if (!fn) return fn.error();
  const int w = request.num_warps;
  if (w < 1 || w > 32 || (w & (w - 1)) != 0)
    return api_internal::request_error("--num-warps " + std::to_string(w) + ": a power of two from 1 to 32");
  if (request.emit != "ptx" && request.emit != "llvm")
    return api_internal::request_error("--emit " + request.emit + ": 'ptx' or 'llvm'");
  codegen::CompileOptions options;
  options.kernel = (*fn)->name;
  options.num_warps = w;
  options.arch = request.arch;
  options.emit_ptx = request.emit == "ptx";
  if (Status s = api_internal::add_param_types(request.defines, request.types, options.params); !s) return s.error();
  const size_t from = state.diags.diagnostics().size();
  std::optional<codegen::CompiledKernel> compiled = codegen::compile_kernel(*state.module, options, state.diags);
  if (!compiled) return api_internal::input_error(state, from);
  CompiledKernel out;
  out.name = compiled->name;
  out.text = std::move(compiled->text);
  out.shared_bytes = compiled->shared_bytes;
  out.metadata_json = compiled->metadata_json();
  return out;
}

}  // namespace tgrad
