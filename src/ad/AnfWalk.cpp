#include "src/ad/AnfWalk.h"

namespace tgrad::ad {

using namespace ast;

void visit_expr(const Expr &e, const std::function<void(const Expr &)> &fn) {
  switch (e.kind) {
    case NodeKind::Attribute: visit_expr(*cast<Attribute>(&e)->value, fn); break;
    case NodeKind::Subscript:
      visit_expr(*cast<Subscript>(&e)->value, fn);
      for (const ExprPtr &i : cast<Subscript>(&e)->indices) visit_expr(*i, fn);
      break;
    case NodeKind::Slice: {
      auto *s = cast<Slice>(&e);
      for (const ExprPtr *p : {&s->lower, &s->upper, &s->step})
        if (*p) visit_expr(**p, fn);
      break;
    }
    case NodeKind::Call:
      visit_expr(*cast<Call>(&e)->func, fn);
      for (const ExprPtr &a : cast<Call>(&e)->args) visit_expr(*a, fn);
      for (const Keyword &k : cast<Call>(&e)->keywords) visit_expr(*k.value, fn);
      break;
    case NodeKind::UnaryOp: visit_expr(*cast<UnaryOp>(&e)->operand, fn); break;
    case NodeKind::BinOp:
      visit_expr(*cast<BinOp>(&e)->lhs, fn);
      visit_expr(*cast<BinOp>(&e)->rhs, fn);
      break;
    case NodeKind::BoolOp:
      for (const ExprPtr &v : cast<BoolOp>(&e)->values) visit_expr(*v, fn);
      break;
    case NodeKind::Compare:
      visit_expr(*cast<Compare>(&e)->left, fn);
      for (const ExprPtr &c : cast<Compare>(&e)->comparators) visit_expr(*c, fn);
      break;
    case NodeKind::IfExp:
      visit_expr(*cast<IfExp>(&e)->cond, fn);
      visit_expr(*cast<IfExp>(&e)->then_value, fn);
      visit_expr(*cast<IfExp>(&e)->else_value, fn);
      break;
    case NodeKind::Tuple:
      for (const ExprPtr &x : cast<Tuple>(&e)->elts) visit_expr(*x, fn);
      break;
    case NodeKind::List:
      for (const ExprPtr &x : cast<List>(&e)->elts) visit_expr(*x, fn);
      break;
    default: break;
  }
  fn(e);
}

void visit_exprs(const StmtList &block, const std::function<void(const Expr &)> &fn) {
  for (const StmtPtr &st : block) {
    if (auto *a = dyn_cast<Assign>(st.get())) visit_expr(*a->value, fn);
    if (auto *a = dyn_cast<AugAssign>(st.get())) visit_expr(*a->value, fn);
    if (auto *x = dyn_cast<ExprStmt>(st.get())) visit_expr(*x->value, fn);
    if (auto *r = dyn_cast<Return>(st.get()); r && r->value) visit_expr(*r->value, fn);
    if (auto *f = dyn_cast<For>(st.get())) {
      visit_expr(*f->iter, fn);
      visit_exprs(f->body, fn);
    }
    if (auto *i = dyn_cast<If>(st.get())) {
      visit_expr(*i->cond, fn);
      visit_exprs(i->body, fn);
      visit_exprs(i->orelse, fn);
    }
  }
}

// Names read anywhere in an expression / statement.
void reads(const Expr &e, std::set<std::string> &out) {
  visit_expr(e, [&out](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x)) out.insert(n->id);
  });
}

void stmt_reads(const Stmt &s, std::set<std::string> &out) {
  switch (s.kind) {
    case NodeKind::Assign: reads(*cast<Assign>(&s)->value, out); return;
    case NodeKind::AugAssign:
      reads(*cast<AugAssign>(&s)->target, out);
      reads(*cast<AugAssign>(&s)->value, out);
      return;
    case NodeKind::ExprStmt: reads(*cast<ExprStmt>(&s)->value, out); return;
    case NodeKind::Return:
      if (cast<Return>(&s)->value) reads(*cast<Return>(&s)->value, out);
      return;
    case NodeKind::Assert:
      reads(*cast<Assert>(&s)->test, out);
      if (cast<Assert>(&s)->msg) reads(*cast<Assert>(&s)->msg, out);
      return;
    default: return;
  }
}

// Names read anywhere in a block: its statements, loop ranges and if
// conditions, at any depth.
// Names one statement reads, including, for a loop or an if, its range or
// condition and its body at any depth.
void deep_reads(const Stmt &s, std::set<std::string> &out) {
  stmt_reads(s, out);
  if (auto *f = dyn_cast<For>(&s)) {
    reads(*f->iter, out);
    block_reads(f->body, out);
  }
  if (auto *i = dyn_cast<If>(&s)) {
    reads(*i->cond, out);
    block_reads(i->body, out);
    block_reads(i->orelse, out);
  }
}
void block_reads(const StmtList &block, std::set<std::string> &out) {
  for (const StmtPtr &s : block) deep_reads(*s, out);
}

// Calls `fn` on every expression node of `e`, children first; `fn` may
// replace the node it is given.
void rewrite_expr(ExprPtr &e, const std::function<void(ExprPtr &)> &fn) {
  switch (e->kind) {
    case NodeKind::Call: {
      auto *c = cast<Call>(e.get());
      rewrite_expr(c->func, fn);
      for (ExprPtr &a : c->args) rewrite_expr(a, fn);
      for (Keyword &k : c->keywords) rewrite_expr(k.value, fn);
      break;
    }
    case NodeKind::BinOp:
      rewrite_expr(cast<BinOp>(e.get())->lhs, fn);
      rewrite_expr(cast<BinOp>(e.get())->rhs, fn);
      break;
    case NodeKind::UnaryOp: rewrite_expr(cast<UnaryOp>(e.get())->operand, fn); break;
    case NodeKind::BoolOp:
      for (ExprPtr &v : cast<BoolOp>(e.get())->values) rewrite_expr(v, fn);
      break;
    case NodeKind::Compare:
      rewrite_expr(cast<Compare>(e.get())->left, fn);
      for (ExprPtr &c : cast<Compare>(e.get())->comparators) rewrite_expr(c, fn);
      break;
    case NodeKind::Attribute: rewrite_expr(cast<Attribute>(e.get())->value, fn); break;
    case NodeKind::Subscript:
      rewrite_expr(cast<Subscript>(e.get())->value, fn);
      for (ExprPtr &i : cast<Subscript>(e.get())->indices) rewrite_expr(i, fn);
      break;
    case NodeKind::IfExp:
      rewrite_expr(cast<IfExp>(e.get())->cond, fn);
      rewrite_expr(cast<IfExp>(e.get())->then_value, fn);
      rewrite_expr(cast<IfExp>(e.get())->else_value, fn);
      break;
    case NodeKind::Tuple:
      for (ExprPtr &x : cast<Tuple>(e.get())->elts) rewrite_expr(x, fn);
      break;
    case NodeKind::List:
      for (ExprPtr &x : cast<List>(e.get())->elts) rewrite_expr(x, fn);
      break;
    default: break;
  }
  fn(e);
}

// The same over every expression a block's statements read, at any depth.
void rewrite_exprs(StmtList &block, const std::function<void(ExprPtr &)> &fn) {
  for (StmtPtr &st : block) {
    if (auto *a = dyn_cast<Assign>(st.get())) rewrite_expr(a->value, fn);
    if (auto *a = dyn_cast<AugAssign>(st.get())) rewrite_expr(a->value, fn);
    if (auto *x = dyn_cast<ExprStmt>(st.get())) rewrite_expr(x->value, fn);
    if (auto *r = dyn_cast<Return>(st.get()); r && r->value) rewrite_expr(r->value, fn);
    if (auto *f = dyn_cast<For>(st.get())) {
      rewrite_expr(f->iter, fn);
      rewrite_exprs(f->body, fn);
    }
    if (auto *i = dyn_cast<If>(st.get())) {
      rewrite_expr(i->cond, fn);
      rewrite_exprs(i->body, fn);
      rewrite_exprs(i->orelse, fn);
    }
  }
}

std::string assigned_name(const Stmt &s) {
  auto *a = dyn_cast<Assign>(&s);
  auto *n = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
  return n ? n->id : "";
}

const Assign *top_level_assignment(const StmtList &block, const std::string &name) {
  for (const StmtPtr &s : block)
    if (assigned_name(*s) == name) return cast<Assign>(s.get());
  return nullptr;
}

const Expr *call_argument(const Call &c, size_t position, const std::string &keyword) {
  if (position < c.args.size()) return c.args[position].get();
  return c.keyword(keyword);
}

void count_reads(const StmtList &block, std::map<std::string, int> &out) {
  for (const StmtPtr &s : block) {
    std::set<std::string> r;
    stmt_reads(*s, r);
    if (auto *f = dyn_cast<For>(s.get())) reads(*f->iter, r);
    if (auto *i = dyn_cast<If>(s.get())) reads(*i->cond, r);
    for (const std::string &n : r) ++out[n];
    if (auto *f = dyn_cast<For>(s.get())) count_reads(f->body, out);
    if (auto *i = dyn_cast<If>(s.get())) {
      count_reads(i->body, out);
      count_reads(i->orelse, out);
    }
  }
}

void stmt_assignments(const Stmt &s, std::map<std::string, int> &out) {
  std::function<void(const Expr &)> target = [&](const Expr &t) {
    if (auto *n = dyn_cast<Name>(&t)) ++out[n->id];
    if (auto *tu = dyn_cast<Tuple>(&t))
      for (const ExprPtr &e : tu->elts) target(*e);
  };
  if (auto *a = dyn_cast<Assign>(&s))
    for (const ExprPtr &t : a->targets) target(*t);
  if (auto *a = dyn_cast<AugAssign>(&s)) target(*a->target);
  if (auto *a = dyn_cast<AnnAssign>(&s); a && a->value) target(*a->target);
  if (auto *f = dyn_cast<For>(&s)) {
    target(*f->target);
    count_assignments(f->body, out);
  }
  if (auto *i = dyn_cast<If>(&s)) {
    count_assignments(i->body, out);
    count_assignments(i->orelse, out);
  }
  if (auto *w = dyn_cast<While>(&s)) count_assignments(w->body, out);
}

void count_assignments(const StmtList &block, std::map<std::string, int> &out) {
  for (const StmtPtr &s : block) stmt_assignments(*s, out);
}

}  // namespace tgrad::ad
