// Splitting a loop so that the iterations whose masks hold in every lane run
// without them (src/ad/reverse/MaskPeeling.h): the split's bounds, the masks
// dropped, and the loops it must leave alone.
#include <gtest/gtest.h>

#include "src/ad/reverse/MaskPeeling.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

sema::ParamTypes kernel_types(const char *n_type = "i32") {
  sema::ParamTypes t;
  for (const char *p : {"Q", "K", "DQ"}) t[p] = sema::SType::tensor({sema::DType::FP16, true}, {});
  t["N"] = sema::SType::tensor({std::string(n_type) == "i32" ? sema::DType::Int32 : sema::DType::FP32, false}, {});
  return t;
}

const std::string kPrologue =
    "def k(Q, K, DQ, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):\n"
    "    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)\n"
    "    offs_d = tl.arange(0, D)\n"
    "    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])\n"
    "    dq = tl.zeros((BM, D), dtype=tl.float32)\n";

// Peels `text`'s kernel; returns how many loops were split.
int peel(Parsed &p, const sema::ParamTypes &types, const std::set<std::string> &generic = {}) {
  ad::NameAllocator names;
  names.reserve_all(*p.module, *p.module->functions[0]);
  return ad::reverse::peel_masked_iterations(*p.module->functions[0], names, *p.module, types, generic, p.sources);
}

TEST(MaskPeeling, RunsTheFullBlocksOfARaggedLoopWithoutMasks) {
  const std::string body =
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < N, other=0.0)\n"
      "        s = tl.dot(q, tl.trans(k))\n"
      "        s = tl.where((offs_m[:, None] >= offs_n[None, :]) & (offs_n[None, :] < N), s, 0.0)\n"
      "        dq += tl.dot(s.to(tl.float16), k)\n";
  auto p = parse_text(std::string(kHead) + kPrologue + "    for start_n in range(0, N, BN):\n" + body +
                      "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(peel(*p, kernel_types()), 1);
  auto want = parse_text(
      std::string(kHead) + kPrologue +
      "    start_n_count = (max(N, 0) + BN - 1) // BN\n"
      "    start_n_last_unmasked = min(min(start_n_count, max(N, 0) // BN), max(tl.program_id(0) * BM + 1, 0) // BN)\n"
      "    for start_n in range(0, start_n_last_unmasked * BN, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        s = tl.dot(q, tl.trans(k))\n"
      "        dq += tl.dot(s.to(tl.float16), k)\n"
      "    for start_n in tl.range(start_n_last_unmasked * BN, N, BN, num_stages=1):\n" + body +
      "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n");
  ASSERT_TRUE(want->ok()) << want->all_messages();
  // (The causal mask and the ragged one hold together: `s = tl.where(mask, s, 0.0)` goes.)
  EXPECT_TRUE(ast::equal(p->module->functions[0]->body, want->module->functions[0]->body))
      << emit::print_function(*p->module->functions[0]);
}

TEST(MaskPeeling, LeavesAMaskThatShapesAValue) {
  // The mask is [BM, BN] and the value it selects [BM, 1]: True in its place would sum BN times less.
  auto p = parse_text(std::string(kHead) + kPrologue +
                      "    for start_n in range(0, N, BN):\n"
                      "        offs_n = start_n + tl.arange(0, BN)\n"
                      "        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
                      "        qs = tl.sum(q.to(tl.float32), 1)[:, None]\n"
                      "        r = tl.sum(tl.where(offs_n[None, :] < N, qs, 0.0), 1)\n"
                      "        dq += tl.dot(tl.dot(q, tl.trans(k)).to(tl.float16), k) * r[:, None]\n"
                      "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  DiagEngine diags(p->sources);  // (it types: the split is refused for the shape, not for an error)
  ASSERT_TRUE(sema::analyze(*p->module, *p->module->functions[0], kernel_types(), diags) && !diags.has_errors());
  const ast::StmtList before = ast::clone(p->module->functions[0]->body);
  EXPECT_EQ(peel(*p, kernel_types()), 0);
  EXPECT_TRUE(ast::equal(p->module->functions[0]->body, before));
}

TEST(MaskPeeling, LeavesABoundThatMayNotBeAnInteger) {
  // N only bounds lanes here: a representative type may make it a float, for which the split does not compile.
  auto p = parse_text(std::string(kHead) + kPrologue +
                      "    for start_n in range(0, 1024, BN):\n"
                      "        offs_n = start_n + tl.arange(0, BN)\n"
                      "        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < N, other=0.0)\n"
                      "        dq += tl.dot(q, tl.trans(k)).to(tl.float32)\n"
                      "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(peel(*p, kernel_types(), {"N"}), 0);
  EXPECT_EQ(peel(*p, kernel_types()), 1);  // given as an integer, it splits
}

TEST(MaskPeeling, BoundsTheRunByAMaskUnderAConstexprIfOnlyWhereItIsCompiled) {
  // A kernel generic over CAUSAL: the diagonal's mask is compiled only with CAUSAL, so it ends the unmasked run only
  // then; without it the run goes to the ragged end.
  const std::string kCausalPrologue =
      "def k(Q, K, DQ, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):\n"
      "    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)\n"
      "    offs_d = tl.arange(0, D)\n"
      "    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])\n"
      "    dq = tl.zeros((BM, D), dtype=tl.float32)\n";
  auto body = [](const char *causal, const char *ragged) {
    return std::string("        offs_n = start_n + tl.arange(0, BN)\n"
                       "        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
                       "        s = tl.dot(q, tl.trans(k))\n"
                       "        if CAUSAL:\n"
                       "            s = tl.where(") + causal + ", s, 0.0)\n" +
           "        else:\n"
           "            s = tl.where(" + ragged + ", s, 0.0)\n" +
           "        dq += tl.dot(s.to(tl.float16), k)\n";
  };
  auto p = parse_text(std::string(kHead) + kCausalPrologue + "    for start_n in range(0, N, BN):\n" +
                      body("(offs_m[:, None] >= offs_n[None, :]) & (offs_n[None, :] < N)", "offs_n[None, :] < N") +
                      "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  sema::ParamTypes types = kernel_types();
  EXPECT_EQ(peel(*p, types), 1);
  auto want = parse_text(
      std::string(kHead) + kCausalPrologue +
      "    start_n_count = (max(N, 0) + BN - 1) // BN\n"
      "    start_n_last_unmasked = min(start_n_count, max(N, 0) // BN)\n"
      "    if CAUSAL:\n"
      "        start_n_last_unmasked = min(start_n_last_unmasked, max(tl.program_id(0) * BM + 1, 0) // BN)\n"
      "    for start_n in range(0, start_n_last_unmasked * BN, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        s = tl.dot(q, tl.trans(k))\n"
      "        dq += tl.dot(s.to(tl.float16), k)\n" +
      "    for start_n in tl.range(start_n_last_unmasked * BN, N, BN, num_stages=1):\n" +
      body("(offs_m[:, None] >= offs_n[None, :]) & (offs_n[None, :] < N)", "offs_n[None, :] < N") +
      "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n");
  ASSERT_TRUE(want->ok()) << want->all_messages();
  EXPECT_TRUE(ast::equal(p->module->functions[0]->body, want->module->functions[0]->body))
      << emit::print_function(*p->module->functions[0]) << "\nwant:\n" << emit::print_function(*want->module->functions[0]);
}

}  // namespace
}  // namespace tgrad::testing
