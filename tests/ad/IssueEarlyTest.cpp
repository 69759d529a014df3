// Issuing loads of read-only memory early (src/ad/IssueEarly.h).
#include <gtest/gtest.h>

#include "src/ad/IssueEarly.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

// The statements of `body` (as the kernel's body) whose text starts with one of `movable`, moved.
// `heading`: a "Grad of:" comment for the marked statements (the parser keeps no comments).
std::string issued_early(const std::string &body, const std::vector<std::string> &movable, size_t *moved = nullptr,
                         const std::string &heading = "") {
  auto p = parse_text(std::string(kHead) + "def k(X, dY, dZ, N):\n" + body);
  EXPECT_TRUE(p->ok()) << p->all_messages();
  ast::StmtList block = ast::clone(p->module->functions[0]->body);
  std::set<const ast::Stmt *> marked;
  std::function<void(ast::StmtList &)> mark = [&](ast::StmtList &b) {
    for (ast::StmtPtr &s : b) {
      if (auto *f = ast::dyn_cast<ast::For>(s.get())) mark(f->body);
      ast::StmtList one;
      one.push_back(ast::clone(*s));
      std::string text = emit::print_stmts(one);
      for (const std::string &m : movable)
        if (text.rfind(m, 0) == 0) {
          marked.insert(s.get());
          s->leading_comment = heading;
        }
    }
  };
  mark(block);
  size_t n = ad::issue_early(block, marked);
  if (moved) *moved = n;
  return emit::print_stmts(block);
}

TEST(IssueEarly, MovesUpToJustAfterWhatTheLoadReads) {
  size_t moved = 0;
  EXPECT_EQ(issued_early("    p = dY + N\n    x = tl.load(X)\n    s = tl.sum(x)\n    g = tl.load(p)\n    t = s + g\n",
                         {"g = "}, &moved),
            "p = dY + N\n\n# (Loaded early: nothing in the backward writes this memory.)\ng = tl.load(p)\nx = tl.load(X)\ns = tl.sum(x)\nt = s + g\n");
  EXPECT_EQ(moved, 1u);
  // Nothing it reads is assigned later than the block's start: to the start.
  EXPECT_EQ(issued_early("    x = tl.load(X)\n    g = tl.load(dY)\n", {"g = "}), "\n# (Loaded early: nothing in the backward writes this memory.)\ng = tl.load(dY)\nx = tl.load(X)\n");
  // Already right after its address: stays.
  EXPECT_EQ(issued_early("    x = tl.load(X)\n    p = dY + x\n    g = tl.load(p)\n", {"g = "}, &moved),
            "x = tl.load(X)\np = dY + x\ng = tl.load(p)\n");
  EXPECT_EQ(moved, 0u);
}

TEST(IssueEarly, StaysBelowAReassignmentOfWhatItReads) {
  EXPECT_EQ(issued_early("    p = dY\n    x = tl.load(X)\n    p = dZ\n    s = x + 1\n    g = tl.load(p)\n", {"g = "}),
            "p = dY\nx = tl.load(X)\np = dZ\n\n# (Loaded early: nothing in the backward writes this memory.)\ng = tl.load(p)\ns = x + 1\n");
  // A loop that assigns a name the load reads is not crossed either.
  EXPECT_EQ(issued_early("    p = dY\n    for i in range(0, N):\n        p = p + 1\n    s = N + 1\n    g = tl.load(p)\n",
                         {"g = "}),
            "p = dY\nfor i in range(0, N):\n    p = p + 1\n\n# (Loaded early: nothing in the backward writes this memory.)\ng = tl.load(p)\ns = N + 1\n");
}

TEST(IssueEarly, MovesInsideNestedBlocksAndKeepsTheHeading) {
  EXPECT_EQ(issued_early("    for i in range(0, N):\n        p = dY + i\n        x = tl.load(X + i)\n"
                         "        g = tl.load(p)\n        t = x + g\n",
                         {"g = "}, nullptr, "Grad of: tl.store(Y + i, y)"),
            "for i in range(0, N):\n    p = dY + i\n\n    # Grad of: tl.store(Y + i, y)\n"
            "    # (Loaded early: nothing in the backward writes this memory.)\n    g = tl.load(p)\n"
            "    x = tl.load(X + i)\n\n    # Grad of: tl.store(Y + i, y)\n    t = x + g\n");
}

}  // namespace
}  // namespace tgrad::testing
