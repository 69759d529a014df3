#include "src/ad/ConstexprPaths.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/ad/AnfWalk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

// Names a block assigns at any depth (assignment targets, loop variables).
std::set<std::string> assigned_in(const StmtList &block) {
  std::map<std::string, int> counts;
  count_assignments(block, counts);
  std::set<std::string> out;
  for (const auto &kv : counts) out.insert(kv.first);
  return out;
}

struct Checker {
  const sema::TypeInfo &types;
  DiagEngine *diags;  // null: collect the conditions only
  bool reported = false;
  std::vector<const Expr *> conditions;
  const Function *fn = nullptr;  // for the message: which parameters a condition on locals reads

  // The tl.constexpr parameters a condition reads, through the locals it
  // reads (`n_sub == 2` with `n_sub = BT // BC`: BT and BC).
  std::vector<std::string> constexpr_params_of(const Expr &cond) const {
    std::vector<std::string> out;
    if (!fn) return out;
    std::map<std::string, const Expr *> defs;
    std::map<std::string, int> counts;
    count_assignments(fn->body, counts);
    for (const StmtPtr &s : fn->body)
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1)
        if (auto *n = dyn_cast<Name>(a->targets[0].get()); n && counts[n->id] == 1) defs[n->id] = a->value.get();
    std::set<std::string> seen;
    std::function<void(const Expr &, int)> walk = [&](const Expr &e, int depth) {
      visit_expr(e, [&](const Expr &x) {
        auto *n = dyn_cast<Name>(&x);
        if (!n || !seen.insert(n->id).second) return;
        for (size_t k = 0; k < fn->params.size(); ++k)
          if (fn->params[k].name == n->id && fn->is_constexpr_param(k)) out.push_back(n->id);
        if (auto d = defs.find(n->id); d != defs.end() && depth < 16) walk(*d->second, depth + 1);
      });
    };
    walk(cond, 0);
    return out;
  }

  std::string what_to_give(const Expr &cond) const {
    const std::vector<std::string> params = constexpr_params_of(cond);
    bool reads_a_param_directly = false;
    visit_expr(cond, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x))
        for (const std::string &p : params) reads_a_param_directly |= p == n->id;
    });
    if (params.empty() || reads_a_param_directly) return "give it with -D (one backward per value)";
    std::string list;
    for (size_t k = 0; k < params.size(); ++k)
      list += (k ? (k + 1 == params.size() ? " and " : ", ") : "") + params[k];
    return "give " + list + ", which it is computed from, with -D";
  }

  // `before`: names assigned before this block; `after`: names live after it
  // (a later statement may read their values before assigning them again:
  // `if FLAG: p = ...; tl.store(p, ...)` in a loop reads p after the if in
  // the next iteration, but only the p that iteration assigns).
  void block(const StmtList &body, std::set<std::string> before, const std::set<std::string> &after) {
    // What is live after each if or loop, built backwards in one pass.
    std::vector<std::set<std::string>> later(body.size());
    std::set<std::string> suffix = after;
    for (size_t k = body.size(); k-- > 0;) {
      if (isa<If>(body[k].get()) || isa<For>(body[k].get())) later[k] = suffix;
      suffix = live_before(*body[k], std::move(suffix));
    }
    for (size_t k = 0; k < body.size(); ++k) {
      const Stmt &s = *body[k];
      if (auto *i = dyn_cast<If>(&s)) {
        const sema::SType *c = types.type_of(i->cond.get());
        const bool unknown_constexpr = c && !c->is_tensor() && !c->known && c->kind != sema::SType::Kind::Unknown;
        const std::set<std::string> then_names = assigned_in(i->body), else_names = assigned_in(i->orelse);
        if (unknown_constexpr)
          for (const std::set<std::string> *one : {&then_names, &else_names})
            for (const std::string &n : *one) {
              const std::set<std::string> &other = one == &then_names ? else_names : then_names;
              if (before.count(n) || other.count(n) || !later[k].count(n)) continue;
              if (conditions.empty() || conditions.back() != i->cond.get()) conditions.push_back(i->cond.get());
              reported = true;
              if (!diags) continue;
              diags->error(i->cond->span, "'" + n + "' is assigned only when the tl.constexpr condition '" +
                                             emit::print_expr(*i->cond) + "' is " +
                                             (one == &then_names ? "true" : "false") +
                                             " and is used after this if; its backward depends on the condition's "
                                             "value: " + what_to_give(*i->cond));
            }
        // A name whose type differs between the branches (and is read after
        // the if) has no one type without the condition's value.
        if (unknown_constexpr)
          if (auto d = types.divergent_names.find(i->cond.get()); d != types.divergent_names.end())
            for (const std::string &n : d->second)
              if (later[k].count(n) && (conditions.empty() || conditions.back() != i->cond.get()))
                conditions.push_back(i->cond.get());
        block(i->body, before, later[k]);
        block(i->orelse, before, later[k]);
        // After an if, a name counts as assigned where both branches assign it,
        // or where the branch Triton keeps (a condition of known value) does.
        const std::optional<bool> truth = c ? sema::known_truth(*c) : std::nullopt;
        for (const std::string &n : then_names)
          if (else_names.count(n) || truth == true) before.insert(n);
        if (truth == false) before.insert(else_names.begin(), else_names.end());
        continue;
      }
      if (auto *f = dyn_cast<For>(&s)) {
        const std::string var = isa<Name>(f->target.get()) ? cast<Name>(f->target.get())->id : "";
        block(f->body, before, live_at_loop_end(f->body, later[k], var));
      }
      std::map<std::string, int> assigned;
      stmt_assignments(s, assigned);
      for (const auto &kv : assigned) before.insert(kv.first);
    }
  }
};

}  // namespace

std::vector<const Expr *> constexpr_guarded_conditions(const Function &fn, const sema::TypeInfo &types) {
  Checker c{types, nullptr, false, {}};
  std::set<std::string> params;
  for (const Param &p : fn.params) params.insert(p.name);
  c.block(fn.body, params, {});
  // A conditional expression whose values differ in type (`tl.zeros(...) if
  // USE_DW else None`) has no one type without its condition's value.
  for (const Expr *cond : types.divergent_conditions)
    if (std::find(c.conditions.begin(), c.conditions.end(), cond) == c.conditions.end()) c.conditions.push_back(cond);
  return c.conditions;
}

bool report_constexpr_guarded_definitions(const Function &fn, const sema::TypeInfo &types, DiagEngine &diags) {
  Checker c{types, &diags, false, {}, &fn};
  std::set<std::string> params;
  for (const Param &p : fn.params) params.insert(p.name);
  c.block(fn.body, params, {});
  return c.reported;
}

namespace {
bool names(const Expr &e, const std::string &name) {
  auto *n = dyn_cast<Name>(&e);
  return n && n->id == name;
}
}  // namespace

std::vector<std::pair<const Function *, std::string>> helpers_receiving_constexpr(const Module &module,
                                                                                   const Function &fn,
                                                                                   const std::string &flag) {
  std::vector<std::pair<const Function *, std::string>> out;
  std::function<void(const Function &, const std::string &, int)> visit = [&](const Function &f,
                                                                              const std::string &name, int depth) {
    if (depth > 8) return;
    visit_exprs(f.body, [&](const Expr &e) {
      auto *call = dyn_cast<Call>(&e);
      auto *callee_name = call ? dyn_cast<Name>(call->func.get()) : nullptr;
      const Function *callee = callee_name ? module.find_function(callee_name->id) : nullptr;
      if (!callee || callee == &f) return;
      auto receive = [&](const std::string &param) {
        for (const auto &seen : out)
          if (seen.first == callee && seen.second == param) return;
        out.push_back({callee, param});
        visit(*callee, param, depth + 1);
      };
      for (size_t k = 0; k < call->args.size() && k < callee->params.size(); ++k)
        if (names(*call->args[k], name)) receive(callee->params[k].name);
      for (const Keyword &kw : call->keywords)
        if (kw.value && names(*kw.value, name)) receive(kw.name);
    });
  };
  visit(fn, flag, 0);
  return out;
}

}  // namespace tgrad::ad
