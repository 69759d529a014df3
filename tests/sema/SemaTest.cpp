// Semantic analysis, one construct per test: the type each expression gets
// (dtype and symbolic shape), constexpr evaluation, and the errors sema
// reports at the offending expression.
#include <gtest/gtest.h>

#include "tests/parse/ParseHelpers.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::testing {
namespace {

using sema::Dim;
using sema::DType;
using sema::SType;

SType tile(DType d, std::vector<Dim> shape) { return SType::tensor(sema::ElemType{d, false}, std::move(shape)); }
SType ptr(DType d) { return SType::tensor(sema::ElemType{d, true}, {}); }
Dim N() { return Dim::symbolic("N"); }

struct Analysed {
  std::unique_ptr<Parsed> parsed;
  std::optional<sema::TypeInfo> info;
  std::string errors;
  // The type of the value returned (or "ERROR: ...").
  std::string result() const { return info ? info->result.str() : "ERROR: " + errors; }
  // The type of the last assignment to `name`.
  std::string var(const std::string &name) const {
    std::string found = "(not assigned)";
    for (const auto &s : parsed->module->functions[0]->body)
      if (auto *a = ast::dyn_cast<ast::Assign>(s.get()))
        if (auto *n = ast::dyn_cast<ast::Name>(a->targets[0].get()); n && n->id == name)
          if (const SType *t = info->type_of(a->value.get())) found = t->str();
    return found;
  }
};

// Analyses `f(x, y, z)` with the given parameter types.
Analysed analyse(const std::string &body, const sema::ParamTypes &params, const std::string &signature = "x, y, z") {
  std::string text = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef f(" + signature + "):\n";
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) text += (line.empty() ? "" : "    ") + line + "\n";
  Analysed a;
  a.parsed = parse_text(text);
  if (!a.parsed->ok()) {
    a.errors = a.parsed->all_messages();
    return a;
  }
  a.info = sema::analyze(*a.parsed->module, *a.parsed->module->functions[0], params, *a.parsed->diags);
  a.errors = a.parsed->all_messages();
  return a;
}

TEST(Types, TheSeedFunctionFn1) {
  Analysed a = analyse("a = tl.exp(x)\nb = tl.log(tl.expand_dims(y, 1))\nc = a + b\nreturn a * b + tl.dot(c, c)\n",
                       {{"x", tile(DType::FP32, {N()})}, {"y", tile(DType::FP32, {N()})}});
  EXPECT_EQ(a.var("a"), "fp32[N]");
  EXPECT_EQ(a.var("b"), "fp32[N, 1]");
  EXPECT_EQ(a.var("c"), "fp32[N, N]");
  EXPECT_EQ(a.result(), "fp32[N, N]");
}

// A constexpr number's .to(dtype): a scalar tensor of that dtype, as Triton makes it (measured on the
// H100 with Triton 3.6: `(i_t // NTS).to(tl.int64)` inside a tl.static_range loop compiles).
TEST(Types, ToOnAConstexprNumberIsAScalarTensor) {
  Analysed a = analyse("i = N // 2\nj = i.to(tl.int64)\nreturn x + j\n",
                       {{"x", tile(DType::FP32, {Dim::known(4)})}, {"N", SType::of_int(6)}}, "x, N: tl.constexpr");
  EXPECT_EQ(a.var("j"), "int64");  // a scalar tensor prints as its dtype
  EXPECT_EQ(a.result(), "fp32[4]");
}

TEST(Types, ArangeAndIndexing) {
  Analysed a = analyse("r = tl.arange(0, BLOCK)\ncol = r[:, None]\nrow = r[None, :]\nm = col * 4 + row\nreturn m\n", {},
                       "x, BLOCK: tl.constexpr");
  EXPECT_EQ(a.var("r"), "int32[BLOCK]");
  EXPECT_EQ(a.var("col"), "int32[BLOCK, 1]");
  EXPECT_EQ(a.var("row"), "int32[1, BLOCK]");
  EXPECT_EQ(a.result(), "int32[BLOCK, BLOCK]");
  Analysed known = analyse("return tl.arange(0, BLOCK * 2)\n", {{"BLOCK", SType::of_int(64)}}, "x, BLOCK: tl.constexpr");
  EXPECT_EQ(known.result(), "int32[128]");
}

// A helper returning a constant per dtype under constexpr ifs (FlagGems' limits), typed without the dtype: the
// returns' kinds differ by a condition tgrad cannot decide, so the value is unknown, not an error; with the dtype,
// the branch it takes decides.
TEST(Types, ConstantsReturnedPerDtype) {
  const std::string body = "d = dtype.value\nif d.is_floating():\n    return float('-inf')\nif d.is_int_signed():\n"
                           "    return -1 * 2 ** (d.int_bitwidth - 1)\nreturn 0\n";
  Analysed unknown = analyse(body, {}, "x, dtype: tl.constexpr");
  EXPECT_EQ(unknown.result(), "?") << unknown.errors;
  Analysed f16 = analyse(body, {{"dtype", SType::of_dtype(DType::FP16)}}, "x, dtype: tl.constexpr");
  EXPECT_EQ(f16.result(), "constexpr float -inf") << f16.errors;
  Analysed i32 = analyse(body, {{"dtype", SType::of_dtype(DType::Int32)}}, "x, dtype: tl.constexpr");
  EXPECT_EQ(i32.result(), "constexpr int -2147483648") << i32.errors;
}

// Triton 3.6's indexing (measured on the H100): the k-th None inserts an axis at position k of the shape so far, at
// its end past it; ':' keeps what is there. A program id indexed as a column or a row is a tensor of shape [1]
// (torchao's blockwise fp8 kernels); a 2-D tile's `x[None, :]` is [1, M, N].
TEST(Types, IndexingFollowsTriton36) {
  Analysed a = analyse("p = tl.program_id(0)\ncol = p[:, None]\nrow = p[None, :]\nm = col * 4 + row\nt = x[None, :]\n"
                       "return m\n",
                       {{"x", tile(DType::FP32, {Dim::known(4), Dim::known(8)})}});
  EXPECT_EQ(a.var("col"), "int32[1]");
  EXPECT_EQ(a.var("row"), "int32[1]");
  EXPECT_EQ(a.result(), "int32[1]");
  EXPECT_EQ(a.var("t"), "fp32[1, 4, 8]");
}

TEST(Types, PromotionFollowsTriton) {
  EXPECT_EQ(analyse("return x + y\n", {{"x", tile(DType::FP16, {N()})}, {"y", tile(DType::BF16, {N()})}}).result(), "fp16[N]");
  EXPECT_EQ(analyse("return x / y\n", {{"x", tile(DType::FP16, {N()})}, {"y", tile(DType::FP16, {N()})}}).result(), "fp32[N]");
  EXPECT_EQ(analyse("return x * 2.0\n", {{"x", tile(DType::FP16, {N()})}}).result(), "fp16[N]");
  EXPECT_EQ(analyse("return x + 4.0\n", {{"x", tile(DType::Int16, {N()})}}).result(), "fp32[N]");
  EXPECT_EQ(analyse("return x < y\n", {{"x", tile(DType::FP32, {N()})}, {"y", tile(DType::FP16, {N()})}}).result(), "int1[N]");
  EXPECT_EQ(analyse("return x.to(tl.float16)\n", {{"x", tile(DType::FP32, {N()})}}).result(), "fp16[N]");
}

TEST(Types, PointersLoadsAndStores) {
  Analysed a = analyse("offs = tl.arange(0, 128)\np = x + offs\nv = tl.load(p, mask=offs < n, other=0.0)\n"
                       "tl.store(y + offs, v.to(tl.float32), mask=offs < n)\nreturn v\n",
                       {{"x", ptr(DType::FP16)}, {"y", ptr(DType::FP32)}, {"n", tile(DType::Int32, {})}}, "x, y, n");
  EXPECT_EQ(a.var("p"), "*fp16[128]");
  EXPECT_EQ(a.result(), "fp16[128]");
  Analysed elem = analyse("return x.dtype.element_ty\n", {{"x", ptr(DType::BF16)}});
  EXPECT_EQ(elem.result(), "dtype bf16");
}

TEST(Types, ReductionsWithAxisAndKeepDims) {
  sema::ParamTypes p = {{"x", tile(DType::FP16, {Dim::symbolic("M"), N()})}};
  EXPECT_EQ(analyse("return tl.sum(x, axis=1)\n", p).result(), "fp16[M]");
  EXPECT_EQ(analyse("return tl.sum(x, axis=0, keep_dims=True)\n", p).result(), "fp16[1, N]");
  EXPECT_EQ(analyse("return tl.max(x, 1)\n", p).result(), "fp32[M]");
  EXPECT_EQ(analyse("return tl.sum(x)\n", p).result(), "fp16");
  EXPECT_EQ(analyse("return tl.argmax(x, 0)\n", p).result(), "int32[N]");
  // With their indices, tl.max / tl.min widen bf16 only (Triton's standard.py: _promote_bfloat16_to_float32).
  EXPECT_EQ(analyse("return tl.max(x, 1, return_indices=True)\n", p).result(), "tuple(fp16[M], int32[M])");
  sema::ParamTypes b = {{"x", tile(DType::BF16, {Dim::symbolic("M"), N()})}};
  EXPECT_EQ(analyse("return tl.min(x, 1, return_indices=True)\n", b).result(), "tuple(fp32[M], int32[M])");
  // Without them, integers narrower than 32 bits reduce in int32, as floats narrower do in fp32.
  sema::ParamTypes i8 = {{"x", tile(DType::Int8, {Dim::symbolic("M"), N()})}};
  EXPECT_EQ(analyse("return tl.max(x, 1)\n", i8).result(), "int32[M]");
  EXPECT_EQ(analyse("return tl.max(x, 1, return_indices=True)\n", i8).result(), "tuple(int8[M], int32[M])");
}

TEST(Types, DtypeIdentityIsEquality) {
  // Triton's dtypes are one object each: `is` compares them as == does, when both are known.
  EXPECT_EQ(analyse("return x.dtype.element_ty is tl.bfloat16\n", {{"x", ptr(DType::BF16)}}).result(), "constexpr bool True");
  EXPECT_EQ(analyse("return x.dtype.element_ty is tl.bfloat16\n", {{"x", ptr(DType::FP16)}}).result(), "constexpr bool False");
  EXPECT_EQ(analyse("return x.dtype.element_ty is not tl.float16\n", {{"x", ptr(DType::FP16)}}).result(), "constexpr bool False");
}

TEST(Types, DotShapesAndAccumulator) {
  sema::ParamTypes p = {{"x", tile(DType::FP16, {Dim::known(32), Dim::known(64)})},
                        {"y", tile(DType::FP16, {Dim::known(64), Dim::known(16)})},
                        {"z", tile(DType::FP32, {Dim::known(32), Dim::known(16)})}};
  EXPECT_EQ(analyse("return tl.dot(x, y)\n", p).result(), "fp32[32, 16]");
  EXPECT_EQ(analyse("return tl.dot(x, y, z)\n", p).result(), "fp32[32, 16]");
  EXPECT_EQ(analyse("return tl.dot(x, y, out_dtype=tl.float16)\n", p).result(), "fp16[32, 16]");
  Analysed bad = analyse("return tl.dot(y, x)\n", p);
  EXPECT_NE(bad.errors.find("t.py:6:12: error: tl.dot inner dimensions differ: [64, 16] and [32, 64]"), std::string::npos) << bad.errors;
}

TEST(Types, ShapeManipulation) {
  sema::ParamTypes p = {{"x", tile(DType::FP32, {Dim::known(4), Dim::known(8)})}};
  EXPECT_EQ(analyse("return tl.trans(x)\n", p).result(), "fp32[8, 4]");
  EXPECT_EQ(analyse("return tl.reshape(x, (32,))\n", p).result(), "fp32[32]");
  EXPECT_EQ(analyse("return tl.broadcast_to(x[None, :, :], (2, 4, 8))\n", p).result(), "fp32[2, 4, 8]");
  EXPECT_EQ(analyse("return tl.permute(x, (1, 0))\n", p).result(), "fp32[8, 4]");
  EXPECT_EQ(analyse("return x.shape[1]\n", p).result(), "constexpr int 8");
  EXPECT_NE(analyse("return tl.reshape(x, (16,))\n", p).errors.find("cannot reshape [4, 8] (32 elements) to [16]"), std::string::npos);
}

TEST(Constexpr, ArithmeticCdivAndNextPowerOfTwo) {
  EXPECT_EQ(analyse("return triton.cdiv(1000, 256)\n", {}).result(), "constexpr int 4");
  EXPECT_EQ(analyse("return triton.next_power_of_2(781)\n", {}).result(), "constexpr int 1024");
  EXPECT_EQ(analyse("return B * 2 + 1\n", {}, "x, B: tl.constexpr").result(), "constexpr int (B * 2) + 1");
  EXPECT_EQ(analyse("return B * 2 + 1\n", {{"B", SType::of_int(8)}}, "x, B: tl.constexpr").result(), "constexpr int 17");
  EXPECT_EQ(analyse("return tl.cdiv(x, 4)\n", {{"x", tile(DType::Int32, {})}}).result(), "int32");
}

TEST(ControlFlow, ConstexprIfSelectsOneBranch) {
  Analysed a = analyse("if FP16:\n    r = x.to(tl.float16)\nelse:\n    r = x\nreturn r\n",
                       {{"x", tile(DType::FP32, {N()})}, {"FP16", SType::of_bool(true)}}, "x, FP16: tl.constexpr");
  EXPECT_EQ(a.result(), "fp16[N]");
}

TEST(ControlFlow, RuntimeIfNeedsOneTypeOnBothPaths) {
  Analysed a = analyse("if n > 0:\n    r = x.to(tl.float16)\nelse:\n    r = x\nreturn r\n",
                       {{"x", tile(DType::FP32, {N()})}, {"n", tile(DType::Int32, {})}}, "x, n");
  EXPECT_NE(a.errors.find("'r' is fp16[N] on one path of this if and fp32[N] on the other"), std::string::npos) << a.errors;
  Analysed b = analyse("if n > 0:\n    r = x\nreturn r\n", {{"x", tile(DType::FP32, {N()})}, {"n", tile(DType::Int32, {})}}, "x, n");
  EXPECT_NE(b.errors.find("t.py:8:12: error: 'r' is not assigned on every path"), std::string::npos) << b.errors;
}

TEST(ControlFlow, ConstexprWithoutAValueMayGiveBranchesDifferentTypes) {
  Analysed a = analyse("if FP16:\n    r = x.to(tl.float16)\nelse:\n    r = x\nq = x.to(tl.float16) if FP16 else x\nreturn r\n",
                       {{"x", tile(DType::FP32, {N()})}}, "x, FP16: tl.constexpr");
  EXPECT_TRUE(a.info) << a.errors;
  EXPECT_EQ(a.result(), "?");
}

TEST(ControlFlow, LoopCarriedVariablesKeepTheirType) {
  sema::ParamTypes p = {{"x", tile(DType::FP16, {N()})}, {"n", tile(DType::Int32, {})}};
  Analysed ok = analyse("acc = tl.zeros([N], dtype=tl.float32)\nfor i in range(0, n):\n    acc += x\nreturn acc\n",
                        {{"x", tile(DType::FP16, {Dim::known(16)})}, {"n", tile(DType::Int32, {})}, {"N", SType::of_int(16)}},
                        "x, n, N: tl.constexpr");
  EXPECT_EQ(ok.result(), "fp32[16]") << ok.errors;
  Analysed bad = analyse("acc = tl.zeros([16], dtype=tl.float16)\nfor i in range(0, n):\n    acc = acc * 0.5 + tl.sum(x)\nreturn acc\n",
                         {{"x", tile(DType::FP32, {Dim::known(16)})}, {"n", tile(DType::Int32, {})}}, "x, n");
  EXPECT_NE(bad.errors.find("loop-carried variable 'acc' enters the loop as fp16[16] and leaves an iteration as fp32[16]"),
            std::string::npos)
      << bad.errors;
  Analysed var = analyse("for i in range(0, n):\n    j = i\nreturn j\n", {{"n", tile(DType::Int32, {})}}, "n");
  EXPECT_NE(var.errors.find("'j' is not assigned on every path"), std::string::npos) << var.errors;
  // A name first assigned in one loop is the body's own (Triton drops it after the loop): a later loop may
  // assign it a value of another type (fla's chunk_abc kernels: a [BC, BC] tile, then a [BC] row).
  Analysed again = analyse("for i in range(0, n):\n    t = x[:, None] * x[None, :]\nfor j in range(0, n):\n"
                           "    t = x\nfor k in range(0, n):\n    t = x[:, None] * x[None, :]\nreturn x\n",
                           {{"x", tile(DType::FP32, {Dim::known(16)})}, {"n", tile(DType::Int32, {})}}, "x, n");
  EXPECT_EQ(again.result(), "fp32[16]") << again.errors;
}

TEST(HelperCalls, TypesFlowThroughJitFunctions) {
  auto p = parse_text(
      "import triton\nimport triton.language as tl\n@triton.jit\ndef sq(a):\n    return a * a, a.to(tl.float16)\n"
      "@triton.jit\ndef f(x):\n    s, h = sq(x)\n    return h\n");
  ASSERT_TRUE(p->ok());
  auto info = sema::analyze(*p->module, *p->module->find_function("f"), {{"x", tile(DType::FP32, {N()})}}, *p->diags);
  ASSERT_TRUE(info) << p->all_messages();
  EXPECT_EQ(info->result.str(), "fp16[N]");
}

TEST(Errors, AtTheOffendingExpression) {
  sema::ParamTypes p = {{"x", tile(DType::FP16, {N()})}, {"y", tile(DType::FP32, {Dim::known(4)})},
                        {"z", tile(DType::FP32, {Dim::known(8)})}};
  EXPECT_NE(analyse("return tl.exp(x)\n", p).errors.find("t.py:6:12: error: math.exp expects fp32 or fp64, got fp16"), std::string::npos);
  EXPECT_NE(analyse("return y + z\n", p).errors.find("t.py:6:12: error: shapes [4] and [8] cannot be broadcast together"), std::string::npos);
  EXPECT_NE(analyse("return tl.arange(0, 12)\n", p).errors.find("the range must be a power of 2"), std::string::npos);
  EXPECT_NE(analyse("return w\n", p).errors.find("name 'w' is not defined"), std::string::npos);
  // A dtype called as a constructor (Liger-Kernel's multi-block softmax): Triton 3.6 refuses it (measured).
  EXPECT_NE(analyse("return tl.float32(0.0)\n", p)
                .errors.find("t.py:6:12: error: dtype fp32 is not callable (Triton 3.6 refuses it too); for a scalar "
                             "of that type write tl.full([], value, tl.float32)"),
            std::string::npos);
  // Triton 2.0's spellings, gone from Triton 3.6: the message says what to write instead.
  sema::ParamTypes sq = {{"a", tile(DType::FP16, {Dim::known(16), Dim::known(16)})}};
  EXPECT_NE(analyse("return tl.dot(a, a, trans_b=True)\n", sq, "a")
                .errors.find("tl.dot() has no keyword argument 'trans_b' in Triton 3.6 (Triton 2.0 had it): transpose "
                             "the operand instead, tl.dot(a, tl.trans(b))"),
            std::string::npos);
  EXPECT_NE(analyse("return tl.libdevice.tanh(y)\n", p)
                .errors.find("t.py:6:12: error: 'tl.libdevice' is not in Triton 3.6 (kernels written for Triton 2.0 use "
                             "it): write `from triton.language.extra import libdevice`"),
            std::string::npos);
  EXPECT_NE(analyse("return y ** 2\n", p).errors.find("'**' on tensors is not supported"), std::string::npos);
  EXPECT_NE(analyse("tl.static_assert(4 == 8, 'sizes')\n", p).errors.find("static assertion failed: sizes"), std::string::npos);
  EXPECT_NE(analyse("return y // 2.0\n", p).errors.find("'//' on floating-point tensors is not supported"), std::string::npos);
}

TEST(Assumptions, SymbolicDimensionsThatMustBeEqualAreRecorded) {
  Analysed a = analyse("return x + y\n", {{"x", tile(DType::FP32, {Dim::symbolic("M")})}, {"y", tile(DType::FP32, {N()})}});
  ASSERT_TRUE(a.info) << a.errors;
  ASSERT_EQ(a.info->assumptions.size(), 1u);
  EXPECT_EQ(a.info->assumptions[0].a.str(), "M");
  EXPECT_EQ(a.info->assumptions[0].b.str(), "N");
}

TEST(Assumptions, LoopCarriedSymbolicShapesThatMustBeEqualAreRecorded) {
  // `[BT, K]` in, `[BT, BK]` out (a dot with a [BK, BK] tile): valid Triton where K == BK.
  Analysed a = analyse("s = tl.zeros([16, K], dtype=tl.float32)\nfor i in range(0, n):\n"
                       "    s = s - tl.dot(s, tl.zeros([BK, BK], dtype=tl.float32))\nreturn s\n",
                       {{"n", tile(DType::Int32, {})}}, "n, K: tl.constexpr, BK: tl.constexpr");
  ASSERT_TRUE(a.info) << a.errors;
  bool assumed = false;
  for (const sema::ShapeAssumption &s : a.info->assumptions) assumed |= s.a.str() == "K" && s.b.str() == "BK";
  EXPECT_TRUE(assumed);
  // Known dimensions that differ are still an error.
  Analysed bad = analyse("s = tl.zeros([16, 32], dtype=tl.float32)\nfor i in range(0, n):\n"
                         "    s = tl.zeros([16, 64], dtype=tl.float32)\nreturn s\n",
                         {{"n", tile(DType::Int32, {})}}, "n");
  EXPECT_NE(bad.errors.find("enters the loop as fp32[16, 32]"), std::string::npos) << bad.errors;
}

TEST(Names, HelpersOfTritonsStandardAndCoreModules) {
  // nsa's bitonic top-k: tl.standard._log2, tl.core.get_int_dtype, tl.core.CONSTEXPR_0, x.numel.
  Analysed a = analyse("n: tl.constexpr = tl.standard._log2(x.numel)\n"
                       "idtype = tl.core.get_int_dtype(bitwidth=x.dtype.primitive_bitwidth, signed=True)\n"
                       "ix = x.to(idtype, bitcast=True)\nreturn ix, n, tl.core.CONSTEXPR_0\n",
                       {{"x", tile(DType::FP32, {Dim::known(16)})}}, "x");
  EXPECT_EQ(a.result(), "tuple(int32[16], constexpr int 4, constexpr int 0)") << a.errors;
  // Read without its caller (x untyped), a helper's shapes built from x are untyped, not an error.
  Analysed helper = analyse("n_outer: tl.constexpr = x.numel >> 2\nreturn tl.reshape(x, [n_outer, 2, 2])\n", {}, "x");
  EXPECT_TRUE(helper.info) << helper.errors;
}

// A jit helper's tl.constexpr parameter read without its caller may hold a tensor (attorch's
// calc_mean_and_inv_std indexes `last_dim_mask[None, :]`: Triton reads the annotation only on kernels): unknown.
TEST(Unknown, IndexedConstexprParameterWithoutAValue) {
  Analysed a = analyse("return tl.where(m[None, :], x, 0.0)\n", {}, "x, m: tl.constexpr");
  EXPECT_TRUE(a.info) << a.errors;
}

// tl.reduce with a combine function: the reduced shape as tl.sum's (an axis, keep_dims, no axis), a tuple of
// tensors reduced together, and an int1 `a and b` combine (FlagGems' all/any).
TEST(Types, ReduceWithACombineFunction) {
  auto type_of_return = [](const std::string &ret, const std::string &combine) {
    auto p = parse_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef c(a, b):\n    return " +
                        combine + "\n\n@triton.jit\ndef c2(a, n, b, m):\n    return a + b, n + m\n\n"
                        "@triton.jit\ndef f(x, y):\n    return " + ret + "\n");
    if (!p->ok()) return "PARSE: " + p->all_messages();
    const ast::Function *f = p->module->find_function("f");
    auto info = sema::analyze(*p->module, *f, {{"x", tile(DType::FP32, {Dim::known(4), Dim::known(8)})},
                                               {"y", tile(DType::Int1, {Dim::known(4), Dim::known(8)})}},
                              *p->diags);
    return info ? info->result.str() : "ERROR: " + p->all_messages();
  };
  EXPECT_EQ(type_of_return("tl.reduce(x, 1, c)", "a * b"), "fp32[4]");
  EXPECT_EQ(type_of_return("tl.reduce(x, 0, c, keep_dims=True)", "a * b"), "fp32[1, 8]");
  EXPECT_EQ(type_of_return("tl.reduce(x, None, c)", "tl.maximum(a, b)"), "fp32");
  EXPECT_EQ(type_of_return("tl.reduce((x, x), 1, c2)", "a"), "tuple(fp32[4], fp32[4])");
  EXPECT_EQ(type_of_return("tl.reduce(y, 1, c)", "a and b"), "int1[4]");
  EXPECT_NE(type_of_return("tl.reduce(x, 1, c)", "a > b").find("returns int1 for an input of fp32"), std::string::npos);
}

// tl.flip keeps its operand's type; its axis must be given (Triton 3.6 fails on dim=None) and have a power-of-two
// length, as Triton's standard.py asserts; pointers and scalars are refused.
TEST(Types, Flip) {
  const sema::ParamTypes types = {{"x", tile(DType::FP16, {Dim::known(4), N()})},
                                  {"y", tile(DType::FP32, {Dim::known(6), Dim::known(8)})}, {"z", ptr(DType::FP32)}};
  EXPECT_NE(analyse("return tl.flip(x)\n", types).result().find("tl.flip needs its axis: Triton 3.6 refuses dim=None"),
            std::string::npos);
  EXPECT_EQ(analyse("return tl.flip(x, 1)\n", types).result(), "fp16[4, N]");
  EXPECT_EQ(analyse("return tl.flip(x, 0)\n", types).result(), "fp16[4, N]");
  EXPECT_EQ(analyse("return tl.flip(y, dim=-1)\n", types).result(), "fp32[6, 8]");
  EXPECT_NE(analyse("return tl.flip(y, 0)\n", types).result().find("power-of-two length along its axis, got 6"),
            std::string::npos);
  EXPECT_NE(analyse("return tl.flip(x, 2)\n", types).result().find("axis 2 is out of range"), std::string::npos);
  EXPECT_NE(analyse("return tl.flip(z + tl.arange(0, 4), 0)\n", types).result().find("cannot reverse pointers"),
            std::string::npos);
}

TEST(Unknown, UntypedParametersPropagateWithoutErrors) {
  Analysed a = analyse("a = tl.exp(x) * 2\nb = tl.sum(a, axis=0)\nreturn b + y\n", {});
  EXPECT_TRUE(a.info) << a.errors;
  EXPECT_EQ(a.result(), "?");
}

TEST(TestKernels, EveryTestKernelAnalysesWithoutErrors) {
  for (const char *name : {"vector_add", "softmax", "layer_norm", "rms_norm", "matmul", "attention", "misc_ops",
                           "fn1", "helper_call", "mixed_module"}) {
    std::string path = std::string("tests/kernels/") + name + ".py";
    auto p = parse_text(read_file(path), path);
    ASSERT_TRUE(p->ok()) << p->all_messages();
    for (const auto &f : p->module->functions)
      EXPECT_TRUE(sema::analyze(*p->module, *f, {}, *p->diags)) << f->name << ": " << p->all_messages();
  }
}

}  // namespace
}  // namespace tgrad::testing
