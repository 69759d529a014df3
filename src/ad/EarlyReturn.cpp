#include "src/ad/EarlyReturn.h"

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
    out.push_back(std::make_unique<If>(clone(*i->cond), std::move(body), std::move(orelse), i->span));
    return out;
  }
  return out;
}

bool has_conditional_assignment(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()) &&
                                               isa<IfExp>(a->value.get()))
      return true;
    if (auto *i = dyn_cast<If>(s.get()); i && (has_conditional_assignment(i->body) || has_conditional_assignment(i->orelse)))
      return true;
    if (auto *f = dyn_cast<For>(s.get()); f && has_conditional_assignment(f->body)) return true;
  }
  return false;
}

StmtList split_conditional_assignments(const StmtList &block) {
  StmtList out;
  for (const StmtPtr &s : block) {
    auto *a = dyn_cast<Assign>(s.get());
    auto *e = a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()) ? dyn_cast<IfExp>(a->value.get()) : nullptr;
    if (e) {
      auto branch = [&](const Expr &value) {
        ExprList targets;
        targets.push_back(clone(*a->targets[0]));
        StmtList b;
        b.push_back(std::make_unique<Assign>(std::move(targets), clone(value), s->span));
        return b;
      };
      out.push_back(std::make_unique<If>(clone(*e->cond), branch(*e->then_value), branch(*e->else_value), s->span));
      continue;
    }
    StmtPtr copy = clone(*s);
    if (auto *i = dyn_cast<If>(copy.get())) {
      i->body = split_conditional_assignments(i->body);
      i->orelse = split_conditional_assignments(i->orelse);
    }
    if (auto *f = dyn_cast<For>(copy.get())) f->body = split_conditional_assignments(f->body);
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

std::unique_ptr<Function> conditional_assignments_as_ifs(const Function &fn) {
  if (!has_conditional_assignment(fn.body)) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  out->body = split_conditional_assignments(fn.body);
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
