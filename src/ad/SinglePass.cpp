#include "src/ad/SinglePass.h"

#include <map>
#include <set>

#include "src/ad/AnfWalk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

// `range(a, b, c)` with three operands, each a literal or a name in `fixed`.
const Call *fixed_range(const For &f, const std::set<std::string> &fixed) {
  auto *c = dyn_cast<Call>(f.iter.get());
  if (!c || emit::print_expr(*c->func) != "range" || c->args.size() != 3 || !c->keywords.empty()) return nullptr;
  if (!isa<Name>(f.target.get())) return nullptr;
  for (const ExprPtr &a : c->args) {
    if (isa<IntLit>(a.get())) continue;
    auto *n = dyn_cast<Name>(a.get());
    if (!n || !fixed.count(n->id)) return nullptr;
  }
  return c;
}

bool returns(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (isa<Return>(s.get())) return true;
    if (auto *f = dyn_cast<For>(s.get()); f && returns(f->body)) return true;
    if (auto *w = dyn_cast<While>(s.get()); w && returns(w->body)) return true;
    if (auto *i = dyn_cast<If>(s.get()); i && (returns(i->body) || returns(i->orelse))) return true;
  }
  return false;
}

ExprPtr compare(ExprPtr lhs, CompareOpKind op, ExprPtr rhs) {
  ExprList right;
  right.push_back(std::move(rhs));
  return std::make_unique<Compare>(std::move(lhs), std::vector<CompareOpKind>{op}, std::move(right));
}

bool is_zero(const Expr &e) {
  auto *i = dyn_cast<IntLit>(&e);
  return i && i->value == 0;
}

}  // namespace

std::optional<SinglePassVersion> single_pass_version(const Function &kernel) {
  // Parameters the kernel never reassigns: their values are those of the launch.
  std::map<std::string, int> assigned;
  count_assignments(kernel.body, assigned);
  std::set<std::string> fixed;
  for (const Param &p : kernel.params)
    if (!assigned.count(p.name)) fixed.insert(p.name);

  std::map<std::string, size_t> loops_over;  // printed range -> how many top-level loops run over it
  std::string best;
  for (const StmtPtr &s : kernel.body) {
    auto *f = dyn_cast<For>(s.get());
    if (!f || !fixed_range(*f, fixed) || returns(f->body)) continue;
    std::string r = emit::print_expr(*f->iter);
    if (++loops_over[r] > (best.empty() ? 0 : loops_over[best]) && loops_over[r] >= 2) best = r;
  }
  if (best.empty()) return std::nullopt;

  SinglePassVersion v;
  v.range = best;
  v.forward = clone_signature(kernel);
  for (const StmtPtr &s : kernel.body) {
    auto *f = dyn_cast<For>(s.get());
    if (!f || !fixed_range(*f, fixed) || returns(f->body) || emit::print_expr(*f->iter) != best) {
      v.forward->body.push_back(clone(*s));
      continue;
    }
    const Call &range = *fixed_range(*f, fixed);
    if (!v.condition) {
      // (a < b) & (b <= a + c); a + c is c when a is 0.
      ExprPtr end = is_zero(*range.args[0]) ? clone(*range.args[2])
                                            : std::make_unique<BinOp>(BinaryOpKind::Add, clone(*range.args[0]), clone(*range.args[2]));
      v.condition = std::make_unique<BinOp>(BinaryOpKind::BitAnd,
                                            compare(clone(*range.args[0]), CompareOpKind::Lt, clone(*range.args[1])),
                                            compare(clone(*range.args[1]), CompareOpKind::LtE, std::move(end)));
    }
    ExprList target;
    target.push_back(clone(*f->target));
    v.forward->body.push_back(std::make_unique<Assign>(std::move(target), clone(*range.args[0]), f->span));
    for (const StmtPtr &b : f->body) v.forward->body.push_back(clone(*b));
    ++v.loops;
  }
  return v;
}

}  // namespace tgrad::ad
