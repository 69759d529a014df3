#include "src/api/Launch.h"

#include <set>

#include "src/api/FunctionNames.h"
#include "src/api/State.h"
#include "src/interp/TensorOps.h"

namespace tgrad::api_internal {

Result<PreparedLaunch> prepare_launch(const ast::Module &m, const LaunchRequest &o) {
  if (o.kernel.empty() == o.function.empty()) return request_error("give either --kernel NAME (with --grid) or --fn NAME");
  if (!o.kernel.empty() && o.grid.empty()) return request_error("--kernel " + o.kernel + " needs --grid X[,Y[,Z]]");
  if (!o.function.empty() && !o.grid.empty()) return request_error("--grid applies to --kernel, not to --fn");
  PreparedLaunch p;
  const std::string &name = o.kernel.empty() ? o.function : o.kernel;
  const ast::Function *fn = m.find_function(name);
  if (!fn)
    return request_error((o.kernel.empty() ? "--fn " : "--kernel ") + name +
                         ": no @triton.jit function of that name (the file has: " + function_names(m) + ")");
  p.fn = fn;
  std::string error;
  if (!o.grid.empty()) {
    auto g = driver::parse_grid(o.grid, error);
    if (!g) return request_error(error);
    p.grid = *g;
  }
  auto has_param = [&](const std::string &n) {
    for (const auto &param : fn->params)
      if (param.name == n) return true;
    return false;
  };
  std::set<std::string> seen;
  for (const std::string &d : o.defines) {
    auto parsed = driver::parse_define(d, error);
    if (!parsed) return request_error(error);
    if (!has_param(parsed->first)) return request_error("-D " + d + ": '" + fn->name + "' has no parameter '" + parsed->first + "'");
    if (!seen.insert(parsed->first).second) return request_error("'" + parsed->first + "' is given more than once");
    p.defines.push_back(*parsed);
  }
  for (const std::string &a : o.args) {
    auto parsed = driver::parse_arg(a, error);
    if (!parsed) return request_error(error);
    if (!has_param(parsed->first)) return request_error("--arg " + a + ": '" + fn->name + "' has no parameter '" + parsed->first + "'");
    if (!seen.insert(parsed->first).second) return request_error("'" + parsed->first + "' is given more than once");
    p.args.push_back(*parsed);
  }
  for (size_t k = 0; k < fn->params.size(); ++k) {
    const auto &param = fn->params[k];
    if (seen.count(param.name) || param.default_value) continue;
    return request_error(fn->is_constexpr_param(k) ? "tl.constexpr parameter '" + param.name + "' of '" + fn->name +
                                                         "' needs a value: -D " + param.name + "=..."
                                                   : "parameter '" + param.name + "' of '" + fn->name +
                                                         "' needs a value: --arg " + param.name + "=...");
  }
  return p;
}

void build_launch(const LaunchRequest &o, const PreparedLaunch &p, bool float64, interp::Launch &launch,
                  interp::Memory &memory) {
  launch.kernel = o.kernel;
  launch.grid = p.grid;
  uint64_t stream = 0;
  for (auto &[name, value] : p.defines) {
    interp::KernelArg a;
    a.kind = interp::KernelArg::Kind::Constexpr;
    a.constexpr_value = value;
    launch.args[name] = a;
  }
  for (auto &[name, spec] : p.args) {
    interp::KernelArg a;
    if (spec.kind == driver::ArgSpec::Kind::Buffer) {
      interp::Buffer b;
      b.name = name;
      b.dtype = spec.buffer.dtype;
      b.shape = spec.buffer.shape;
      std::vector<double> values = driver::fill_values(spec.buffer, o.seed, stream++);
      for (double v : values) {
        if (sema::is_float(b.dtype)) b.f.push_back(interp::round_float(b.dtype, v, float64));
        else b.i.push_back(static_cast<int64_t>(v));
      }
      a.kind = interp::KernelArg::Kind::Buffer;
      a.buffer = memory.buffers().size();
      memory.add(std::move(b));
    } else if (spec.kind == driver::ArgSpec::Kind::None) {
      a.kind = interp::KernelArg::Kind::None;
    } else if (spec.kind == driver::ArgSpec::Kind::Int) {
      a.kind = interp::KernelArg::Kind::Int;
      a.n = spec.n;
    } else {
      a.kind = interp::KernelArg::Kind::Float;
      a.x = spec.x;
    }
    launch.args[name] = a;
  }
}

}  // namespace tgrad::api_internal
