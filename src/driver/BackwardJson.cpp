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
    for (const auto &z : bwd.zero_gradients)
      if (z.first == p) e["zero_gradient"] = {{"why", z.second}};
    if (std::find(bwd.saved_outputs.begin(), bwd.saved_outputs.end(), p) != bwd.saved_outputs.end())
      e["contents"] = "what the forward stored: the backward reads it";
    params.push_back(e);
  }
  for (size_t k = 0; k < bwd.gradient_buffers.size(); ++k) {
    const bool input = k < bwd.input_gradients;
    params.push_back({{"name", bwd.gradient_buffers[k].second},
                      {"type", type_of(bwd.gradient_buffers[k].first)},
                      {"role", input ? "gradient of an input" : "gradient of an output"},
                      {"of", bwd.gradient_buffers[k].first},
                      {"pass_by_keyword", true},
                      // Atomics and in-place adds accumulate: those input gradients must start at zero.
                      {"initial_contents", !input ? "the upstream gradient"
                                           : std::find(bwd.zero_initialized.begin(), bwd.zero_initialized.end(),
                                                       bwd.gradient_buffers[k].first) != bwd.zero_initialized.end()
                                               ? "zeros"
                                               : "any (the backward writes every element the forward loads)"}});
  }
  for (const auto &p : bwd.partial_sums) {
    params.push_back({{"name", p.scratch}, {"type", "*fp32"}, {"role", "scratch"}, {"pass_by_keyword", true},
                      {"partial_sums_of", p.gradient}, {"shape", json::array({"G", "numel(" + p.input + ")"})},
                      {"initial_contents", "any (each program zeroes its row)"}});
  }
  for (const auto &p : bwd.partial_sums)
    params.push_back({{"name", p.numel}, {"type", "i32"}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", "numel(" + p.input + ")"}});
  if (!bwd.num_programs_param.empty())
    params.push_back({{"name", bwd.num_programs_param}, {"type", "i32"}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", "the forward's grid size along axis 0"}});
  // Tapes: [programs, trips, numel(value)] each; `trips` bounds every program's trip count of the loop.
  auto tape_shape = [](const ad::Backward::Tape &t) {
    json shape = json::array({"programs", t.trips_param});
    for (const std::string &d : t.tile_shape) shape.push_back(d);
    return shape;
  };
  auto loop_of = [](const ad::Backward::Tape &t) {
    return "for ... in " + t.loop_range + " (line " + std::to_string(t.loop_line) + ")";
  };
  std::vector<std::string> trips_done;
  for (const auto &t : bwd.tapes)
    params.push_back({{"name", t.scratch}, {"type", "*fp32"}, {"role", "scratch"}, {"pass_by_keyword", true},
                      {"tape_of", t.value}, {"shape", tape_shape(t)}, {"initial_contents", "any (written before it is read)"}});
  for (const auto &t : bwd.tapes) {
    if (std::find(trips_done.begin(), trips_done.end(), t.trips_param) != trips_done.end()) continue;
    trips_done.push_back(t.trips_param);
    params.push_back({{"name", t.trips_param}, {"type", "i32"}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", "at least the most iterations any program of the forward runs of the loop " + loop_of(t) +
                                    " (smaller: the gradients come out NaN)"}});
  }
  for (const std::string &b : bwd.output_adjoints) params.push_back({{"name", b}, {"role", "adjoint of an output"}});
  out["parameters"] = params;
  json scratch = json::array();
  if (kernel && bwd.partial_sums.empty()) {
    out["kernels"] = json::array({{{"name", bwd.backward_name}, {"grid", "the forward's grid"}}});
  } else if (kernel) {
    // Launched in this order: the backward over G programs, then one reduction per partial-sum buffer.
    json kernels = json::array();
    kernels.push_back({{"name", bwd.backward_name},
                       {"grid", "(G,) for any G from 1 to the forward's grid size along axis 0 (e.g. the number of SMs)"}});
    const std::string block = std::to_string(ad::Backward::kReduceBlock);
    for (const auto &p : bwd.partial_sums) {
      kernels.push_back({{"name", bwd.reduce_kernel},
                         {"grid", "(cdiv(numel(" + p.input + "), " + block + "),)"},
                         {"arguments", {{"partial", p.scratch}, {"gradient", p.gradient}, {"numel", "numel(" + p.input + ")"},
                                        {"rows", "G"}, {"BLOCK", ad::Backward::kReduceBlock},
                                        {"ROWS", ad::Backward::kReduceRows}}}});
      scratch.push_back({{"name", p.scratch}, {"dtype", "float32"}, {"shape", json::array({"G", "numel(" + p.input + ")"})},
                         {"initial_contents", "any (each program zeroes its row)"}, {"holds", "per-program partial sums of " + p.gradient}});
    }
    out["kernels"] = kernels;
  } else {
    json returns = json::array();
    for (const std::string &w : request.wrt) returns.push_back("adjoint of " + w);
    out["returns"] = returns;
  }
  for (const auto &t : bwd.tapes)
    scratch.push_back({{"name", t.scratch}, {"dtype", "float32"}, {"shape", tape_shape(t)},
                       {"programs", "the forward's grid size, all axes multiplied"},
                       {"initial_contents", "any (written before it is read)"},
                       {"holds", "the value of '" + t.value + "' entering each iteration of the loop " + loop_of(t) +
                                     ", per program: the backward runs that loop in reverse"}});
  out["scratch_buffers"] = scratch;
  out["memory_adjoints"] = bwd.explanations;
  return out.dump(2) + "\n";
}

}  // namespace tgrad::driver
