// Rows or columns of a tile that are zero for certain (src/ad/reverse/ZeroLanes.h).
#include "src/ad/reverse/ZeroLanes.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Equal.h"

namespace tgrad::ad::reverse {

namespace {

// Every assignment of each name, at any depth: the value (a `+=` or `-=` is kept with its operator), and the
// names assigned any other way (loop variables, tuple targets, other augmented assignments).
struct Assignments {
  struct One {
    const Expr *value;
    bool accumulate;  // `name += value` or `name -= value`
    bool top_level;
  };
  std::map<std::string, std::vector<One>> of;
  std::set<std::string> opaque;

  void collect(const StmtList &block, bool top) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get())) {
        auto *n = a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
        if (n) {
          of[n->id].push_back({a->value.get(), false, top});
        } else {
          std::set<std::string> targets;
          for (const ExprPtr &t : a->targets) reads(*t, targets);
          opaque.insert(targets.begin(), targets.end());
        }
      } else if (auto *g = dyn_cast<AugAssign>(s.get())) {
        auto *n = dyn_cast<Name>(g->target.get());
        if (n && (g->op == BinaryOpKind::Add || g->op == BinaryOpKind::Sub))
          of[n->id].push_back({g->value.get(), true, top});
        else if (n)
          opaque.insert(n->id);
      } else if (auto *x = dyn_cast<AnnAssign>(s.get())) {
        std::set<std::string> targets;
        reads(*x->target, targets);
        opaque.insert(targets.begin(), targets.end());
      } else if (auto *f = dyn_cast<For>(s.get())) {
        std::set<std::string> targets;
        reads(*f->target, targets);
        opaque.insert(targets.begin(), targets.end());
        collect(f->body, false);
      } else if (auto *i = dyn_cast<If>(s.get())) {
        collect(i->body, false);
        collect(i->orelse, false);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        collect(w->body, false);
      }
    }
  }

  // The one definition of a name assigned once, at the top level, or null.
  const Expr *single(const std::string &name) const {
    const Expr *value = only(name);
    return value && of.at(name)[0].top_level ? value : nullptr;
  }
  // The one definition of a name assigned once (at any depth: its value wherever it is read), or null.
  const Expr *only(const std::string &name) const {
    auto it = of.find(name);
    if (opaque.count(name) || it == of.end() || it->second.size() != 1 || it->second[0].accumulate) return nullptr;
    return it->second[0].value;
  }
};

bool is_zero_literal(const Expr *e) {
  if (auto *i = e ? dyn_cast<IntLit>(e) : nullptr) return i->value == 0;
  if (auto *f = e ? dyn_cast<FloatLit>(e) : nullptr) return f->value == 0.0;
  return false;
}

class ZeroProof {
 public:
  ZeroProof(const Assignments &assigned, const std::string &predicate, int axis)
      : assigned_(assigned), predicate_(predicate), axis_(axis) {}

  bool holds_for(const std::string &tile) {
    // Greatest fixed point: every assigned name is assumed zero outside R until one of its values is not.
    for (const auto &[n, list] : assigned_.of)
      if (!assigned_.opaque.count(n)) zero_.insert(n);
    for (bool changed = true; changed;) {
      changed = false;
      for (auto it = zero_.begin(); it != zero_.end();) {
        bool all = true;
        for (const Assignments::One &one : assigned_.of.at(*it)) all = all && zero(*one.value);
        if (all) {
          ++it;
        } else {
          it = zero_.erase(it);
          changed = true;
        }
      }
    }
    return zero_.count(tile) > 0;
  }

 private:
  // Whether the mask `m` keeps no lane where R is false: R is one of its conjuncts.
  bool implies_predicate(const Expr &m, int depth = 0) const {
    if (depth > 32) return false;
    if (auto *n = dyn_cast<Name>(&m)) {
      if (n->id == predicate_) return true;
      const Expr *def = assigned_.only(n->id);
      const Expr *r = assigned_.single(predicate_);
      if (!def) return false;
      if (r && ast::equal(*def, *r)) return true;
      return implies_predicate(*def, depth + 1);
    }
    if (auto *b = dyn_cast<BinOp>(&m); b && b->op == BinaryOpKind::BitAnd)
      return implies_predicate(*b->lhs, depth + 1) || implies_predicate(*b->rhs, depth + 1);
    return false;
  }

  bool zero(const Expr &e) const {
    if (is_zero_literal(&e)) return true;
    if (auto *n = dyn_cast<Name>(&e)) return zero_.count(n->id) > 0;
    if (auto *u = dyn_cast<UnaryOp>(&e)) return u->op == UnaryOpKind::Neg && zero(*u->operand);
    if (auto *b = dyn_cast<BinOp>(&e)) {
      if (b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Sub) return zero(*b->lhs) && zero(*b->rhs);
      if (b->op == BinaryOpKind::Mul) return zero(*b->lhs) || zero(*b->rhs);
      return false;
    }
    auto *c = dyn_cast<Call>(&e);
    if (!c) return false;
    const std::string f = callee(*c);
    if (f == "tl.zeros" || f == "tl.zeros_like") return true;
    if (auto *to = dyn_cast<Attribute>(c->func.get()); to && to->attr == "to") return zero(*to->value);
    if (f == "tl.load") {
      const Expr *mask = call_argument(*c, 1, "mask"), *other = call_argument(*c, 2, "other");
      return mask && other && is_zero_literal(other) && implies_predicate(*mask);
    }
    if (f == "tl.where" && c->args.size() == 3 && c->keywords.empty()) return zero(*c->args[1]) && zero(*c->args[2]);
    if (f == "tl.dot" && c->args.size() >= 2) {
      for (const Keyword &k : c->keywords)
        if (k.name != "acc" && k.name != "allow_tf32" && k.name != "input_precision" && k.name != "out_dtype")
          return false;
      const Expr *acc = call_argument(*c, 2, "acc");
      if (acc && !zero(*acc)) return false;
      return zero(*c->args[axis_ == 0 ? 0 : 1]);
    }
    return false;
  }

  const Assignments &assigned_;
  std::string predicate_;
  int axis_;
  std::set<std::string> zero_;
};

}  // namespace

std::optional<ZeroBound> zero_outside_bound(const Function &fn, const std::string &tile) {
  Assignments assigned;
  assigned.collect(fn.body, true);
  std::set<std::string> params;
  for (const Param &p : fn.params) params.insert(p.name);
  for (const StmtPtr &s : fn.body) {
    const std::string r = assigned_name(*s);
    const Expr *def = r.empty() ? nullptr : assigned.single(r);
    auto *cmp = def ? dyn_cast<Compare>(def) : nullptr;
    if (!cmp || cmp->ops.size() != 1 || cmp->ops[0] != CompareOpKind::Lt) continue;
    // R = x < B, x (or a name assigned once, at the top level, to it) i[:, None] or i[None, :], i assigned once at
    // the top level.
    auto *x = dyn_cast<Name>(cmp->left.get());
    auto *sub = x && assigned.single(x->id) ? dyn_cast<Subscript>(assigned.single(x->id))
                                            : dyn_cast<Subscript>(cmp->left.get());
    const int along = sub ? broadcast_axis(*sub) : 0;
    auto *i = sub ? dyn_cast<Name>(sub->value.get()) : nullptr;
    if (!along || !i || !assigned.single(i->id)) continue;
    const Expr &b = *cmp->comparators[0];
    auto *bound_name = dyn_cast<Name>(&b);
    if (!isa<IntLit>(&b) && !(bound_name && params.count(bound_name->id) && !assigned.of.count(bound_name->id) &&
                              !assigned.opaque.count(bound_name->id)))
      continue;
    const int axis = along == 1 ? 0 : 1;
    if (ZeroProof(assigned, r, axis).holds_for(tile)) return ZeroBound{r, i->id, emit::print_expr(b), axis};
  }
  return std::nullopt;
}

namespace {

bool same_value(const Function &fa, const Assignments &a, const Function &fb, const Assignments &b,
                const std::string &name, int depth) {
  if (depth > 24) return false;
  const Expr *da = a.single(name), *db = b.single(name);
  if (!da || !db) {
    // The same parameter of both, assigned in neither.
    auto param = [&](const Function &f, const Assignments &s) {
      return !s.of.count(name) && !s.opaque.count(name) &&
             std::any_of(f.params.begin(), f.params.end(), [&](const Param &p) { return p.name == name; });
    };
    return !da && !db && param(fa, a) && param(fb, b);
  }
  if (!ast::equal(*da, *db)) return false;
  std::set<std::string> read;
  reads(*da, read);
  for (const std::string &r : read)
    if (r != "tl" && !same_value(fa, a, fb, b, r, depth + 1)) return false;
  return true;
}

}  // namespace

bool same_top_level_value(const Function &a, const Function &b, const std::string &name) {
  Assignments in_a, in_b;
  in_a.collect(a.body, true);
  in_b.collect(b.body, true);
  return same_value(a, in_a, b, in_b, name, 0);
}

}  // namespace tgrad::ad::reverse
