// Holding an owner loop's tiles transposed (src/ad/reverse/TileOrientation.h):
// the rewrite removes the register transposes of computed tiles, leaves loops
// it cannot improve alone, and keeps the kernel typing.
#include <gtest/gtest.h>

#include "src/ad/reverse/TileOrientation.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

sema::ParamTypes kernel_types() {
  sema::ParamTypes t;
  for (const char *p : {"Q", "K", "DO", "DK", "DV"}) t[p] = sema::SType::tensor({sema::DType::FP16, true}, {});
  t["N"] = sema::SType::tensor({sema::DType::Int32, false}, {});
  return t;
}

// The loop of the kernel's body (its last loop statement).
ast::For &loop_of(ast::Function &fn) {
  ast::For *loop = nullptr;
  for (ast::StmtPtr &s : fn.body)
    if (auto *f = ast::dyn_cast<ast::For>(s.get())) loop = f;
  return *loop;
}

const std::string kPrologue =
    "def k(Q, K, DO, DK, DV, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):\n"
    "    offs_n = tl.program_id(0) * BN + tl.arange(0, BN)\n"
    "    offs_d = tl.arange(0, D)\n"
    "    k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
    "    kt = tl.trans(k)\n"
    "    keep = offs_n[None, :] < N\n"
    "    dk = tl.zeros((BN, D), dtype=tl.float32)\n"
    "    dv = tl.zeros((BN, D), dtype=tl.float32)\n"
    "    for m in range(0, N):\n"
    "        offs_m = m * BM + tl.arange(0, BM)\n"
    "        q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])\n"
    "        do = tl.load(DO + offs_m[:, None] * D + offs_d[None, :])\n"
    "        row = tl.sum(do.to(tl.float32), 1)\n";
const std::string kEpilogue =
    "    tl.store(DK + offs_n[:, None] * D + offs_d[None, :], dk)\n"
    "    tl.store(DV + offs_n[:, None] * D + offs_d[None, :], dv)\n";

TEST(TileOrientation, HoldsTheScoresTransposedSoNoComputedTileIsTransposed) {
  auto p = parse_text(std::string(kHead) + kPrologue +
                      "        s = tl.dot(q, kt)\n"
                      "        p = tl.exp(tl.where(keep, s, float('-inf')) - row[:, None])\n"
                      "        p16 = p.to(tl.float16)\n"
                      "        dv = dv + tl.dot(tl.trans(p16), do)\n"
                      "        ds = p * 2.0 + tl.broadcast_to(tl.expand_dims(row, 1), p.shape)\n"
                      "        g = tl.dot(tl.trans(q), ds.to(tl.float16))\n"
                      "        gk = tl.trans(g)\n"
                      "        dk = dk + gk\n" +
                      kEpilogue);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ast::Function &fn = *p->module->functions[0];
  DiagEngine diags(p->sources);
  std::optional<sema::TypeInfo> types = sema::analyze(*p->module, fn, kernel_types(), diags);
  ASSERT_TRUE(types && !diags.has_errors());
  EXPECT_EQ(ad::reverse::orient_loop_tiles(fn, loop_of(fn), *types), "[BM, BN] tiles as [BN, BM]");

  auto want = parse_text(std::string(kHead) + kPrologue +
                         "        s = tl.dot(k, tl.trans(q))\n"
                         "        p = tl.exp(tl.where(offs_n[:, None] < N, s, float('-inf')) - row[None, :])\n"
                         "        p16 = p.to(tl.float16)\n"
                         "        dv = dv + tl.dot(p16, do)\n"
                         "        ds = p * 2.0 + tl.broadcast_to(tl.expand_dims(row, 0), p.shape)\n"
                         "        gk = tl.dot(ds.to(tl.float16), q)\n"
                         "        dk = dk + gk\n" +
                         kEpilogue);
  ASSERT_TRUE(want->ok()) << want->all_messages();
  EXPECT_TRUE(ast::equal(fn.body, want->module->functions[0]->body)) << emit::print_function(fn);
  // It still types, with the same shapes of what leaves the loop.
  DiagEngine again(p->sources);
  EXPECT_TRUE(sema::analyze(*p->module, fn, kernel_types(), again) && !again.has_errors());
}

TEST(TileOrientation, LeavesALoopWithoutRegisterTransposesAlone) {
  auto p = parse_text(std::string(kHead) + kPrologue +
                      "        s = tl.dot(k, tl.trans(q))\n"
                      "        p16 = tl.exp(s).to(tl.float16)\n"
                      "        dv = dv + tl.dot(p16, do)\n" +
                      kEpilogue);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ast::Function &fn = *p->module->functions[0];
  const ast::StmtList before = ast::clone(fn.body);
  DiagEngine diags(p->sources);
  std::optional<sema::TypeInfo> types = sema::analyze(*p->module, fn, kernel_types(), diags);
  ASSERT_TRUE(types && !diags.has_errors());
  EXPECT_EQ(ad::reverse::orient_loop_tiles(fn, loop_of(fn), *types), "");
  EXPECT_TRUE(ast::equal(fn.body, before));
}

TEST(TileOrientation, GivesUpOnAnExpressionItCannotTranspose) {
  // tl.cumsum along the rows has no transposed spelling the pass knows: nothing changes.
  auto p = parse_text(std::string(kHead) + kPrologue +
                      "        s = tl.dot(q, kt)\n"
                      "        c = tl.cumsum(s, 1)\n"
                      "        p16 = c.to(tl.float16)\n"
                      "        dv = dv + tl.dot(tl.trans(p16), do)\n" +
                      kEpilogue);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ast::Function &fn = *p->module->functions[0];
  const ast::StmtList before = ast::clone(fn.body);
  DiagEngine diags(p->sources);
  std::optional<sema::TypeInfo> types = sema::analyze(*p->module, fn, kernel_types(), diags);
  ASSERT_TRUE(types && !diags.has_errors());
  EXPECT_EQ(ad::reverse::orient_loop_tiles(fn, loop_of(fn), *types), "");
  EXPECT_TRUE(ast::equal(fn.body, before));
}

}  // namespace
}  // namespace tgrad::testing
