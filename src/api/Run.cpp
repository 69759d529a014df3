// Running a kernel or a tile function in the interpreter through the API.
#include "tgrad/api/Run.h"

#include <map>

#include "src/api/Launch.h"
#include "src/api/State.h"
#include "src/driver/LaunchSpec.h"
#include "tgrad/interp/Interpreter.h"

namespace tgrad {

using api_internal::Access;
using api_internal::FileState;

std::string Tensor::type() const { return std::string(sema::short_name(dtype)) + interp::shape_str(shape); }

Status validate_launch(const KernelFile &file, const LaunchRequest &request) {
  Result<api_internal::PreparedLaunch> p = api_internal::prepare_launch(file.module(), request);
  if (!p) return p.error();
  return Status();
}

Result<RunResult> run(KernelFile &file, const LaunchRequest &request) {
  FileState &state = Access::state(file);
  Result<api_internal::PreparedLaunch> p = api_internal::prepare_launch(*state.module, request);
  if (!p) return p.error();
  interp::RunOptions options;
  options.float64 = request.float64;
  options.max_loop_iterations = request.max_iterations;
  interp::Memory memory;
  const size_t from = state.diags.diagnostics().size();
  RunResult result;
  if (!request.kernel.empty()) {
    interp::Launch launch;
    api_internal::build_launch(request, *p, request.float64, launch, memory);
    if (!interp::run_kernel(*state.module, launch, memory, options, state.diags))
      return api_internal::input_error(state, from);
    for (const interp::Buffer &b : memory.buffers()) {
      Tensor t{b.name, b.dtype, b.shape, {}};
      for (int64_t k = 0; k < b.size(); ++k) t.values.push_back(b.get(k));
      result.buffers.push_back(std::move(t));
    }
    return result;
  }
  std::map<std::string, interp::Value> args;
  uint64_t stream = 0;
  for (auto &[name, value] : p->defines) args[name] = value;
  for (auto &[name, spec] : p->args) {
    if (spec.kind == driver::ArgSpec::Kind::Buffer)
      args[name] = interp::make_tensor(spec.buffer.dtype, spec.buffer.shape,
                                       driver::fill_values(spec.buffer, request.seed, stream++), request.float64);
    else if (spec.kind == driver::ArgSpec::Kind::None)
      args[name] = interp::Value::none();
    else if (spec.kind == driver::ArgSpec::Kind::Int)
      args[name] = interp::Value::of_int(spec.n);
    else
      args[name] = interp::Value::of_float(spec.x);
  }
  auto values = interp::run_function(*state.module, request.function, args, memory, options, state.diags);
  if (!values) return api_internal::input_error(state, from);
  for (size_t k = 0; k < values->size(); ++k) {
    const interp::Value &v = (*values)[k];
    RunResult::Value r;
    r.name = values->size() == 1 ? "result" : "result" + std::to_string(k);
    if (v.kind != interp::Value::Kind::Tensor) {
      r.description = v.describe();
    } else {
      Tensor t{r.name, v.t->type.dtype, v.t->shape, {}};
      for (int64_t i = 0; i < v.t->size(); ++i) t.values.push_back(v.t->as_double(i));
      r.tensor = std::move(t);
    }
    result.results.push_back(std::move(r));
  }
  return result;
}

Status write_npy(const std::string &path, const Tensor &tensor) {
  std::string error;
  if (driver::write_npy(path, tensor.dtype, tensor.shape, tensor.values, error)) return Status();
  Error e;
  e.kind = Error::Kind::Output;
  e.message = error;
  return e;
}

}  // namespace tgrad
