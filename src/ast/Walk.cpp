#include "tgrad/ast/Walk.h"

namespace tgrad::ast {

namespace {

// The child slots of an expression, in evaluation order; `ExprT` is Expr or
// const Expr, so that one list serves the read-only and the rewriting walk.
template <class ExprT, class Fn>
void each_child(ExprT &e, Fn &&child) {
  auto each = [&](auto &list) {
    for (auto &x : list) child(x);
  };
  switch (e.kind) {
    case NodeKind::Attribute: child(cast<Attribute>(&e)->value); break;
    case NodeKind::Subscript:
      child(cast<Subscript>(&e)->value);
      each(cast<Subscript>(&e)->indices);
      break;
    case NodeKind::Slice: {
      auto *s = cast<Slice>(&e);
      for (auto *p : {&s->lower, &s->upper, &s->step})
        if (*p) child(*p);
      break;
    }
    case NodeKind::Call: {
      auto *c = cast<Call>(&e);
      child(c->func);
      each(c->args);
      for (auto &k : c->keywords) child(k.value);
      break;
    }
    case NodeKind::UnaryOp: child(cast<UnaryOp>(&e)->operand); break;
    case NodeKind::BinOp:
      child(cast<BinOp>(&e)->lhs);
      child(cast<BinOp>(&e)->rhs);
      break;
    case NodeKind::BoolOp: each(cast<BoolOp>(&e)->values); break;
    case NodeKind::Compare:
      child(cast<Compare>(&e)->left);
      each(cast<Compare>(&e)->comparators);
      break;
    case NodeKind::IfExp:
      child(cast<IfExp>(&e)->cond);
      child(cast<IfExp>(&e)->then_value);
      child(cast<IfExp>(&e)->else_value);
      break;
    case NodeKind::Tuple: each(cast<Tuple>(&e)->elts); break;
    case NodeKind::List: each(cast<List>(&e)->elts); break;
    default: break;
  }
}

}  // namespace

void for_each_child(Expr &e, const std::function<void(ExprPtr &)> &fn) { each_child(e, fn); }

void visit_expr(const Expr &e, const std::function<void(const Expr &)> &fn) {
  each_child(e, [&](const ExprPtr &c) { visit_expr(*c, fn); });
  fn(e);
}

void rewrite_expr(ExprPtr &e, const std::function<void(ExprPtr &)> &fn) {
  each_child(*e, [&](ExprPtr &c) { rewrite_expr(c, fn); });
  fn(e);
}

void visit_stmt_exprs(const Stmt &s, const std::function<void(const Expr &)> &fn) {
  auto expr = [&](const ExprPtr &e) {
    if (e) visit_expr(*e, fn);
  };
  auto block = [&](const StmtList &b) {
    for (const StmtPtr &x : b) visit_stmt_exprs(*x, fn);
  };
  if (auto *e = dyn_cast<ExprStmt>(&s)) expr(e->value);
  if (auto *a = dyn_cast<Assign>(&s)) {
    for (const ExprPtr &t : a->targets) expr(t);
    expr(a->value);
  }
  if (auto *a = dyn_cast<AugAssign>(&s)) {
    expr(a->target);
    expr(a->value);
  }
  if (auto *a = dyn_cast<AnnAssign>(&s)) {
    expr(a->target);
    expr(a->annotation);
    expr(a->value);
  }
  if (auto *i = dyn_cast<If>(&s)) {
    expr(i->cond);
    block(i->body);
    block(i->orelse);
  }
  if (auto *f = dyn_cast<For>(&s)) {
    expr(f->target);
    expr(f->iter);
    block(f->body);
  }
  if (auto *w = dyn_cast<While>(&s)) {
    expr(w->cond);
    block(w->body);
  }
  if (auto *r = dyn_cast<Return>(&s)) expr(r->value);
  if (auto *a = dyn_cast<Assert>(&s)) {
    expr(a->test);
    expr(a->msg);
  }
}

namespace {

template <class Map>
void count_block_assignments(const StmtList &block, Map &out);

template <class Map>
void count_stmt_assignments(const Stmt &s, Map &out) {
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
    count_block_assignments(f->body, out);
  }
  if (auto *i = dyn_cast<If>(&s)) {
    count_block_assignments(i->body, out);
    count_block_assignments(i->orelse, out);
  }
  if (auto *w = dyn_cast<While>(&s)) count_block_assignments(w->body, out);
}

template <class Map>
void count_block_assignments(const StmtList &block, Map &out) {
  for (const StmtPtr &s : block) count_stmt_assignments(*s, out);
}

// The count of one name, where the counting templates index a map by every name.
struct OneNameCount {
  const std::string &name;
  int count = 0;
  int ignored = 0;
  int &operator[](const std::string &n) { return n == name ? count : ignored; }
};

}  // namespace

int assignments_of(const Stmt &s, const std::string &name) {
  OneNameCount one{name};
  count_stmt_assignments(s, one);
  return one.count;
}

void stmt_assignments(const Stmt &s, std::map<std::string, int> &out) { count_stmt_assignments(s, out); }
void count_assignments(const StmtList &block, std::map<std::string, int> &out) { count_block_assignments(block, out); }
void stmt_assignments(const Stmt &s, std::unordered_map<std::string, int> &out) { count_stmt_assignments(s, out); }
void count_assignments(const StmtList &block, std::unordered_map<std::string, int> &out) {
  count_block_assignments(block, out);
}

}  // namespace tgrad::ast
