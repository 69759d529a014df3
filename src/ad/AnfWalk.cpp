#include "src/ad/AnfWalk.h"

#include <algorithm>

namespace tgrad::ad {

using namespace ast;

void visit_exprs(const StmtList &block, const std::function<void(const Expr &)> &fn) {
  for (const StmtPtr &st : block) {
    if (auto *a = dyn_cast<Assign>(st.get())) visit_expr(*a->value, fn);
    if (auto *a = dyn_cast<AugAssign>(st.get())) visit_expr(*a->value, fn);
    if (auto *x = dyn_cast<ExprStmt>(st.get())) visit_expr(*x->value, fn);
    if (auto *r = dyn_cast<Return>(st.get()); r && r->value) visit_expr(*r->value, fn);
    if (auto *f = dyn_cast<For>(st.get())) {
      visit_expr(*f->iter, fn);
      visit_exprs(f->body, fn);
    }
    if (auto *i = dyn_cast<If>(st.get())) {
      visit_expr(*i->cond, fn);
      visit_exprs(i->body, fn);
      visit_exprs(i->orelse, fn);
    }
    // (A-normal form has neither; a kernel as written may: `acc_dtype` read inside a persistent kernel's while loop.)
    if (auto *a = dyn_cast<AnnAssign>(st.get()); a && a->value) visit_expr(*a->value, fn);
    if (auto *w = dyn_cast<While>(st.get())) {
      visit_expr(*w->cond, fn);
      visit_exprs(w->body, fn);
    }
  }
}

namespace {

// Names read anywhere in an expression / statement, into either kind of set.
template <class Names>
void expr_reads_into(const Expr &e, Names &out) {
  visit_expr(e, [&out](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x)) out.insert(n->id);
  });
}

template <class Names>
void stmt_reads_into(const Stmt &s, Names &out) {
  switch (s.kind) {
    case NodeKind::Assign: expr_reads_into(*cast<Assign>(&s)->value, out); return;
    case NodeKind::AugAssign:
      expr_reads_into(*cast<AugAssign>(&s)->target, out);
      expr_reads_into(*cast<AugAssign>(&s)->value, out);
      return;
    case NodeKind::AnnAssign:  // `ACC: tl.constexpr = helper(X.dtype.element_ty)` reads `helper`
      if (cast<AnnAssign>(&s)->value) expr_reads_into(*cast<AnnAssign>(&s)->value, out);
      return;
    case NodeKind::ExprStmt: expr_reads_into(*cast<ExprStmt>(&s)->value, out); return;
    case NodeKind::Return:
      if (cast<Return>(&s)->value) expr_reads_into(*cast<Return>(&s)->value, out);
      return;
    case NodeKind::Assert:
      expr_reads_into(*cast<Assert>(&s)->test, out);
      if (cast<Assert>(&s)->msg) expr_reads_into(*cast<Assert>(&s)->msg, out);
      return;
    default: return;
  }
}

}  // namespace

void reads(const Expr &e, std::set<std::string> &out) { expr_reads_into(e, out); }
void reads(const Expr &e, std::unordered_set<std::string> &out) { expr_reads_into(e, out); }
void stmt_reads(const Stmt &s, std::set<std::string> &out) { stmt_reads_into(s, out); }
void stmt_reads(const Stmt &s, std::unordered_set<std::string> &out) { stmt_reads_into(s, out); }

// Names read anywhere in a block: its statements, loop ranges and if
// conditions, at any depth.
// Names one statement reads, including, for a loop or an if, its range or
// condition and its body at any depth.
namespace {

template <class Names>
void block_reads_into(const StmtList &block, Names &out, const StmtList *skip);

template <class Names>
void deep_reads_into(const Stmt &s, Names &out, const StmtList *skip) {
  stmt_reads_into(s, out);
  if (auto *f = dyn_cast<For>(&s)) {
    expr_reads_into(*f->iter, out);
    block_reads_into(f->body, out, skip);
  }
  if (auto *i = dyn_cast<If>(&s)) {
    expr_reads_into(*i->cond, out);
    block_reads_into(i->body, out, skip);
    block_reads_into(i->orelse, out, skip);
  }
  if (auto *w = dyn_cast<While>(&s)) {  // (kernels as written: a persistent kernel's while loop)
    expr_reads_into(*w->cond, out);
    block_reads_into(w->body, out, skip);
  }
}

template <class Names>
void block_reads_into(const StmtList &block, Names &out, const StmtList *skip) {
  if (&block == skip) return;
  for (const StmtPtr &s : block) deep_reads_into(*s, out, skip);
}

}  // namespace

void deep_reads(const Stmt &s, std::set<std::string> &out, const StmtList *skip) { deep_reads_into(s, out, skip); }
void block_reads(const StmtList &block, std::set<std::string> &out, const StmtList *skip) {
  block_reads_into(block, out, skip);
}
void block_reads(const StmtList &block, std::unordered_set<std::string> &out) { block_reads_into(block, out, nullptr); }

namespace {

// Liveness as a function of what is live after: live_before(s, L) = gen ∪ (L − kill), or gen alone where `all`
// (a return: nothing after it runs). Summaries compose, so a loop's fixed point has a closed form: at its body's
// end, L ∪ (gen(body) − {var}) is live (the names live after the loop, and those the next iteration reads before
// assigning), and before the loop L ∪ (gen(body) − {var}) ∪ reads(range). One walk of each statement, where
// iterating each loop to its fixed point walked the innermost body of loops nested d deep 2^d times or more.
struct Liveness {
  std::set<std::string> gen, kill;
  bool all = false;  // kills every name

  std::set<std::string> apply(std::set<std::string> live) const {
    if (all) return gen;
    for (const std::string &k : kill) live.erase(k);
    live.insert(gen.begin(), gen.end());
    return live;
  }
};

Liveness block_liveness(const StmtList &block);

Liveness stmt_liveness(const Stmt &s) {
  Liveness out;
  if (auto *a = dyn_cast<Assign>(&s)) {
    for (const ExprPtr &t : a->targets) reads(*t, out.kill);  // the names a target list binds
    reads(*a->value, out.gen);
    return out;
  }
  if (auto *a = dyn_cast<AnnAssign>(&s)) {
    if (auto *t = dyn_cast<Name>(a->target.get())) out.kill.insert(t->id);
    if (a->value) reads(*a->value, out.gen);
    return out;
  }
  if (auto *f = dyn_cast<For>(&s)) {
    const std::string var = isa<Name>(f->target.get()) ? cast<Name>(f->target.get())->id : "";
    out.gen = block_liveness(f->body).gen;  // zero iterations keep what is live after: no kill
    out.gen.erase(var);
    reads(*f->iter, out.gen);
    return out;
  }
  if (auto *w = dyn_cast<While>(&s)) {
    out.gen = block_liveness(w->body).gen;
    reads(*w->cond, out.gen);
    return out;
  }
  if (auto *i = dyn_cast<If>(&s)) {
    Liveness a = block_liveness(i->body), b = block_liveness(i->orelse);
    out.gen = std::move(a.gen);
    out.gen.insert(b.gen.begin(), b.gen.end());
    reads(*i->cond, out.gen);
    // Killed on both paths: (L − k1) ∪ (L − k2) = L − (k1 ∩ k2).
    if (a.all && b.all) {
      out.all = true;
    } else if (a.all || b.all) {
      out.kill = a.all ? std::move(b.kill) : std::move(a.kill);
    } else {
      for (const std::string &k : a.kill)
        if (b.kill.count(k)) out.kill.insert(k);
    }
    return out;
  }
  if (isa<Return>(&s)) out.all = true;  // nothing after a return runs
  stmt_reads(s, out.gen);
  return out;
}

Liveness block_liveness(const StmtList &block) {
  // A statement s then what follows it (`out`): gen(s) ∪ (gen(out) − kill(s)), kill(s) ∪ kill(out), from the last
  // statement back, updating `out` in place (copying its sets for each statement made a block's liveness quadratic
  // in its length).
  Liveness out;
  for (size_t k = block.size(); k-- > 0;) {
    Liveness s = stmt_liveness(*block[k]);
    if (s.all) {  // nothing after it runs
      out.gen = std::move(s.gen);
      out.kill.clear();
      out.all = true;
      continue;
    }
    for (const std::string &g : s.kill) out.gen.erase(g);
    out.gen.insert(s.gen.begin(), s.gen.end());
    if (!out.all) out.kill.insert(s.kill.begin(), s.kill.end());
  }
  return out;
}

}  // namespace

std::set<std::string> live_at_loop_end(const StmtList &body, const std::set<std::string> &live_after,
                                       const std::string &loop_var, std::set<std::string> *body_in) {
  const Liveness b = block_liveness(body);
  std::set<std::string> end = live_after;
  for (const std::string &g : b.gen)
    if (g != loop_var) end.insert(g);
  if (body_in) *body_in = b.apply(end);
  return end;
}

std::set<std::string> live_before(const Stmt &s, std::set<std::string> live) {
  return stmt_liveness(s).apply(std::move(live));
}

std::set<std::string> live_before(const StmtList &block, std::set<std::string> live) {
  return block_liveness(block).apply(std::move(live));
}

// Calls `fn` on every expression node of `e`, children first; `fn` may
// replace the node it is given.
// The same over every expression a block's statements read, at any depth.
void rewrite_exprs(StmtList &block, const std::function<void(ExprPtr &)> &fn) {
  for (StmtPtr &st : block) {
    if (auto *a = dyn_cast<Assign>(st.get())) rewrite_expr(a->value, fn);
    if (auto *a = dyn_cast<AugAssign>(st.get())) rewrite_expr(a->value, fn);
    if (auto *x = dyn_cast<ExprStmt>(st.get())) rewrite_expr(x->value, fn);
    if (auto *r = dyn_cast<Return>(st.get()); r && r->value) rewrite_expr(r->value, fn);
    if (auto *f = dyn_cast<For>(st.get())) {
      rewrite_expr(f->iter, fn);
      rewrite_exprs(f->body, fn);
    }
    if (auto *i = dyn_cast<If>(st.get())) {
      rewrite_expr(i->cond, fn);
      rewrite_exprs(i->body, fn);
      rewrite_exprs(i->orelse, fn);
    }
  }
}

std::set<std::string> constexpr_params(const Function &fn) {
  std::set<std::string> out;
  for (size_t k = 0; k < fn.params.size(); ++k)
    if (fn.is_constexpr_param(k)) out.insert(fn.params[k].name);
  return out;
}

bool reads_only(const Expr &cond, const std::set<std::string> &constexprs) {
  std::set<std::string> r;
  reads(cond, r);
  return std::all_of(r.begin(), r.end(), [&](const std::string &n) { return constexprs.count(n) > 0; });
}

void each_assignment(const StmtList &block, const std::function<void(const std::string &, const Expr &)> &fn) {
  for (const StmtPtr &st : block) {
    if (auto *a = dyn_cast<Assign>(st.get()); a && a->targets.size() == 1)
      if (const Name *n = as_name(a->targets[0].get())) fn(n->id, *a->value);
    if (auto *i = dyn_cast<If>(st.get())) {
      each_assignment(i->body, fn);
      each_assignment(i->orelse, fn);
    } else if (auto *f = dyn_cast<For>(st.get())) {
      each_assignment(f->body, fn);
    } else if (auto *w = dyn_cast<While>(st.get())) {
      each_assignment(w->body, fn);
    }
  }
}

std::string assigned_name(const Stmt &s) {
  auto *a = dyn_cast<Assign>(&s);
  auto *n = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
  return n ? n->id : "";
}

const Assign *top_level_assignment(const StmtList &block, const std::string &name) {
  for (const StmtPtr &s : block)
    if (assigned_name(*s) == name) return cast<Assign>(s.get());
  return nullptr;
}

const Expr *call_argument(const Call &c, size_t position, const std::string &keyword) {
  if (position < c.args.size()) return c.args[position].get();
  return c.keyword(keyword);
}

void count_reads(const StmtList &block, std::map<std::string, int> &out) {
  for (const StmtPtr &s : block) {
    std::set<std::string> r;
    stmt_reads(*s, r);
    if (auto *f = dyn_cast<For>(s.get())) reads(*f->iter, r);
    if (auto *i = dyn_cast<If>(s.get())) reads(*i->cond, r);
    for (const std::string &n : r) ++out[n];
    if (auto *f = dyn_cast<For>(s.get())) count_reads(f->body, out);
    if (auto *i = dyn_cast<If>(s.get())) {
      count_reads(i->body, out);
      count_reads(i->orelse, out);
    }
  }
}



}  // namespace tgrad::ad
