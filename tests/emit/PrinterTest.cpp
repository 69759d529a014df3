// The Python printer on trees that no parser produced: parentheses must
// follow from precedence (STYLE.md §4, mistake 1), literals must read back.
#include <gtest/gtest.h>

#include <cmath>

#include "tgrad/tgrad.h"

namespace tgrad::emit {
namespace {

using namespace ast;

ExprPtr name(const char *n) { return std::make_unique<Name>(n); }
ExprPtr bin(BinaryOpKind op, ExprPtr a, ExprPtr b) { return std::make_unique<BinOp>(op, std::move(a), std::move(b)); }
ExprPtr un(UnaryOpKind op, ExprPtr a) { return std::make_unique<UnaryOp>(op, std::move(a)); }

TEST(Printer, ParenthesesFollowPrecedence) {
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Mul, name("x"), bin(BinaryOpKind::Add, name("a"), name("b")))),
            "x * (a + b)");
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Add, bin(BinaryOpKind::Mul, name("x"), name("a")), name("b"))), "x * a + b");
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Sub, name("a"), bin(BinaryOpKind::Sub, name("b"), name("c")))),
            "a - (b - c)");
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Sub, bin(BinaryOpKind::Sub, name("a"), name("b")), name("c"))), "a - b - c");
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Pow, bin(BinaryOpKind::Pow, name("a"), name("b")), name("c"))),
            "(a ** b) ** c");
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Pow, name("a"), bin(BinaryOpKind::Pow, name("b"), name("c")))),
            "a ** b ** c");
  EXPECT_EQ(print_expr(*bin(BinaryOpKind::Pow, un(UnaryOpKind::Neg, name("a")), name("b"))), "(-a) ** b");
  EXPECT_EQ(print_expr(*un(UnaryOpKind::Neg, bin(BinaryOpKind::Pow, name("a"), name("b")))), "-a ** b");
  EXPECT_EQ(print_expr(*un(UnaryOpKind::Neg, bin(BinaryOpKind::Add, name("a"), name("b")))), "-(a + b)");
  EXPECT_EQ(print_expr(*un(UnaryOpKind::Not, bin(BinaryOpKind::BitAnd, name("a"), name("b")))), "not a & b");
}

TEST(Printer, PrimariesParenthesiseTheirBase) {
  auto attr = std::make_unique<Attribute>(bin(BinaryOpKind::Add, name("a"), name("b")), "to");
  ExprList args;
  args.push_back(std::make_unique<Attribute>(name("tl"), "float16"));
  Call call(std::move(attr), std::move(args), {});
  EXPECT_EQ(print_expr(call), "(a + b).to(tl.float16)");
}

TEST(Printer, ComparisonsInsideComparisonsKeepParentheses) {
  ExprList rhs;
  rhs.push_back(name("c"));
  auto inner = std::make_unique<Compare>(name("a"), std::vector<CompareOpKind>{CompareOpKind::Lt}, ExprList{});
  inner->comparators.push_back(name("b"));
  Compare outer(std::move(inner), {CompareOpKind::Eq}, std::move(rhs));
  EXPECT_EQ(print_expr(outer), "(a < b) == c");
}

TEST(Printer, TuplesAndConditionals) {
  ExprList elts;
  elts.push_back(name("a"));
  Tuple one(std::move(elts));
  EXPECT_EQ(print_expr(one), "(a,)");
  Tuple empty{ExprList{}};
  EXPECT_EQ(print_expr(empty), "()");  // once an endless recursion
  StmtList body;
  body.push_back(std::make_unique<Return>(std::make_unique<Tuple>(ExprList{})));
  EXPECT_EQ(print_stmts(body), "return ()\n");
  IfExp nested(name("c"), std::make_unique<IfExp>(name("d"), name("x"), name("y")), name("z"));
  EXPECT_EQ(print_expr(nested), "(x if d else y) if c else z");
}

TEST(Printer, GeneratedLiterals) {
  EXPECT_EQ(print_expr(FloatLit(1.0, "")), "1.0");
  EXPECT_EQ(print_expr(FloatLit(0.1, "")), "0.1");
  EXPECT_EQ(print_expr(FloatLit(1e-5, "")), "1e-05");
  EXPECT_EQ(print_expr(FloatLit(1.4426950408889634, "")), "1.4426950408889634");
  EXPECT_EQ(print_expr(FloatLit(INFINITY, "")), "float('inf')");
  EXPECT_EQ(print_expr(FloatLit(1e-5, "1e-5")), "1e-5");  // as written
  EXPECT_EQ(print_expr(IntLit(255, "")), "255");
  EXPECT_EQ(print_expr(IntLit(255, "0xFF")), "0xFF");
  // Single quotes where the text has a double quote and no single one (no escaped quotes), else double quotes.
  EXPECT_EQ(print_expr(StrLit("a\"b\\c\n", "")), "'a\"b\\\\c\\n'");
  EXPECT_EQ(print_expr(StrLit("a\"b'c", "")), "\"a\\\"b'c\"");
  EXPECT_EQ(print_expr(StrLit("it's", "")), "\"it's\"");
  EXPECT_EQ(print_expr(BoolLit(false)), "False");
}

TEST(Printer, StatementsAndEmptyBodies) {
  StmtList body;
  ExprList targets;
  ExprList pair;
  pair.push_back(name("a"));
  pair.push_back(name("b"));
  targets.push_back(std::make_unique<Tuple>(std::move(pair)));
  ExprList values;
  values.push_back(name("b"));
  values.push_back(name("a"));
  body.push_back(std::make_unique<Assign>(std::move(targets), std::make_unique<Tuple>(std::move(values))));
  body.push_back(std::make_unique<If>(name("c"), StmtList{}, StmtList{}));
  body.push_back(std::make_unique<AugAssign>(name("acc"), BinaryOpKind::FloorDiv, name("k")));
  EXPECT_EQ(print_stmts(body, 1), "    a, b = b, a\n    if c:\n        pass\n    acc //= k\n");
}

}  // namespace
}  // namespace tgrad::emit
