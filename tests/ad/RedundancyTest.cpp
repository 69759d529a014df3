// The passes that remove repeated work before and after differentiation:
// common subexpressions of a kernel's top level, hoisting out of a loop, and
// the one-pass version of a multi-pass kernel.
#include <gtest/gtest.h>

#include "src/ad/Redundancy.h"
#include "src/ad/SinglePass.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

// The module's first function, in A-normal form as written (the tests write it so).
ad::AnfFunction anf_of(const Parsed &p) {
  ad::AnfFunction anf;
  anf.fn = std::make_unique<ast::Function>();
  anf.fn->name = p.module->functions[0]->name;
  for (const ast::Param &q : p.module->functions[0]->params) anf.fn->params.push_back({q.name, q.span, nullptr, nullptr});
  anf.fn->body = ast::clone(p.module->functions[0]->body);
  return anf;
}

TEST(CommonSubexpressions, MergesEqualValuesAndKeepsTheUsersName) {
  auto p = parse_text(std::string(kHead) +
                      "def k(X, Y, N):\n"
                      "    t = tl.arange(0, 16)\n    t_2 = tl.arange(0, 16)\n    cols = t_2 + N\n    tmp = t + N\n"
                      "    a = tl.load(X + cols)\n    b = tl.load(X + tmp)\n    tl.store(Y + cols, a * b)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ad::AnfFunction anf = anf_of(*p);
  ad::eliminate_common_subexpressions(anf, {"X", "Y"}, {"cols", "a", "b"});
  EXPECT_EQ(emit::print_stmts(anf.fn->body),
            "t = tl.arange(0, 16)\ncols = t + N\na = tl.load(X + cols)\ntl.store(Y + cols, a * a)\n");
}

TEST(CommonSubexpressions, KeepsLoadsOfABufferTheKernelWrites) {
  auto p = parse_text(std::string(kHead) +
                      "def k(S, N):\n"
                      "    a = tl.load(S + N)\n    tl.store(S + N, a + 1.0)\n    b = tl.load(S + N)\n"
                      "    tl.store(S + N + 1, b)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ad::AnfFunction anf = anf_of(*p);
  ad::eliminate_common_subexpressions(anf, {"S"}, {"a", "b"});
  EXPECT_NE(emit::print_stmts(anf.fn->body).find("b = tl.load(S + N)"), std::string::npos)
      << emit::print_stmts(anf.fn->body);
}

TEST(Hoisting, MovesWhatDoesNotDependOnTheLoop) {
  auto p = parse_text(std::string(kHead) +
                      "def k(W, X, dX, N):\n"
                      "    cols = tl.arange(0, 16)\n    w = tl.load(W + cols)\n    row = pid * N\n"
                      "    x = tl.load(X + row + cols)\n    tl.store(dX + row + cols, x * w)\n    d = tl.load(dX + cols)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ast::StmtList body = ast::clone(p->module->functions[0]->body), before;
  ad::Purity purity(body, {"W", "X", "dX"});
  EXPECT_EQ(ad::hoist_loop_invariants(body, before, purity, "pid"), 2u);
  EXPECT_EQ(emit::print_stmts(before), "cols = tl.arange(0, 16)\nw = tl.load(W + cols)\n");
  // The row's loads stay, and so does the load of a buffer the loop writes.
  EXPECT_NE(emit::print_stmts(body).find("d = tl.load(dX + cols)"), std::string::npos) << emit::print_stmts(body);
}

TEST(SinglePass, LoopsOverOneRangeRunOnce) {
  auto p = parse_text(std::string(kHead) +
                      "def k(X, Y, N, B: tl.constexpr):\n"
                      "    acc = tl.zeros([B], dtype=tl.float32)\n"
                      "    for s in range(0, N, B):\n        acc += tl.load(X + s + tl.arange(0, B))\n"
                      "    for s in range(0, N, B):\n        tl.store(Y + s + tl.arange(0, B), acc)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto v = ad::single_pass_version(*p->module->functions[0]);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->loops, 2u);
  EXPECT_EQ(v->range, "range(0, N, B)");
  EXPECT_EQ(emit::print_expr(*v->condition), "(0 < N) & (N <= B)");
  EXPECT_EQ(emit::print_stmts(v->forward->body),
            "acc = tl.zeros([B], dtype=tl.float32)\ns = 0\nacc += tl.load(X + s + tl.arange(0, B))\n"
            "s = 0\ntl.store(Y + s + tl.arange(0, B), acc)\n");
}

TEST(SinglePass, NoneForOneLoopOrABoundTheKernelChanges) {
  for (const char *body : {"    for s in range(0, N, B):\n        tl.store(Y + s + tl.arange(0, B), 1.0)\n",
                           "    N += 1\n    for s in range(0, N, B):\n        tl.store(Y + s, 1.0)\n"
                           "    for s in range(0, N, B):\n        tl.store(Y + s + 1, 1.0)\n"}) {
    auto p = parse_text(std::string(kHead) + "def k(Y, N, B: tl.constexpr):\n" + body);
    ASSERT_TRUE(p->ok()) << p->all_messages();
    EXPECT_FALSE(ad::single_pass_version(*p->module->functions[0])) << body;
  }
}

TEST(SinglePass, AConditionForAnyStart) {
  auto p = parse_text(std::string(kHead) +
                      "def k(Y, lo, hi, B: tl.constexpr):\n"
                      "    for s in range(lo, hi, B):\n        tl.store(Y + s, 1.0)\n"
                      "    for s in range(lo, hi, B):\n        tl.store(Y + s + 1, 2.0)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto v = ad::single_pass_version(*p->module->functions[0]);
  ASSERT_TRUE(v);
  EXPECT_EQ(emit::print_expr(*v->condition), "(lo < hi) & (hi <= lo + B)");
}

}  // namespace
}  // namespace tgrad::testing
