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

}  // namespace

std::unique_ptr<Function> guard_early_returns(const Function &fn) {
  if (!returns_through_ifs(fn.body)) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  out->body = guard(fn.body);
  if (out->body.empty()) out->body.push_back(std::make_unique<Pass>(fn.span));
  return out;
}

}  // namespace tgrad::ad
