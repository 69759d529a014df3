// Owner-computes kernels launched longest first (src/ad/reverse/LongestFirst.h).
#include "src/ad/reverse/LongestFirst.h"

#include <map>
#include <set>
#include <string>

#include "src/ad/reverse/AstHelpers.h"
#include "src/ad/reverse/GroupedOrder.h"

namespace tgrad::ad::reverse {

namespace {

// Whether `e` reads tl.program_id(axis), through the names its top-level single assignments define.
bool reads_program_id(const Expr &e, int axis, const std::map<std::string, const Expr *> &defs, int depth = 0) {
  if (depth > 32) return false;
  bool found = false;
  visit_expr(e, [&](const Expr &x) {
    if (found) return;
    if (program_axis_of(x, "tl.program_id") == axis) found = true;
    if (auto *n = dyn_cast<Name>(&x)) {
      auto it = defs.find(n->id);
      if (it != defs.end() && reads_program_id(*it->second, axis, defs, depth + 1)) found = true;
    }
  });
  return found;
}

}  // namespace

bool launch_longest_first(Function &owner, Backward::OwnerKernel &k) {
  if (k.summed_axis != 0 || !k.grid_sizes.empty() || k.longest_first) return false;
  // The top-level single assignments (a name assigned twice is not followed: a loop-carried value).
  std::map<std::string, const Expr *> defs;
  std::set<std::string> twice;
  each_assignment(owner.body, [&](const std::string &target, const Expr &value) {
    if (!defs.emplace(target, &value).second) twice.insert(target);
  });
  for (const std::string &n : twice) defs.erase(n);
  bool reads_other = false, reads_third = false;
  visit_exprs(owner.body, [&](const Expr &x) {
    const int a = program_axis_of(x, "tl.program_id"), b = program_axis_of(x, "tl.num_programs");
    reads_other |= a == 1;
    // (An axis by keyword or not a literal: not rewritten below, so not swapped at all.)
    auto *c = a != -2 || b != -2 ? dyn_cast<Call>(&x) : nullptr;
    reads_third |= a == 2 || a == -1 || b == 2 || b == -1 || (c && (c->args.size() != 1 || !c->keywords.empty()));
  });
  if (!reads_other || reads_third) return false;
  bool unequal = false;
  for (const StmtPtr &s : owner.body) {
    auto *loop = dyn_cast<For>(s.get());
    auto *range = loop ? dyn_cast<Call>(loop->iter.get()) : nullptr;
    if (!range || range->args.size() < 2 || (callee(*range) != "range" && callee(*range) != "tl.range")) continue;
    unequal |= reads_program_id(*range->args[0], 0, defs) && !reads_program_id(*range->args[1], 0, defs);
  }
  if (!unequal) return false;
  rewrite_exprs(owner.body, [](ExprPtr &e) {
    auto *c = dyn_cast<Call>(e.get());
    if (!c || c->args.size() != 1) return;
    for (const char *fn : {"tl.program_id", "tl.num_programs"}) {
      const int a = program_axis_of(*e, fn);
      if (a == 0 || a == 1) c->args[0] = std::make_unique<IntLit>(static_cast<uint64_t>(1 - a), "");
    }
  });
  k.longest_first = true;
  return true;
}

}  // namespace tgrad::ad::reverse
