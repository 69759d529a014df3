// No dependence is ever dropped silently (issue 13). Three kinds of test:
//  - every spelling of a libdevice / tl.math import differentiates and
//    passes the gradient check (tests/kernels/libdevice_imports.py);
//  - what tgrad cannot follow is a located error, never a warning and a
//    backward: calls into modules it does not read, functions it does not
//    know, bitcasts, inputs that reach a store only through operations
//    without a gradient; an input that reaches nothing is a warning and is
//    marked in the launch protocol;
//  - randomly generated kernels (loads, libdevice and tl.math calls in
//    every import spelling, reductions, shared weights, two stores) pass
//    the gradient check, whose loss is built from what the interpreter saw
//    the original kernel write, not from tgrad's reading of it; and the
//    same check fails once a rule is broken or drops its dependence.
#include <algorithm>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "src/ad/Rules.h"
#include "src/driver/BackwardJson.h"
#include "tests/ad/KernelSetup.h"

namespace tgrad::testing {
namespace {

// ------------------------------------------------------------- spellings

KernelCase import_case(const std::string &kernel) {
  return KernelCase{"libdevice_imports", kernel, {3, 1, 1},
                    {"X=fp32[300]", "G=fp32[300]", "Y=fp32[300]:zeros", "N=300"}, {"BLOCK=128"}, {"X", "G"}, {}, ""};
}

class ImportSpellings : public ::testing::TestWithParam<std::string> {};

TEST_P(ImportSpellings, DifferentiateAndPassTheGradientCheck) {
  KernelSetup s = setup(import_case(GetParam()));
  ASSERT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 64);
  ASSERT_TRUE(result) << s.parsed->all_messages();
  ASSERT_EQ(result->args.size(), 2u);
  for (const auto &arg : result->args) {
    EXPECT_TRUE(arg.pass) << "d/d" << arg.name << ": relative error " << arg.relative_error << "\n"
                          << result->backward_source;
    EXPECT_GT(arg.max_abs_error, 0.0) << "a gradient check that compares zeros proves nothing";
  }
  // No warning: every input reaches the store.
  EXPECT_TRUE(s.parsed->diags->diagnostics().empty()) << s.parsed->all_messages();
}

INSTANTIATE_TEST_SUITE_P(LibdeviceImports, ImportSpellings,
                         ::testing::Values("tanh_scale_kernel", "tanh_alias_kernel", "rsqrt_kernel", "rsqrt_alias_kernel",
                                           "erf_kernel", "erf_alias_kernel", "pow_kernel", "pow_alias_kernel",
                                           "exp2_kernel", "exp2_alias_kernel", "module_spellings_kernel",
                                           "tl_math_names_kernel"));

TEST(ImportSpellings, AnImportInsideAModuleLevelTryBlock) {
  KernelSetup s = setup(KernelCase{"gelu_conditional_import", "gelu_tanh_kernel", {3, 1, 1},
                                   {"X=fp32[300]", "Y=fp32[300]:zeros", "n_elements=300"}, {"BLOCK=128"}, {"X"}, {}, ""});
  ASSERT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  ASSERT_EQ(s.parsed->module->imports.size(), 4u);
  EXPECT_TRUE(s.parsed->module->imports[2].conditional);
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 64);
  ASSERT_TRUE(result) << s.parsed->all_messages();
  EXPECT_TRUE(result->pass) << result->backward_source;
  // The backward imports the alternative sema used (the try path), unconditionally, once.
  EXPECT_NE(result->backward_source.find("\nfrom triton.language.extra.libdevice import tanh\n"), std::string::npos)
      << result->backward_source;
  EXPECT_EQ(result->backward_source.find("cuda.libdevice"), std::string::npos) << result->backward_source;
}

// ---------------------------------------------------------------- errors

const char *kHeader = "import triton\nimport triton.language as tl\n";

// Differentiates `kernel` of `source` with X and G as --wrt; returns the
// diagnostics and whether a backward came out.
std::pair<bool, std::string> differentiate_source(const std::string &source, const std::vector<std::string> &wrt = {"X"},
                                                  const std::vector<std::string> &no_grad = {}) {
  KernelCase c{"", "k", {2, 1, 1}, {"X=fp32[16]", "G=fp32[16]", "Y=fp32[16]:zeros", "Z=fp32[16]:zeros"}, {"B=8"}, wrt, {},
               source};
  KernelSetup s = setup(c);
  s.request.no_grad = no_grad;
  EXPECT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  auto bwd = ad::differentiate(*s.parsed->module, s.parsed->sources, s.request, *s.parsed->diags);
  return {bwd.has_value(), s.parsed->all_messages()};
}

std::string kernel_with(const std::string &imports, const std::string &body) {
  return std::string(kHeader) + imports + "\n@triton.jit\ndef k(X, G, Y, Z, B: tl.constexpr):\n"
         "    o = tl.program_id(0) * B + tl.arange(0, B)\n    x = tl.load(X + o)\n    g = tl.load(G + o)\n" + body;
}

TEST(Dependence, ACallIntoAModuleTgradDoesNotReadIsALocatedError) {
  auto [ok, m] = differentiate_source(kernel_with("from mylib.activations import fancy\n",
                                                  "    tl.store(Y + o, fancy(x) * g)\n"));
  EXPECT_FALSE(ok);
  EXPECT_NE(m.find("t.py:10:21: error: 'fancy' is imported from 'mylib.activations', which tgrad does not read, so it "
                   "cannot tell what 'fancy(...)' computes; the gradient of 'x' through it would be lost"),
            std::string::npos) << m;
}

TEST(Dependence, AMethodOfAnUnreadModuleIsALocatedError) {
  auto [ok, m] = differentiate_source(kernel_with("import mylib\n", "    tl.store(Y + o, mylib.ops.fancy(x) * g)\n"));
  EXPECT_FALSE(ok);
  EXPECT_NE(m.find("error: 'mylib' is imported from 'mylib', which tgrad does not read, so it cannot tell what "
                   "'mylib.ops.fancy(...)' computes"),
            std::string::npos) << m;
}

TEST(Dependence, AnUnknownFunctionOfAKnownModuleIsALocatedError) {
  auto [ok, m] = differentiate_source(kernel_with("from triton.language.extra.libdevice import frobnicate as fancy\n",
                                                  "    tl.store(Y + o, fancy(x) * g)\n"));
  EXPECT_FALSE(ok);
  EXPECT_NE(m.find("t.py:10:21: error: 'frobnicate' is imported from 'triton.language.extra.libdevice', but tgrad does "
                   "not know that function yet"),
            std::string::npos) << m;
}

TEST(Dependence, ABitcastToAnIntegerIsALocatedError) {
  auto [ok, m] = differentiate_source(kernel_with("", "    i = x.to(tl.int32, bitcast=True)\n"
                                                      "    tl.store(Y + o, (i >> 1).to(tl.float32, bitcast=True) * g)\n"));
  EXPECT_FALSE(ok);
  EXPECT_NE(m.find("t.py:9:9: error: this cast turns 'x', which carries a gradient, into int32[8]; tgrad cannot tell "
                   "that its gradient is zero"),
            std::string::npos) << m;
}

TEST(Dependence, AnInputReachingAStoreOnlyThroughAComparisonIsAnError) {
  auto [ok, m] = differentiate_source(kernel_with("", "    tl.store(Y + o, tl.where(x > 0, g, 2.0 * g))\n"));
  EXPECT_FALSE(ok);
  EXPECT_NE(m.find("error: what 'k' loads through 'X' reaches the stores to 'Y' only through operations without a "
                   "gradient"),
            std::string::npos) << m;
}

TEST(Dependence, ComparisonsAndIntegerConversionsBesideAGradientAreFine) {
  auto [ok, m] = differentiate_source(
      kernel_with("", "    n = x.to(tl.int32)\n    tl.store(Y + o, tl.where(x > 0, x, n.to(tl.float32)) * g)\n"));
  EXPECT_TRUE(ok) << m;
  EXPECT_EQ(m, "");
}

TEST(Dependence, AnInputReachingNothingIsAWarningMarkedInTheProtocol) {
  const std::string source = kernel_with("", "    tl.store(Y + o, g * 2.0)\n");
  KernelCase c{"", "k", {2, 1, 1}, {"X=fp32[16]", "G=fp32[16]", "Y=fp32[16]:zeros", "Z=fp32[16]:zeros"}, {"B=8"},
               {"X", "G"}, {}, source};
  KernelSetup s = setup(c);
  auto bwd = ad::differentiate(*s.parsed->module, s.parsed->sources, s.request, *s.parsed->diags);
  ASSERT_TRUE(bwd) << s.parsed->all_messages();
  EXPECT_NE(s.parsed->all_messages().find("warning: no store of 'k' depends on what it loads through 'X': its gradient "
                                          "is zero"),
            std::string::npos);
  ASSERT_EQ(bwd->zero_gradients.size(), 1u);
  EXPECT_EQ(bwd->zero_gradients[0].first, "X");
  // The backward never writes dX: the protocol asks for zeros.
  EXPECT_NE(std::find(bwd->zero_initialized.begin(), bwd->zero_initialized.end(), "X"), bwd->zero_initialized.end());
  const std::string json = driver::backward_json(*s.parsed->module, s.request, *bwd);
  EXPECT_NE(json.find("\"zero_gradient\": {\n        \"why\": \"no store of 'k' depends on what it loads through 'X'\""),
            std::string::npos) << json;
  // The audit of the other input: the stores its loads reach.
  std::string all;
  for (const std::string &e : bwd->explanations) all += e + "\n";
  EXPECT_NE(all.find("'G': what it loads reaches the stores to 'Y'"), std::string::npos) << all;
  // And the gradient check agrees: zeros for X, the right values for G.
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 16);
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->pass);
}

TEST(Dependence, AnInputReachingOnlyNoGradOutputsIsAWarning) {
  auto [ok, m] = differentiate_source(kernel_with("", "    tl.store(Y + o, g * 2.0)\n    tl.store(Z + o, x * 3.0)\n"),
                                      {"X", "G"}, {"Z"});
  EXPECT_TRUE(ok) << m;
  EXPECT_NE(m.find("warning: what it loads reaches only the outputs 'Z', which --no-grad says take no gradient: its "
                   "gradient is zero"),
            std::string::npos) << m;
}

TEST(ConstexprGuards, ADefinitionGuardedByAFlagWithoutAValueGetsOneBackwardPerValue) {
  KernelCase c{"merges", "bias_act_kernel", {3, 1, 1}, {"X=fp32[300]", "B=fp32[300]", "Y=fp32[300]:zeros", "N=300"},
               {"BLOCK=128"}, {"X", "B"}, {}, ""};
  KernelSetup s = setup(c);
  ASSERT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  // Reading it is fine (valid Triton) ...
  const ast::Function *fn = s.parsed->module->find_function("bias_act_kernel");
  ASSERT_TRUE(sema::analyze(*s.parsed->module, *fn, s.request.param_types, *s.parsed->diags)) << s.parsed->all_messages();
  // ... and its backward dispatches on the flag, as the forward does (src/ad/Specialize.h).
  auto bwd = ad::differentiate(*s.parsed->module, s.parsed->sources, s.request, *s.parsed->diags);
  ASSERT_TRUE(bwd) << s.parsed->all_messages();
  for (const char *want : {"# Specialized: one backward per value of HAS_BIAS = True, False.",
                           "def bias_act_kernel_bwd_HAS_BIAS_true(X, B, Y, N, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr, dX, dB, dY):",
                           "    if HAS_BIAS:\n        bias_act_kernel_bwd_HAS_BIAS_true(X, B, Y, N, HAS_BIAS, BLOCK, dX, dB, dY)\n"
                           "    else:\n        bias_act_kernel_bwd_HAS_BIAS_false(X, B, Y, N, HAS_BIAS, BLOCK, dX, dB, dY)\n"})
    EXPECT_NE(bwd->source.find(want), std::string::npos) << want << "\n" << bwd->source;
  // dB is not written when HAS_BIAS is false: it must start at zero.
  EXPECT_NE(std::find(bwd->zero_initialized.begin(), bwd->zero_initialized.end(), "B"), bwd->zero_initialized.end());
  // With the flag given, the one backward.
  s.request.param_types["HAS_BIAS"] = sema::SType::of_bool(true);
  auto one = ad::differentiate(*s.parsed->module, s.parsed->sources, s.request, *s.parsed->diags);
  ASSERT_TRUE(one) << s.parsed->all_messages();
  EXPECT_EQ(one->source.find("Specialized"), std::string::npos) << one->source;
}

// Builtins tgrad reads but does not type yet (tl.cat, tl.sort): the kernel
// reads, and differentiating it is a located error saying why. A load
// through pointers an untyped builtin made from X is invisible to the
// zero-gradient audit: a zero gradient there would be a guess (it once was
// a warning). Tensor descriptors, once in this list, are lowered now.
TEST(UntypedBuiltins, ReadButRefusedWithAReason) {
  const std::string source = std::string(kHeader) +
      "\n@triton.jit\ndef k(X, G, Y, Z, B: tl.constexpr):\n"
      "    p = tl.cat(X + tl.arange(0, B), X + B + tl.arange(0, B))\n"
      "    x = tl.load(p)\n    o = tl.arange(0, 2 * B)\n    tl.store(Y + o, x)\n";
  auto [ok, m] = differentiate_source(source);
  EXPECT_FALSE(ok);
  EXPECT_NE(m.find("t.py:7:9: error: tgrad cannot differentiate this tl.load: its pointer comes from an operation tgrad "
                   "does not type yet (a builtin such as tl.cat"),
            std::string::npos) << m;
  EXPECT_EQ(m.find("warning"), std::string::npos) << m;
  // X reaches only an untyped value: nothing tgrad sees is loaded through it.
  const std::string hidden = std::string(kHeader) +
      "\n@triton.jit\ndef k(X, G, Y, Z, B: tl.constexpr):\n"
      "    o = tl.arange(0, B)\n    p = tl.sort(X + o, 0)\n    tl.store(Y + o, tl.load(G + o))\n";
  auto [ok_hidden, m_hidden] = differentiate_source(hidden);
  EXPECT_FALSE(ok_hidden);
  EXPECT_NE(m_hidden.find("t.py:7:5: error: 'X' reaches this expression, which tgrad does not type, so it cannot see "
                          "what is loaded through it; its gradient would be lost"),
            std::string::npos) << m_hidden;
  const std::string descriptor = std::string(kHeader) +
      "\n@triton.jit\ndef k(X, G, Y, Z, B: tl.constexpr):\n"
      "    d = tl.make_tensor_descriptor(X, shape=[16], strides=[1], block_shape=[B])\n"
      "    x = d.load([0])\n    o = tl.arange(0, B)\n    tl.store(Y + o, x)\n";
  auto [ok_descriptor, m_descriptor] = differentiate_source(descriptor);
  EXPECT_TRUE(ok_descriptor) << m_descriptor;
  const std::string sort = kernel_with("", "    a = tl.sort(x, 0)\n"
                                           "    tl.store(Y + tl.arange(0, B), a * x)\n");
  auto [ok2, m2] = differentiate_source(sort);
  EXPECT_FALSE(ok2);
  EXPECT_NE(m2.find("t.py:9:9: error: tgrad does not differentiate tl.sort yet; the gradient of 'x' through it "
                    "would be lost. Write it with the operations tgrad differentiates"),
            std::string::npos) << m2;
}

// A module that is not found stays unread: differentiating through its
// function names it (ACallIntoAModuleTgradDoesNotRead... above); one found
// through the search path is read.
TEST(FollowImports, AbsoluteImportsThroughTheSearchPath) {
  const std::string source = std::string(kHeader) + "from helper_module import softplus\n\n@triton.jit\n"
      "def k(X, G, Y, Z, B: tl.constexpr):\n    o = tl.arange(0, B)\n    tl.store(Y + o, softplus(tl.load(X + o)))\n";
  KernelCase c{"", "k", {1, 1, 1}, {"X=fp32[8]", "G=fp32[8]", "Y=fp32[8]:zeros", "Z=fp32[8]:zeros"}, {"B=8"}, {"X"}, {},
               source};
  KernelSetup s = setup(c);  // t.py in the working directory: helper_module is not found
  auto bwd = ad::differentiate(*s.parsed->module, s.parsed->sources, s.request, *s.parsed->diags);
  EXPECT_FALSE(bwd);
  EXPECT_NE(s.parsed->all_messages().find("'softplus' is imported from 'helper_module', which tgrad does not read"),
            std::string::npos) << s.parsed->all_messages();
  KernelSetup t = setup(c);
  parse::follow_imports(*t.parsed->module, "t.py", {"tests/kernels"}, t.parsed->sources, *t.parsed->diags);
  ASSERT_TRUE(t.parsed->ok()) << t.parsed->all_messages();
  auto result = driver::grad_check_kernel(*t.parsed->module, t.parsed->sources, t.request, t.launch, t.memory, {},
                                          *t.parsed->diags, 8);
  ASSERT_TRUE(result) << t.parsed->all_messages();
  EXPECT_TRUE(result->pass) << result->backward_source;
  // --emit source prints the user's file, not the helpers read for it.
  EXPECT_EQ(emit::print_module(*t.parsed->module).find("def softplus"), std::string::npos);
}

// Common-subexpression elimination removes `b = X + o` (equal to `a`) while
// its purity analysis still looks at b's definition: once a use after free
// (found by tools/corpus_check on a real kernel, a crash); the removed
// statements now live until the pass ends.
TEST(Redundancy, ARemovedDuplicateAddressStaysReadable) {
  auto [ok, m] = differentiate_source(kernel_with("", "    a = X + o\n    b = X + o\n    y = tl.load(b) * g\n"
                                                      "    tl.store(Y + o, y + tl.load(a))\n"),
                                      {"X", "G"});
  EXPECT_TRUE(ok) << m;
}

// ------------------------------------------------------- random kernels

// A random row kernel: each program loads a row of X and the weights W
// (loaded by every program: partial sums), combines them with random
// operations, and stores a tile to Y and a row reduction to Z. The calls
// use every spelling: names imported from libdevice (with and without
// aliases), from tl.math, through module imports and tl.extra.cuda.
// Values stay away from kinks and poles (as in random_programs_test).
std::string random_kernel(std::mt19937 &rng) {
  std::vector<std::string> names = {"x", "w"};
  std::ostringstream body;
  auto pick = [&]() { return names[std::uniform_int_distribution<size_t>(0, names.size() - 1)(rng)]; };
  const int steps = std::uniform_int_distribution<int>(3, 7)(rng);
  for (int k = 0; k < steps; ++k) {
    const std::string a = pick(), b = pick(), t = "t" + std::to_string(k);
    std::string e;
    switch (std::uniform_int_distribution<int>(0, 17)(rng)) {
      case 0: e = a + " + " + b; break;
      case 1: e = a + " * " + b; break;
      case 2: e = a + " / (1.5 + tl.sigmoid(" + b + "))"; break;
      case 3: e = "tanh(" + a + ") * " + b; break;                          // by name
      case 4: e = "ld_erf(" + a + ") + " + b; break;                        // by name, aliased
      case 5: e = "libdevice.atan(" + a + ") * 2.0"; break;                 // module import
      case 6: e = "cuda_ld.log1p(" + a + " * " + a + ")"; break;            // tl.extra.cuda module, aliased
      case 7: e = "rsqrt(1.0 + " + a + " * " + a + ")"; break;              // tl.math, by name
      case 8: e = "m_exp2(" + a + " * 0.5) - " + b; break;                  // tl.math, aliased
      case 9: e = "ld_pow(1.0 + " + a + " * " + a + ", 1.5)"; break;        // two arguments
      case 10: e = "tl.extra.cuda.libdevice.sinh(" + a + " * 0.5)"; break;  // attribute chain
      case 11: e = "tl.math.exp(" + a + " * 0.3) * " + b; break;
      case 12: e = "tl.where(" + a + " > 0.1, " + a + " * 2.0, " + b + ")"; break;
      case 13: e = "tl.sum(tl.where(mask, " + a + " * " + b + ", 0.0), axis=0) + " + b; break;  // row reduction, broadcast back
      case 14: e = "tl.maximum(" + a + ", " + b + " * 0.5)"; break;
      case 15: e = "libdevice.cbrt(1.5 + " + a + " * " + a + ") * " + b; break;
      case 16: e = "tl.max(tl.where(mask, " + a + ", -1.0e30), axis=0) * 0.5 + " + b; break;
      default: e = "asinh(" + a + ") - " + b; break;
    }
    body << "    " << t << " = " << e << "\n";
    names.push_back(t);
  }
  const std::string last = names.back(), other = names[names.size() - 2];
  body << "    tl.store(Y + row * N + cols, " << last << ", mask=mask)\n";
  body << "    tl.store(Z + row, tl.sum(tl.where(mask, " << other << ", 0.0), axis=0))\n";
  return std::string(kHeader) +
         "from triton.language.extra.libdevice import tanh, erf as ld_erf, pow as ld_pow, asinh\n"
         "from triton.language.extra import libdevice\n"
         "import triton.language.extra.cuda.libdevice as cuda_ld\n"
         "from triton.language.math import rsqrt, exp2 as m_exp2\n\n"
         "@triton.jit\ndef k(X, W, Y, Z, N, BLOCK: tl.constexpr):\n"
         "    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    mask = cols < N\n"
         "    x = tl.load(X + row * N + cols, mask=mask, other=0.0)\n"
         "    w = tl.load(W + cols, mask=mask, other=0.0)\n" +
         body.str();
}

KernelCase random_case(const std::string &source) {
  return KernelCase{"", "k", {3, 1, 1}, {"X=fp32[3,13]", "W=fp32[13]", "Y=fp32[3,13]:zeros", "Z=fp32[3]:zeros", "N=13"},
                    {"BLOCK=16"}, {"X", "W"}, {}, source};
}

// Checks one random kernel: the number of --wrt inputs whose check failed,
// or -1 if tgrad refused the kernel.
int failures(const std::string &source, std::string &report) {
  KernelSetup s = setup(random_case(source));
  if (!s.parsed->ok()) {
    report = s.parsed->all_messages();
    return -1;
  }
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 48);
  if (!result) {
    report = s.parsed->all_messages();
    return -1;
  }
  int failed = 0;
  std::ostringstream r;
  for (const auto &arg : result->args) {
    failed += !arg.pass;
    r << "d/d" << arg.name << ": relative error " << arg.relative_error << (arg.pass ? "" : " FAIL") << "\n";
  }
  report = r.str() + result->backward_source;
  return failed;
}

constexpr int kRandomKernels = 40;

TEST(RandomKernels, GradientsMatchFiniteDifferencesOfTheOriginalKernel) {
  std::mt19937 rng(13);
  for (int p = 0; p < kRandomKernels; ++p) {
    const std::string source = random_kernel(rng);
    std::string report;
    EXPECT_EQ(failures(source, report), 0) << "kernel " << p << ":\n" << source << "\n" << report;
  }
}

// The checks above must be able to fail: with tanh's rule made wrong, or
// made to drop its dependence (a rule that assigns no adjoint), the kernels
// that call tanh fail.
int failures_with_rule(const std::string &rule) {
  ad::RuleOverride broken(rule);
  EXPECT_TRUE(broken.ok());
  std::mt19937 rng(13);
  int failed_kernels = 0, tanh_kernels = 0;
  for (int p = 0; p < kRandomKernels; ++p) {
    const std::string source = random_kernel(rng);
    if (source.find("tanh(") == std::string::npos) continue;
    ++tanh_kernels;
    std::string report;
    failed_kernels += failures(source, report) != 0;
  }
  EXPECT_GT(tanh_kernels, 3);
  return failed_kernels;
}

TEST(RandomKernels, AWrongRuleIsCaught) {
  EXPECT_GT(failures_with_rule("import triton\n@triton.jit\ndef tanh(y, x, by):\n    bx = by * (1.0 - y)\n"), 2);
}

TEST(RandomKernels, ARuleThatDropsItsDependenceIsCaught) {
  EXPECT_GT(failures_with_rule("import triton\n@triton.jit\ndef tanh(y, x, by):\n    pass\n"), 2);
}

}  // namespace
}  // namespace tgrad::testing

using tgrad::testing::differentiate_source;
using tgrad::testing::kernel_with;

// Atomic additions in a forward differentiate (each added value takes the
// upstream gradient at its addresses); what depends on the order of programs
// is a located error: the value an atomic returns, an atomic max of a value
// with a gradient, and a buffer both stored to and atomically updated.
TEST(Atomics, WhatDependsOnTheOrderOfProgramsIsRefused) {
  auto [ok, m] = differentiate_source(kernel_with("", "    tl.atomic_add(Y + o, x * g)\n    tl.atomic_add(Y + o, x)\n"));
  EXPECT_TRUE(ok) << m;
  auto [ok1, m1] = differentiate_source(kernel_with("", "    old = tl.atomic_add(Y + o, x)\n    tl.store(Z + o, old * g)\n"));
  EXPECT_FALSE(ok1);
  EXPECT_NE(m1.find("t.py:9:11: error: the value tl.atomic_add returns (the contents before this program's update) "
                    "depends on the order of programs"),
            std::string::npos) << m1;
  auto [ok2, m2] = differentiate_source(kernel_with("", "    tl.atomic_max(Y + o, x * g)\n"));
  EXPECT_FALSE(ok2);
  EXPECT_NE(m2.find("t.py:9:5: error: tl.atomic_max of a value that depends on --wrt inputs cannot be differentiated"),
            std::string::npos) << m2;
  // Compare-and-swap stores its third operand: that one's gradient counts too.
  auto [ok5, m5] = differentiate_source(kernel_with("", "    tl.atomic_cas(Y + o, g, x * g)\n"));
  EXPECT_FALSE(ok5);
  EXPECT_NE(m5.find("error: tl.atomic_cas of a value that depends on --wrt inputs"), std::string::npos) << m5;
  auto [ok3, m3] = differentiate_source(kernel_with("", "    tl.store(Y + o, x)\n    tl.atomic_add(Y + o, g * x)\n"));
  EXPECT_FALSE(ok3);
  EXPECT_NE(m3.find("t.py:10:5: error: 'Y' is both stored to and updated atomically in this kernel"), std::string::npos)
      << m3;
  // A counter without a gradient (an inactive atomic) is a side effect the backward does not replay.
  auto [ok4, m4] = differentiate_source(kernel_with("", "    tl.atomic_max(Z, 1)\n    tl.store(Y + o, x * g)\n"));
  EXPECT_TRUE(ok4) << m4;
  EXPECT_EQ(m4.find("atomic_max"), std::string::npos) << m4;
}

// Two stores through one pointer: a constant written first, outside loops,
// then the result, differentiates (the last writer takes the upstream
// gradient); the other order may overwrite the result, and is refused.
TEST(Stores, AConstantWrittenFirstThenTheResult) {
  auto [ok, m] = differentiate_source(kernel_with("", "    tl.store(Y + o, tl.zeros([B], dtype=tl.float32))\n"
                                                      "    tl.store(Y + o, x * g)\n"));
  EXPECT_TRUE(ok) << m;
  // The result overwritten by a constant: the backward consumes the upstream
  // gradient (the constant's store leaves zeros before the result's takes it).
  auto [ok2, m2] = differentiate_source(kernel_with("", "    tl.store(Y + o, x * g)\n"
                                                        "    tl.store(Y + o, tl.zeros([B], dtype=tl.float32))\n"));
  EXPECT_TRUE(ok2) << m2;
}
