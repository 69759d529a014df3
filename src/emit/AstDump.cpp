#include "tgrad/emit/AstDump.h"

#include <sstream>

#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::emit {

using namespace ast;

namespace {

class Dumper {
 public:
  Dumper(std::ostringstream &out, const ExprAnnotator &annotate) : out_(out), annotate_(annotate) {}

  void function(const Function &f, int depth) {
    line(depth, "Function " + f.name, f.span);
    for (const Decorator &d : f.decorators) line(depth + 1, "Decorator " + decorator_kind(d.kind) + " @" + d.name, d.span);
    if (!f.jit_alias.empty()) line(depth + 1, "JitAlias " + f.jit_alias, {});
    for (const Param &p : f.params) {
      line(depth + 1, "Param " + p.name, p.span);
      if (p.annotation) labelled(depth + 2, "annotation", *p.annotation);
      if (p.default_value) labelled(depth + 2, "default", *p.default_value);
    }
    if (f.returns) labelled(depth + 1, "returns", *f.returns);
    body(depth + 1, "body", f.body);
  }

  void stmt(int depth, const Stmt &s) {
    switch (s.kind) {
      case NodeKind::ExprStmt:
        line(depth, "ExprStmt", s.span);
        expr(depth + 1, *cast<ExprStmt>(&s)->value);
        return;
      case NodeKind::Assign: {
        auto *n = cast<Assign>(&s);
        line(depth, "Assign", s.span);
        for (const ExprPtr &t : n->targets) labelled(depth + 1, "target", *t);
        labelled(depth + 1, "value", *n->value);
        return;
      }
      case NodeKind::AugAssign: {
        auto *n = cast<AugAssign>(&s);
        line(depth, std::string("AugAssign ") + spelling(n->op) + "=", s.span);
        labelled(depth + 1, "target", *n->target);
        labelled(depth + 1, "value", *n->value);
        return;
      }
      case NodeKind::AnnAssign: {
        auto *n = cast<AnnAssign>(&s);
        line(depth, "AnnAssign", s.span);
        labelled(depth + 1, "target", *n->target);
        labelled(depth + 1, "annotation", *n->annotation);
        if (n->value) labelled(depth + 1, "value", *n->value);
        return;
      }
      case NodeKind::If: {
        auto *n = cast<If>(&s);
        line(depth, "If", s.span);
        labelled(depth + 1, "cond", *n->cond);
        body(depth + 1, "then", n->body);
        if (!n->orelse.empty()) body(depth + 1, "else", n->orelse);
        return;
      }
      case NodeKind::For: {
        auto *n = cast<For>(&s);
        line(depth, "For", s.span);
        labelled(depth + 1, "target", *n->target);
        labelled(depth + 1, "iter", *n->iter);
        body(depth + 1, "body", n->body);
        return;
      }
      case NodeKind::While: {
        auto *n = cast<While>(&s);
        line(depth, "While", s.span);
        labelled(depth + 1, "cond", *n->cond);
        body(depth + 1, "body", n->body);
        return;
      }
      case NodeKind::Return: {
        auto *n = cast<Return>(&s);
        line(depth, "Return", s.span);
        if (n->value) expr(depth + 1, *n->value);
        return;
      }
      case NodeKind::Pass: line(depth, "Pass", s.span); return;
      case NodeKind::Assert: {
        auto *n = cast<Assert>(&s);
        line(depth, "Assert", s.span);
        labelled(depth + 1, "test", *n->test);
        if (n->msg) labelled(depth + 1, "msg", *n->msg);
        return;
      }
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        return;
    }
  }

  void expr(int depth, const Expr &e, const std::string &label = "") {
    pending_annotation_ = annotate_ ? annotate_(e) : "";
    std::string head = label.empty() ? "" : label + ": ";
    switch (e.kind) {
      case NodeKind::Name: line(depth, head + "Name " + cast<Name>(&e)->id, e.span); return;
      case NodeKind::IntLit:
      case NodeKind::FloatLit:
      case NodeKind::BoolLit:
      case NodeKind::NoneLit:
      case NodeKind::StrLit:
      case NodeKind::EllipsisLit:
        line(depth, head + kind_name(e.kind) + " " + print_expr(e), e.span);
        return;
      case NodeKind::Attribute: {
        auto *n = cast<Attribute>(&e);
        line(depth, head + "Attribute ." + n->attr, e.span);
        expr(depth + 1, *n->value);
        return;
      }
      case NodeKind::Subscript: {
        auto *n = cast<Subscript>(&e);
        line(depth, head + "Subscript", e.span);
        expr(depth + 1, *n->value);
        for (const ExprPtr &i : n->indices) expr(depth + 1, *i, "index");
        return;
      }
      case NodeKind::Slice: {
        auto *n = cast<Slice>(&e);
        line(depth, head + "Slice", e.span);
        if (n->lower) expr(depth + 1, *n->lower, "lower");
        if (n->upper) expr(depth + 1, *n->upper, "upper");
        if (n->step) expr(depth + 1, *n->step, "step");
        return;
      }
      case NodeKind::Call: {
        auto *n = cast<Call>(&e);
        line(depth, head + "Call", e.span);
        expr(depth + 1, *n->func, "func");
        for (const ExprPtr &a : n->args) expr(depth + 1, *a, "arg");
        for (const Keyword &k : n->keywords) expr(depth + 1, *k.value, "keyword " + k.name);
        return;
      }
      case NodeKind::UnaryOp: {
        auto *n = cast<UnaryOp>(&e);
        line(depth, head + "UnaryOp " + spelling(n->op), e.span);
        expr(depth + 1, *n->operand);
        return;
      }
      case NodeKind::BinOp: {
        auto *n = cast<BinOp>(&e);
        line(depth, head + "BinOp " + spelling(n->op), e.span);
        expr(depth + 1, *n->lhs);
        expr(depth + 1, *n->rhs);
        return;
      }
      case NodeKind::BoolOp: {
        auto *n = cast<BoolOp>(&e);
        line(depth, head + "BoolOp " + spelling(n->op), e.span);
        for (const ExprPtr &v : n->values) expr(depth + 1, *v);
        return;
      }
      case NodeKind::Compare: {
        auto *n = cast<Compare>(&e);
        std::string ops;
        for (CompareOpKind op : n->ops) ops += std::string(" ") + spelling(op);
        line(depth, head + "Compare" + ops, e.span);
        expr(depth + 1, *n->left);
        for (const ExprPtr &c : n->comparators) expr(depth + 1, *c);
        return;
      }
      case NodeKind::IfExp: {
        auto *n = cast<IfExp>(&e);
        line(depth, head + "IfExp", e.span);
        expr(depth + 1, *n->cond, "cond");
        expr(depth + 1, *n->then_value, "then");
        expr(depth + 1, *n->else_value, "else");
        return;
      }
      case NodeKind::Tuple:
        line(depth, head + "Tuple", e.span);
        for (const ExprPtr &x : cast<Tuple>(&e)->elts) expr(depth + 1, *x);
        return;
      case NodeKind::List:
        line(depth, head + "List", e.span);
        for (const ExprPtr &x : cast<List>(&e)->elts) expr(depth + 1, *x);
        return;
#define TGRAD_STMT(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        return;
    }
  }

  void line(int depth, const std::string &text, const SourceSpan &s) {
    out_ << std::string(2 * depth, ' ') << text;
    if (s.valid()) out_ << " @" << s.begin.line << ':' << s.begin.column;
    if (!pending_annotation_.empty()) out_ << " : " << pending_annotation_;
    pending_annotation_.clear();
    out_ << '\n';
  }

 private:
  void labelled(int depth, const std::string &label, const Expr &e) { expr(depth, e, label); }

  void body(int depth, const std::string &label, const StmtList &stmts) {
    out_ << std::string(2 * depth, ' ') << label << ":\n";
    for (const StmtPtr &s : stmts) stmt(depth + 1, *s);
  }

  static std::string decorator_kind(DecoratorKind k) {
    switch (k) {
      case DecoratorKind::Jit: return "jit";
      case DecoratorKind::Autotune: return "autotune";
      case DecoratorKind::Heuristics: return "heuristics";
      case DecoratorKind::ConstexprFunction: return "constexpr_function";
      case DecoratorKind::Other: return "other";
    }
    return "other";
  }

  std::ostringstream &out_;
  const ExprAnnotator &annotate_;
  std::string pending_annotation_;  // for the next line: the expression's own
};

}  // namespace

std::string dump_ast(const Module &m, const SourceManager &sources, const ExprAnnotator &annotate) {
  std::ostringstream out;
  Dumper d(out, annotate);
  out << "Module " << (m.file_id >= 0 ? sources.name(m.file_id) : std::string("<generated>")) << '\n';
  for (const Import &imp : m.imports) {
    std::string text = imp.is_from ? "ImportFrom " + imp.module + ":" : std::string("Import");
    for (const auto &n : imp.names) text += " " + n.first + (n.second.empty() ? "" : " as " + n.second);
    d.line(1, text, imp.span);
  }
  for (const Constant &c : m.constants) {
    d.line(1, "Constant " + c.name, c.span);
    d.stmt(2, *c.stmt);
  }
  for (const auto &f : m.functions) d.function(*f, 1);
  return out.str();
}

std::string dump_ast(const Function &f, const ExprAnnotator &annotate) {
  std::ostringstream out;
  Dumper(out, annotate).function(f, 0);
  return out.str();
}

}  // namespace tgrad::emit
