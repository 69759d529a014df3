#include "src/parse/AstBuilder.h"

#include <cerrno>
#include <cstdlib>

namespace tgrad::parse {

using namespace ast;
using P = tgrad_antlr::TileLangParser;
using antlr4::ParserRuleContext;
using antlr4::tree::ParseTree;
using antlr4::tree::TerminalNode;

namespace {

const char *const kInJit = " in a @triton.jit function";

class Builder {
 public:
  Builder(const ChunkLocator &locator, DiagEngine &diags) : loc_(locator), diags_(diags) {}

  // ------------------------------------------------------------- functions

  std::unique_ptr<Function> function(P::FuncdefContext *ctx) {
    auto f = std::make_unique<Function>();
    f->name = ctx->NAME()->getText();
    f->span = loc_.span(ctx);
    f->name_span = loc_.span(ctx->NAME());
    for (P::ParamContext *p : ctx->parameters()->param()) param(p, *f);
    if (ctx->test()) f->returns = test(ctx->test());
    f->body = suite(ctx->suite());
    return f;
  }

  void param(P::ParamContext *ctx, Function &f) {
    auto *plain = dynamic_cast<P::PlainParamContext *>(ctx);
    if (!plain) {
      unsupported(ctx, "'*args', '**kwargs' and '/' parameters are not supported" + std::string(kInJit) +
                           "; list each parameter by name");
      return;
    }
    Param p;
    p.name = plain->NAME()->getText();
    p.span = loc_.span(plain->NAME());
    // `name: ann = default`, `name: ann`, `name = default`: the ':' decides.
    size_t next = 0;
    bool has_annotation = false;
    for (ParseTree *child : plain->children)
      if (auto *t = dynamic_cast<TerminalNode *>(child); t && t->getText() == ":") has_annotation = true;
    if (has_annotation) p.annotation = test(plain->test(next++));
    if (next < plain->test().size()) p.default_value = test(plain->test(next));
    for (const Param &other : f.params)
      if (other.name == p.name) error(p.span, "duplicate parameter '" + p.name + "'");
    f.params.push_back(std::move(p));
  }

  // ------------------------------------------------------------- statements

  StmtList suite(P::SuiteContext *ctx) {
    StmtList out;
    if (ctx->simple_stmts()) {
      simple_stmts(ctx->simple_stmts(), out);
      return out;
    }
    for (P::StmtContext *s : ctx->stmt()) stmt(s, out);
    return out;
  }

  void stmt(P::StmtContext *ctx, StmtList &out) {
    if (ctx->simple_stmts()) return simple_stmts(ctx->simple_stmts(), out);
    compound_stmt(ctx->compound_stmt(), out);
  }

  void simple_stmts(P::Simple_stmtsContext *ctx, StmtList &out) {
    for (P::Simple_stmtContext *s : ctx->simple_stmt())
      if (StmtPtr st = simple_stmt(s)) out.push_back(std::move(st));
  }

  StmtPtr simple_stmt(P::Simple_stmtContext *ctx) {
    const SourceSpan s = loc_.span(ctx);
    if (auto *c = dynamic_cast<P::ExprStmtAltContext *>(ctx)) return expr_stmt(c->expr_stmt());
    if (dynamic_cast<P::PassStmt_Context *>(ctx)) return std::make_unique<Pass>(s);
    if (auto *c = dynamic_cast<P::ReturnStmtContext *>(ctx))
      return std::make_unique<Return>(c->testlist_star() ? testlist_star(c->testlist_star()) : nullptr, s);
    if (auto *c = dynamic_cast<P::AssertStmtContext *>(ctx))
      return std::make_unique<Assert>(test(c->test(0)), c->test().size() > 1 ? test(c->test(1)) : nullptr, s);
    if (dynamic_cast<P::BreakStmtContext *>(ctx))
      return unsupported_stmt(ctx, std::string("'break' is not supported") + kInJit +
                                       "; express the exit as the condition of a 'while' loop");
    if (dynamic_cast<P::ContinueStmtContext *>(ctx))
      return unsupported_stmt(ctx, std::string("'continue' is not supported") + kInJit +
                                       "; put the rest of the loop body under an 'if' instead");
    if (dynamic_cast<P::GlobalStmtContext *>(ctx) || dynamic_cast<P::NonlocalStmtContext *>(ctx))
      return unsupported_stmt(ctx, "'" + ctx->getStart()->getText() + "' is not supported" + kInJit +
                                       "; pass the value as a parameter (module constants must be tl.constexpr)");
    if (dynamic_cast<P::DelStmtContext *>(ctx)) return unsupported_stmt(ctx, std::string("'del' is not supported") + kInJit);
    if (dynamic_cast<P::RaiseStmtContext *>(ctx)) {
      // Triton's code generator has no `raise`: compiling one is an error, but only where the generator visits it,
      // and it visits only the branch a tl.constexpr condition takes (`else: raise ValueError(...)` after the values
      // a helper supports). A failed static assertion is exactly that error, at the same place: the statement reads
      // as one, its message the statement's source (src/lower/FailingBranches.h turns a branch that raises into an
      // assertion of the condition that avoids it).
      std::string text = ctx->getText();
      if (antlr4::CharStream *input = ctx->getStart()->getInputStream())
        text = input->getText(antlr4::misc::Interval(ctx->getStart()->getStartIndex(), ctx->getStop()->getStopIndex()));
      ExprList args;
      args.push_back(std::make_unique<BoolLit>(false, s));
      args.push_back(std::make_unique<StrLit>(text, "", s));
      auto callee = std::make_unique<Attribute>(std::make_unique<Name>("tl", s), "static_assert", s);
      return std::make_unique<ExprStmt>(std::make_unique<Call>(std::move(callee), std::move(args), std::vector<Keyword>{}, s), s);
    }
    if (dynamic_cast<P::ImportStmtInBodyContext *>(ctx))
      return unsupported_stmt(ctx, std::string("'import' is not supported") + kInJit + "; import at module level");
    if (dynamic_cast<P::YieldStmtContext *>(ctx))
      return unsupported_stmt(ctx, std::string("'yield' is not supported") + kInJit);
    return unsupported_stmt(ctx, "unsupported statement" + std::string(kInJit));
  }

  StmtPtr expr_stmt(P::Expr_stmtContext *ctx) {
    const SourceSpan s = loc_.span(ctx);
    if (auto *c = dynamic_cast<P::AnnAssignContext *>(ctx)) {
      ExprPtr target = testlist_star(c->testlist_star(0));
      check_target(*target);
      ExprPtr value = c->testlist_star().size() > 1 ? testlist_star(c->testlist_star(1)) : nullptr;
      return std::make_unique<AnnAssign>(std::move(target), test(c->test()), std::move(value), s);
    }
    if (auto *c = dynamic_cast<P::AugAssignContext *>(ctx)) {
      ExprPtr target = testlist_star(c->testlist_star(0));
      if (!isa<Name>(target.get()) && !isa<Subscript>(target.get()) && !isa<Attribute>(target.get()))
        error(target->span, "augmented assignment needs a single name as its target");
      std::string op = c->augassign()->getText();
      op.pop_back();  // "+=" -> "+"
      return std::make_unique<AugAssign>(std::move(target), binary_op(op), testlist_star(c->testlist_star(1)), s);
    }
    if (dynamic_cast<P::WalrusStmtContext *>(ctx))
      return unsupported_stmt(ctx, std::string("':=' is not supported") + kInJit + "; use a plain assignment");
    auto *c = dynamic_cast<P::AssignOrExprContext *>(ctx);
    if (!c->yield_expr().empty()) return unsupported_stmt(ctx, std::string("'yield' is not supported") + kInJit);
    std::vector<P::Testlist_starContext *> parts = c->testlist_star();
    ExprPtr value = testlist_star(parts.back());
    if (parts.size() == 1) return std::make_unique<ExprStmt>(std::move(value), s);
    ExprList targets;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      targets.push_back(testlist_star(parts[i]));
      check_target(*targets.back());
    }
    return std::make_unique<Assign>(std::move(targets), std::move(value), s);
  }

  // Assignable: a name, a tuple/list of assignables, an attribute or a subscript.
  void check_target(const Expr &e) {
    switch (e.kind) {
      case NodeKind::Name:
      case NodeKind::Attribute:
      case NodeKind::Subscript: return;
      case NodeKind::Tuple:
        for (const ExprPtr &x : cast<Tuple>(&e)->elts) check_target(*x);
        return;
      case NodeKind::List:
        for (const ExprPtr &x : cast<List>(&e)->elts) check_target(*x);
        return;
      default: error(e.span, "cannot assign to this expression");
    }
  }

  void compound_stmt(P::Compound_stmtContext *ctx, StmtList &out) {
    if (auto *c = ctx->if_stmt()) return out.push_back(if_stmt(c));
    if (auto *c = ctx->while_stmt()) {
      if (c->else_clause()) unsupported(c->else_clause(), std::string("'while ... else' is not supported") + kInJit);
      return out.push_back(std::make_unique<While>(namedexpr(c->namedexpr_test()), suite(c->suite()), loc_.span(ctx)));
    }
    if (auto *c = ctx->for_stmt()) {
      if (c->else_clause()) unsupported(c->else_clause(), std::string("'for ... else' is not supported") + kInJit);
      ExprPtr target = exprlist(c->exprlist());
      check_target(*target);
      ExprPtr iter = testlist(c->testlist());
      return out.push_back(std::make_unique<For>(std::move(target), std::move(iter), suite(c->suite()), loc_.span(ctx)));
    }
    std::string what;
    if (!ctx->decorator().empty()) {
      what = "decorated definitions are not supported inside a @triton.jit function; define the function at module "
             "level with @triton.jit";
    } else if (ctx->funcdef()) {
      what = "nested functions are not supported inside a @triton.jit function; define it at module level with "
             "@triton.jit and call it";
    } else if (ctx->classdef()) {
      what = std::string("'class' is not supported") + kInJit;
    } else if (ctx->with_stmt()) {
      what = std::string("'with' is not supported") + kInJit;
    } else if (ctx->try_stmt()) {
      what = std::string("'try' is not supported") + kInJit + "; use tl.device_assert for runtime checks";
    } else {
      what = std::string("'async' is not supported") + kInJit;
    }
    unsupported(ctx, what);
  }

  StmtPtr if_stmt(P::If_stmtContext *ctx) {
    // Build the elif chain from the back: each elif is an If in its parent's orelse.
    StmtList orelse;
    if (ctx->else_clause()) orelse = suite(ctx->else_clause()->suite());
    std::vector<P::Elif_clauseContext *> elifs = ctx->elif_clause();
    for (size_t i = elifs.size(); i-- > 0;) {
      SourceSpan s = loc_.span(elifs[i]->getStart(), ctx->getStop());
      StmtList inner;
      inner.push_back(
          std::make_unique<If>(namedexpr(elifs[i]->namedexpr_test()), suite(elifs[i]->suite()), std::move(orelse), s));
      orelse = std::move(inner);
    }
    return std::make_unique<If>(namedexpr(ctx->namedexpr_test()), suite(ctx->suite()), std::move(orelse),
                                loc_.span(ctx));
  }

  // ------------------------------------------------------------ expressions

  // `a, b` (a tuple) or `a` (itself).
  ExprPtr testlist_star(P::Testlist_starContext *ctx) { return sequence(ctx, ctx->children); }
  ExprPtr testlist(P::TestlistContext *ctx) { return sequence(ctx, ctx->children); }
  ExprPtr exprlist(P::ExprlistContext *ctx) { return sequence(ctx, ctx->children); }

  ExprPtr sequence(ParserRuleContext *ctx, const std::vector<ParseTree *> &children) {
    ExprList elts;
    bool comma = false;
    for (ParseTree *child : children) {
      if (auto *t = dynamic_cast<TerminalNode *>(child)) {
        comma |= t->getText() == ",";
        continue;
      }
      elts.push_back(any_expr(static_cast<ParserRuleContext *>(child)));
    }
    if (elts.size() == 1 && !comma) return std::move(elts[0]);
    return std::make_unique<Tuple>(std::move(elts), loc_.span(ctx));
  }

  // Dispatch for the expression rules that appear in lists.
  ExprPtr any_expr(ParserRuleContext *ctx) {
    if (auto *c = dynamic_cast<P::TestContext *>(ctx)) return test(c);
    if (auto *c = dynamic_cast<P::Namedexpr_testContext *>(ctx)) return namedexpr(c);
    if (auto *c = dynamic_cast<P::ExprContext *>(ctx)) return expr(c);
    if (dynamic_cast<P::Star_exprContext *>(ctx))
      return unsupported_expr(ctx, std::string("starred expressions ('*x') are not supported") + kInJit);
    return unsupported_expr(ctx, "unsupported expression" + std::string(kInJit));
  }

  ExprPtr namedexpr(P::Namedexpr_testContext *ctx) {
    if (ctx->NAME())
      return unsupported_expr(loc_.span(ctx->NAME()), std::string("':=' is not supported") + kInJit +
                                                          "; assign the value in a statement of its own first");
    return test(ctx->test());
  }

  ExprPtr test(P::TestContext *ctx) {
    if (ExprPtr one = single_operand(ctx)) return one;
    if (ctx->lambdef())
      return unsupported_expr(ctx, std::string("'lambda' is not supported") + kInJit +
                                       "; define a @triton.jit function at module level instead");
    if (ctx->or_test().size() == 1) return or_test(ctx->or_test(0));
    // then_value if cond else else_value
    return std::make_unique<IfExp>(or_test(ctx->or_test(1)), or_test(ctx->or_test(0)), test(ctx->test()),
                                   loc_.span(ctx));
  }

  // Most expressions have one operand at most precedence levels (`x`,
  // `a * b`): the levels from test down to atom_expr with one child pass it
  // through unchanged, so the walk skips them by rule index instead of
  // asking each level's accessors (a dynamic_cast per child per call, a
  // third of building the AST). Null where the chain ends in a form the
  // level builders must see (a conditional expression, a lambda).
  ExprPtr single_operand(ParserRuleContext *ctx) {
    ParserRuleContext *node = ctx;
    while (node->children.size() == 1) {
      switch (node->getRuleIndex()) {
        // In these rules a single child is always a rule context.
        case P::RuleTest:
        case P::RuleOr_test:
        case P::RuleAnd_test:
        case P::RuleNot_test:
        case P::RuleComparison:
        case P::RuleExpr:
        case P::RuleXor_expr:
        case P::RuleAnd_expr:
        case P::RuleShift_expr:
        case P::RuleArith_expr:
        case P::RuleTerm:
        case P::RuleFactor:
        case P::RulePower: node = static_cast<ParserRuleContext *>(node->children[0]); continue;
        default: break;
      }
      break;
    }
    switch (node->getRuleIndex()) {
      case P::RuleAtom_expr: return atom_expr(static_cast<P::Atom_exprContext *>(node));
      case P::RulePower: return power(static_cast<P::PowerContext *>(node));
      case P::RuleFactor: return factor(static_cast<P::FactorContext *>(node));
      case P::RuleTerm:
      case P::RuleArith_expr:
      case P::RuleShift_expr:
      case P::RuleAnd_expr:
      case P::RuleXor_expr:
      case P::RuleExpr: return chain(node);
      case P::RuleComparison: return comparison(static_cast<P::ComparisonContext *>(node));
      case P::RuleNot_test: return not_test(static_cast<P::Not_testContext *>(node));
      case P::RuleAnd_test: return and_test(static_cast<P::And_testContext *>(node));
      case P::RuleOr_test: return or_test(static_cast<P::Or_testContext *>(node));
      default: return nullptr;
    }
  }

  ExprPtr or_test(P::Or_testContext *ctx) {
    if (ctx->and_test().size() == 1) return and_test(ctx->and_test(0));
    ExprList values;
    for (auto *c : ctx->and_test()) values.push_back(and_test(c));
    return std::make_unique<BoolOp>(BoolOpKind::Or, std::move(values), loc_.span(ctx));
  }

  ExprPtr and_test(P::And_testContext *ctx) {
    if (ctx->not_test().size() == 1) return not_test(ctx->not_test(0));
    ExprList values;
    for (auto *c : ctx->not_test()) values.push_back(not_test(c));
    return std::make_unique<BoolOp>(BoolOpKind::And, std::move(values), loc_.span(ctx));
  }

  ExprPtr not_test(P::Not_testContext *ctx) {
    if (ctx->comparison()) return comparison(ctx->comparison());
    return std::make_unique<UnaryOp>(UnaryOpKind::Not, not_test(ctx->not_test()), loc_.span(ctx));
  }

  ExprPtr comparison(P::ComparisonContext *ctx) {
    if (ctx->expr().size() == 1) return expr(ctx->expr(0));
    std::vector<CompareOpKind> ops;
    ExprList comparators;
    for (size_t i = 0; i < ctx->comp_op().size(); ++i) {
      ops.push_back(compare_op(ctx->comp_op(i)));
      comparators.push_back(expr(ctx->expr(i + 1)));
    }
    return std::make_unique<Compare>(expr(ctx->expr(0)), std::move(ops), std::move(comparators), loc_.span(ctx));
  }

  static CompareOpKind compare_op(P::Comp_opContext *ctx) {
    const std::string text = ctx->getText();  // "notin", "isnot" (no spaces)
    if (text == "<") return CompareOpKind::Lt;
    if (text == ">") return CompareOpKind::Gt;
    if (text == "==") return CompareOpKind::Eq;
    if (text == "!=") return CompareOpKind::NotEq;
    if (text == "<=") return CompareOpKind::LtE;
    if (text == ">=") return CompareOpKind::GtE;
    if (text == "is") return CompareOpKind::Is;
    if (text == "isnot") return CompareOpKind::IsNot;
    if (text == "in") return CompareOpKind::In;
    return CompareOpKind::NotIn;
  }

  static BinaryOpKind binary_op(const std::string &op) {
    if (op == "+") return BinaryOpKind::Add;
    if (op == "-") return BinaryOpKind::Sub;
    if (op == "*") return BinaryOpKind::Mul;
    if (op == "/") return BinaryOpKind::Div;
    if (op == "//") return BinaryOpKind::FloorDiv;
    if (op == "%") return BinaryOpKind::Mod;
    if (op == "**") return BinaryOpKind::Pow;
    if (op == "@") return BinaryOpKind::MatMul;
    if (op == "<<") return BinaryOpKind::LShift;
    if (op == ">>") return BinaryOpKind::RShift;
    if (op == "&") return BinaryOpKind::BitAnd;
    if (op == "|") return BinaryOpKind::BitOr;
    return BinaryOpKind::BitXor;
  }

  // A left-associative chain `a op b op c`: operands are rule contexts, the
  // operators terminals or single-token rule contexts (term_op, ...).
  ExprPtr chain(ParserRuleContext *ctx) {
    const std::vector<ParseTree *> &kids = ctx->children;
    // (An operator rule's text is its one token's: read from the token, not
    // gathered from the rule's children.)
    const size_t rule = ctx->getRuleIndex();
    const bool operator_rule = rule == P::RuleTerm || rule == P::RuleArith_expr || rule == P::RuleShift_expr;
    ExprPtr acc = operand(static_cast<ParserRuleContext *>(kids[0]));
    for (size_t i = 1; i + 1 < kids.size(); i += 2) {
      ExprPtr rhs = operand(static_cast<ParserRuleContext *>(kids[i + 1]));
      SourceSpan s = acc->span;
      s.end = rhs->span.end;
      const std::string op =
          operator_rule ? static_cast<ParserRuleContext *>(kids[i])->getStart()->getText() : kids[i]->getText();
      acc = std::make_unique<BinOp>(binary_op(op), std::move(acc), std::move(rhs), s);
    }
    return acc;
  }

  ExprPtr operand(ParserRuleContext *ctx) {
    if (ctx->getRuleIndex() == P::RuleFactor) return factor(static_cast<P::FactorContext *>(ctx));
    return chain(ctx);
  }

  ExprPtr expr(P::ExprContext *ctx) { return chain(ctx); }

  ExprPtr factor(P::FactorContext *ctx) {
    if (ctx->power()) return power(ctx->power());
    const std::string op = ctx->unary_op()->getText();
    UnaryOpKind kind = op == "-" ? UnaryOpKind::Neg : op == "+" ? UnaryOpKind::Pos : UnaryOpKind::Invert;
    return std::make_unique<UnaryOp>(kind, factor(ctx->factor()), loc_.span(ctx));
  }

  ExprPtr power(P::PowerContext *ctx) {
    ExprPtr base = atom_expr(ctx->atom_expr());
    if (!ctx->factor()) return base;
    return std::make_unique<BinOp>(BinaryOpKind::Pow, std::move(base), factor(ctx->factor()), loc_.span(ctx));
  }

  ExprPtr atom_expr(P::Atom_exprContext *ctx) {
    ExprPtr e = atom(ctx->atom());
    for (P::TrailerContext *t : ctx->trailer()) {
      SourceSpan s = e->span;
      s.end = loc_.span(t).end;
      if (auto *c = dynamic_cast<P::AttributeTrailerContext *>(t)) {
        e = std::make_unique<Attribute>(std::move(e), c->NAME()->getText(), s);
      } else if (auto *c = dynamic_cast<P::SubscriptTrailerContext *>(t)) {
        ExprList indices;
        for (P::SubscriptContext *sub : c->subscriptlist()->subscript()) indices.push_back(subscript(sub));
        e = std::make_unique<Subscript>(std::move(e), std::move(indices), s);
      } else {
        auto *call = dynamic_cast<P::CallTrailerContext *>(t);
        ExprList args;
        std::vector<Keyword> keywords;
        if (call->arglist())
          for (P::ArgumentContext *a : call->arglist()->argument()) argument(a, args, keywords);
        e = std::make_unique<Call>(std::move(e), std::move(args), std::move(keywords), s);
      }
    }
    return e;
  }

  ExprPtr subscript(P::SubscriptContext *ctx) {
    if (auto *c = dynamic_cast<P::IndexSubscriptContext *>(ctx)) return test(c->test());
    auto *c = dynamic_cast<P::SliceSubscriptContext *>(ctx);
    return std::make_unique<Slice>(c->lower ? test(c->lower) : nullptr, c->upper ? test(c->upper) : nullptr,
                                   c->step ? test(c->step) : nullptr, loc_.span(ctx));
  }

  void argument(P::ArgumentContext *ctx, ExprList &args, std::vector<Keyword> &keywords) {
    if (auto *c = dynamic_cast<P::KeywordArgumentContext *>(ctx)) {
      Keyword k{c->NAME()->getText(), loc_.span(c->NAME()), test(c->test())};
      for (const Keyword &other : keywords)
        if (other.name == k.name) error(k.name_span, "keyword argument '" + k.name + "' repeated");
      keywords.push_back(std::move(k));
      return;
    }
    if (auto *c = dynamic_cast<P::PositionalArgumentContext *>(ctx)) {
      if (c->comp_for()) {
        unsupported_expr(ctx, std::string("generator expressions are not supported") + kInJit +
                                  "; use a tl.static_range loop or tile operations");
        return;
      }
      if (!keywords.empty()) error(loc_.span(ctx), "positional argument follows keyword argument");
      args.push_back(test(c->test()));
      return;
    }
    unsupported(ctx, std::string("'*args' and '**kwargs' arguments are not supported") + kInJit +
                         "; pass each argument explicitly");
  }

  ExprPtr atom(P::AtomContext *ctx) {
    const SourceSpan s = loc_.span(ctx);
    if (auto *c = dynamic_cast<P::NameAtomContext *>(ctx)) return std::make_unique<Name>(c->NAME()->getText(), s);
    if (auto *c = dynamic_cast<P::NumberAtomContext *>(ctx)) return number(c->NUMBER()->getText(), s);
    if (auto *c = dynamic_cast<P::StringAtomContext *>(ctx)) return string(c, s);
    if (dynamic_cast<P::NoneAtomContext *>(ctx)) return std::make_unique<NoneLit>(s);
    if (dynamic_cast<P::TrueAtomContext *>(ctx)) return std::make_unique<BoolLit>(true, s);
    if (dynamic_cast<P::FalseAtomContext *>(ctx)) return std::make_unique<BoolLit>(false, s);
    if (dynamic_cast<P::EllipsisAtomContext *>(ctx)) return std::make_unique<EllipsisLit>(s);
    if (auto *c = dynamic_cast<P::ParenAtomContext *>(ctx)) {
      if (c->yield_expr()) return unsupported_expr(ctx, std::string("'yield' is not supported") + kInJit);
      if (!c->testlist_comp()) return std::make_unique<Tuple>(ExprList{}, s);
      ExprPtr e = testlist_comp(c, c->testlist_comp(), "generator expressions");
      if (auto *t = dyn_cast<Tuple>(e.get())) t->span = s;  // the tuple includes its parentheses
      return e;
    }
    if (auto *c = dynamic_cast<P::ListAtomContext *>(ctx)) {
      if (!c->testlist_comp()) return std::make_unique<List>(ExprList{}, s);
      ExprPtr e = testlist_comp(c, c->testlist_comp(), "list comprehensions");
      ExprList elts;
      if (auto *t = dyn_cast<Tuple>(e.get()); t && is_bare_sequence(c->testlist_comp()))
        elts = std::move(t->elts);
      else
        elts.push_back(std::move(e));
      return std::make_unique<List>(std::move(elts), s);
    }
    return unsupported_expr(ctx, std::string("dict and set displays are not supported") + kInJit);
  }

  // True when a testlist_comp is `a, b, ...` (with a comma), not one element.
  static bool is_bare_sequence(P::Testlist_compContext *ctx) {
    for (ParseTree *child : ctx->children)
      if (auto *t = dynamic_cast<TerminalNode *>(child); t && t->getText() == ",") return true;
    return false;
  }

  // The elements inside () or []; a comprehension is reported at the bracket.
  ExprPtr testlist_comp(P::AtomContext *atom, P::Testlist_compContext *ctx, const char *comprehension_kind) {
    for (ParseTree *child : ctx->children)
      if (dynamic_cast<P::Comp_forContext *>(child))
        return unsupported_expr(atom, std::string(comprehension_kind) + " are not supported" + kInJit +
                                          "; use a tl.static_range loop or tile operations");
    return sequence(ctx, ctx->children);
  }

  ExprPtr number(const std::string &spelling, const SourceSpan &s) {
    std::string digits;
    for (char c : spelling)
      if (c != '_') digits += c;
    char last = digits.back();
    if (last == 'j' || last == 'J')
      return unsupported_expr(s, std::string("complex literals are not supported") + kInJit);
    bool is_float = digits.find_first_of(".eE") != std::string::npos &&
                    !(digits.size() > 1 && digits[0] == '0' && std::string("xXoObB").find(digits[1]) != std::string::npos);
    if (is_float) {
      errno = 0;
      double v = std::strtod(digits.c_str(), nullptr);
      return std::make_unique<FloatLit>(v, spelling, s);
    }
    int base = 10;
    std::string body = digits;
    if (digits.size() > 1 && digits[0] == '0' && std::isalpha(static_cast<unsigned char>(digits[1]))) {
      char b = static_cast<char>(std::tolower(digits[1]));
      base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
      body = digits.substr(2);
    } else if (digits.size() > 1 && digits[0] == '0' && digits.find_first_not_of('0') != std::string::npos) {
      error(s, "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers");
      return std::make_unique<IntLit>(0, spelling, s);
    }
    errno = 0;
    unsigned long long v = std::strtoull(body.c_str(), nullptr, base);
    if (errno == ERANGE) {
      error(s, "integer literal '" + spelling + "' does not fit in 64 bits");
      return std::make_unique<IntLit>(0, spelling, s);
    }
    return std::make_unique<IntLit>(v, spelling, s);
  }

  ExprPtr string(P::StringAtomContext *ctx, const SourceSpan &s) {
    std::string value, spelling;
    for (TerminalNode *piece : ctx->STRING()) {
      const std::string text = piece->getText();
      if (!spelling.empty()) spelling += ' ';
      spelling += text;
      size_t quote = text.find_first_of("'\"");
      std::string prefix = text.substr(0, quote);
      bool raw = false;
      for (char c : prefix) {
        char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (l == 'f')
          return unsupported_expr(loc_.span(piece), std::string("f-strings are not supported") + kInJit);
        if (l == 'b')
          return unsupported_expr(loc_.span(piece), std::string("bytes literals are not supported") + kInJit);
        raw |= l == 'r';
      }
      size_t q = (text.compare(quote, 3, "'''") == 0 || text.compare(quote, 3, "\"\"\"") == 0) ? 3 : 1;
      std::string body = text.substr(quote + q, text.size() - quote - 2 * q);
      value += raw ? body : unescape(body, loc_.span(piece));
    }
    return std::make_unique<StrLit>(value, spelling, s);
  }

  // Python's escape sequences in a non-raw string literal.
  std::string unescape(const std::string &body, const SourceSpan &s) {
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      char c = body[i];
      if (c != '\\' || i + 1 == body.size()) {
        out += c;
        continue;
      }
      char e = body[++i];
      switch (e) {
        case '\n': break;  // line continuation inside a string
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': {
          std::string hex = body.substr(i + 1, 2);
          if (hex.size() != 2 || !std::isxdigit(static_cast<unsigned char>(hex[0])) ||
              !std::isxdigit(static_cast<unsigned char>(hex[1]))) {
            error(s, "invalid \\x escape in string literal");
            return out;
          }
          append_utf8(out, static_cast<uint32_t>(std::strtoul(hex.c_str(), nullptr, 16)));
          i += 2;
          break;
        }
        case 'u':
        case 'U': {
          size_t n = e == 'u' ? 4 : 8;
          std::string hex = body.substr(i + 1, n);
          bool ok = hex.size() == n;
          for (char h : hex) ok &= std::isxdigit(static_cast<unsigned char>(h)) != 0;
          uint32_t cp = ok ? static_cast<uint32_t>(std::strtoul(hex.c_str(), nullptr, 16)) : 0;
          if (!ok || cp > 0x10FFFF) {
            error(s, std::string("invalid \\") + e + " escape in string literal");
            return out;
          }
          append_utf8(out, cp);
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = 0;
            size_t n = 0;
            while (n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') v = v * 8 + (body[i++] - '0'), ++n;
            --i;
            append_utf8(out, v);
          } else {
            out += '\\';  // unknown escapes stay as written, as in Python
            out += e;
          }
      }
    }
    return out;
  }

  static void append_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // ---------------------------------------------------------------- errors

  void error(const SourceSpan &s, const std::string &message) { diags_.error(s, message); }

  void unsupported(ParserRuleContext *ctx, const std::string &message) { error(first_token_span(ctx), message); }

  StmtPtr unsupported_stmt(ParserRuleContext *ctx, const std::string &message) {
    unsupported(ctx, message);
    return nullptr;
  }

  ExprPtr unsupported_expr(ParserRuleContext *ctx, const std::string &message) {
    return unsupported_expr(loc_.span(ctx), message);
  }

  // The tree stays well formed after an error: the construct becomes `None`.
  // The caller sees the error count and never uses the result.
  ExprPtr unsupported_expr(const SourceSpan &s, const std::string &message) {
    SourceSpan caret = s;
    caret.end = {s.begin.line, s.begin.column + 1};
    if (s.end.line == s.begin.line) caret.end = s.end;
    error(caret, message);
    return std::make_unique<NoneLit>(s);
  }

  // Point at the keyword that starts a statement (`with`, `try`, ...).
  SourceSpan first_token_span(ParserRuleContext *ctx) { return loc_.span(ctx->getStart()); }

  const ChunkLocator &loc_;
  DiagEngine &diags_;
};

}  // namespace

std::unique_ptr<Function> build_function(P::FuncdefContext *ctx, Chunk &chunk, const ChunkLocator &locator,
                                         DiagEngine &diags) {
  std::unique_ptr<Function> f = Builder(locator, diags).function(ctx);
  f->decorators = std::move(chunk.decorators);
  f->jit_alias = chunk.jit_alias;
  return f;
}

bool build_import(P::Import_stmtContext *ctx, const ChunkLocator &locator, DiagEngine &diags, Import &out) {
  (void)diags;
  out.span = locator.span(ctx);
  if (auto *c = dynamic_cast<P::ImportNameContext *>(ctx)) {
    out.is_from = false;
    for (P::Dotted_as_nameContext *d : c->dotted_as_name())
      out.names.emplace_back(d->dotted_name()->getText(), d->NAME() ? d->NAME()->getText() : "");
    return true;
  }
  auto *c = dynamic_cast<P::ImportFromContext *>(ctx);
  out.is_from = true;
  // Leading dots (relative imports) come before the dotted name.
  for (ParseTree *child : c->children) {
    std::string text = child->getText();
    if (text == "from") continue;
    if (text == "." || text == "...") {
      out.module += text;
      continue;
    }
    break;
  }
  if (c->dotted_name()) out.module += c->dotted_name()->getText();
  if (!c->import_as_names()) {
    out.names.emplace_back("*", "");
    return true;
  }
  for (P::Import_as_nameContext *n : c->import_as_names()->import_as_name())
    out.names.emplace_back(n->NAME(0)->getText(), n->NAME().size() > 1 ? n->NAME(1)->getText() : "");
  return true;
}

StmtPtr build_constant(P::Expr_stmtContext *ctx, const ChunkLocator &locator, DiagEngine &diags, std::string &name) {
  Builder b(locator, diags);
  StmtPtr s = b.expr_stmt(ctx);
  if (!s) return nullptr;
  const Expr *target = nullptr;
  if (auto *a = dyn_cast<AnnAssign>(s.get())) {
    if (!a->value) {
      diags.error(s->span, "a module-level tl.constexpr needs a value");
      return nullptr;
    }
    target = a->target.get();
  } else if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1) {
    target = a->targets[0].get();
  }
  const auto *n = dyn_cast<Name>(target);
  if (!n) {
    diags.error(s->span, "a module-level tl.constexpr must assign a single name");
    return nullptr;
  }
  name = n->id;
  return s;
}

}  // namespace tgrad::parse
