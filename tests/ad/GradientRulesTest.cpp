// A gradient check for every adjoint rule: each case is a small tile
// function, differentiated by tgrad, run forward and backward in the
// interpreter in float64 and compared with central finite differences
// (relative error under 1e-6). Shapes are random per case (seeded), and the
// broadcasting cases cover [N,1] with [1,M], a scalar with a tile, [N] with
// [M,N], and reductions over ragged-looking (non-square) tiles.
#include <random>

#include <gtest/gtest.h>

#include "src/ad/Rules.h"
#include "src/driver/GradCheck.h"
#include "src/driver/LaunchSpec.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

struct Case {
  std::string name;
  std::string signature;            // "x, y"
  std::string body;                 // statements, 4-space indented inside f
  std::vector<std::string> args;    // --arg specs with concrete shapes, e.g. "x=fp32[4,8]:uniform(0.5,2)"
  std::vector<std::string> wrt;
  std::vector<std::string> defines = {};
};

std::ostream &operator<<(std::ostream &os, const Case &c) { return os << c.name; }

// Shapes drawn per test run from a fixed seed: powers of two from 1 to 16.
int64_t dim(std::mt19937 &rng) { return int64_t{1} << std::uniform_int_distribution<int>(1, 4)(rng); }

std::vector<Case> cases() {
  std::mt19937 rng(2026);
  const std::string N = std::to_string(dim(rng)), M = std::to_string(dim(rng));
  const std::string pos = ":uniform(0.5,2)";
  std::vector<Case> c = {
      {"add", "x, y", "return x + y", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"sub", "x, y", "return x - y", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"mul", "x, y", "return x * y", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"truediv", "x, y", "return x / y", {"x=fp32[" + N + "]", "y=fp32[" + N + "]" + pos}, {"x", "y"}},
      {"neg_pos", "x", "return -x + (+x) * 3.0", {"x=fp32[" + N + "]"}, {"x"}},
      {"exp", "x", "return tl.exp(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"exp2", "x", "return tl.exp2(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"math_exp2", "x", "return tl.math.exp2(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"log", "x", "return tl.log(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"log2", "x", "return tl.log2(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"sqrt", "x", "return tl.sqrt(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"rsqrt", "x", "return tl.math.rsqrt(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"sin", "x", "return tl.sin(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"cos", "x", "return tl.cos(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"tanh", "x", "return libdevice.tanh(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"sigmoid", "x", "return tl.sigmoid(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"sqrt_rn", "x", "return tl.math.sqrt_rn(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"div_rn", "x, y", "return tl.math.div_rn(x, y)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]" + pos}, {"x", "y"}},
      {"fdiv", "x, y", "return tl.math.fdiv(x, y)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]" + pos}, {"x", "y"}},
      {"exp10", "x", "return libdevice.exp10(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"log10", "x", "return libdevice.log10(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"log1p", "x", "return libdevice.log1p(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"expm1", "x", "return libdevice.expm1(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"cbrt", "x", "return libdevice.cbrt(x)", {"x=fp32[" + N + "]" + pos}, {"x"}},
      {"tan", "x", "return libdevice.tan(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"asin", "x", "return libdevice.asin(x)", {"x=fp32[" + N + "]:uniform(-0.9,0.9)"}, {"x"}},
      {"acos", "x", "return libdevice.acos(x)", {"x=fp32[" + N + "]:uniform(-0.9,0.9)"}, {"x"}},
      {"atan", "x", "return libdevice.atan(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"atan2", "x, y", "return libdevice.atan2(x, y)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]" + pos}, {"x", "y"}},
      {"sinh", "x", "return libdevice.sinh(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"cosh", "x", "return libdevice.cosh(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"asinh", "x", "return libdevice.asinh(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"acosh", "x", "return libdevice.acosh(x)", {"x=fp32[" + N + "]:uniform(1.5,3)"}, {"x"}},
      {"atanh", "x", "return libdevice.atanh(x)", {"x=fp32[" + N + "]:uniform(-0.9,0.9)"}, {"x"}},
      {"erfc", "x", "return libdevice.erfc(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"rounding_has_no_gradient", "x", "return libdevice.trunc(x * 3.0) * x + libdevice.rint(x) * 0.5", {"x=fp32[" + N + "]"}, {"x"}},
      {"erf", "x", "return tl.math.erf(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"abs", "x", "return tl.abs(x)", {"x=fp32[" + N + "]"}, {"x"}},
      {"maximum", "x, y", "return tl.maximum(x, y)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"minimum", "x, y", "return tl.minimum(x, y)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"fma", "x, y, z", "return tl.fma(x, y, z)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]", "z=fp32[" + N + "]"}, {"x", "y", "z"}},
      {"pow", "x, y", "return libdevice.pow(x, y)", {"x=fp32[" + N + "]" + pos, "y=fp32[" + N + "]"}, {"x", "y"}},
      {"where", "x, y", "return tl.where(x > 0, x * 2.0, y)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"where_nan_safe", "x", "return tl.where(x > 0, tl.log(tl.where(x > 0, x, 1.0)), 0.0)", {"x=fp32[" + N + "]"}, {"x"}},
      {"cast_round_trip", "x", "return x.to(tl.float16).to(tl.float32) * x", {"x=fp32[" + N + "]"}, {"x"}},
      {"tl_cast", "x", "return tl.cast(x, tl.float64) * 2.0", {"x=fp32[" + N + "]"}, {"x"}},
      {"expand_dims", "x", "return tl.expand_dims(x, 1) * tl.expand_dims(x, 0)", {"x=fp32[" + N + "]"}, {"x"}},
      {"index_none", "x, y", "return x[:, None] * y[None, :]", {"x=fp32[" + N + "]", "y=fp32[" + M + "]"}, {"x", "y"}},
      {"reshape", "x", "return tl.reshape(x, (" + std::to_string(std::stoi(N) * std::stoi(M)) + ",)) * 2.0",
       {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"view", "x", "return x.view(" + std::to_string(std::stoi(N) * std::stoi(M)) + ") * 2.0", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"trans", "x", "return tl.trans(x) * 2.0", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"permute_3d", "x", "return tl.permute(x, (2, 0, 1)) * 2.0", {"x=fp32[2,4,8]"}, {"x"}},
      {"broadcast_to", "x", "return tl.broadcast_to(x, (" + M + ", " + N + "))", {"x=fp32[1," + N + "]"}, {"x"}},
      // Broadcasting patterns: [N,1] with [1,M], scalar with tile, [N] with [M,N].
      {"bcast_col_row", "x, y", "return x * y", {"x=fp32[" + N + ",1]", "y=fp32[1," + M + "]"}, {"x", "y"}},
      {"bcast_scalar_tile", "x, y", "return x * y + x", {"x=fp32[1]", "y=fp32[" + N + "," + M + "]"}, {"x", "y"}},
      {"bcast_vector_matrix", "x, y", "return x / y", {"x=fp32[" + N + "]", "y=fp32[" + M + "," + N + "]" + pos}, {"x", "y"}},
      {"bcast_constant", "x", "return 2.0 * x - 1.0", {"x=fp32[" + N + "]"}, {"x"}},
      // Reductions with axis and keep_dims, on non-square tiles.
      {"sum_axis0", "x", "return tl.sum(x, axis=0)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"sum_axis1_keep", "x", "return tl.sum(x, axis=1, keep_dims=True) * x", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"sum_all", "x", "return tl.sum(x) * x", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"sum_method", "x", "return x.sum(1)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"max_axis", "x", "return tl.max(x, axis=1)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"max_keep", "x", "return tl.max(x, 0, keep_dims=True) + x", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"max_all", "x", "return tl.max(x) * 1.0", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"min_axis", "x", "return tl.min(x, axis=0)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      // return_indices=True: the values' gradient is the reduction's; the indices have none.
      {"max_indices", "x", "m, i = tl.max(x, 1, return_indices=True)\nreturn m * (i + 1).to(tl.float32)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"min_indices_keep", "x", "m, i = tl.min(x, 0, return_indices=True, keep_dims=True)\nreturn m + x", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      // triton-ascend's slices: one row taken (strided over columns), one row replaced.
      {"extract_slice", "x", "return tl.extract_slice(x, [1, 0], [1, 2], [1, 2]) * 2.0", {"x=fp32[4,4]"}, {"x"}},
      {"insert_slice", "x, s", "return tl.insert_slice(x, s * s, [2, 0], [1, 4], [1, 1]) * x", {"x=fp32[4,4]", "s=fp32[1,4]"}, {"x", "s"}},
      // tl.reduce with combine functions: a product (axis, keep_dims, the whole tile), a maximum, a sum.
      {"reduce_product", "x", "return tl.reduce(x, 1, times)", {"x=fp32[" + N + "," + M + "]" + pos}, {"x"}},
      {"reduce_product_keep", "x", "return tl.reduce(x, 0, times, keep_dims=True) * x", {"x=fp32[" + N + "," + M + "]" + pos}, {"x"}},
      {"reduce_product_all", "x", "return tl.reduce(x, None, times) * 1.0", {"x=fp32[" + N + "," + M + "]" + pos}, {"x"}},
      {"reduce_max", "x", "return tl.reduce(x, axis=0, combine_fn=larger)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"reduce_sum_keep", "x", "return tl.reduce(x * x, 1, plus, keep_dims=True) * x", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"cumsum", "x", "return tl.cumsum(x, 1)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"cumsum_reverse", "x", "return tl.cumsum(x, 0, reverse=True)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"cumprod", "x", "return tl.cumprod(x, 1)", {"x=fp32[" + N + "," + M + "]" + pos}, {"x"}},
      {"cumprod_reverse", "x", "return tl.cumprod(x, 0, reverse=True) * x", {"x=fp32[" + N + "," + M + "]" + pos}, {"x"}},
      // tl.flip along the last axis (-1) and along axis 0, times x so that each element meets another.
      {"flip", "x", "return tl.flip(x, -1) * x", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"flip_dim0", "x, y", "return tl.flip(x * y, 0) * y", {"x=fp32[" + N + "," + M + "]", "y=fp32[" + N + ",1]"}, {"x", "y"}},
      {"softmax", "x", "return tl.softmax(x)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      {"softmax_dim1", "x", "return tl.softmax(x, dim=1, keep_dims=True)", {"x=fp32[" + N + "," + M + "]"}, {"x"}},
      // dot: both operands, ieee precision kept, an accumulator, fp16 operands.
      {"dot", "x, y", "return tl.dot(x, y, input_precision=\"ieee\")", {"x=fp32[16,32]", "y=fp32[32,16]"}, {"x", "y"}},
      {"dot_acc", "x, y, z", "return tl.dot(x, y, z, input_precision=\"ieee\")", {"x=fp32[16,16]", "y=fp32[16,32]", "z=fp32[16,32]"}, {"x", "y", "z"}},
      {"dot_fp16", "x, y", "return tl.dot(x, y)", {"x=fp16[16,16]", "y=fp16[16,16]"}, {"x", "y"}},
      // gather: the adjoint sums the lanes that read each source element (indices repeat and skip elements).
      {"gather_1d", "x, i", "return tl.gather(x, i, 0)", {"x=fp32[8]", "i=int32[8]:uniform(0,8)"}, {"x"}},
      {"gather_axis0", "x, i", "return tl.gather(x, i, axis=0)", {"x=fp32[4,8]", "i=int32[2,8]:uniform(0,4)"}, {"x"}},
      {"gather_axis1", "x, i", "return x.gather(i, -1)", {"x=fp32[4,8]", "i=int32[4,2]:uniform(0,8)"}, {"x"}},
      // clamp: the gradient goes to x inside the bounds, to a tensor bound where x passes it.
      {"clamp", "x, lo, hi", "return tl.clamp(x, lo, hi)", {"x=fp32[16]:uniform(-2,2)", "lo=fp32[16]:uniform(-1,-0.5)", "hi=fp32[16]:uniform(0.5,1)"}, {"x", "lo", "hi"}},
      {"clamp_numbers", "x", "return tl.clamp(x, -0.5, 0.5)", {"x=fp32[16]:uniform(-2,2)"}, {"x"}},
      // M or N of 1: the backward product over it is a sum of broadcast products (tl.dot needs K >= 16).
      {"dot_vector", "x, y", "return tl.dot(x, y, input_precision=\"ieee\")", {"x=fp32[16,32]", "y=fp32[32,1]"}, {"x", "y"}},
      {"dot_row", "x, y", "return tl.dot(x, y, input_precision=\"ieee\")", {"x=fp32[1,16]", "y=fp32[16,32]"}, {"x", "y"}},
      {"dot_batched_vector", "x, y", "return tl.dot(x, y, input_precision=\"ieee\")", {"x=fp32[2,1,16]", "y=fp32[2,16,1]"}, {"x", "y"}},
      // PTX approximations differentiate as their function (the interpreter computes the function itself).
      {"asm_tanh", "x", "return tl.inline_asm_elementwise(\"tanh.approx.f32 $0, $1;\", \"=f,f\", [x], dtype=tl.float32, is_pure=True, pack=1)", {"x=fp32[8]"}, {"x"}},
      {"asm_ex2", "x", "return tl.inline_asm_elementwise(\"ex2.approx.ftz.f32 $0, $1;\", constraints=\"=f,f\", args=[x * 0.5], dtype=tl.float32, is_pure=True, pack=1)", {"x=fp32[8]"}, {"x"}},
      // tl.join / tl.split / tl.interleave: halves, a broadcast operand, a half without a gradient.
      {"join", "x, y", "j = tl.join(x, y)\nreturn j * j", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"join_broadcast", "x, y", "j = tl.join(x[:, None], y[None, :])\nreturn j * j",
       {"x=fp32[" + N + "]", "y=fp32[" + M + "]"}, {"x", "y"}},
      {"split", "x", "a, b = tl.split(x)\nreturn a * tl.exp(b)", {"x=fp32[" + N + ",2]"}, {"x"}},
      {"split_one_half", "x", "a, b = tl.split(x)\nreturn a * a", {"x=fp32[" + N + ",2]"}, {"x"}},
      {"interleave", "x, y", "i = tl.interleave(x, y)\nreturn i * i", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"},
       {"x", "y"}},
      // Values used more than once accumulate; reassignment is renamed.
      {"reuse", "x", "a = x * x\nb = a + x\nb = b * a\nreturn b", {"x=fp32[" + N + "]"}, {"x"}},
      {"aug_assign", "x, y", "acc = x * 1.0\nacc += y * x\nacc *= y\nreturn acc", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"tuple_return", "x, y", "return x * y, tl.exp(x)", {"x=fp32[" + N + "]", "y=fp32[" + N + "]"}, {"x", "y"}},
      {"constexpr_if", "x, MODE: tl.constexpr", "if MODE == 1:\n    r = tl.exp(x)\nelse:\n    r = x * x\nreturn r",
       {"x=fp32[" + N + "]"}, {"x"}, {"MODE=1"}},
      {"static_range_unrolled", "x", "acc = x * 0.0\nfor i in tl.static_range(3):\n    acc = acc * x + (i + 1) * 1.0\nreturn acc",
       {"x=fp32[" + N + "]"}, {"x"}},
      {"masks_carry_no_gradient", "x", "m = x > 0\ny = tl.where(m, x, -x)\nreturn y * m.to(tl.float32)", {"x=fp32[" + N + "]"}, {"x"}},
  };
  return c;
}

class GradientRules : public ::testing::TestWithParam<Case> {};

TEST_P(GradientRules, MatchesFiniteDifferencesInFloat64) {
  const Case &c = GetParam();
  // (Combine functions for the tl.reduce cases.)
  std::string text = "import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n"
                     "@triton.jit\ndef times(a, b):\n    return a * b\n\n"
                     "@triton.jit\ndef larger(a, b):\n    return tl.maximum(a, b)\n\n"
                     "@triton.jit\ndef plus(a, b):\n    return b + a\n\n"
                     "@triton.jit\ndef f(" + c.signature + "):\n";
  std::istringstream in(c.body);
  std::string line;
  while (std::getline(in, line)) text += "    " + line + "\n";
  auto p = parse_text(text, c.name + ".py");
  ASSERT_TRUE(p->ok()) << p->all_messages();

  ad::BackwardRequest request;
  request.function = "f";
  request.wrt = c.wrt;
  std::map<std::string, interp::Value> inputs;
  std::string error;
  uint64_t stream = 0;
  for (const std::string &d : c.defines) {
    auto def = driver::parse_define(d, error);
    ASSERT_TRUE(def) << error;
    inputs[def->first] = def->second;
    request.param_types[def->first] = sema::SType::of_int(def->second.n);
  }
  for (const std::string &a : c.args) {
    auto spec = driver::parse_arg(a, error);
    ASSERT_TRUE(spec) << error;
    sema::SymShape shape;
    for (int64_t d : spec->second.buffer.shape) shape.push_back(sema::Dim::known(d));
    request.param_types[spec->first] = sema::SType::tensor(sema::ElemType{spec->second.buffer.dtype, false}, shape);
    inputs[spec->first] = interp::make_tensor(spec->second.buffer.dtype, spec->second.buffer.shape,
                                              driver::fill_values(spec->second.buffer, 11, stream++), true);
  }
  auto result = driver::grad_check(*p->module, p->sources, request, inputs, {}, *p->diags);
  ASSERT_TRUE(result) << p->all_messages();
  for (const auto &arg : result->args)
    EXPECT_TRUE(arg.pass) << c.name << ": d/d" << arg.name << " relative error " << arg.relative_error << "\n"
                          << result->backward_source;
  // The emitted source parses with tgrad's own parser.
  auto reparsed = parse_text(result->backward_source, c.name + "_bwd.py");
  EXPECT_TRUE(reparsed->ok()) << reparsed->all_messages() << result->backward_source;
}

INSTANTIATE_TEST_SUITE_P(EveryRule, GradientRules, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });

TEST(GradientRules, EveryRuleInTheTableHasACase) {
  std::set<std::string> covered = {"add", "sub", "mul", "truediv", "neg", "pos", "exp", "exp2", "log", "log2", "sqrt",
                                   "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "abs", "maximum", "minimum",
                                   "fma", "pow", "where", "cast", "expand_dims", "index", "reshape", "trans",
                                   "broadcast_to", "sum", "max", "min", "cumsum", "softmax", "dot", "sqrt_rn", "div_rn",
                                   "fdiv", "exp10", "log10", "log1p", "expm1", "cbrt", "tan", "asin", "acos", "atan",
                                   "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc", "join", "split", "clamp", "gather",
                                   "interleave", "reduce_product", "extract_slice", "insert_slice", "flip", "cumprod"};
  for (const std::string &r : ad::rule_names()) EXPECT_TRUE(covered.count(r)) << "rule '" << r << "' has no gradient check";
}

TEST(GradientRules, TiesOfMaxSplitTheGradientEvenly) {
  auto p = parse_text("import triton\nimport triton.language as tl\n@triton.jit\ndef f(x):\n    return tl.max(x, axis=0)\n");
  ASSERT_TRUE(p->ok());
  ad::BackwardRequest request{"f", {"x"}, {{"x", sema::SType::tensor({sema::DType::FP32, false}, {sema::Dim::known(4)})}}, ""};
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  interp::Memory memory;
  interp::RunOptions run;
  run.float64 = true;
  auto out = interp::run_function(*bwd->module, bwd->backward_name,
                                  {{"x", interp::make_tensor(sema::DType::FP32, {4}, {1, 3, 3, 2}, true)},
                                   {bwd->output_adjoints[0], interp::make_tensor(sema::DType::FP32, {}, {1}, true)}},
                                  memory, run, *p->diags);
  ASSERT_TRUE(out) << p->all_messages();
  EXPECT_EQ((*out)[0].t->f, (std::vector<double>{0, 0.5, 0.5, 0}));
}

// tl.cumprod's gradient at zeros (none, one, two, one at either end), both directions, against the sum of products
// with one factor left out, computed here directly: no division by the zeros.
TEST(GradientRules, CumprodGradientAtZeros) {
  const std::vector<std::vector<double>> rows = {
      {1.5, -2, 0.5, 3}, {1.5, 0, 0.5, 3}, {2, 0, 0.5, 0}, {0, 2, -1, 3}, {2, -1, 3, 0}, {0, 0, 2, 1}};
  for (const bool reverse : {false, true}) {
    auto p = parse_text(std::string("import triton\nimport triton.language as tl\n@triton.jit\ndef f(x):\n    return "
                                    "tl.cumprod(x, 0") + (reverse ? ", reverse=True" : "") + ")\n");
    ASSERT_TRUE(p->ok());
    ad::BackwardRequest request{"f", {"x"}, {{"x", sema::SType::tensor({sema::DType::FP32, false}, {sema::Dim::known(4)})}}, ""};
    auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
    ASSERT_TRUE(bwd) << p->all_messages();
    const std::vector<double> by = {0.5, -1.25, 2, 0.75};
    for (const std::vector<double> &x : rows) {
      interp::Memory memory;
      interp::RunOptions run;
      run.float64 = true;
      auto out = interp::run_function(*bwd->module, bwd->backward_name,
                                      {{"x", interp::make_tensor(sema::DType::FP32, {4}, x, true)},
                                       {bwd->output_adjoints[0], interp::make_tensor(sema::DType::FP32, {4}, by, true)}},
                                      memory, run, *p->diags);
      ASSERT_TRUE(out) << p->all_messages();
      for (int j = 0; j < 4; ++j) {
        double want = 0;  // sum over the outputs i that hold x_j of by_i times the product of their other factors
        for (int i = 0; i < 4; ++i) {
          const bool holds = reverse ? j >= i : j <= i;
          if (!holds) continue;
          double product = 1;
          for (int k = 0; k < 4; ++k)
            if (k != j && (reverse ? k >= i : k <= i)) product *= x[k];
          want += by[i] * product;
        }
        EXPECT_DOUBLE_EQ((*out)[0].t->f[j], want) << "reverse=" << reverse << " x[0]=" << x[0] << " x[1]=" << x[1]
                                                  << " x[2]=" << x[2] << " x[3]=" << x[3] << " j=" << j;
      }
    }
  }
}

TEST(GradientRules, UnusedInputGetsAZeroAdjointAndAWarning) {
  auto p = parse_text("import triton\nimport triton.language as tl\n@triton.jit\ndef f(x, y):\n    return x * 2.0\n");
  ASSERT_TRUE(p->ok());
  sema::SType t = sema::SType::tensor({sema::DType::FP32, false}, {sema::Dim::known(4)});
  ad::BackwardRequest request{"f", {"x", "y"}, {{"x", t}, {"y", t}}, ""};
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  EXPECT_NE(p->all_messages().find("t.py:4:10: warning: no output of 'f' depends on 'y': its adjoint is zero"), std::string::npos)
      << p->all_messages();
  EXPECT_NE(bwd->source.find("by = tl.zeros_like(y)"), std::string::npos) << bwd->source;
}

TEST(GradientRules, AnOperationWithoutARuleIsALocatedError) {
  auto p = parse_text("import triton\nimport triton.language as tl\n@triton.jit\ndef f(x):\n    return x % 2.0\n");
  ASSERT_TRUE(p->ok());
  ad::BackwardRequest request{"f", {"x"}, {{"x", sema::SType::tensor({sema::DType::FP32, false}, {sema::Dim::known(4)})}}, ""};
  EXPECT_FALSE(ad::differentiate(*p->module, p->sources, request, *p->diags));
  std::string m = p->all_messages();
  EXPECT_NE(m.find("t.py:5:12: error: tgrad has no adjoint rule for 'operator %'; supported operations: abs, acos,"), std::string::npos) << m;
}

TEST(GradientRules, NonFloatWrtIsRejected) {
  auto p = parse_text("import triton\nimport triton.language as tl\n@triton.jit\ndef f(x, n):\n    return x * n\n");
  ASSERT_TRUE(p->ok());
  ad::BackwardRequest request{"f", {"n"},
                              {{"x", sema::SType::tensor({sema::DType::FP32, false}, {sema::Dim::known(4)})},
                               {"n", sema::SType::tensor({sema::DType::Int32, false}, {})}}, ""};
  EXPECT_FALSE(ad::differentiate(*p->module, p->sources, request, *p->diags));
  EXPECT_NE(p->all_messages().find("'n' is int32, not a floating-point value, and carries no gradient"), std::string::npos)
      << p->all_messages();
}

TEST(GradientRules, TheRulesFileParses) {
  EXPECT_FALSE(ad::rule_names().empty());
  EXPECT_NE(std::string(ad::rules_source()).find("def mul(y, a, b, by):"), std::string::npos);
}

}  // namespace
}  // namespace tgrad::testing
