// Randomised gradient checks: straight-line tile functions built from random
// operations (elementwise math, broadcasting between [N], [N,1] and [1,N]
// values, reductions with keep_dims, where, reuse of values, reassignment),
// each differentiated by tgrad and compared with finite differences in
// float64. A fixed seed keeps the programs the same on every run; the cases
// exist to find combinations the per-rule tests do not exercise (accumulation
// into aliased adjoints, unbroadcast after reassignment, ...).
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "src/driver/GradCheck.h"
#include "src/driver/LaunchSpec.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

struct Program {
  std::string source;
  int shapes[3];  // of x (N), y (N,1), z (1,N): fixed; N varies
};

// Values are kept away from the kinks and poles of the operations used:
// divisions divide by 1.5 + sigmoid(.), logs take 1 + v*v.
std::string random_program(std::mt19937 &rng) {
  std::vector<std::string> names = {"x", "y", "z"};
  std::ostringstream body;
  auto pick = [&]() { return names[std::uniform_int_distribution<size_t>(0, names.size() - 1)(rng)]; };
  int steps = std::uniform_int_distribution<int>(3, 7)(rng);
  for (int k = 0; k < steps; ++k) {
    std::string a = pick(), b = pick();
    std::string target = (k % 3 == 2 && k > 0) ? names[names.size() - 1] : "t" + std::to_string(k);  // reassign sometimes
    std::string e;
    switch (std::uniform_int_distribution<int>(0, 11)(rng)) {
      case 0: e = a + " + " + b; break;
      case 1: e = a + " - " + b; break;
      case 2: e = a + " * " + b; break;
      case 3: e = a + " / (1.5 + tl.sigmoid(" + b + "))"; break;
      case 4: e = "tl.exp(" + a + " * 0.3)"; break;
      case 5: e = "tl.log(1.0 + " + a + " * " + a + ")"; break;
      case 6: e = "tl.sigmoid(" + a + ") * " + b; break;
      case 7: e = "tl.where(" + a + " > 0.1, " + a + " * 2.0, " + b + ")"; break;
      case 8: e = "tl.sum(" + a + " * " + b + ", axis=1, keep_dims=True)"; break;
      case 9: e = "tl.sum(" + a + ", axis=0, keep_dims=True) + " + b; break;
      case 10: e = "libdevice.tanh(" + a + ") + " + a; break;
      default: e = "tl.maximum(" + a + ", " + b + " * 0.5)"; break;
    }
    body << "    " << target << " = " << e << "\n";
    if (target.rfind("t", 0) == 0) names.push_back(target);
  }
  std::string last = names.back();
  body << "    return " << last << " + x * 0.0\n";
  return "import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n"
         "@triton.jit\ndef f(x, y, z):\n" + body.str();
}

TEST(RandomPrograms, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(7);
  const int kPrograms = 60;
  int checked = 0;
  for (int p = 0; p < kPrograms; ++p) {
    std::string source = random_program(rng);
    const int64_t n = int64_t{1} << std::uniform_int_distribution<int>(1, 3)(rng);
    auto parsed = parse_text(source, "random" + std::to_string(p) + ".py");
    ASSERT_TRUE(parsed->ok()) << parsed->all_messages() << source;
    ad::BackwardRequest request;
    request.function = "f";
    request.wrt = {"x", "y", "z"};
    std::map<std::string, interp::Value> inputs;
    const std::vector<std::pair<std::string, interp::Shape>> shapes = {{"x", {n, n}}, {"y", {n, 1}}, {"z", {1, n}}};
    uint64_t stream = 0;
    for (const auto &[name, shape] : shapes) {
      sema::SymShape s;
      for (int64_t d : shape) s.push_back(sema::Dim::known(d));
      request.param_types[name] = sema::SType::tensor({sema::DType::FP32, false}, s);
      driver::BufferSpec spec{sema::DType::FP32, shape, driver::BufferSpec::Fill::Uniform, -1.0, 1.0};
      inputs[name] = interp::make_tensor(sema::DType::FP32, shape, driver::fill_values(spec, 3, stream++), true);
    }
    auto result = driver::grad_check(*parsed->module, parsed->sources, request, inputs, {}, *parsed->diags);
    ASSERT_TRUE(result) << parsed->all_messages() << source;
    for (const auto &arg : result->args)
      EXPECT_TRUE(arg.pass) << "program " << p << ", d/d" << arg.name << ": relative error " << arg.relative_error
                            << "\n" << source << "\n" << result->backward_source;
    ++checked;
  }
  EXPECT_EQ(checked, kPrograms);
}

}  // namespace
}  // namespace tgrad::testing
