#include "src/ad/ScanCombine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "tgrad/diag/Diagnostics.h"
#include "tgrad/interp/Interpreter.h"

namespace tgrad::ad {

namespace {

// combine(args...) in float64, or nullopt where it does not run (a branch on
// the values, an operation the interpreter refuses): then it is "Other".
std::optional<std::vector<double>> run_combine(const ast::Module &module, const ast::Function &combine,
                                               const std::vector<double> &args) {
  std::map<std::string, interp::Value> bound;
  for (size_t k = 0; k < args.size(); ++k)
    bound[combine.params[k].name] = interp::make_tensor(sema::DType::FP32, {}, {args[k]}, /*float64=*/true);
  interp::Memory memory;
  interp::RunOptions options;
  options.float64 = true;
  options.max_loop_iterations = 10'000;
  SourceManager sources;
  DiagEngine quiet(sources);
  std::optional<std::vector<interp::Value>> results =
      interp::run_function(module, combine.name, bound, memory, options, quiet);
  if (!results) return std::nullopt;
  std::vector<double> out;
  for (const interp::Value &v : *results) {
    if (v.kind == interp::Value::Kind::Tensor && v.t->is_float() && v.t->f.size() == 1) out.push_back(v.t->f[0]);
    else if (v.kind == interp::Value::Kind::Float) out.push_back(v.x);
    else return std::nullopt;
  }
  return out;
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-12 * (1.0 + std::fabs(a) + std::fabs(b)); }

}  // namespace

ScanCombine classify_scan_combine(const ast::Module &module, const ast::Function &combine, size_t inputs) {
  ScanCombine result;
  if (combine.params.size() != 2 * inputs || (inputs != 1 && inputs != 2)) return result;
  std::mt19937_64 rng(0x5ca9);
  std::uniform_real_distribution<double> operand(0.5, 2.0);
  bool sum = inputs == 1, coefficient_first = inputs == 2, coefficient_second = inputs == 2;
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<double> x(2 * inputs);
    for (double &v : x) v = operand(rng);
    std::optional<std::vector<double>> y = run_combine(module, combine, x);
    if (!y || y->size() != inputs) return result;
    if (inputs == 1) {
      sum &= close((*y)[0], x[0] + x[1]);
      continue;
    }
    // Elements (p1, q1) and (p2, q2).
    const double p1 = x[0], q1 = x[1], p2 = x[2], q2 = x[3];
    coefficient_first &= close((*y)[0], p1 * p2) && close((*y)[1], q1 * p2 + q2);
    coefficient_second &= close((*y)[1], q1 * q2) && close((*y)[0], p1 * q2 + p2);
  }
  if (sum) {
    result.kind = ScanCombine::Kind::Sum;
  } else if (coefficient_first || coefficient_second) {
    result.kind = ScanCombine::Kind::FirstOrderRecurrence;
    result.coefficient = coefficient_first ? 0 : 1;
    result.state = coefficient_first ? 1 : 0;
  }
  return result;
}

ReduceCombine classify_reduce_combine(const ast::Module &module, const ast::Function &combine) {
  if (combine.params.size() != 2) return ReduceCombine::Other;
  std::mt19937_64 rng(0x7ed0);
  std::uniform_real_distribution<double> operand(-2.0, 2.0);
  bool sum = true, product = true, max = true, min = true;
  for (int trial = 0; trial < 8; ++trial) {
    const double a = operand(rng), b = operand(rng);
    std::optional<std::vector<double>> y = run_combine(module, combine, {a, b});
    if (!y || y->size() != 1) return ReduceCombine::Other;
    const double r = (*y)[0];
    sum &= close(r, a + b);
    product &= close(r, a * b);
    max &= close(r, std::max(a, b));
    min &= close(r, std::min(a, b));
  }
  if (sum) return ReduceCombine::Sum;
  if (product) return ReduceCombine::Product;
  if (max) return ReduceCombine::Max;
  if (min) return ReduceCombine::Min;
  return ReduceCombine::Other;
}

}  // namespace tgrad::ad
