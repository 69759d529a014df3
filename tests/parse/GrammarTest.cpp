// Each construct of the grammar (DESIGN.md §2) parsed into the expected tree.
// Trees are compared as S-expressions, which show the structure (and so the
// precedence and associativity) that the printed form hides.
#include <gtest/gtest.h>

#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

using namespace ast;

std::string sx(const Expr &e);

std::string sx_list(const ExprList &l) {
  std::string s;
  for (const ExprPtr &e : l) s += " " + sx(*e);
  return s;
}

std::string sx(const Expr &e) {
  switch (e.kind) {
    case NodeKind::Name: return cast<Name>(&e)->id;
    case NodeKind::IntLit: return std::to_string(cast<IntLit>(&e)->value);
    case NodeKind::FloatLit: return "f" + emit::float_spelling(cast<FloatLit>(&e)->value);
    case NodeKind::BoolLit: return cast<BoolLit>(&e)->value ? "True" : "False";
    case NodeKind::NoneLit: return "None";
    case NodeKind::StrLit: return "'" + cast<StrLit>(&e)->value + "'";
    case NodeKind::EllipsisLit: return "...";
    case NodeKind::Attribute: return "(. " + sx(*cast<Attribute>(&e)->value) + " " + cast<Attribute>(&e)->attr + ")";
    case NodeKind::Subscript: {
      auto *n = cast<Subscript>(&e);
      return "([] " + sx(*n->value) + sx_list(n->indices) + ")";
    }
    case NodeKind::Slice: {
      auto *n = cast<Slice>(&e);
      auto part = [](const ExprPtr &p) { return p ? sx(*p) : std::string("_"); };
      return "(: " + part(n->lower) + " " + part(n->upper) + " " + part(n->step) + ")";
    }
    case NodeKind::Call: {
      auto *n = cast<Call>(&e);
      std::string s = "(call " + sx(*n->func) + sx_list(n->args);
      for (const Keyword &k : n->keywords) s += " " + k.name + "=" + sx(*k.value);
      return s + ")";
    }
    case NodeKind::UnaryOp: {
      auto *n = cast<UnaryOp>(&e);
      return std::string("(") + (n->op == UnaryOpKind::Neg ? "neg" : spelling(n->op)) + " " + sx(*n->operand) + ")";
    }
    case NodeKind::BinOp: {
      auto *n = cast<BinOp>(&e);
      return std::string("(") + spelling(n->op) + " " + sx(*n->lhs) + " " + sx(*n->rhs) + ")";
    }
    case NodeKind::BoolOp: {
      auto *n = cast<BoolOp>(&e);
      return std::string("(") + spelling(n->op) + sx_list(n->values) + ")";
    }
    case NodeKind::Compare: {
      auto *n = cast<Compare>(&e);
      std::string s = "(cmp " + sx(*n->left);
      for (size_t i = 0; i < n->ops.size(); ++i) s += std::string(" ") + spelling(n->ops[i]) + " " + sx(*n->comparators[i]);
      return s + ")";
    }
    case NodeKind::IfExp: {
      auto *n = cast<IfExp>(&e);
      return "(if " + sx(*n->cond) + " " + sx(*n->then_value) + " " + sx(*n->else_value) + ")";
    }
    case NodeKind::Tuple: return "(tuple" + sx_list(cast<Tuple>(&e)->elts) + ")";
    case NodeKind::List: return "(list" + sx_list(cast<List>(&e)->elts) + ")";
    default: return "?";
  }
}

std::string sx(const StmtList &body);

std::string sx(const Stmt &s) {
  switch (s.kind) {
    case NodeKind::ExprStmt: return "(expr " + sx(*cast<ExprStmt>(&s)->value) + ")";
    case NodeKind::Assign: {
      auto *n = cast<Assign>(&s);
      return "(= " + sx_list(n->targets).substr(1) + " " + sx(*n->value) + ")";
    }
    case NodeKind::AugAssign: {
      auto *n = cast<AugAssign>(&s);
      return std::string("(") + spelling(n->op) + "= " + sx(*n->target) + " " + sx(*n->value) + ")";
    }
    case NodeKind::AnnAssign: {
      auto *n = cast<AnnAssign>(&s);
      return "(ann " + sx(*n->target) + " " + sx(*n->annotation) + (n->value ? " " + sx(*n->value) : "") + ")";
    }
    case NodeKind::If: {
      auto *n = cast<If>(&s);
      return "(if " + sx(*n->cond) + " " + sx(n->body) + " " + sx(n->orelse) + ")";
    }
    case NodeKind::For: {
      auto *n = cast<For>(&s);
      return "(for " + sx(*n->target) + " " + sx(*n->iter) + " " + sx(n->body) + ")";
    }
    case NodeKind::While: {
      auto *n = cast<While>(&s);
      return "(while " + sx(*n->cond) + " " + sx(n->body) + ")";
    }
    case NodeKind::Return: {
      auto *n = cast<Return>(&s);
      return n->value ? "(return " + sx(*n->value) + ")" : "(return)";
    }
    case NodeKind::Pass: return "(pass)";
    case NodeKind::Assert: {
      auto *n = cast<Assert>(&s);
      return "(assert " + sx(*n->test) + (n->msg ? " " + sx(*n->msg) : "") + ")";
    }
    default: return "?";
  }
}

std::string sx(const StmtList &body) {
  std::string s = "[";
  for (size_t i = 0; i < body.size(); ++i) s += (i ? " " : "") + sx(*body[i]);
  return s + "]";
}

// The body of `f` parsed from the given statements, as S-expressions.
std::string body_of(const std::string &stmts) {
  auto p = parse_text(jit_function(stmts));
  if (!p->ok()) return "ERRORS:\n" + p->all_messages();
  if (p->module->functions.size() != 1) return "expected one function";
  return sx(p->module->functions[0]->body);
}

// One expression statement's tree.
std::string expr_of(const std::string &expr) {
  std::string s = body_of(expr + "\n");
  if (s.rfind("[(expr ", 0) != 0) return s;
  return s.substr(7, s.size() - 9);
}

TEST(Expressions, ArithmeticPrecedenceAndAssociativity) {
  EXPECT_EQ(expr_of("a + b * c"), "(+ a (* b c))");
  EXPECT_EQ(expr_of("a - b - c"), "(- (- a b) c)");
  EXPECT_EQ(expr_of("(a + b) * c"), "(* (+ a b) c)");
  EXPECT_EQ(expr_of("a / b // c % d @ e"), "(@ (% (// (/ a b) c) d) e)");
  EXPECT_EQ(expr_of("a ** b ** c"), "(** a (** b c))");
  EXPECT_EQ(expr_of("-a ** b"), "(neg (** a b))");
  EXPECT_EQ(expr_of("a ** -b"), "(** a (neg b))");
  EXPECT_EQ(expr_of("~a + +b"), "(+ (~ a) (+ b))");
}

TEST(Expressions, BitwiseAndShiftPrecedence) {
  EXPECT_EQ(expr_of("a | b ^ c & d << e >> f"), "(| a (^ b (& c (>> (<< d e) f))))");
  EXPECT_EQ(expr_of("a + b << c"), "(<< (+ a b) c)");
}

TEST(Expressions, ComparisonsAndBooleans) {
  EXPECT_EQ(expr_of("a < b"), "(cmp a < b)");
  EXPECT_EQ(expr_of("0 <= a < n"), "(cmp 0 <= a < n)");
  EXPECT_EQ(expr_of("a is None"), "(cmp a is None)");
  EXPECT_EQ(expr_of("a is not None"), "(cmp a is not None)");
  EXPECT_EQ(expr_of("a not in b"), "(cmp a not in b)");
  EXPECT_EQ(expr_of("a == b != c >= d > e"), "(cmp a == b != c >= d > e)");
  EXPECT_EQ(expr_of("a and b or c and d"), "(or (and a b) (and c d))");
  EXPECT_EQ(expr_of("a and b and c"), "(and a b c)");
  EXPECT_EQ(expr_of("not a and b"), "(and (not a) b)");
  EXPECT_EQ(expr_of("not a < b"), "(not (cmp a < b))");
  EXPECT_EQ(expr_of("(offs < n) & mask"), "(& (cmp offs < n) mask)");
}

TEST(Expressions, ConditionalExpression) {
  EXPECT_EQ(expr_of("a if c else b"), "(if c a b)");
  EXPECT_EQ(expr_of("a if c else b if d else e"), "(if c a (if d b e))");
}

TEST(Expressions, Literals) {
  EXPECT_EQ(expr_of("0xFF"), "255");
  EXPECT_EQ(expr_of("0o17"), "15");
  EXPECT_EQ(expr_of("0b101"), "5");
  EXPECT_EQ(expr_of("1_000"), "1000");
  EXPECT_EQ(expr_of("1e-5"), "f1e-05");
  EXPECT_EQ(expr_of("0."), "f0.0");
  EXPECT_EQ(expr_of(".5"), "f0.5");
  EXPECT_EQ(expr_of("True"), "True");
  EXPECT_EQ(expr_of("None"), "None");
  EXPECT_EQ(expr_of("..."), "...");
  EXPECT_EQ(expr_of("'evict_last'"), "'evict_last'");
  EXPECT_EQ(expr_of("'a' \"b\""), "'ab'");
  EXPECT_EQ(expr_of("'tab\\tnl\\n\\x41\\u00e9'"), "'tab\tnl\nA\xc3\xa9'");
  EXPECT_EQ(expr_of("r'\\n'"), "'\\n'");
  EXPECT_EQ(expr_of("0xFFFFFFFFFFFFFFFF"), "18446744073709551615");
}

TEST(Expressions, CallsAttributesKeywords) {
  EXPECT_EQ(expr_of("tl.load(p + offs, mask=m, other=0.0)"), "(call (. tl load) (+ p offs) mask=m other=f0.0)");
  EXPECT_EQ(expr_of("x.to(tl.float16)"), "(call (. x to) (. tl float16))");
  EXPECT_EQ(expr_of("tl.math.exp2(x)"), "(call (. (. tl math) exp2) x)");
  EXPECT_EQ(expr_of("x.shape[0]"), "([] (. x shape) 0)");
  EXPECT_EQ(expr_of("f()"), "(call f)");
  EXPECT_EQ(expr_of("f(a,)"), "(call f a)");
  EXPECT_EQ(expr_of("helper(x)(y)"), "(call (call helper x) y)");
}

TEST(Expressions, SubscriptsAndSlices) {
  EXPECT_EQ(expr_of("x[:, None]"), "([] x (: _ _ _) None)");
  EXPECT_EQ(expr_of("x[None, :]"), "([] x None (: _ _ _))");
  EXPECT_EQ(expr_of("x[1:n:2]"), "([] x (: 1 n 2))");
  EXPECT_EQ(expr_of("x[::2]"), "([] x (: _ _ 2))");
  EXPECT_EQ(expr_of("x[i]"), "([] x i)");
  EXPECT_EQ(expr_of("x[..., None]"), "([] x ... None)");
}

TEST(Expressions, TuplesAndLists) {
  EXPECT_EQ(expr_of("(a, b)"), "(tuple a b)");
  EXPECT_EQ(expr_of("(a,)"), "(tuple a)");
  EXPECT_EQ(expr_of("()"), "(tuple)");
  EXPECT_EQ(expr_of("(a)"), "a");
  EXPECT_EQ(expr_of("[BLOCK_M, BLOCK_N]"), "(list BLOCK_M BLOCK_N)");
  EXPECT_EQ(expr_of("[a]"), "(list a)");
  EXPECT_EQ(expr_of("[]"), "(list)");
  EXPECT_EQ(expr_of("[(a, b)]"), "(list (tuple a b))");
}

TEST(Statements, Assignments) {
  EXPECT_EQ(body_of("a = b\n"), "[(= a b)]");
  EXPECT_EQ(body_of("a = b = c\n"), "[(= a b c)]");
  EXPECT_EQ(body_of("a, b = b, a\n"), "[(= (tuple a b) (tuple b a))]");
  EXPECT_EQ(body_of("(a, b) = f(x)\n"), "[(= (tuple a b) (call f x))]");
  EXPECT_EQ(body_of("acc += tl.dot(a, b)\n"), "[(+= acc (call (. tl dot) a b))]");
  EXPECT_EQ(body_of("p -= 1\nq *= 2\nr /= 3\ns //= 4\nt %= 5\nu **= 6\nv <<= 1\nw >>= 1\nx &= m\ny |= m\nz ^= m\n"),
            "[(-= p 1) (*= q 2) (/= r 3) (//= s 4) (%= t 5) (**= u 6) (<<= v 1) (>>= w 1) (&= x m) (|= y m) (^= z m)]");
  EXPECT_EQ(body_of("n: tl.constexpr = 4\n"), "[(ann n (. tl constexpr) 4)]");
  EXPECT_EQ(body_of("t: tl.tensor\n"), "[(ann t (. tl tensor))]");
}

TEST(Statements, IfElifElse) {
  EXPECT_EQ(body_of("if a:\n    b = 1\nelif c:\n    b = 2\nelse:\n    b = 3\n"),
            "[(if a [(= b 1)] [(if c [(= b 2)] [(= b 3)])])]");
  EXPECT_EQ(body_of("if a: return\n"), "[(if a [(return)] [])]");
}

TEST(Statements, Loops) {
  EXPECT_EQ(body_of("for i in range(0, n, 2):\n    x += i\n"), "[(for i (call range 0 n 2) [(+= x i)])]");
  EXPECT_EQ(body_of("for i in tl.static_range(4):\n    pass\n"), "[(for i (call (. tl static_range) 4) [(pass)])]");
  EXPECT_EQ(body_of("for i in tl.range(0, n, num_stages=3):\n    pass\n"),
            "[(for i (call (. tl range) 0 n num_stages=3) [(pass)])]");
  EXPECT_EQ(body_of("for i, j in pairs:\n    pass\n"), "[(for (tuple i j) pairs [(pass)])]");
  EXPECT_EQ(body_of("while i < n:\n    i += 1\n"), "[(while (cmp i < n) [(+= i 1)])]");
}

TEST(Statements, ReturnPassAssertExpression) {
  EXPECT_EQ(body_of("return a, b\n"), "[(return (tuple a b))]");
  EXPECT_EQ(body_of("return (a, b)\n"), "[(return (tuple a b))]");
  EXPECT_EQ(body_of("return\n"), "[(return)]");
  EXPECT_EQ(body_of("pass\n"), "[(pass)]");
  EXPECT_EQ(body_of("assert x > 0, 'positive'\n"), "[(assert (cmp x > 0) 'positive')]");
  EXPECT_EQ(body_of("tl.store(p, x, mask=m)\n"), "[(expr (call (. tl store) p x mask=m))]");
  EXPECT_EQ(body_of("a = 1; b = 2\n"), "[(= a 1) (= b 2)]");
  EXPECT_EQ(body_of("\"\"\"Docstring.\"\"\"\nreturn x\n"), "[(expr 'Docstring.') (return x)]");
}

TEST(Functions, ParametersAnnotationsDefaults) {
  auto p = parse_text(
      "import triton\nimport triton.language as tl\n@triton.jit\n"
      "def k(X, n, BLOCK: tl.constexpr, eps=1e-5, ACT: tl.constexpr = 'relu') -> None:\n    pass\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  const Function &f = *p->module->functions[0];
  ASSERT_EQ(f.params.size(), 5u);
  EXPECT_EQ(f.params[2].name, "BLOCK");
  EXPECT_TRUE(f.is_constexpr_param(2));
  EXPECT_FALSE(f.is_constexpr_param(1));
  EXPECT_TRUE(f.is_constexpr_param(4));
  EXPECT_EQ(sx(*f.params[3].default_value), "f1e-05");
  EXPECT_EQ(sx(*f.params[4].default_value), "'relu'");
  ASSERT_TRUE(f.returns);
  EXPECT_EQ(sx(*f.returns), "None");
  EXPECT_EQ(f.params[1].span.begin.line, 4);
  EXPECT_EQ(f.params[1].span.begin.column, 10);
}

TEST(Spans, NodesCarryExactLocations) {
  auto p = parse_text(jit_function("acc = tl.dot(a,\n             b) + c\n"));
  ASSERT_TRUE(p->ok()) << p->all_messages();
  const auto *assign = cast<Assign>(p->module->functions[0]->body[0].get());
  EXPECT_EQ(assign->span.begin, (SourcePos{6, 5}));
  const auto *sum = cast<BinOp>(assign->value.get());
  EXPECT_EQ(sum->span.begin, (SourcePos{6, 11}));
  EXPECT_EQ(sum->span.end, (SourcePos{7, 24}));
  const auto *call = cast<Call>(sum->lhs.get());
  EXPECT_EQ(call->args[1]->span.begin, (SourcePos{7, 18}));
  EXPECT_EQ(cast<Name>(sum->rhs.get())->span.begin, (SourcePos{7, 23}));
}

}  // namespace
}  // namespace tgrad::testing
