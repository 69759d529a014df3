// The gradient check through the API: the launch read into parameter types
// for the differentiator and values for the interpreter.
#include "tgrad/api/Check.h"

#include <cstdint>
#include <map>

#include "src/api/Launch.h"
#include "src/api/Requests.h"
#include "src/api/State.h"
#include "src/driver/GradCheck.h"

namespace tgrad {
namespace {

using api_internal::Access;
using api_internal::FileState;
using api_internal::PreparedLaunch;

// `generic`: the backward is differentiated with the -D values only, as
// without types; the --arg specs still make the buffers it runs with.
void forget_argument_types(ad::BackwardRequest &request, const PreparedLaunch &p) {
  // (A pointer passed as None too: the generic backward dispatches on it, `if W is None:`.)
  for (const auto &arg : p.args) request.param_types.erase(arg.first);
}

GradientCheck to_api(const driver::GradCheckResult &r) {
  GradientCheck out;
  for (const driver::GradCheckArg &a : r.args)
    out.arguments.push_back({a.name, a.type, a.relative_error, a.max_abs_error, a.pass});
  out.pass = r.pass;
  out.backward_source = r.backward_source;
  return out;
}

}  // namespace

Result<GradientCheck> check_gradient(KernelFile &file, const CheckRequest &check) {
  FileState &state = Access::state(file);
  const LaunchRequest &o = check.launch;
  Result<PreparedLaunch> prepared = api_internal::prepare_launch(*state.module, o);
  if (!prepared) return prepared.error();
  const PreparedLaunch &p = *prepared;
  ad::BackwardRequest request;
  request.function = p.fn->name;
  request.no_grad = check.no_grad;
  request.deterministic = check.deterministic;
  if (Status s = api_internal::resolve_wrt(check.wrt, *p.fn, request.wrt); !s) return s.error();
  std::string wrt_text;
  for (size_t k = 0; k < check.wrt.size(); ++k) wrt_text += (k ? "," : "") + check.wrt[k];
  for (const std::string &w : request.wrt)
    for (const auto &a : p.args) {
      if (a.first == w && a.second.kind == driver::ArgSpec::Kind::None)
        return api_internal::request_error("--wrt " + wrt_text + ": '" + w +
                                           "' is passed as None (--arg " + w + "=None) and has no gradient; leave it "
                                           "out of --wrt");
      if (a.first == w && (a.second.kind != driver::ArgSpec::Kind::Buffer || !sema::is_float(a.second.buffer.dtype)))
        return api_internal::request_error("--wrt " + wrt_text + ": '" + w +
                                           "' is not a floating-point tile and carries no gradient");
    }
  driver::GradCheckOptions options;
  options.seed = o.seed;
  options.rtol = check.rtol;
  const size_t from = state.diags.diagnostics().size();
  if (!o.kernel.empty()) {
    for (const std::string &w : request.wrt) {
      bool buffer = false;
      for (const auto &a : p.args) buffer |= a.first == w && a.second.kind == driver::ArgSpec::Kind::Buffer;
      if (!buffer)
        return api_internal::request_error("--wrt " + wrt_text + ": '" + w + "' must be a pointer given a buffer (--arg " +
                                           w + "=fp32[...])");
    }
    for (auto &[name, value] : p.defines) request.param_types[name] = driver::stype_of(value);
    for (auto &[name, spec] : p.args) {
      if (spec.kind == driver::ArgSpec::Kind::Buffer)
        request.param_types[name] = sema::SType::tensor(sema::ElemType{spec.buffer.dtype, true}, {});
      else if (spec.kind == driver::ArgSpec::Kind::None)
        request.param_types[name] = sema::SType::none();
      else if (spec.kind == driver::ArgSpec::Kind::Int)
        request.param_types[name] = sema::SType::tensor(
            sema::ElemType{spec.n >= INT32_MIN && spec.n <= INT32_MAX ? sema::DType::Int32 : sema::DType::Int64, false},
            {});
      else
        request.param_types[name] = sema::SType::tensor(sema::ElemType{sema::DType::FP32, false}, {});
    }
    if (check.generic) forget_argument_types(request, p);
    interp::Launch launch;
    interp::Memory memory;
    api_internal::build_launch(o, p, /*float64=*/true, launch, memory);
    auto result = driver::grad_check_kernel(*state.module, state.sources, request, launch, memory, options, state.diags);
    if (!result) return api_internal::input_error(state, from);
    return to_api(*result);
  }
  // Parameter types and values: tiles from the --arg specs, constexprs from -D.
  std::map<std::string, interp::Value> inputs;
  uint64_t stream = 0;
  for (auto &[name, value] : p.defines) {
    request.param_types[name] = driver::stype_of(value);
    inputs[name] = value;
  }
  for (auto &[name, spec] : p.args) {
    if (spec.kind == driver::ArgSpec::Kind::Buffer) {
      sema::SymShape shape;
      for (int64_t d : spec.buffer.shape) shape.push_back(sema::Dim::known(d));
      request.param_types[name] = sema::SType::tensor(sema::ElemType{spec.buffer.dtype, false}, shape);
      inputs[name] = interp::make_tensor(spec.buffer.dtype, spec.buffer.shape,
                                         driver::fill_values(spec.buffer, o.seed, stream++), true);
    } else if (spec.kind == driver::ArgSpec::Kind::None) {
      request.param_types[name] = sema::SType::none();
      inputs[name] = interp::Value::none();
    } else if (spec.kind == driver::ArgSpec::Kind::Int) {
      request.param_types[name] = sema::SType::of_int(spec.n);
      inputs[name] = interp::Value::of_int(spec.n);
    } else {
      request.param_types[name] = sema::SType::of_float(spec.x);
      inputs[name] = interp::Value::of_float(spec.x);
    }
  }
  if (check.generic) forget_argument_types(request, p);
  auto result = driver::grad_check(*state.module, state.sources, request, inputs, options, state.diags);
  if (!result) return api_internal::input_error(state, from);
  return to_api(*result);
}

}  // namespace tgrad
