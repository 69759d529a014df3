// Rows or columns of a tile that are zero for certain (src/ad/reverse/ZeroLanes.h): what proves them, and what
// must not.
#include <gtest/gtest.h>

#include "src/ad/reverse/ZeroLanes.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

// An owner kernel of dA in the shape OwnerComputes writes it: the upstream gradient loaded under a row bound,
// `loop_body` (reading `dc`, writing `tile`) summed over the forward's programs.
std::string owner(const std::string &loop_body, const std::string &dc_load =
                                                    "tl.load(DC + offs_m_col * N + offs_n[None, :], mask=c_mask, "
                                                    "other=0.0)") {
  return std::string(kHead) +
         "def k(B, DC, DA, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, n_programs):\n"
         "    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)\n"
         "    offs_k = tl.arange(0, BK)\n"
         "    offs_m_col = offs_m[:, None]\n"
         "    rows = offs_m_col < M\n"
         "    tile = tl.zeros((BM, BK), dtype=tl.float32)\n"
         "    for pid_n in range(0, n_programs):\n"
         "        offs_n = pid_n * BN + tl.arange(0, BN)\n"
         "        c_mask = rows & (offs_n[None, :] < N)\n"
         "        dc = " + dc_load + "\n"
         "        b = tl.load(B + offs_k[:, None] * N + offs_n[None, :], mask=offs_k[:, None] < K, other=0.0)\n" +
         loop_body + "    tl.atomic_add(DA + offs_m_col * K + offs_k[None, :], tile, mask=offs_k[None, :] < K)\n";
}

std::optional<ad::reverse::ZeroBound> bound_of(const std::string &text, const std::string &tile = "tile") {
  auto p = parse_text(text);
  EXPECT_TRUE(p->ok()) << p->all_messages();
  return ad::reverse::zero_outside_bound(*p->module->functions[0], tile);
}

TEST(ZeroLanes, RowsOfAProductWhoseLeftOperandIsLoadedAsZeroThere) {
  auto b = bound_of(owner("        tile = tile + tl.dot(dc.to(tl.float16), tl.trans(b))\n"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->predicate, "rows");
  EXPECT_EQ(b->index, "offs_m");
  EXPECT_EQ(b->bound, "M");
  EXPECT_EQ(b->axis, 0);
  // Through a relu's selection, a negation and a scale too.
  EXPECT_TRUE(bound_of(owner("        g = tl.where(dc > 0, -dc * 2.0, 0.0)\n"
                             "        tile += tl.dot(g.to(tl.float16), tl.trans(b))\n")));
}

TEST(ZeroLanes, NotWhereTheZerosAreNotCertain) {
  // The right operand's rows say nothing about the product's rows.
  EXPECT_FALSE(bound_of(owner("        tile = tile + tl.dot(tl.trans(b), dc.to(tl.float16))\n")));
  // A load without `other`: Triton leaves masked lanes undefined.
  EXPECT_FALSE(bound_of(owner("        tile = tile + tl.dot(dc.to(tl.float16), tl.trans(b))\n",
                              "tl.load(DC + offs_m_col * N + offs_n[None, :], mask=c_mask)")));
  // A mask without the bound.
  EXPECT_FALSE(bound_of(owner("        tile = tile + tl.dot(dc.to(tl.float16), tl.trans(b))\n",
                              "tl.load(DC + offs_m_col * N + offs_n[None, :], mask=offs_n[None, :] < N, other=0.0)")));
  // Something added that is not zero there; a division (0 / 0).
  EXPECT_FALSE(bound_of(owner("        tile = tile + tl.dot(dc.to(tl.float16), tl.trans(b)) + 1.0\n")));
  EXPECT_FALSE(bound_of(owner("        tile = tile + tl.dot((dc / dc).to(tl.float16), tl.trans(b))\n")));
  // Rows that the bound's own other branch of an or would keep.
  EXPECT_FALSE(bound_of(owner("        tile = tile + tl.dot(dc.to(tl.float16), tl.trans(b))\n",
                              "tl.load(DC + offs_m_col * N + offs_n[None, :], mask=rows | (offs_n[None, :] < N), "
                              "other=0.0)")));
  // An accumulator multiplied by itself is still zero there, but one assigned by a tuple is not analysed.
  EXPECT_FALSE(bound_of(owner("        tile, other = tile + tl.dot(dc.to(tl.float16), tl.trans(b)), 0\n")));
}

TEST(ZeroLanes, ColumnsOfAProductWhoseRightOperandIsLoadedAsZeroThere) {
  const std::string text = std::string(kHead) +
                           "def k(A, DC, DB, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, n):\n"
                           "    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)\n"
                           "    offs_k = tl.arange(0, BK)\n"
                           "    cols = offs_n[None, :] < N\n"
                           "    tile = tl.zeros((BK, BN), dtype=tl.float32)\n"
                           "    for pid_m in range(0, n):\n"
                           "        offs_m = pid_m * BM + tl.arange(0, BM)\n"
                           "        dc = tl.load(DC + offs_m[:, None] * N + offs_n[None, :], mask=(offs_m[:, None] < M) & cols, other=0.0)\n"
                           "        a = tl.load(A + offs_m[:, None] * K + offs_k[None, :])\n"
                           "        tile = tile + tl.dot(tl.trans(a), dc.to(tl.float16))\n"
                           "    tl.atomic_add(DB + offs_k[:, None] * N + offs_n[None, :], tile)\n";
  auto b = bound_of(text);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->predicate, "cols");
  EXPECT_EQ(b->axis, 1);
  EXPECT_EQ(b->index, "offs_n");
}

TEST(ZeroLanes, SameTopLevelValue) {
  auto a = parse_text(std::string(kHead) + "def f(M, BM: tl.constexpr):\n    pid = tl.program_id(0)\n"
                      "    offs = pid * BM + tl.arange(0, BM)\n    x = offs % M\n");
  auto b = parse_text(std::string(kHead) + "def g(M, BM: tl.constexpr):\n    pid = tl.program_id(0)\n"
                      "    offs = pid * BM + tl.arange(0, BM)\n");
  auto c = parse_text(std::string(kHead) + "def h(M, BM: tl.constexpr):\n    pid = tl.program_id(1)\n"
                      "    offs = pid * BM + tl.arange(0, BM)\n");
  ASSERT_TRUE(a->ok() && b->ok() && c->ok());
  EXPECT_TRUE(ad::reverse::same_top_level_value(*a->module->functions[0], *b->module->functions[0], "offs"));
  // The same text, another program axis.
  EXPECT_FALSE(ad::reverse::same_top_level_value(*a->module->functions[0], *c->module->functions[0], "offs"));
}

}  // namespace
}  // namespace tgrad::testing
