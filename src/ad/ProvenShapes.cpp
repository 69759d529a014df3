#include "src/ad/ProvenShapes.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {
namespace {

using namespace ast;

// The shape sema gives `e` where it is a tensor whose every dimension is a
// constant or a named symbol; else null.
const sema::SymShape *known_shape(const Expr &e, const sema::TypeInfo &types) {
  const sema::SType *t = types.type_of(&e);
  if (!t || !t->is_tensor()) return nullptr;
  for (const sema::Dim &d : t->shape)
    if (!d.value && d.symbol.empty()) return nullptr;
  return &t->shape;
}

bool same_known_shape(const Expr &a, const Expr &b, const sema::TypeInfo &types) {
  const sema::SymShape *x = known_shape(a, types), *y = known_shape(b, types);
  return x && y && *x == *y;
}

bool is_callee(const Call &c, const char *name) { return emit::print_expr(*c.func) == name; }

// `tl.static_assert(a.shape == b.shape)`, the form reverse mode writes: its two sides.
bool shape_assertion(const Stmt &s, const Expr *&a, const Expr *&b) {
  auto *e = dyn_cast<ExprStmt>(&s);
  auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
  if (!c || !is_callee(*c, "tl.static_assert") || c->args.size() != 1 || !c->keywords.empty()) return false;
  auto *cmp = dyn_cast<Compare>(c->args[0].get());
  if (!cmp || cmp->ops.size() != 1 || cmp->ops[0] != CompareOpKind::Eq) return false;
  auto *l = dyn_cast<Attribute>(cmp->left.get());
  auto *r = dyn_cast<Attribute>(cmp->comparators[0].get());
  if (!l || !r || l->attr != "shape" || r->attr != "shape") return false;
  a = l->value.get();
  b = r->value.get();
  return true;
}

// `tl.broadcast_to(tl.expand_dims(s, axis), shape)` or `tl.broadcast_to(s,
// shape)` with `s` a scalar
// (sema: a tensor of no dimensions): `s`; else null.
Expr *broadcast_scalar(Expr &e, const sema::TypeInfo &types) {
  auto *c = dyn_cast<Call>(&e);
  if (!c || !is_callee(*c, "tl.broadcast_to") || c->args.size() != 2 || !c->keywords.empty()) return nullptr;
  // (`tl.broadcast_to(s, shape)` too)
  Expr *scalar = c->args[0].get();
  if (auto *inner = dyn_cast<Call>(scalar); inner && is_callee(*inner, "tl.expand_dims")) {
    if (inner->args.size() != 2 || !inner->keywords.empty()) return nullptr;
    scalar = inner->args[0].get();
  }
  const sema::SType *t = types.type_of(scalar);
  if (!t || !t->is_tensor() || !t->shape.empty()) return nullptr;
  return scalar;
}

bool elementwise(BinaryOpKind op) {
  return op == BinaryOpKind::Add || op == BinaryOpKind::Sub || op == BinaryOpKind::Mul || op == BinaryOpKind::Div;
}

class Simplifier {
 public:
  explicit Simplifier(const sema::TypeInfo &types) : types_(types) {}

  bool run(Function &fn) {
    std::unordered_map<std::string, int> assigned;  // (only looked up: hashed)
    count_assignments(fn.body, assigned);
    find_named_broadcasts(fn.body, assigned);
    check_named_uses(fn.body);
    block(fn.body);
    return changed_;
  }

 private:
  // `n = <scalar broadcast>` assigned once: candidates, until a read of n
  // that is not an operand of elementwise arithmetic of n's shape.
  void find_named_broadcasts(StmtList &b, const std::unordered_map<std::string, int> &assigned) {
    for (StmtPtr &s : b) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1)
        if (auto *n = dyn_cast<Name>(a->targets[0].get()); n && assigned.at(n->id) == 1)
          if (broadcast_scalar(*a->value, types_) && known_shape(*a->value, types_)) named_[n->id] = a;
      for_each_block(*s, [&](StmtList &inner) { find_named_broadcasts(inner, assigned); });
    }
  }

  static void for_each_block(Stmt &s, const std::function<void(StmtList &)> &fn) {
    if (auto *i = dyn_cast<If>(&s)) {
      fn(i->body);
      fn(i->orelse);
    } else if (auto *f = dyn_cast<For>(&s)) {
      fn(f->body);
    } else if (auto *w = dyn_cast<While>(&s)) {
      fn(w->body);
    }
  }

  // Every read of a candidate must be an operand of elementwise arithmetic
  // whose other operand has the candidate's shape, or the value of an
  // accumulation into a target of its shape.
  void check_named_uses(StmtList &b) {
    for (StmtPtr &s : b) {
      std::vector<Expr *> roots;
      if (auto *a = dyn_cast<Assign>(s.get())) {
        roots.push_back(a->value.get());
      } else if (auto *a = dyn_cast<AnnAssign>(s.get())) {
        if (a->value) roots.push_back(a->value.get());
      } else if (auto *a = dyn_cast<AugAssign>(s.get())) {
        if (auto *n = dyn_cast<Name>(a->value.get()); n && named_.count(n->id)) {
          if (same_known_shape(*a->target, *named_[n->id]->value, types_)) allowed_.insert(a->value.get());
        }
        roots.push_back(a->value.get());
      } else if (auto *e = dyn_cast<ExprStmt>(s.get())) {
        roots.push_back(e->value.get());
      } else if (auto *r = dyn_cast<Return>(s.get())) {
        if (r->value) roots.push_back(r->value.get());
      } else if (auto *i = dyn_cast<If>(s.get())) {
        roots.push_back(i->cond.get());
      } else if (auto *f = dyn_cast<For>(s.get())) {
        roots.push_back(f->iter.get());
      } else if (auto *w = dyn_cast<While>(s.get())) {
        roots.push_back(w->cond.get());
      } else if (!isa<Pass>(s.get())) {
        named_.clear();  // a statement of another kind (an assert): nothing changes
      }
      for (Expr *root : roots) {
        visit_expr(*root, [&](const Expr &x) {
          auto *op = dyn_cast<BinOp>(&x);
          if (!op || !elementwise(op->op)) return;
          // (Not beside another candidate: both would become scalars, and so would their result.)
          auto check = [&](const ExprPtr &mine, const ExprPtr &other) {
            auto *n = dyn_cast<Name>(mine.get());
            auto *o = dyn_cast<Name>(other.get());
            if (n && named_.count(n->id) && !(o && named_.count(o->id)) &&
                same_known_shape(*other, *named_[n->id]->value, types_))
              allowed_.insert(mine.get());
          };
          check(op->lhs, op->rhs);
          check(op->rhs, op->lhs);
        });
        visit_expr(*root, [&](const Expr &x) {
          if (auto *n = dyn_cast<Name>(&x); n && named_.count(n->id) && !allowed_.count(&x)) named_.erase(n->id);
        });
      }
      for_each_block(*s, [&](StmtList &inner) { check_named_uses(inner); });
    }
  }

  void block(StmtList &b) {
    StmtList kept;
    for (StmtPtr &s : b) {
      const Expr *x = nullptr, *y = nullptr;
      if (shape_assertion(*s, x, y) && same_known_shape(*x, *y, types_)) {
        // (its comment goes to the next statement)
        changed_ = true;
        pending_ = pending_.empty() ? s->leading_comment
                                    : (s->leading_comment.empty() ? pending_ : pending_ + "\n" + s->leading_comment);
        continue;
      }
      if (!pending_.empty()) {
        s->leading_comment = s->leading_comment.empty() ? pending_ : pending_ + "\n" + s->leading_comment;
        pending_.clear();
      }
      rewrite(*s);
      for_each_block(*s, [&](StmtList &inner) { block(inner); });
      kept.push_back(std::move(s));
    }
    b = std::move(kept);
  }

  // A named broadcast all of whose reads allow it becomes its scalar; an
  // inline one that is an operand of elementwise arithmetic with an operand
  // of its shape, or the value of an accumulation into its shape, too.
  void rewrite(Stmt &s) {
    if (auto *a = dyn_cast<Assign>(&s); a && a->targets.size() == 1)
      if (auto *n = dyn_cast<Name>(a->targets[0].get()); n && named_.count(n->id) && named_[n->id] == a) {
        Expr *scalar = broadcast_scalar(*a->value, types_);
        a->value = clone(*scalar);
        changed_ = true;
        return;
      }
    auto unwrap = [&](ExprPtr &e, const Expr &other) {
      Expr *scalar = broadcast_scalar(*e, types_);
      if (scalar && same_known_shape(*e, other, types_)) {
        e = clone(*scalar);
        changed_ = true;
      }
    };
    if (auto *a = dyn_cast<AugAssign>(&s); a && elementwise(a->op)) unwrap(a->value, *a->target);
    auto walk = [&](ExprPtr &root) {
      rewrite_expr(root, [&](ExprPtr &x) {
        auto *op = dyn_cast<BinOp>(x.get());
        if (!op || !elementwise(op->op)) return;
        // (both operands typed before either changes)
        unwrap(op->lhs, *op->rhs);
        unwrap(op->rhs, *op->lhs);
      });
    };
    if (auto *a = dyn_cast<Assign>(&s)) walk(a->value);
    if (auto *a = dyn_cast<AugAssign>(&s)) walk(a->value);
    if (auto *e = dyn_cast<ExprStmt>(&s)) walk(e->value);
  }

  const sema::TypeInfo &types_;
  std::map<std::string, Assign *> named_;  // candidates: names of scalar broadcasts
  std::set<const Expr *> allowed_;         // reads of candidates that allow the scalar
  std::string pending_;                    // the comments of dropped assertions
  bool changed_ = false;
};

}  // namespace

bool drop_proven_shape_checks(Function &fn, const sema::TypeInfo &types) { return Simplifier(types).run(fn); }

}  // namespace tgrad::ad
