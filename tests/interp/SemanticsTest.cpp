// The interpreter's operator semantics, one Triton rule per test: type
// promotion (TRITON.md's table), rounding, broadcasting, integer division,
// reductions' result types, dot, and the errors for what Triton rejects.
#include <cmath>

#include <gtest/gtest.h>

#include "src/interp/TensorOps.h"
#include "tests/parse/ParseHelpers.h"
#include "tgrad/interp/Interpreter.h"

namespace tgrad::testing {
namespace {

using interp::Value;
using sema::DType;

struct Ran {
  std::vector<Value> results;
  std::string errors;
};

// Calls `f(x, y, z)` whose body is given, with the given arguments.
Ran call(const std::string &body, std::map<std::string, Value> args, bool float64 = false,
         int64_t max_loop_iterations = 100'000'000) {
  auto p = parse_text(jit_function(body));
  Ran r;
  if (!p->ok()) {
    r.errors = p->all_messages();
    return r;
  }
  interp::Memory memory;
  interp::RunOptions options;
  options.float64 = float64;
  options.max_loop_iterations = max_loop_iterations;
  for (const char *n : {"x", "y", "z"})
    if (!args.count(n)) args[n] = Value::none();
  auto out = interp::run_function(*p->module, "f", args, memory, options, *p->diags);
  if (out) r.results = *out;
  r.errors = p->all_messages();
  return r;
}

Value tile(DType d, std::vector<double> v, interp::Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return interp::make_tensor(d, shape, v, false);
}

std::string type_of(const Ran &r, size_t k = 0) {
  if (!r.errors.empty()) return "ERROR: " + r.errors;
  return r.results.at(k).t ? r.results.at(k).t->type_str() : r.results.at(k).describe();
}

TEST(Promotion, MatchesTritonTable) {
  EXPECT_EQ(type_of(call("return x + y\n", {{"x", tile(DType::FP16, {1})}, {"y", tile(DType::BF16, {1})}})), "fp16[1]");
  EXPECT_EQ(type_of(call("return x + y\n", {{"x", tile(DType::Int32, {1})}, {"y", tile(DType::BF16, {1})}})), "fp32[1]");
  EXPECT_EQ(type_of(call("return x + y\n", {{"x", tile(DType::Int32, {1})}, {"y", tile(DType::FP16, {1})}})), "fp16[1]");
  EXPECT_EQ(type_of(call("return x / y\n", {{"x", tile(DType::FP16, {1})}, {"y", tile(DType::FP16, {1})}})), "fp32[1]");
  EXPECT_EQ(type_of(call("return x % y\n", {{"x", tile(DType::FP16, {1})}, {"y", tile(DType::FP16, {1})}})), "fp32[1]");
  EXPECT_EQ(type_of(call("return x * 2.0\n", {{"x", tile(DType::FP16, {1})}})), "fp16[1]");
  EXPECT_EQ(type_of(call("return x + 4.0\n", {{"x", tile(DType::Int16, {1})}})), "fp32[1]");
  EXPECT_EQ(type_of(call("return x + y\n", {{"x", tile(DType::Int32, {1})}, {"y", tile(DType::UInt32, {1})}})), "uint32[1]");
  EXPECT_EQ(type_of(call("return x + 1\n", {{"x", tile(DType::Int8, {1})}})), "int8[1]");
  EXPECT_EQ(type_of(call("return x / y\n", {{"x", tile(DType::Int32, {1})}, {"y", tile(DType::Int32, {2})}})), "fp32[1]");
  EXPECT_EQ(type_of(call("return x < y\n", {{"x", tile(DType::FP32, {1})}, {"y", tile(DType::FP16, {2})}})), "int1[1]");
}

TEST(Rounding, Fp16AndBf16AreRoundedToNearestEven) {
  // 1 + 2^-11 is halfway between two fp16 values: ties to even gives 1.
  Ran r = call("return x + y\n", {{"x", tile(DType::FP16, {1.0})}, {"y", tile(DType::FP16, {1.0 / 2048})}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->f[0], 1.0);
  EXPECT_EQ(interp::round_float(DType::FP16, 1.0 + 3.0 / 2048, false), 1.0 + 2.0 / 1024);
  EXPECT_EQ(interp::round_float(DType::FP16, 70000.0, false), INFINITY);
  EXPECT_EQ(interp::round_float(DType::FP16, 65504.0, false), 65504.0);
  EXPECT_EQ(interp::round_float(DType::FP16, std::ldexp(1.0, -24), false), std::ldexp(1.0, -24));
  EXPECT_EQ(interp::round_float(DType::BF16, 1.0 + 1.0 / 256, false), 1.0);  // tie, to even
  EXPECT_EQ(interp::round_float(DType::BF16, 1.0 + 3.0 / 256, false), 1.0 + 4.0 / 256);
  EXPECT_EQ(interp::round_float(DType::FP32, 0.1, false), static_cast<double>(0.1f));
  EXPECT_EQ(interp::round_float(DType::FP32, 0.1, true), 0.1);  // float64 mode keeps doubles
}

TEST(Broadcasting, RowAndColumnMakeAMatrix) {
  Ran r = call("return x[:, None] * y[None, :]\n", {{"x", tile(DType::FP32, {1, 2})}, {"y", tile(DType::FP32, {3, 4, 5, 6})}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->type_str(), "fp32[2, 4]");
  EXPECT_EQ(r.results[0].t->f, (std::vector<double>{3, 4, 5, 6, 6, 8, 10, 12}));
  Ran bad = call("return x + y\n", {{"x", tile(DType::FP32, {1, 2})}, {"y", tile(DType::FP32, {3, 4, 5, 6})}});
  EXPECT_NE(bad.errors.find("shapes [2] and [4] cannot be broadcast together"), std::string::npos) << bad.errors;
}

TEST(IntegerArithmetic, TensorsTruncateConstantsFloor) {
  Ran r = call("return x // 2, x % 2, -7 // 2, -7 % 2\n", {{"x", tile(DType::Int32, {-7, 7})}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->i, (std::vector<int64_t>{-3, 3}));  // C truncation on tensors
  EXPECT_EQ(r.results[1].t->i, (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(r.results[2].n, -4);  // Python floor on constants
  EXPECT_EQ(r.results[3].n, 1);
  Ran wrap = call("return x + 1\n", {{"x", tile(DType::Int32, {2147483647})}});
  EXPECT_EQ(wrap.results[0].t->i[0], -2147483648LL);
  Ran zero = call("return x // y\n", {{"x", tile(DType::Int32, {1})}, {"y", tile(DType::Int32, {0})}});
  EXPECT_NE(zero.errors.find("integer division by zero"), std::string::npos);
}

TEST(Reductions, ResultTypesFollowTriton) {
  EXPECT_EQ(type_of(call("return tl.sum(x, axis=0)\n", {{"x", tile(DType::FP16, {1, 2})}})), "fp16");
  EXPECT_EQ(type_of(call("return tl.max(x, axis=0)\n", {{"x", tile(DType::FP16, {1, 2})}})), "fp32");
  EXPECT_EQ(type_of(call("return tl.sum(x, axis=0)\n", {{"x", tile(DType::Int8, {1, 2})}})), "int32");
  EXPECT_EQ(type_of(call("return tl.cumsum(x, 0)\n", {{"x", tile(DType::BF16, {1, 2})}})), "fp32[2]");
  EXPECT_EQ(type_of(call("return tl.cumsum(x, 0)\n", {{"x", tile(DType::FP16, {1, 2})}})), "fp16[2]");
  EXPECT_EQ(type_of(call("return tl.argmax(x, 0)\n", {{"x", tile(DType::FP32, {1, 2})}})), "int32");
}

TEST(Reductions, AxesAndKeepDims) {
  Value m = interp::make_tensor(DType::FP32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}, false);
  Ran r = call("return tl.sum(x, axis=0), tl.sum(x, axis=1, keep_dims=True), tl.sum(x), tl.max(x, 1), tl.argmin(x, 1)\n", {{"x", m}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->f, (std::vector<double>{6, 8, 10, 12}));
  EXPECT_EQ(r.results[1].t->type_str(), "fp32[2, 1]");
  EXPECT_EQ(r.results[1].t->f, (std::vector<double>{10, 26}));
  EXPECT_EQ(r.results[2].t->f, (std::vector<double>{36}));
  EXPECT_EQ(r.results[3].t->f, (std::vector<double>{4, 8}));
  EXPECT_EQ(r.results[4].t->i, (std::vector<int64_t>{0, 0}));
}

// tl.flip reverses the axis given, negative ones counted from the end (Triton's standard.py; integers too).
TEST(Reshapes, FlipReversesAnAxis) {
  Value m = interp::make_tensor(DType::FP32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}, false);
  Ran r = call("return tl.flip(x, 1), tl.flip(x, 0), tl.flip(x, dim=-2), tl.flip(tl.arange(0, 4), 0)\n", {{"x", m}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->f, (std::vector<double>{4, 3, 2, 1, 8, 7, 6, 5}));
  EXPECT_EQ(r.results[1].t->f, (std::vector<double>{5, 6, 7, 8, 1, 2, 3, 4}));
  EXPECT_EQ(r.results[2].t->f, (std::vector<double>{5, 6, 7, 8, 1, 2, 3, 4}));
  EXPECT_EQ(r.results[3].t->i, (std::vector<int64_t>{3, 2, 1, 0}));
}

// libdevice's classifications give int32 1 or 0 (isfinited / finitef: FlagGems' isclose through its shim).
TEST(Math, ClassificationsAreInt32) {
  Value x = interp::make_tensor(DType::FP32, {4}, {1.0, -0.0, INFINITY, NAN}, false);
  Ran r = call("return tl.math.isnan(x), tl.math.isinf(x), tl.math.signbit(x), tl.math.finitef(x), "
               "tl.math.isfinited(x)\n", {{"x", x}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->type_str(), "int32[4]");
  EXPECT_EQ(r.results[0].t->i, (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(r.results[1].t->i, (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(r.results[2].t->i, (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(r.results[3].t->i, (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(r.results[4].t->i, (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST(Math, ExpOfFp16IsAnError) {
  Ran r = call("return tl.exp(x)\n", {{"x", tile(DType::FP16, {1})}});
  EXPECT_NE(r.errors.find("expects fp32 or fp64, got fp16; cast with .to(tl.float32) first"), std::string::npos) << r.errors;
  Ran ok = call("return tl.exp(x.to(tl.float32))\n", {{"x", tile(DType::FP16, {1})}});
  ASSERT_TRUE(ok.errors.empty()) << ok.errors;
  EXPECT_DOUBLE_EQ(ok.results[0].t->f[0], static_cast<double>(static_cast<float>(std::exp(1.0))));
}

TEST(Where, SelectsAndPromotes) {
  Ran r = call("return tl.where(x > 0, x, 0.0)\n", {{"x", tile(DType::FP16, {-1, 2})}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].t->type_str(), "fp16[2]");
  EXPECT_EQ(r.results[0].t->f, (std::vector<double>{0, 2}));
}

TEST(Dot, ShapesPrecisionAndAccumulator) {
  std::vector<double> a(16 * 16), b(16 * 16);
  for (size_t k = 0; k < a.size(); ++k) a[k] = 1.0 + 1.0 / 4096 * static_cast<double>(k % 7), b[k] = (k % 16 == k / 16) ? 1 : 0;
  Value A = interp::make_tensor(DType::FP32, {16, 16}, a, false), B = interp::make_tensor(DType::FP32, {16, 16}, b, false);
  // B is the identity: ieee returns A exactly; tf32 rounds A's mantissa to 10 bits.
  Ran ieee = call("return tl.dot(x, y, input_precision=\"ieee\")\n", {{"x", A}, {"y", B}});
  ASSERT_TRUE(ieee.errors.empty()) << ieee.errors;
  EXPECT_EQ(ieee.results[0].t->f[1], a[1]);
  Ran tf32 = call("return tl.dot(x, y)\n", {{"x", A}, {"y", B}});
  EXPECT_EQ(tf32.results[0].t->f[1], interp::round_tf32(a[1]));
  EXPECT_NE(tf32.results[0].t->f[1], a[1]);
  Ran small = call("return tl.dot(x, y)\n", {{"x", tile(DType::FP32, {1, 2, 3, 4}, {2, 2})}, {"y", tile(DType::FP32, {1, 2, 3, 4}, {2, 2})}});
  EXPECT_NE(small.errors.find("at least 16"), std::string::npos) << small.errors;
  // M and N may be 1 (a matrix-vector product as [16, 16] @ [16, 1]); only K needs 16.
  std::vector<double> column(16, 1.0);
  Ran vector = call("return tl.dot(x, y)\n", {{"x", A}, {"y", interp::make_tensor(DType::FP32, {16, 1}, column, false)}});
  ASSERT_TRUE(vector.errors.empty()) << vector.errors;
  EXPECT_EQ(vector.results[0].t->shape, (std::vector<int64_t>{16, 1}));
  Ran mixed = call("return tl.dot(x, y)\n", {{"x", interp::make_tensor(DType::FP16, {16, 16}, a, false)}, {"y", B}});
  EXPECT_NE(mixed.errors.find("must have one dtype"), std::string::npos) << mixed.errors;
}

// tl.swizzle2d on a 5 x 3 grid in groups of 2 rows (the last group has one):
// each group is walked column by column. The table was measured on the H100
// with Triton 3.6 (tests/gpu/TORCH.md).
TEST(ProgramOrder, Swizzle2dGroupsRows) {
  Ran r = call("i = tl.arange(0, 16) // 3\nj = tl.arange(0, 16) % 3\n"
               "a, b = tl.swizzle2d(i, j, 5, 3, 2)\nreturn a, b\n", {});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  const int64_t want_i[15] = {0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 4, 4, 4};
  const int64_t want_j[15] = {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 0, 1, 2};
  for (int k = 0; k < 15; ++k) {
    EXPECT_EQ(r.results[0].t->i[k], want_i[k]) << "element " << k;
    EXPECT_EQ(r.results[1].t->i[k], want_j[k]) << "element " << k;
  }
}

// tl.standard._log2 and tl.core.get_int_dtype (nsa's bitonic top-k): 16 elements give 4; fp32 bits read as
// int32 give 1065353216 for 1.0 (both measured on the H100 with Triton 3.6).
TEST(Constexpr, StandardLog2AndIntDtype) {
  Ran r = call("x = tl.arange(0, 16).to(tl.float32)\nn: tl.constexpr = tl.standard._log2(x.numel)\n"
               "idtype = tl.core.get_int_dtype(bitwidth=x.dtype.primitive_bitwidth, signed=True)\n"
               "return n, x.to(idtype, bitcast=True)\n", {});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].n, 4);
  EXPECT_EQ(r.results[1].t->type_str(), "int32[16]");
  EXPECT_EQ(r.results[1].t->i[1], 1065353216);
}

TEST(Constexpr, PythonArithmeticAndCdiv) {
  Ran r = call("return triton.cdiv(1000, 256), tl.cdiv(7, 2), triton.next_power_of_2(781), 2 ** 10, 7 / 2\n", {});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  EXPECT_EQ(r.results[0].n, 4);
  EXPECT_EQ(r.results[1].n, 4);
  EXPECT_EQ(r.results[2].n, 1024);
  EXPECT_EQ(r.results[3].n, 1024);
  EXPECT_EQ(r.results[4].x, 3.5);
}

TEST(Errors, WhatTritonRejectsIsRejectedWithALocation) {
  Ran arange = call("return tl.arange(0, 12)\n", {});
  EXPECT_NE(arange.errors.find("t.py:6:12: error: tl.arange(0, 12): the range must be a power of 2"), std::string::npos)
      << arange.errors;
  Ran cond = call("if x:\n    return 1\nreturn 0\n", {{"x", tile(DType::FP32, {1, 2})}});
  EXPECT_NE(cond.errors.find("a condition must be a scalar"), std::string::npos) << cond.errors;
  Ran pow = call("return x ** 2\n", {{"x", tile(DType::FP32, {1})}});
  EXPECT_NE(pow.errors.find("'**' on tensors is not supported"), std::string::npos) << pow.errors;
  Ran undefined = call("return w\n", {});
  EXPECT_NE(undefined.errors.find("name 'w' is not defined"), std::string::npos) << undefined.errors;
  Ran sassert = call("tl.static_assert(1 == 2, \"sizes\")\n", {});
  EXPECT_NE(sassert.errors.find("static assertion failed: sizes"), std::string::npos) << sassert.errors;
  Ran dassert = call("tl.device_assert(x > 0, \"positive\")\n", {{"x", tile(DType::FP32, {1, -1})}});
  EXPECT_NE(dassert.errors.find("device assertion failed: positive (lane 1"), std::string::npos) << dassert.errors;
  Ran loop = call("i = 0\nwhile i < 1:\n    i = i * 1\n", {}, false, 1000);
  EXPECT_NE(loop.errors.find("loop stopped after 1000 iterations"), std::string::npos) << loop.errors;
}

TEST(Errors, HelperCallsShowWhereTheyWereCalledFrom) {
  auto p = parse_text(
      "import triton\nimport triton.language as tl\n@triton.jit\ndef inner(a):\n    return tl.exp(a)\n"
      "@triton.jit\ndef outer(a):\n    return inner(a)\n");
  ASSERT_TRUE(p->ok());
  interp::Memory memory;
  auto out = interp::run_function(*p->module, "outer", {{"a", tile(DType::FP16, {1})}}, memory, {}, *p->diags);
  EXPECT_FALSE(out);
  EXPECT_EQ(p->messages(), (std::vector<std::string>{
                               "t.py:5:12: error: math.exp expects fp32 or fp64, got fp16; cast with .to(tl.float32) first",
                               "t.py:8:12: note: in the call of 'inner' here"}));
}

TEST(Memory, MaskedLoadsTakeOtherAndOutOfBoundsIsAnError) {
  auto p = parse_text(
      "import triton\nimport triton.language as tl\n@triton.jit\n"
      "def k(X, Y, n, B: tl.constexpr):\n    o = tl.arange(0, B)\n    x = tl.load(X + o, mask=o < n, other=-1.0)\n"
      "    tl.store(Y + o, x * 2, mask=o < n + 1)\n");
  ASSERT_TRUE(p->ok());
  interp::Memory memory;
  interp::Buffer x{"X", DType::FP32, {3}, {1, 2, 3}, {}};
  interp::Buffer y{"Y", DType::FP32, {4}, {0, 0, 0, 0}, {}};
  memory.add(x);
  memory.add(y);
  interp::Launch launch;
  launch.kernel = "k";
  launch.args["X"] = {interp::KernelArg::Kind::Buffer, 0, 0, 0, {}};
  launch.args["Y"] = {interp::KernelArg::Kind::Buffer, 1, 0, 0, {}};
  launch.args["n"] = {interp::KernelArg::Kind::Int, 0, 3, 0, {}};
  interp::KernelArg b;
  b.kind = interp::KernelArg::Kind::Constexpr;
  b.constexpr_value = Value::of_int(4);
  launch.args["B"] = b;
  ASSERT_TRUE(interp::run_kernel(*p->module, launch, memory, {}, *p->diags)) << p->all_messages();
  EXPECT_EQ(memory.buffers()[1].f, (std::vector<double>{2, 4, 6, -2}));

  launch.args["n"].n = 4;  // now lane 3 reads past X's 3 elements
  interp::Memory memory2;
  memory2.add(x);
  memory2.add(y);
  EXPECT_FALSE(interp::run_kernel(*p->module, launch, memory2, {}, *p->diags));
  EXPECT_NE(p->all_messages().find("t.py:6:9: error: out-of-bounds load from 'X': element 3 (it has 3 elements), lane 3"),
            std::string::npos)
      << p->all_messages();
}

TEST(Memory, AtomicsReturnOldValuesAndApplyInLaneOrder) {
  auto p = parse_text(
      "import triton\nimport triton.language as tl\n@triton.jit\n"
      "def k(A, OLD, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
      "    old = tl.atomic_add(A + o % 2, 1.0, mask=o < 3)\n    tl.store(OLD + o, old)\n"
      "    tl.atomic_max(A + 2 + o * 0, o.to(tl.float32))\n"
      "    tl.atomic_cas(A + 3 + o * 0, 0.0, 7.0)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  interp::Memory memory;
  memory.add(interp::Buffer{"A", DType::FP32, {4}, {0, 0, 0, 0}, {}});
  memory.add(interp::Buffer{"OLD", DType::FP32, {4}, {9, 9, 9, 9}, {}});
  interp::Launch launch;
  launch.kernel = "k";
  launch.grid = {2, 1, 1};  // two programs: atomics accumulate across them
  launch.args["A"] = {interp::KernelArg::Kind::Buffer, 0, 0, 0, {}};
  launch.args["OLD"] = {interp::KernelArg::Kind::Buffer, 1, 0, 0, {}};
  interp::KernelArg b;
  b.kind = interp::KernelArg::Kind::Constexpr;
  b.constexpr_value = Value::of_int(4);
  launch.args["B"] = b;
  ASSERT_TRUE(interp::run_kernel(*p->module, launch, memory, {}, *p->diags)) << p->all_messages();
  // Lanes 0 and 2 add to A[0], lane 1 to A[1]; lane 3 is masked off and its
  // "old value" (undefined in Triton) is 0 here.
  EXPECT_EQ(memory.buffers()[0].f, (std::vector<double>{4, 2, 3, 7}));
  EXPECT_EQ(memory.buffers()[1].f, (std::vector<double>{2, 1, 3, 0}));  // the second program's view
}

// Triton's Philox draws, measured on the H100 (Triton 3.6: tl.randint4x and
// tl.rand with seed 1234 at offsets 0..3, ten rounds); the interpreter's are
// bitwise the same (.real/rand: 1024 offsets, three seeds, 7 and 10 rounds).
TEST(RandomNumbers, PhiloxDrawsAreTritons) {
  Ran r = call("a, b, c, d = tl.randint4x(1234, x)\nreturn a, d, tl.rand(1234, x)\n",
               {{"x", tile(DType::Int32, {0, 1, 2, 3})}});
  ASSERT_TRUE(r.errors.empty()) << r.errors;
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].t->i, (std::vector<int64_t>{546353992, 2666454581, 1070188760, 3055983166}));
  EXPECT_EQ(r.results[1].t->i, (std::vector<int64_t>{3419031310, 343858512, 2300394257, 3900454750}));
  EXPECT_EQ(r.results[2].t->f, (std::vector<double>{0.2544158697128296, 0.758335292339325, 0.49834543466567993,
                                                    0.5769469141960144}));
  EXPECT_EQ(type_of(r), "uint32[4]");
}

}  // namespace
}  // namespace tgrad::testing

