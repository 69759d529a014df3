#include "src/driver/GradCheck.h"

#include <cmath>
#include <random>

#include "src/interp/TensorOps.h"

namespace tgrad::driver {

using interp::Tensor;
using interp::TensorRef;
using interp::Value;

namespace {

// L = sum_o sum(out_o * w_o), accumulated in double.
double loss(const std::vector<Value> &outputs, const std::vector<std::vector<double>> &weights) {
  double l = 0;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor &t = *outputs[o].t;
    for (int64_t k = 0; k < t.size(); ++k) l += t.as_double(k) * weights[o][k];
  }
  return l;
}

Value with_element(const Value &v, int64_t k, double x) {
  auto t = std::make_shared<Tensor>(*v.t);
  t->f[k] = x;
  return Value::of_tensor(t);
}

}  // namespace

std::optional<GradCheckResult> grad_check(const ast::Module &module, const SourceManager &sources,
                                          const ad::BackwardRequest &request, const std::map<std::string, Value> &inputs,
                                          const GradCheckOptions &options, DiagEngine &diags) {
  std::optional<ad::Backward> bwd = ad::differentiate(module, sources, request, diags);
  if (!bwd) return std::nullopt;
  interp::Memory memory;
  interp::RunOptions run;
  run.float64 = true;

  auto forward = [&](const std::map<std::string, Value> &args) {
    return interp::run_function(module, request.function, args, memory, run, diags);
  };
  std::optional<std::vector<Value>> outputs = forward(inputs);
  if (!outputs) return std::nullopt;
  for (const Value &o : *outputs)
    if (o.kind != Value::Kind::Tensor || !o.t->is_float()) {
      diags.error({}, "'" + request.function + "' returns " + o.describe() + "; the gradient check needs floating-point tensors");
      return std::nullopt;
    }

  // Random output weights: the upstream adjoints.
  std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ull + 0xC0FFEE);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<std::vector<double>> weights;
  std::map<std::string, Value> bwd_args = inputs;
  for (size_t o = 0; o < outputs->size(); ++o) {
    const Tensor &t = *(*outputs)[o].t;
    std::vector<double> w(t.size());
    for (double &x : w) x = dist(rng);
    weights.push_back(w);
    bwd_args[bwd->output_adjoints[o]] = interp::make_tensor(t.type.dtype, t.shape, w, true);
  }
  std::optional<std::vector<Value>> adjoints =
      interp::run_function(*bwd->module, bwd->backward_name, bwd_args, memory, run, diags);
  if (!adjoints) return std::nullopt;
  if (adjoints->size() != request.wrt.size()) {
    diags.error({}, "internal error: the backward returned " + std::to_string(adjoints->size()) + " adjoints for " +
                        std::to_string(request.wrt.size()) + " inputs");
    return std::nullopt;
  }

  GradCheckResult result;
  result.backward_source = bwd->source;
  result.pass = true;
  for (size_t w = 0; w < request.wrt.size(); ++w) {
    const std::string &x = request.wrt[w];
    const Value &input = inputs.at(x);
    const Tensor &ad = *(*adjoints)[w].t;
    GradCheckArg arg{x, input.t->type_str(), 0, 0, false};
    double diff2 = 0, ref2 = 0;
    for (int64_t k = 0; k < input.t->size(); ++k) {
      double xk = input.t->f[k];
      double h = options.step * std::max(1.0, std::fabs(xk));
      std::map<std::string, Value> plus = inputs, minus = inputs;
      plus[x] = with_element(input, k, xk + h);
      minus[x] = with_element(input, k, xk - h);
      std::optional<std::vector<Value>> op = forward(plus), om = forward(minus);
      if (!op || !om) return std::nullopt;
      double fd = (loss(*op, weights) - loss(*om, weights)) / (2 * h);
      double a = ad.as_double(ad.size() == input.t->size() ? k : 0);
      diff2 += (a - fd) * (a - fd);
      ref2 += fd * fd;
      arg.max_abs_error = std::max(arg.max_abs_error, std::fabs(a - fd));
    }
    if (ad.size() != input.t->size()) {
      diags.error({}, "internal error: the adjoint of '" + x + "' has " + std::to_string(ad.size()) + " elements, '" + x +
                          "' has " + std::to_string(input.t->size()));
      return std::nullopt;
    }
    arg.relative_error = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-300);
    // An input the outputs do not depend on: its adjoint must be exactly zero.
    arg.pass = ref2 == 0 ? diff2 == 0 : arg.relative_error <= options.rtol;
    result.pass &= arg.pass;
    result.args.push_back(arg);
  }
  return result;
}

}  // namespace tgrad::driver
