#include "src/driver/BackwardJson.h"

#include <nlohmann/json.hpp>

#include "tgrad/tgrad.h"

namespace tgrad::driver {

std::string backward_json(const ast::Module &module, const ad::BackwardRequest &request, const ad::Backward &bwd) {
  using nlohmann::json;
  const ast::Function *fn = module.find_function(request.function);
  const bool kernel = !bwd.gradient_buffers.empty() || bwd.output_adjoints.empty();
  json out;
  out["tgrad_version"] = kVersion;
  out["forward"] = request.function;
  out["backward"] = bwd.backward_name;
  out["kind"] = kernel ? "kernel" : "tile function";
  json params = json::array();
  auto type_of = [&](const std::string &name) -> std::string {
    auto it = request.param_types.find(name);
    return it == request.param_types.end() ? "?" : it->second.str();
  };
  auto gradient_of = [&](const std::string &name) -> std::string {
    for (const auto &g : bwd.gradient_buffers)
      if (g.first == name) return g.second;
    return "";
  };
  for (size_t k = 0; fn && k < fn->params.size(); ++k) {
    const std::string &p = fn->params[k].name;
    json e = {{"name", p}, {"type", type_of(p)}};
    bool wrt = std::find(request.wrt.begin(), request.wrt.end(), p) != request.wrt.end();
    if (fn->is_constexpr_param(k)) e["role"] = "constexpr";
    else if (wrt) e["role"] = "differentiated input";
    else if (!gradient_of(p).empty()) e["role"] = "output";
    else e["role"] = "forward argument";
    if (!gradient_of(p).empty()) e["gradient"] = gradient_of(p);
    params.push_back(e);
  }
  for (size_t k = 0; k < bwd.gradient_buffers.size(); ++k) {
    const bool input = k < bwd.input_gradients;
    params.push_back({{"name", bwd.gradient_buffers[k].second},
                      {"type", type_of(bwd.gradient_buffers[k].first)},
                      {"role", input ? "gradient of an input" : "gradient of an output"},
                      {"of", bwd.gradient_buffers[k].first},
                      {"pass_by_keyword", true},
                      // Input gradients accumulate (atomics): they must start at zero.
                      {"initial_contents", input ? "zeros" : "the upstream gradient"}});
  }
  for (const std::string &b : bwd.output_adjoints) params.push_back({{"name", b}, {"role", "adjoint of an output"}});
  out["parameters"] = params;
  if (kernel) {
    out["kernels"] = json::array({{{"name", bwd.backward_name}, {"grid", "the forward's grid"}}});
  } else {
    json returns = json::array();
    for (const std::string &w : request.wrt) returns.push_back("adjoint of " + w);
    out["returns"] = returns;
  }
  out["scratch_buffers"] = json::array();
  out["memory_adjoints"] = bwd.explanations;
  return out.dump(2) + "\n";
}

}  // namespace tgrad::driver
