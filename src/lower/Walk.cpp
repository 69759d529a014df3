#include "src/lower/Walk.h"

namespace tgrad::lower {

using namespace ast;

void collect_names(const Expr &e, std::set<std::string> &out) {
  switch (e.kind) {
    case NodeKind::Name: out.insert(cast<Name>(&e)->id); return;
    case NodeKind::Attribute: collect_names(*cast<Attribute>(&e)->value, out); return;
    case NodeKind::Subscript: {
      auto *s = cast<Subscript>(&e);
      collect_names(*s->value, out);
      for (const ExprPtr &i : s->indices) collect_names(*i, out);
      return;
    }
    case NodeKind::Slice: {
      auto *s = cast<Slice>(&e);
      for (const ExprPtr *p : {&s->lower, &s->upper, &s->step})
        if (*p) collect_names(**p, out);
      return;
    }
    case NodeKind::Call: {
      auto *c = cast<Call>(&e);
      collect_names(*c->func, out);
      for (const ExprPtr &a : c->args) collect_names(*a, out);
      for (const Keyword &k : c->keywords) collect_names(*k.value, out);
      return;
    }
    case NodeKind::UnaryOp: collect_names(*cast<UnaryOp>(&e)->operand, out); return;
    case NodeKind::BinOp:
      collect_names(*cast<BinOp>(&e)->lhs, out);
      collect_names(*cast<BinOp>(&e)->rhs, out);
      return;
    case NodeKind::BoolOp:
      for (const ExprPtr &v : cast<BoolOp>(&e)->values) collect_names(*v, out);
      return;
    case NodeKind::Compare:
      collect_names(*cast<Compare>(&e)->left, out);
      for (const ExprPtr &v : cast<Compare>(&e)->comparators) collect_names(*v, out);
      return;
    case NodeKind::IfExp: {
      auto *i = cast<IfExp>(&e);
      collect_names(*i->cond, out);
      collect_names(*i->then_value, out);
      collect_names(*i->else_value, out);
      return;
    }
    case NodeKind::Tuple:
      for (const ExprPtr &v : cast<Tuple>(&e)->elts) collect_names(*v, out);
      return;
    case NodeKind::List:
      for (const ExprPtr &v : cast<List>(&e)->elts) collect_names(*v, out);
      return;
    default: return;
  }
}

void collect_names(const StmtList &block, std::set<std::string> &out) {
  for (const StmtPtr &s : block) {
    switch (s->kind) {
      case NodeKind::ExprStmt: collect_names(*cast<ExprStmt>(s.get())->value, out); break;
      case NodeKind::Assign:
        for (const ExprPtr &t : cast<Assign>(s.get())->targets) collect_names(*t, out);
        collect_names(*cast<Assign>(s.get())->value, out);
        break;
      case NodeKind::AugAssign:
        collect_names(*cast<AugAssign>(s.get())->target, out);
        collect_names(*cast<AugAssign>(s.get())->value, out);
        break;
      case NodeKind::AnnAssign:
        collect_names(*cast<AnnAssign>(s.get())->target, out);
        if (cast<AnnAssign>(s.get())->value) collect_names(*cast<AnnAssign>(s.get())->value, out);
        break;
      case NodeKind::If:
        collect_names(*cast<If>(s.get())->cond, out);
        collect_names(cast<If>(s.get())->body, out);
        collect_names(cast<If>(s.get())->orelse, out);
        break;
      case NodeKind::For:
        collect_names(*cast<For>(s.get())->target, out);
        collect_names(*cast<For>(s.get())->iter, out);
        collect_names(cast<For>(s.get())->body, out);
        break;
      case NodeKind::While:
        collect_names(*cast<While>(s.get())->cond, out);
        collect_names(cast<While>(s.get())->body, out);
        break;
      case NodeKind::Return:
        if (cast<Return>(s.get())->value) collect_names(*cast<Return>(s.get())->value, out);
        break;
      case NodeKind::Assert: collect_names(*cast<Assert>(s.get())->test, out); break;
      default: break;
    }
  }
}

}  // namespace tgrad::lower

namespace tgrad::lower {

using namespace ast;

void rewrite_expr(ExprPtr &e, const std::function<void(ExprPtr &)> &fn) {
  switch (e->kind) {
    case NodeKind::Attribute: rewrite_expr(cast<Attribute>(e.get())->value, fn); break;
    case NodeKind::Subscript: {
      auto *s = cast<Subscript>(e.get());
      rewrite_expr(s->value, fn);
      for (ExprPtr &i : s->indices) rewrite_expr(i, fn);
      break;
    }
    case NodeKind::Slice: {
      auto *s = cast<Slice>(e.get());
      for (ExprPtr *p : {&s->lower, &s->upper, &s->step})
        if (*p) rewrite_expr(*p, fn);
      break;
    }
    case NodeKind::Call: {
      auto *c = cast<Call>(e.get());
      rewrite_expr(c->func, fn);
      for (ExprPtr &a : c->args) rewrite_expr(a, fn);
      for (Keyword &k : c->keywords) rewrite_expr(k.value, fn);
      break;
    }
    case NodeKind::UnaryOp: rewrite_expr(cast<UnaryOp>(e.get())->operand, fn); break;
    case NodeKind::BinOp:
      rewrite_expr(cast<BinOp>(e.get())->lhs, fn);
      rewrite_expr(cast<BinOp>(e.get())->rhs, fn);
      break;
    case NodeKind::BoolOp:
      for (ExprPtr &v : cast<BoolOp>(e.get())->values) rewrite_expr(v, fn);
      break;
    case NodeKind::Compare:
      rewrite_expr(cast<Compare>(e.get())->left, fn);
      for (ExprPtr &v : cast<Compare>(e.get())->comparators) rewrite_expr(v, fn);
      break;
    case NodeKind::IfExp: {
      auto *i = cast<IfExp>(e.get());
      rewrite_expr(i->cond, fn);
      rewrite_expr(i->then_value, fn);
      rewrite_expr(i->else_value, fn);
      break;
    }
    case NodeKind::Tuple:
      for (ExprPtr &v : cast<Tuple>(e.get())->elts) rewrite_expr(v, fn);
      break;
    case NodeKind::List:
      for (ExprPtr &v : cast<List>(e.get())->elts) rewrite_expr(v, fn);
      break;
    default: break;
  }
  fn(e);
}

void rewrite_block(StmtList &block, const std::function<void(ExprPtr &)> &fn) {
  for (StmtPtr &s : block) {
    switch (s->kind) {
      case NodeKind::ExprStmt: rewrite_expr(cast<ExprStmt>(s.get())->value, fn); break;
      case NodeKind::Assign:
        for (ExprPtr &t : cast<Assign>(s.get())->targets) rewrite_expr(t, fn);
        rewrite_expr(cast<Assign>(s.get())->value, fn);
        break;
      case NodeKind::AugAssign:
        rewrite_expr(cast<AugAssign>(s.get())->target, fn);
        rewrite_expr(cast<AugAssign>(s.get())->value, fn);
        break;
      case NodeKind::AnnAssign:
        rewrite_expr(cast<AnnAssign>(s.get())->target, fn);
        if (cast<AnnAssign>(s.get())->value) rewrite_expr(cast<AnnAssign>(s.get())->value, fn);
        break;
      case NodeKind::If:
        rewrite_expr(cast<If>(s.get())->cond, fn);
        rewrite_block(cast<If>(s.get())->body, fn);
        rewrite_block(cast<If>(s.get())->orelse, fn);
        break;
      case NodeKind::For:
        rewrite_expr(cast<For>(s.get())->target, fn);
        rewrite_expr(cast<For>(s.get())->iter, fn);
        rewrite_block(cast<For>(s.get())->body, fn);
        break;
      case NodeKind::While:
        rewrite_expr(cast<While>(s.get())->cond, fn);
        rewrite_block(cast<While>(s.get())->body, fn);
        break;
      case NodeKind::Return:
        if (cast<Return>(s.get())->value) rewrite_expr(cast<Return>(s.get())->value, fn);
        break;
      case NodeKind::Assert:
        rewrite_expr(cast<Assert>(s.get())->test, fn);
        if (cast<Assert>(s.get())->msg) rewrite_expr(cast<Assert>(s.get())->msg, fn);
        break;
      default: break;
    }
  }
}

}  // namespace tgrad::lower
