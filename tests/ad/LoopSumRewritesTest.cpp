// Two rewrites of the loops that sum tl.dot products in a backward kernel:
// selections made only in rows the kernel's writes discard, dropped
// (src/ad/reverse/DiscardedRows.h), and a loop-invariant scalar factor of the
// products applied once after the loop (src/ad/reverse/DotScaling.h). Each
// with the kernels it must leave alone.
#include <gtest/gtest.h>

#include "src/ad/reverse/DiscardedRows.h"
#include "src/ad/reverse/DotScaling.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

sema::ParamTypes kernel_types() {
  sema::ParamTypes t;
  for (const char *p : {"Q", "K", "DK", "DQ"}) t[p] = sema::SType::tensor({sema::DType::FP16, true}, {});
  t["N"] = sema::SType::tensor({sema::DType::Int32, false}, {});
  t["scale"] = sema::SType::tensor({sema::DType::FP32, false}, {});
  return t;
}

// An owner of key rows `offs_n` summing over query blocks, as attention's dK owner does.
const std::string kOwnerHead =
    "def k(Q, K, DK, DQ, N, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):\n"
    "    offs_n = tl.program_id(0) * BN + tl.arange(0, BN)\n"
    "    offs_d = tl.arange(0, D)\n"
    "    kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < N, other=0.0)\n"
    "    dk = tl.zeros((BN, D), dtype=tl.float32)\n"
    "    for start_m in range(0, N, BM):\n"
    "        offs_m = start_m + tl.arange(0, BM)\n"
    "        q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)\n"
    "        s = tl.dot(kt, tl.trans(q))\n";

std::string owner(const std::string &loop_rest, const std::string &flush) {
  return std::string(kHead) + kOwnerHead + loop_rest + flush;
}

const char *kFlush = "    tl.atomic_add(DK + offs_n[:, None] * D + offs_d[None, :], dk, mask=offs_n[:, None] < N)\n";

int drop(Parsed &p) {
  return ad::reverse::drop_discarded_row_selections(*p.module->functions[0], *p.module, kernel_types(), p.sources);
}
int scale(Parsed &p) {
  return ad::reverse::scale_dot_sums_after_loops(*p.module->functions[0], *p.module, kernel_types(), p.sources);
}

// (A kernel a rewrite leaves alone must type: else it is left for that reason.)
bool types_cleanly(Parsed &p) {
  DiagEngine diags(p.sources);
  return sema::analyze(*p.module, *p.module->functions[0], kernel_types(), diags) && !diags.has_errors();
}

void expect_body(Parsed &p, const std::string &want_text) {
  auto want = parse_text(want_text);
  ASSERT_TRUE(want->ok()) << want->all_messages();
  EXPECT_TRUE(ast::equal(p.module->functions[0]->body, want->module->functions[0]->body))
      << emit::print_function(*p.module->functions[0]) << "\nwant:\n" << emit::print_function(*want->module->functions[0]);
}

TEST(DiscardedRows, DropsSelectionsByTheOwnersRowBound) {
  const std::string loop =
      "        s = tl.where(offs_n[:, None] < N, s, float(\"-inf\"))\n"
      "        p = tl.exp(s)\n"
      "        dk += tl.dot(tl.where(offs_n[:, None] < N, p, 0.0).to(tl.float16), q)\n";
  auto p = parse_text(owner(loop, kFlush));
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(drop(*p), 2);
  // (`s = tl.where(..., s, ...)` is now `s = s`: gone.)
  expect_body(*p, owner("        p = tl.exp(s)\n        dk += tl.dot(p.to(tl.float16), q)\n", kFlush));
}

TEST(DiscardedRows, FollowsTheMaskThroughANameAndAConjunction) {
  // The flush's mask is a name for the bound and the lanes of D: the bound is one of its conjuncts.
  const std::string loop = "        dk += tl.dot(tl.where(offs_n[:, None] < N, s, 0.0).to(tl.float16), q)\n";
  const std::string flush =
      "    rows = offs_n[:, None] < N\n"
      "    tl.store(DK + offs_n[:, None] * D + offs_d[None, :], dk, mask=rows & (offs_d[None, :] < D))\n";
  auto p = parse_text(owner(loop, flush));
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(drop(*p), 1);
  expect_body(*p, owner("        dk += tl.dot(s.to(tl.float16), q)\n", flush));
}

TEST(DiscardedRows, KeepsSelectionsWhoseRowsMeetOthers) {
  const char *cases[] = {
      // The rows are summed over (the column sum reaches every row's values).
      "        dk += tl.dot(tl.broadcast_to(tl.sum(tl.where(offs_n[:, None] < N, s, 0.0), 0)[None, :], (BN, BM))"
      ".to(tl.float16), q)\n",
      // The selected tile is a dot's right operand: its rows are contracted.
      "        dk += tl.dot(tl.dot(kt, tl.trans(kt)).to(tl.float16), tl.where(offs_n[:, None] < N, kt, 0.0))\n",
      // The same written with `@`: the right operand's rows are contracted.
      "        dk += (tl.dot(kt, tl.trans(kt)).to(tl.float16) @ tl.where(offs_n[:, None] < N, kt, 0.0)).to(tl.float32)\n",
      // The selected tile is also summed whole.
      "        t = tl.where(offs_n[:, None] < N, s, 0.0)\n"
      "        dk += tl.dot(t.to(tl.float16), q) * tl.sum(t)\n",
  };
  for (const char *loop : cases) {
    auto p = parse_text(owner(loop, kFlush));
    ASSERT_TRUE(p->ok()) << p->all_messages() << loop;
    DiagEngine diags(p->sources);
    ASSERT_TRUE(sema::analyze(*p->module, *p->module->functions[0], kernel_types(), diags) && !diags.has_errors())
        << loop;
    const ast::StmtList before = ast::clone(p->module->functions[0]->body);
    EXPECT_EQ(drop(*p), 0) << loop;
    EXPECT_TRUE(ast::equal(p->module->functions[0]->body, before)) << loop;
  }
}

TEST(DiscardedRows, KeepsSelectionsWhereAWriteKeepsThoseRows) {
  const std::string loop = "        dk += tl.dot(tl.where(offs_n[:, None] < N, s, 0.0).to(tl.float16), q)\n";
  const char *flushes[] = {
      // Written without a mask: every row is kept.
      "    tl.store(DK + offs_n[:, None] * D + offs_d[None, :], dk)\n",
      // A second write under another mask.
      "    tl.atomic_add(DK + offs_n[:, None] * D + offs_d[None, :], dk, mask=offs_n[:, None] < N)\n"
      "    tl.store(DQ + offs_n[:, None] * D + offs_d[None, :], dk, mask=offs_n[:, None] < 2 * N)\n",
  };
  for (const char *flush : flushes) {
    auto p = parse_text(owner(loop, flush));
    ASSERT_TRUE(p->ok()) << p->all_messages();
    ASSERT_TRUE(types_cleanly(*p)) << flush;
    EXPECT_EQ(drop(*p), 0) << flush;
  }
}

TEST(DiscardedRows, KeepsAPredicateWhoseNamesChange) {
  // `offs_n` is assigned twice: the mask at the flush is not the one in the loop.
  const std::string text = std::string(kHead) +
                           "def k(Q, K, DK, DQ, N, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):\n"
                           "    offs_n = tl.arange(0, BN)\n"
                           "    offs_d = tl.arange(0, D)\n"
                           "    dk = tl.zeros((BN, D), dtype=tl.float32)\n"
                           "    for start_m in range(0, N, BM):\n"
                           "        offs_m = start_m + tl.arange(0, BM)\n"
                           "        q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])\n"
                           "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
                           "        s = tl.dot(kt, tl.trans(q))\n"
                           "        dk += tl.dot(tl.where(offs_n[:, None] < N, s, 0.0).to(tl.float16), q)\n"
                           "    offs_n = offs_n + BN\n" +
                           kFlush;
  auto p = parse_text(text);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ASSERT_TRUE(types_cleanly(*p));
  EXPECT_EQ(drop(*p), 0);
}

// A dQ kernel: rows of queries, a loop over key blocks.
const std::string kDqHead =
    "def k(Q, K, DK, DQ, N, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):\n"
    "    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)\n"
    "    offs_d = tl.arange(0, D)\n"
    "    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])\n";
const char *kDqLoop =
    "    for start_n in range(0, N, BN):\n"
    "        offs_n = start_n + tl.arange(0, BN)\n"
    "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
    "        s = tl.dot(q, tl.trans(kt))\n";
const char *kDqStore = "    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq)\n";

TEST(DotScaling, ScalesTheSumOnceAfterTheLoop) {
  auto p = parse_text(std::string(kHead) + kDqHead + "    dq = tl.zeros((BM, D), dtype=tl.float32)\n" + kDqLoop +
                      "        ds = tl.where(offs_n[None, :] < N, s * 0.5, 0.0) * scale\n"
                      "        dq += tl.dot(ds.to(tl.float16), kt)\n" + kDqStore);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(scale(*p), 1);
  expect_body(*p, std::string(kHead) + kDqHead + "    dq = tl.zeros((BM, D), dtype=tl.float32)\n" + kDqLoop +
                      "        ds = tl.where(offs_n[None, :] < N, s, 0.0)\n"
                      "        dq += tl.dot(ds.to(tl.float16), kt)\n"
                      "    dq = dq * (scale * 0.5)\n" + kDqStore);
}

TEST(DotScaling, ScalesAnInlineOperandAndAFactorOfTheProduct) {
  auto p = parse_text(std::string(kHead) + kDqHead + "    dq = tl.zeros((BM, D), dtype=tl.float32)\n" + kDqLoop +
                      "        dq = dq + tl.dot((s * scale).to(tl.float16), kt) * 2.0\n" + kDqStore);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(scale(*p), 1);
  expect_body(*p, std::string(kHead) + kDqHead + "    dq = tl.zeros((BM, D), dtype=tl.float32)\n" + kDqLoop +
                      "        dq = dq + tl.dot(s.to(tl.float16), kt)\n"
                      "    dq = dq * (2.0 * scale)\n" + kDqStore);
}

TEST(DotScaling, LeavesSumsItCannotScaleAfterwards) {
  const char *cases[] = {
      // The sum does not start at zero: the scale would apply to its start too.
      "    dq = tl.load(DQ + offs_m[:, None] * D + offs_d[None, :]).to(tl.float32)\n"
      "    for start_n in range(0, N, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        dq += tl.dot((tl.dot(q, tl.trans(kt)) * scale).to(tl.float16), kt)\n",
      // The factor changes in the loop.
      "    dq = tl.zeros((BM, D), dtype=tl.float32)\n"
      "    f = scale\n"
      "    for start_n in range(0, N, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        dq += tl.dot((tl.dot(q, tl.trans(kt)) * f).to(tl.float16), kt)\n"
      "        f = f * 0.5\n",
      // The loop reads the sum (a running rescale).
      "    dq = tl.zeros((BM, D), dtype=tl.float32)\n"
      "    for start_n in range(0, N, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        dq += tl.dot((tl.dot(q, tl.trans(kt)) * scale).to(tl.float16), kt)\n"
      "        dq = tl.minimum(dq, 1.0)\n",
      // The scale is rounded by an integer cast: it cannot move past it.
      "    dq = tl.zeros((BM, D), dtype=tl.float32)\n"
      "    for start_n in range(0, N, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        dq += tl.dot((tl.dot(q, tl.trans(kt)) * scale).to(tl.int8).to(tl.float16), kt)\n",
      // A tile factor, not a scalar.
      "    dq = tl.zeros((BM, D), dtype=tl.float32)\n"
      "    w = tl.load(Q + offs_m).to(tl.float32)[:, None]\n"
      "    for start_n in range(0, N, BN):\n"
      "        offs_n = start_n + tl.arange(0, BN)\n"
      "        kt = tl.load(K + offs_n[:, None] * D + offs_d[None, :])\n"
      "        dq += tl.dot((tl.dot(q, tl.trans(kt)) * w).to(tl.float16), kt)\n",
  };
  for (const char *body : cases) {
    auto p = parse_text(std::string(kHead) + kDqHead + body + kDqStore);
    ASSERT_TRUE(p->ok()) << p->all_messages() << body;
    DiagEngine diags(p->sources);
    ASSERT_TRUE(sema::analyze(*p->module, *p->module->functions[0], kernel_types(), diags) && !diags.has_errors())
        << body;
    EXPECT_EQ(scale(*p), 0) << body;
  }
}

}  // namespace
}  // namespace tgrad::testing
