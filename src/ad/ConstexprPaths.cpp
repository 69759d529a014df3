#include "src/ad/ConstexprPaths.h"

#include <functional>
#include <set>
#include <string>

#include "src/ad/AnfWalk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

// Names a block assigns at any depth (assignment targets, loop variables).
void assigned_in(const StmtList &block, std::set<std::string> &out) {
  std::function<void(const Expr &)> target = [&](const Expr &t) {
    if (auto *n = dyn_cast<Name>(&t)) out.insert(n->id);
    if (auto *tu = dyn_cast<Tuple>(&t))
      for (const ExprPtr &e : tu->elts) target(*e);
  };
  for (const StmtPtr &s : block) {
    if (auto *a = dyn_cast<Assign>(s.get()))
      for (const ExprPtr &t : a->targets) target(*t);
    if (auto *a = dyn_cast<AugAssign>(s.get())) target(*a->target);
    if (auto *a = dyn_cast<AnnAssign>(s.get())) target(*a->target);
    if (auto *f = dyn_cast<For>(s.get())) {
      target(*f->target);
      assigned_in(f->body, out);
    }
    if (auto *w = dyn_cast<While>(s.get())) assigned_in(w->body, out);
    if (auto *i = dyn_cast<If>(s.get())) {
      assigned_in(i->body, out);
      assigned_in(i->orelse, out);
    }
  }
}

struct Checker {
  const sema::TypeInfo &types;
  DiagEngine &diags;
  bool reported = false;

  // `before`: names assigned before this block; `after`: names read after it.
  void block(const StmtList &body, std::set<std::string> before, const std::set<std::string> &after) {
    for (size_t k = 0; k < body.size(); ++k) {
      const Stmt &s = *body[k];
      std::set<std::string> later = after;
      for (size_t j = k + 1; j < body.size(); ++j) deep_reads(*body[j], later);
      if (auto *i = dyn_cast<If>(&s)) {
        const sema::SType *c = types.type_of(i->cond.get());
        const bool unknown_constexpr = c && !c->is_tensor() && !c->known && c->kind != sema::SType::Kind::Unknown;
        if (unknown_constexpr) {
          std::set<std::string> then_names, else_names;
          assigned_in(i->body, then_names);
          assigned_in(i->orelse, else_names);
          for (const std::set<std::string> *one : {&then_names, &else_names})
            for (const std::string &n : *one) {
              const std::set<std::string> &other = one == &then_names ? else_names : then_names;
              if (before.count(n) || other.count(n) || !later.count(n)) continue;
              const std::string flag = emit::print_expr(*i->cond);
              diags.error(i->cond->span, "'" + n + "' is assigned only when the tl.constexpr condition '" + flag + "' is " +
                                             (one == &then_names ? "true" : "false") +
                                             " and is used after this if; its backward depends on the condition's "
                                             "value: give it with -D (one backward per value)");
              reported = true;
            }
        }
        std::set<std::string> inner_after = later;
        block(i->body, before, inner_after);
        block(i->orelse, before, inner_after);
      } else if (auto *f = dyn_cast<For>(&s)) {
        std::set<std::string> inner_after = later;
        deep_reads(s, inner_after);  // the next iteration reads what the body reads
        block(f->body, before, inner_after);
      }
      std::set<std::string> assigned;
      assigned_in_stmt(s, assigned);
      before.insert(assigned.begin(), assigned.end());
    }
  }

  static void assigned_in_stmt(const Stmt &s, std::set<std::string> &out) {
    if (auto *a = dyn_cast<Assign>(&s)) {
      for (const ExprPtr &t : a->targets)
        if (auto *n = dyn_cast<Name>(t.get())) out.insert(n->id);
    }
    if (auto *a = dyn_cast<AugAssign>(&s))
      if (auto *n = dyn_cast<Name>(a->target.get())) out.insert(n->id);
    if (auto *f = dyn_cast<For>(&s)) assigned_in(f->body, out);
    if (auto *i = dyn_cast<If>(&s)) {
      // After an if, a name counts as assigned where both branches assign it.
      std::set<std::string> t, e;
      assigned_in(i->body, t);
      assigned_in(i->orelse, e);
      for (const std::string &n : t)
        if (e.count(n)) out.insert(n);
    }
  }
};

}  // namespace

bool report_constexpr_guarded_definitions(const Function &fn, const sema::TypeInfo &types, DiagEngine &diags) {
  Checker c{types, diags};
  std::set<std::string> params;
  for (const Param &p : fn.params) params.insert(p.name);
  c.block(fn.body, params, {});
  return c.reported;
}

}  // namespace tgrad::ad
