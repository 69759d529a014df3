#include "src/ad/EarlyReturn.h"

#include <set>
#include <string>

#include "src/lower/Walk.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::ad {

using namespace ast;

namespace {

bool is_bare_return(const Stmt &s) {
  auto *r = dyn_cast<Return>(&s);
  return r && !r->value;
}

// Whether a block contains a bare return reachable through ifs only.
bool returns_through_ifs(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (is_bare_return(*s)) return true;
    if (auto *i = dyn_cast<If>(s.get()); i && (returns_through_ifs(i->body) || returns_through_ifs(i->orelse)))
      return true;
  }
  return false;
}

StmtList concat(const StmtList &a, const StmtList &b, size_t from_b) {
  StmtList out = clone(a);
  for (size_t j = from_b; j < b.size(); ++j) out.push_back(clone(*b[j]));
  return out;
}

// `block` with every bare return through ifs removed: the statements after
// a return-bearing if move into each of its branches (where they run unless
// the branch returns first).
StmtList guard(const StmtList &block) {
  StmtList out;
  for (size_t k = 0; k < block.size(); ++k) {
    const Stmt &s = *block[k];
    if (is_bare_return(s)) return out;  // nothing after it runs
    auto *i = dyn_cast<If>(&s);
    if (!i || (!returns_through_ifs(i->body) && !returns_through_ifs(i->orelse))) {
      out.push_back(clone(s));
      continue;
    }
    StmtList body = guard(concat(i->body, block, k + 1)), orelse = guard(concat(i->orelse, block, k + 1));
    if (body.empty()) body.push_back(std::make_unique<Pass>(i->span));
    auto guarded = std::make_unique<If>(clone(*i->cond), std::move(body), std::move(orelse), i->span);
    guarded->guards_early_return = true;
    out.push_back(std::move(guarded));
    return out;
  }
  return out;
}

// Fresh names for the values of conditional expressions taken out of a
// larger expression (`lse if not SPLIT else 0.0` inside a sum).
class ChoiceNames {
 public:
  explicit ChoiceNames(const Function &fn) {
    lower::collect_names(fn.body, taken_);
    for (size_t k = 0; k < fn.params.size(); ++k) {
      taken_.insert(fn.params[k].name);
      if (fn.is_constexpr_param(k)) constexpr_params_.insert(fn.params[k].name);
    }
  }
  // `(-1 if REVERSE else 1)`: a choice between numbers on a tl.constexpr
  // parameter, which Triton makes when it compiles. It stays an expression
  // (a loop's pointer step `p += (-1 if REVERSE else 1) * K` stays one
  // loop-invariant step).
  bool compile_time_choice(const IfExp &e) const {
    auto number = [](const Expr &x) {
      const Expr *v = &x;
      if (auto *u = dyn_cast<UnaryOp>(v); u && u->op == UnaryOpKind::Neg) v = u->operand.get();
      return isa<IntLit>(v) || isa<FloatLit>(v);
    };
    const Expr *c = e.cond.get();
    if (auto *u = dyn_cast<UnaryOp>(c); u && u->op == UnaryOpKind::Not) c = u->operand.get();
    auto *n = dyn_cast<Name>(c);
    if (n && constexpr_params_.count(n->id) && number(*e.then_value) && number(*e.else_value)) return true;
    // `BLOCK if BLOCK <= 128 else SMALL` (mamba's chunk scan, as a tl.arange's end): every name a tl.constexpr
    // parameter, so the whole choice is one; split into an if, the name it would get is no tl.constexpr, and
    // Triton refuses it as an arange's end.
    std::set<std::string> read;
    visit_expr(e, [&](const Expr &x) {
      if (auto *name = dyn_cast<Name>(&x)) read.insert(name->id);
    });
    bool only_constexprs = !read.empty();
    for (const std::string &r : read) only_constexprs &= constexpr_params_.count(r) > 0;
    bool plain = true;  // names, numbers and arithmetic on them (no call that a branch would guard)
    visit_expr(e, [&](const Expr &x) { plain &= !isa<Call>(&x) && !isa<Attribute>(&x) && !isa<Subscript>(&x); });
    return only_constexprs && plain;
  }
  std::string fresh() {
    for (int k = 1;; ++k) {
      std::string n = k == 1 ? "choice" : "choice_" + std::to_string(k);
      if (taken_.insert(n).second) return n;
    }
  }

 private:
  std::set<std::string> taken_;
  std::set<std::string> constexpr_params_;
};

// Replaces each outermost conditional expression inside `e` with a fresh
// name, appending `name = a if c else b` to `hoisted` in evaluation order.
// Branches of a conditional are not entered: what they contain stays
// conditional (the split assignment handles it inside its own branch).
void hoist_conditionals(ExprPtr &e, StmtList &hoisted, ChoiceNames &names) {
  if (auto *i = dyn_cast<IfExp>(e.get()); i && names.compile_time_choice(*i)) return;
  if (isa<IfExp>(e.get())) {
    const SourceSpan span = e->span;
    std::string n = names.fresh();
    ExprList targets;
    targets.push_back(std::make_unique<Name>(n, span));
    hoisted.push_back(std::make_unique<Assign>(std::move(targets), std::move(e), span));
    e = std::make_unique<Name>(n, span);
    return;
  }
  for_each_child(*e, [&](ExprPtr &child) { hoist_conditionals(child, hoisted, names); });
}

bool is_conditional_assignment(const Stmt &s) {
  auto *a = dyn_cast<Assign>(&s);
  return a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()) && isa<IfExp>(a->value.get());
}

StmtList split_conditional_assignments(const StmtList &block, ChoiceNames &names) {
  StmtList out;
  for (const StmtPtr &s : block) {
    if (is_conditional_assignment(*s)) {
      auto *a = cast<Assign>(s.get());
      auto *e = cast<IfExp>(a->value.get());
      auto branch = [&](const Expr &value) {
        ExprList targets;
        targets.push_back(clone(*a->targets[0]));
        StmtList b;
        b.push_back(std::make_unique<Assign>(std::move(targets), clone(value), s->span));
        return split_conditional_assignments(b, names);  // a conditional inside a branch
      };
      StmtList before;
      ExprPtr cond = clone(*e->cond);
      hoist_conditionals(cond, before, names);
      for (StmtPtr &h : split_conditional_assignments(before, names)) out.push_back(std::move(h));
      out.push_back(std::make_unique<If>(std::move(cond), branch(*e->then_value), branch(*e->else_value), s->span));
      continue;
    }
    StmtPtr copy = clone(*s);
    // The expressions evaluated once, before the statement's own effect:
    // their conditionals become assignments just before it. A while loop's
    // condition runs every iteration and stays as written.
    std::vector<ExprPtr *> slots;
    if (auto *a = dyn_cast<Assign>(copy.get())) slots.push_back(&a->value);
    if (auto *a = dyn_cast<AugAssign>(copy.get())) slots.push_back(&a->value);
    if (auto *a = dyn_cast<AnnAssign>(copy.get()); a && a->value) slots.push_back(&a->value);
    if (auto *x = dyn_cast<ExprStmt>(copy.get())) slots.push_back(&x->value);
    if (auto *r = dyn_cast<Return>(copy.get()); r && r->value) slots.push_back(&r->value);
    if (auto *i = dyn_cast<If>(copy.get())) slots.push_back(&i->cond);
    if (auto *f = dyn_cast<For>(copy.get())) slots.push_back(&f->iter);
    StmtList before;
    for (ExprPtr *slot : slots) hoist_conditionals(*slot, before, names);
    for (StmtPtr &h : split_conditional_assignments(before, names)) out.push_back(std::move(h));
    if (auto *i = dyn_cast<If>(copy.get())) {
      i->body = split_conditional_assignments(i->body, names);
      i->orelse = split_conditional_assignments(i->orelse, names);
    }
    if (auto *f = dyn_cast<For>(copy.get())) f->body = split_conditional_assignments(f->body, names);
    if (auto *w = dyn_cast<While>(copy.get())) w->body = split_conditional_assignments(w->body, names);
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

std::unique_ptr<Function> conditional_assignments_as_ifs(const Function &fn) {
  bool any = false;
  lower::visit_block(fn.body, [&](const Expr &e) { any |= isa<IfExp>(&e); });
  if (!any) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  ChoiceNames names(fn);
  out->body = split_conditional_assignments(fn.body, names);
  return out;
}

std::unique_ptr<Function> guard_early_returns(const Function &fn) {
  if (!returns_through_ifs(fn.body)) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  out->body = guard(fn.body);
  if (out->body.empty()) out->body.push_back(std::make_unique<Pass>(fn.span));
  return out;
}

}  // namespace tgrad::ad
