#include "src/lower/FailingBranches.h"

#include <iterator>


namespace tgrad::lower {

using namespace ast;

namespace {

// The failing assertion a block runs unconditionally (`tl.static_assert(False, ...)` among its own statements):
// the block never compiles. Null where it has none.
const Call *unconditional_failure(const StmtList &block) {
  for (const StmtPtr &s : block) {
    auto *e = dyn_cast<ExprStmt>(s.get());
    auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
    auto *callee = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
    auto *base = callee ? dyn_cast<Name>(callee->value.get()) : nullptr;
    if (!base || base->id != "tl" || callee->attr != "static_assert" || c->args.empty()) continue;
    if (auto *b = dyn_cast<BoolLit>(c->args[0].get()); b && !b->value) return c;
  }
  return nullptr;
}

StmtPtr assertion(ExprPtr condition, const Call &failure) {
  const SourceSpan span = failure.span;  // (its errors point at the raise)
  ExprList args;
  args.push_back(std::move(condition));
  if (failure.args.size() > 1) args.push_back(clone(*failure.args[1]));
  auto callee = std::make_unique<Attribute>(std::make_unique<Name>("tl", span), "static_assert", span);
  return std::make_unique<ExprStmt>(std::make_unique<Call>(std::move(callee), std::move(args), std::vector<Keyword>{}, span),
                                    span);
}

// Rewrites the block's ifs, inner ones first (an elif chain's last else first); whether any changed.
bool rewrite(StmtList &block) {
  bool changed = false;
  StmtList out;
  for (StmtPtr &s : block) {
    if (auto *f = dyn_cast<For>(s.get())) changed |= rewrite(f->body);
    if (auto *w = dyn_cast<While>(s.get())) changed |= rewrite(w->body);
    auto *i = dyn_cast<If>(s.get());
    if (!i) {
      out.push_back(std::move(s));
      continue;
    }
    changed |= rewrite(i->body);
    changed |= rewrite(i->orelse);
    const Call *then_fails = unconditional_failure(i->body);
    const Call *else_fails = i->orelse.empty() ? nullptr : unconditional_failure(i->orelse);
    if ((then_fails == nullptr) == (else_fails == nullptr)) {  // neither fails, or both (no specialization compiles)
      out.push_back(std::move(s));
      continue;
    }
    changed = true;
    if (else_fails) {
      out.push_back(assertion(std::move(i->cond), *else_fails));
      std::move(i->body.begin(), i->body.end(), std::back_inserter(out));
    } else {
      const SourceSpan span = i->cond->span;
      out.push_back(assertion(std::make_unique<UnaryOp>(UnaryOpKind::Not, std::move(i->cond), span), *then_fails));
      std::move(i->orelse.begin(), i->orelse.end(), std::back_inserter(out));
    }
  }
  block = std::move(out);
  return changed;
}

// Whether a block holds an if that the rewrite changes (a cheap look before a copy of the module).
bool has_failing_branch(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (auto *f = dyn_cast<For>(s.get()); f && has_failing_branch(f->body)) return true;
    if (auto *w = dyn_cast<While>(s.get()); w && has_failing_branch(w->body)) return true;
    if (auto *i = dyn_cast<If>(s.get()))
      if (unconditional_failure(i->body) || unconditional_failure(i->orelse) || has_failing_branch(i->body) ||
          has_failing_branch(i->orelse))
        return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<Module> with_failing_branches_asserted(const Module &module) {
  bool any = false;
  for (const auto &f : module.functions) any |= has_failing_branch(f->body);
  if (!any) return nullptr;
  std::unique_ptr<Module> out = clone(module);
  bool changed = false;
  for (auto &f : out->functions) changed |= rewrite(f->body);
  return changed ? std::move(out) : nullptr;
}

}  // namespace tgrad::lower
