#include "src/ad/MemoryAccumulators.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/lower/Walk.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::ad {

using namespace ast;

namespace {

bool is_memory_access(const std::string &callee) {
  return callee == "tl.load" || callee == "tl.store" || callee.rfind("tl.atomic_", 0) == 0;
}

// A load's or a store's address, mask and `other`, by position or keyword.
struct Access {
  const Call *call = nullptr;
  const Expr *pointer = nullptr, *mask = nullptr, *other = nullptr, *value = nullptr;
};

std::optional<Access> access_of(const Call &c) {
  const std::string callee = emit::print_expr(*c.func);
  if (callee != "tl.load" && callee != "tl.store") return std::nullopt;
  // Block pointers' accesses (boundary_check, padding) address differently.
  if (c.keyword("boundary_check") || c.keyword("padding_option")) return std::nullopt;
  Access a;
  a.call = &c;
  a.pointer = call_argument(c, 0, "pointer");
  if (callee == "tl.load") {
    a.mask = call_argument(c, 1, "mask");
    a.other = call_argument(c, 2, "other");
  } else {
    a.value = call_argument(c, 1, "value");
    a.mask = call_argument(c, 2, "mask");
  }
  if (!a.pointer || (callee == "tl.store" && !a.value)) return std::nullopt;
  return a;
}

bool same_optional(const Expr *a, const Expr *b) { return (!a && !b) || (a && b && equal(*a, *b)); }

// `x.to(T)` read as x (a cast keeps the value a load or a sum gave).
const Expr *without_cast(const Expr *e) {
  auto *to = dyn_cast<Call>(e);
  auto *attr = to ? dyn_cast<Attribute>(to->func.get()) : nullptr;
  return attr && attr->attr == "to" ? attr->value.get() : e;
}

// The pointer parameters an address may be based on: its pointer-typed names, followed through their assignments
// to parameters. Both rewrites ask it which buffer an access may touch.
class PointerBases {
 public:
  PointerBases(const Function &fn, const sema::TypeInfo &types) : types_(types) {
    for (const Param &p : fn.params) params_.insert(p.name);
    collect(fn.body);
  }

  struct Traced {
    std::set<std::string> bases;
    bool untraced = false;  // a pointer name neither a parameter nor assigned: it may point anywhere
  };
  Traced of(const Expr &address) const {
    Traced out;
    std::set<std::string> seen;
    walk(address, out, seen);
    return out;
  }

  // How many loads, stores and atomics in a block (at any depth) may touch one of `bases`: an address without a
  // traced base always, one with an untraced pointer name too where `untraced_shares`. An address not understood
  // counts as `unknown` accesses; one in a branch Triton does not compile (a flag's other value) as none.
  size_t accesses(const StmtList &body, const std::set<std::string> &bases, size_t unknown, bool untraced_shares) const {
    size_t n = 0;
    visit_exprs(body, [&](const Expr &x) {
      auto *c = dyn_cast<Call>(&x);
      if (!c || !is_memory_access(emit::print_expr(*c->func))) return;
      const Expr *p = call_argument(*c, 0, "pointer");
      if (!p) {
        n += unknown;
        return;
      }
      if (!types_.type_of(p)) return;
      Traced b = of(*p);
      bool shares = b.bases.empty() || (untraced_shares && b.untraced);
      for (const std::string &x : b.bases) shares |= bases.count(x) > 0;
      n += shares;
    });
    return n;
  }

 private:
  void walk(const Expr &e, Traced &out, std::set<std::string> &seen) const {
    visit_expr(e, [&](const Expr &x) {
      auto *n = dyn_cast<Name>(&x);
      if (!n) return;
      const sema::SType *t = types_.type_of(n);
      if (!t || !t->is_tensor() || !t->elem.is_pointer) return;
      if (params_.count(n->id)) out.bases.insert(n->id);
      if (!seen.insert(n->id).second) return;
      auto defs = definitions_.equal_range(n->id);
      if (defs.first == defs.second && !params_.count(n->id)) out.untraced = true;
      for (auto it = defs.first; it != defs.second; ++it) walk(*it->second, out, seen);
    });
  }

  void collect(const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get())) {
        for (const ExprPtr &t : a->targets) define(*t, *a->value);
      } else if (auto *a = dyn_cast<AugAssign>(s.get())) {
        define(*a->target, *a->value);
      } else if (auto *i = dyn_cast<If>(s.get())) {
        collect(i->body);
        collect(i->orelse);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        collect(f->body);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        collect(w->body);
      }
    }
  }
  void define(const Expr &target, const Expr &value) {
    if (auto *n = dyn_cast<Name>(&target)) {
      definitions_.emplace(n->id, &value);
    } else if (auto *t = dyn_cast<Tuple>(&target)) {
      auto *v = dyn_cast<Tuple>(&value);
      for (size_t k = 0; k < t->elts.size(); ++k) define(*t->elts[k], v && k < v->elts.size() ? *v->elts[k] : value);
    }
  }

  const sema::TypeInfo &types_;
  std::set<std::string> params_;
  std::multimap<std::string, const Expr *> definitions_;
};

class Rewriter {
 public:
  Rewriter(const Function &fn, const sema::TypeInfo &types, std::vector<KeptAccumulator> &kept)
      : types_(types), kept_(kept), pointers_(fn, types) {
    lower::collect_names(fn.body, taken_);
    for (const Param &p : fn.params) taken_.insert(p.name);
  }

  StmtList block(const StmtList &in) {
    StmtList out;
    for (const StmtPtr &s : in) {
      if (auto *f = dyn_cast<For>(s.get())) {
        StmtList hoisted;
        StmtPtr loop = rewrite_loop(*f, hoisted);
        for (StmtPtr &h : hoisted) out.push_back(std::move(h));
        out.push_back(std::move(loop));
      } else if (auto *i = dyn_cast<If>(s.get())) {
        auto copy = std::make_unique<If>(clone(*i->cond), block(i->body), block(i->orelse), i->span);
        copy->guards_early_return = i->guards_early_return;
        copy->leading_comment = i->leading_comment;
        out.push_back(std::move(copy));
      } else if (auto *w = dyn_cast<While>(s.get())) {
        auto copy = std::make_unique<While>(clone(*w->cond), block(w->body), w->span);
        copy->leading_comment = w->leading_comment;
        out.push_back(std::move(copy));
      } else {
        out.push_back(clone(*s));
      }
    }
    return out;
  }

  bool changed() const { return !kept_.empty(); }

 private:
  // One accumulator: the body's statement with the load, the one with the store.
  struct Candidate {
    size_t load_stmt = 0, store_stmt = 0;
    Access load, store;
    std::string carried;  // the name the loop carries
    // Assignments in the loop the address, mask and `other` read, each of a
    // value the loop does not change (`row_ptr = W + pid * stride`), in order.
    std::vector<const Assign *> needed;
  };

  StmtPtr rewrite_loop(const For &f, StmtList &hoisted) {
    std::map<std::string, int> assigned;
    count_assignments(f.body, assigned);
    visit_expr(*f.target, [&](const Expr &x) {  // the loop variable
      if (auto *n = dyn_cast<Name>(&x)) assigned[n->id] += 2;
    });
    std::vector<const Expr *> conditions;
    StmtList body = rewrite_in_loop(f.body, f.body, assigned, conditions, hoisted);
    auto loop = std::make_unique<For>(clone(*f.target), clone(*f.iter), std::move(body), f.span);
    loop->leading_comment = f.leading_comment;
    return loop;
  }

  // A block of a loop's body (the body itself, or a branch of an if in it
  // whose conditions, `conditions`, the loop does not change): its
  // accumulators rewritten, the loads they start from added to `hoisted`
  // under the same conditions.
  StmtList rewrite_in_loop(const StmtList &block_in, const StmtList &loop_body, const std::map<std::string, int> &assigned,
                           std::vector<const Expr *> &conditions, StmtList &hoisted) {
    std::vector<Candidate> found = candidates(block_in, loop_body, assigned);
    StmtList out;
    for (size_t k = 0; k < block_in.size(); ++k) {
      const Stmt &s = *block_in[k];
      const Candidate *as_load = nullptr, *as_store = nullptr;
      for (const Candidate &c : found) {
        if (c.load_stmt == k) as_load = &c;
        if (c.store_stmt == k) as_store = &c;
      }
      if (as_load) {
        StmtPtr copy = clone(s);
        replace_call(*copy, *as_load->load.call, as_load->carried);
        out.push_back(std::move(copy));
      } else if (as_store) {
        append_store_and_update(*as_store, s, out);
      } else if (auto *i = dyn_cast<If>(&s); i && !uses_any(*i->cond, assigned)) {
        conditions.push_back(i->cond.get());
        StmtList body = rewrite_in_loop(i->body, loop_body, assigned, conditions, hoisted);
        conditions.pop_back();
        // The else branch runs where the condition is false.
        auto negated = std::make_unique<UnaryOp>(UnaryOpKind::Not, clone(*i->cond), i->cond->span);
        conditions.push_back(negated.get());
        StmtList orelse = rewrite_in_loop(i->orelse, loop_body, assigned, conditions, hoisted);
        conditions.pop_back();
        negations_.push_back(std::move(negated));
        auto copy = std::make_unique<If>(clone(*i->cond), std::move(body), std::move(orelse), i->span);
        copy->guards_early_return = i->guards_early_return;
        copy->leading_comment = i->leading_comment;
        out.push_back(std::move(copy));
      } else {
        StmtList one;
        one.push_back(clone(s));
        for (StmtPtr &t : block(one)) out.push_back(std::move(t));
      }
    }
    for (const Candidate &c : found) {
      // The values the address needs, under names of their own (a name
      // assigned both before and in the loop would read as loop-carried).
      StmtList before;
      std::map<std::string, std::string> renamed;
      auto rename = [&](ExprPtr &e) {
        rewrite_expr(e, [&](ExprPtr &x) {
          if (auto *n = dyn_cast<Name>(x.get()); n && renamed.count(n->id))
            x = std::make_unique<Name>(renamed.at(n->id), n->span);
        });
      };
      for (const Assign *a : c.needed) {
        const std::string &old_name = cast<Name>(a->targets[0].get())->id;
        ExprPtr value = clone(*a->value);
        rename(value);
        renamed[old_name] = fresh(old_name + "_outside");
        ExprList targets;
        targets.push_back(std::make_unique<Name>(renamed.at(old_name), a->span));
        before.push_back(std::make_unique<Assign>(std::move(targets), std::move(value), a->span));
      }
      ExprPtr load = clone(*c.load.call);
      rename(load);
      ExprList targets;
      targets.push_back(std::make_unique<Name>(c.carried, c.load.call->span));
      before.push_back(std::make_unique<Assign>(std::move(targets), std::move(load), c.load.call->span));
      for (size_t k = conditions.size(); k-- > 0;) {
        StmtPtr guarded = std::make_unique<If>(clone(*conditions[k]), std::move(before), StmtList{}, c.load.call->span);
        before.clear();
        before.push_back(std::move(guarded));
      }
      before.front()->leading_comment = "kept in a register: the loop below loads these addresses after storing them";
      for (StmtPtr &b : before) hoisted.push_back(std::move(b));
      kept_.push_back({emit::print_expr(*c.load.pointer), c.carried, c.load.call->span.begin.line});
    }
    return out;
  }

  std::vector<Candidate> candidates(const StmtList &block_in, const StmtList &loop_body,
                                    const std::map<std::string, int> &assigned) {
    std::vector<Candidate> out;
    std::set<size_t> used;
    for (size_t i = 0; i < block_in.size(); ++i) {
      const Stmt &s = *block_in[i];
      if (!isa<Assign>(&s) && !isa<AugAssign>(&s) && !isa<ExprStmt>(&s)) continue;
      for (const Call *load : loads_in(s)) {
        std::optional<Access> l = access_of(*load);
        if (!l || used.count(i)) continue;
        std::vector<const Assign *> needed;
        if (!invariant(*l->pointer, loop_body, assigned, needed) ||
            (l->mask && !invariant(*l->mask, loop_body, assigned, needed)) ||
            (l->other && !invariant(*l->other, loop_body, assigned, needed)))
          continue;
        std::optional<size_t> j = matching_store(block_in, i, *l);
        if (!j || used.count(*j)) continue;
        std::optional<Access> st = access_of(*store_call(*block_in[*j]));
        if (!same_shape(*load, *st->value)) continue;
        // Nothing else in the loop touches a buffer this address may point into.
        const std::set<std::string> bases = pointers_.of(*l->pointer).bases;
        if (bases.empty() || pointers_.accesses(loop_body, bases, 2, false) != 2) continue;
        Candidate c{i, *j, *l, *st, fresh(hint(s, *l)), needed};
        used.insert(i);
        used.insert(*j);
        out.push_back(c);
        break;  // one accumulator per statement
      }
    }
    return out;
  }

  // The loads a statement's own expressions make (not nested statements').
  static std::vector<const Call *> loads_in(const Stmt &s) {
    std::vector<const Call *> out;
    const Expr *value = nullptr;
    if (auto *a = dyn_cast<Assign>(&s)) value = a->value.get();
    else if (auto *a = dyn_cast<AugAssign>(&s)) value = a->value.get();
    else if (auto *e = dyn_cast<ExprStmt>(&s)) value = e->value.get();
    if (!value) return out;
    visit_expr(*value, [&](const Expr &x) {
      auto *c = dyn_cast<Call>(&x);
      if (c && emit::print_expr(*c->func) == "tl.load") out.push_back(c);
    });
    return out;
  }

  static const Call *store_call(const Stmt &s) {
    auto *e = dyn_cast<ExprStmt>(&s);
    auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
    return c && emit::print_expr(*c->func) == "tl.store" ? c : nullptr;
  }

  // The first statement after `i` that stores through the load's address and mask.
  static std::optional<size_t> matching_store(const StmtList &body, size_t i, const Access &load) {
    for (size_t j = i + 1; j < body.size(); ++j) {
      const Call *c = store_call(*body[j]);
      if (!c) continue;
      std::optional<Access> st = access_of(*c);
      if (st && equal(*st->pointer, *load.pointer) && same_optional(st->mask, load.mask)) return j;
    }
    return std::nullopt;
  }

  // Whether `e` has the same value in every iteration of the loop: it reads
  // no name the loop assigns, other than names the loop assigns once, with
  // a plain assignment, from such values and without touching memory
  // (`needed` gets those assignments, each after the ones it reads).
  bool invariant(const Expr &e, const StmtList &loop_body, const std::map<std::string, int> &assigned,
                 std::vector<const Assign *> &needed) {
    bool ok = true;
    visit_expr(e, [&](const Expr &x) {
      if (auto *c = dyn_cast<Call>(&x)) {
        const std::string callee = emit::print_expr(*c->func);
        auto *method = dyn_cast<Attribute>(c->func.get());
        const bool pure = callee.rfind("tl.", 0) == 0 || (method && method->attr == "to");
        ok &= pure && !is_memory_access(callee) && !sema::is_random_draw(callee);
      }
      auto *n = dyn_cast<Name>(&x);
      if (!ok || !n || !assigned.count(n->id)) return;
      const Assign *def = assigned.at(n->id) == 1 ? top_level_or_nested_assignment(loop_body, n->id) : nullptr;
      if (!def || def->targets.size() != 1 || !isa<Name>(def->targets[0].get()) ||
          std::find(visiting_.begin(), visiting_.end(), n->id) != visiting_.end()) {
        ok = false;
        return;
      }
      if (std::find(needed.begin(), needed.end(), def) != needed.end()) return;
      visiting_.push_back(n->id);
      ok = invariant(*def->value, loop_body, assigned, needed);
      visiting_.pop_back();
      if (ok) needed.push_back(def);
    });
    return ok;
  }

  // The assignment `name = ...` in a block or the ifs in it (not inner loops).
  static const Assign *top_level_or_nested_assignment(const StmtList &block, const std::string &name) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && assigned_name(*a) == name) return a;
      if (auto *i = dyn_cast<If>(s.get())) {
        if (const Assign *a = top_level_or_nested_assignment(i->body, name)) return a;
        if (const Assign *a = top_level_or_nested_assignment(i->orelse, name)) return a;
      }
    }
    return nullptr;
  }

  static bool uses_any(const Expr &e, const std::map<std::string, int> &assigned) {
    bool hit = false;
    visit_expr(e, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x)) hit |= assigned.count(n->id) > 0;
    });
    return hit;
  }

  bool same_shape(const Expr &loaded, const Expr &stored) const {
    const sema::SType *a = types_.type_of(&loaded), *b = types_.type_of(&stored);
    if (!a || !b || !a->is_tensor() || !b->is_tensor()) return false;
    return a->shape == b->shape;
  }

  // `x = tl.load(...)` (or `x += ...`) names the carried value after x.
  static std::string hint(const Stmt &s, const Access &load) {
    std::string target;
    if (auto *a = dyn_cast<Assign>(&s); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()))
      target = cast<Name>(a->targets[0].get())->id;
    else if (auto *a = dyn_cast<AugAssign>(&s); a && isa<Name>(a->target.get()))
      target = cast<Name>(a->target.get())->id;
    if (!target.empty()) return target + "_in_memory";
    std::string first;
    visit_expr(*load.pointer, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x); n && first.empty()) first = n->id;
    });
    return (first.empty() ? std::string("kept") : first) + "_value";
  }

  std::string fresh(const std::string &base) {
    for (int k = 1;; ++k) {
      std::string n = k == 1 ? base : base + "_" + std::to_string(k);
      if (taken_.insert(n).second) return n;
    }
  }

  static void replace_call(Stmt &s, const Call &load, const std::string &carried) {
    const SourceSpan span = load.span;
    auto swap = [&](ExprPtr &e) {
      rewrite_expr(e, [&](ExprPtr &x) {
        if (equal(*x, load) && x->span.begin.line == span.begin.line && x->span.begin.column == span.begin.column)
          x = std::make_unique<Name>(carried, span);
      });
    };
    if (auto *a = dyn_cast<Assign>(&s)) swap(a->value);
    else if (auto *a = dyn_cast<AugAssign>(&s)) swap(a->value);
    else if (auto *e = dyn_cast<ExprStmt>(&s)) swap(e->value);
  }

  // `tl.store(P, v, mask=M)` then `carried = tl.where(M, v.to(carried.dtype), carried)`;
  // a stored expression is named first, so that it is computed once.
  void append_store_and_update(const Candidate &c, const Stmt &s, StmtList &body) {
    const SourceSpan span = c.store.call->span;
    StmtPtr store = clone(s);
    auto *call = cast<Call>(cast<ExprStmt>(store.get())->value.get());
    ExprPtr *stored = call->args.size() > 1 ? &call->args[1] : nullptr;
    if (!stored)
      for (Keyword &k : call->keywords)
        if (k.name == "value") stored = &k.value;
    std::string stored_name;
    if (auto *n = dyn_cast<Name>(stored->get())) {
      stored_name = n->id;
    } else {
      stored_name = fresh(c.carried + "_stored");
      ExprList targets;
      targets.push_back(std::make_unique<Name>(stored_name, span));
      body.push_back(std::make_unique<Assign>(std::move(targets), std::move(*stored), span));
      *stored = std::make_unique<Name>(stored_name, span);
    }
    body.push_back(std::move(store));
    auto name = [&](const std::string &n) { return std::make_unique<Name>(n, span); };
    ExprList to_args;
    to_args.push_back(std::make_unique<Attribute>(name(c.carried), "dtype", span));
    ExprPtr cast_value =
        std::make_unique<Call>(std::make_unique<Attribute>(name(stored_name), "to", span), std::move(to_args),
                               std::vector<Keyword>{}, span);
    ExprPtr update;
    if (c.load.mask) {
      ExprList where_args;
      where_args.push_back(clone(*c.load.mask));
      where_args.push_back(std::move(cast_value));
      where_args.push_back(name(c.carried));
      update = std::make_unique<Call>(std::make_unique<Attribute>(name("tl"), "where", span), std::move(where_args),
                                      std::vector<Keyword>{}, span);
    } else {
      update = std::move(cast_value);
    }
    ExprList targets;
    targets.push_back(name(c.carried));
    body.push_back(std::make_unique<Assign>(std::move(targets), std::move(update), span));
  }

  const sema::TypeInfo &types_;
  std::vector<KeptAccumulator> &kept_;
  PointerBases pointers_;
  std::set<std::string> taken_;
  std::vector<ExprPtr> negations_;
  std::vector<std::string> visiting_;  // names whose invariance is being decided  // `not c` for the else branches' conditions, while rewriting
};

// Additive updates of memory (keep_memory_accumulators_in_registers' second
// rewrite, src/ad/MemoryAccumulators.h): `old = tl.load(P, mask=M,
// other=0.0)`, `new = old + f`, `tl.store(P, new, mask=M)` in one block, as
// `tl.atomic_add(P, f, mask=M)`.
class AdditionRewriter {
 public:
  AdditionRewriter(const Function &fn, const sema::TypeInfo &types) : fn_(fn), pointers_(fn, types) {
    count_reads(fn.body, reads_);
    count_assignments(fn.body, assigned_);
  }

  // The body rewritten, or nothing where no update qualifies.
  std::optional<StmtList> rewrite(std::vector<KeptAccumulator> &rewritten) {
    std::vector<Update> found;
    find(fn_.body, found);
    // Only where every access to the buffer is such an update: another load would read what they add, another
    // store would be overwritten by them or overwrite them (their order matters then; atomics have none).
    std::map<std::string, size_t> updates_of;
    for (const Update &u : found)
      for (const std::string &b : pointers_.of(*u.load.pointer).bases) updates_of[b] += 1;
    std::vector<const Update *> kept;
    for (const Update &u : found) {
      const PointerBases::Traced t = pointers_.of(*u.load.pointer);
      bool alone = t.bases.size() == 1 && !t.untraced;
      for (const std::string &x : t.bases) alone &= pointers_.accesses(fn_.body, {x}, 1000, true) == 2 * updates_of[x];
      if (alone) kept.push_back(&u);
    }
    if (kept.empty()) return std::nullopt;
    for (const Update *u : kept) {
      chosen_.insert(u->store.call);
      skipped_.insert(u->load_stmt);
      skipped_.insert(u->add_stmt);
      added_[u->store.call] = u->added;
      rewritten.push_back({emit::print_expr(*u->load.pointer), "", u->load.call->span.begin.line});
    }
    return block(fn_.body);
  }

 private:
  struct Update {
    const Stmt *load_stmt = nullptr, *add_stmt = nullptr;
    Access load, store;
    const Expr *added = nullptr;  // f
  };

  // `name = tl.load(...)` (or `tl.load(...).to(T)`): the load.
  static const Call *assigned_load(const Stmt &s, std::string &name) {
    auto *a = dyn_cast<Assign>(&s);
    if (!a || a->targets.size() != 1 || !isa<Name>(a->targets[0].get())) return nullptr;
    auto *c = dyn_cast<Call>(without_cast(a->value.get()));
    if (!c || emit::print_expr(*c->func) != "tl.load") return nullptr;
    name = cast<Name>(a->targets[0].get())->id;
    return c;
  }

  static bool is_zero(const Expr *e) {
    if (!e) return false;
    if (auto *i = dyn_cast<IntLit>(e)) return i->value == 0;
    if (auto *f = dyn_cast<FloatLit>(e)) return f->value == 0.0;
    return false;
  }

  // Whether a statement (at any depth) reads `name`.
  static bool reads_name(const Stmt &s, const std::string &name) {
    std::set<std::string> read;
    deep_reads(s, read);
    return read.count(name) > 0;
  }

  // `new = old + f` or `f + old` (then the sum's name), or `old += f` (then `old`), with f: the sum's name and f.
  static std::optional<std::pair<std::string, const Expr *>> addition_to(const Stmt &s, const std::string &old) {
    if (auto *a = dyn_cast<AugAssign>(&s)) {
      auto *target = dyn_cast<Name>(a->target.get());
      if (target && target->id == old && a->op == BinaryOpKind::Add) return std::make_pair(old, a->value.get());
      return std::nullopt;
    }
    auto *a = dyn_cast<Assign>(&s);
    auto *sum = a && a->targets.size() == 1 ? dyn_cast<BinOp>(a->value.get()) : nullptr;
    auto *target = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
    if (!sum || !target || sum->op != BinaryOpKind::Add) return std::nullopt;
    auto *lhs = dyn_cast<Name>(sum->lhs.get());
    auto *rhs = dyn_cast<Name>(sum->rhs.get());
    const Expr *added = lhs && lhs->id == old ? sum->rhs.get() : rhs && rhs->id == old ? sum->lhs.get() : nullptr;
    if (!added) return std::nullopt;
    return std::make_pair(target->id, added);
  }

  void find(const StmtList &block, std::vector<Update> &out) {
    for (size_t i = 0; i < block.size(); ++i) {
      if (auto *f = dyn_cast<For>(block[i].get())) find(f->body, out);
      if (auto *w = dyn_cast<While>(block[i].get())) find(w->body, out);
      if (auto *c = dyn_cast<If>(block[i].get())) {
        find(c->body, out);
        find(c->orelse, out);
      }
      std::string old;
      const Call *load = assigned_load(*block[i], old);
      std::optional<Access> l = load ? access_of(*load) : std::nullopt;
      // Lanes outside the mask add to nothing: they must load zero (a load without a mask has no such lanes).
      if (!l || (l->mask ? !is_zero(l->other) : l->other != nullptr)) continue;
      // The next statement that reads `old` must add to it, and the sum be stored back by the next one reading it.
      size_t j = i + 1;
      while (j < block.size() && !reads_name(*block[j], old)) ++j;
      if (j >= block.size()) continue;
      std::optional<std::pair<std::string, const Expr *>> update = addition_to(*block[j], old);
      if (!update) continue;
      const std::string &sum = update->first;
      // What is added must not read what was loaded (`new = old + old * x` needs the values in memory).
      std::set<std::string> read_by_added;
      reads(*update->second, read_by_added);
      if (read_by_added.count(old) || read_by_added.count(sum)) continue;
      for (size_t k = j + 1; k < block.size(); ++k) {
        auto *e = dyn_cast<ExprStmt>(block[k].get());
        auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
        std::optional<Access> st = c ? access_of(*c) : std::nullopt;
        if (!st || !equal(*st->pointer, *l->pointer) || !same_optional(st->mask, l->mask)) continue;
        auto *stored = dyn_cast<Name>(without_cast(st->value));
        if (!stored || stored->id != sum) break;
        // `old` and the sum are read only by the addition and the store (statements reading a name count once),
        // and assigned only by the load and the addition: nothing else sees the values in memory.
        auto read_there = [&](const std::string &n) {
          return (reads_name(*block[j], n) ? 1 : 0) + (reads_name(*block[k], n) ? 1 : 0);
        };
        std::map<std::string, int> assigned_here;
        stmt_assignments(*block[i], assigned_here);
        stmt_assignments(*block[j], assigned_here);
        bool only_here = reads_[old] == read_there(old) && reads_[sum] == read_there(sum) &&
                         assigned_[old] == assigned_here[old] && assigned_[sum] == assigned_here[sum];
        // The address and mask mean the same at the store: nothing between assigns what they read.
        std::set<std::string> read;
        reads(*l->pointer, read);
        if (l->mask) reads(*l->mask, read);
        for (size_t m = i + 1; m < k && only_here; ++m) {
          std::map<std::string, int> between;
          stmt_assignments(*block[m], between);
          for (const auto &kv : between) only_here &= !read.count(kv.first);
        }
        if (only_here) out.push_back({block[i].get(), block[j].get(), *l, *st, update->second});
        break;
      }
    }
  }

  StmtList block(const StmtList &in) {
    StmtList out;
    for (const StmtPtr &s : in) {
      if (skipped_.count(s.get())) continue;
      if (auto *f = dyn_cast<For>(s.get())) {
        auto loop = std::make_unique<For>(clone(*f->target), clone(*f->iter), block(f->body), f->span);
        loop->leading_comment = f->leading_comment;
        out.push_back(std::move(loop));
      } else if (auto *i = dyn_cast<If>(s.get())) {
        auto copy = std::make_unique<If>(clone(*i->cond), block(i->body), block(i->orelse), i->span);
        copy->guards_early_return = i->guards_early_return;
        copy->leading_comment = i->leading_comment;
        out.push_back(std::move(copy));
      } else if (auto *w = dyn_cast<While>(s.get())) {
        auto copy = std::make_unique<While>(clone(*w->cond), block(w->body), w->span);
        copy->leading_comment = w->leading_comment;
        out.push_back(std::move(copy));
      } else if (auto *e = dyn_cast<ExprStmt>(s.get()); e && isa<Call>(e->value.get()) &&
                                                      chosen_.count(cast<Call>(e->value.get()))) {
        const Call &store = *cast<Call>(e->value.get());
        std::optional<Access> st = access_of(store);
        ExprList args;
        args.push_back(clone(*st->pointer));
        args.push_back(clone(*added_.at(&store)));
        std::vector<Keyword> keywords;
        if (st->mask) keywords.push_back({"mask", {}, clone(*st->mask)});
        auto add = std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>("tl", store.span),
                                                                      "atomic_add", store.span),
                                          std::move(args), std::move(keywords), store.span);
        auto stmt = std::make_unique<ExprStmt>(std::move(add), s->span);
        stmt->leading_comment = s->leading_comment;
        out.push_back(std::move(stmt));
      } else {
        out.push_back(clone(*s));
      }
    }
    return out;
  }

  const Function &fn_;
  PointerBases pointers_;
  std::map<std::string, int> reads_, assigned_;
  std::set<const Call *> chosen_;
  std::set<const Stmt *> skipped_;
  std::map<const Call *, const Expr *> added_;
};

}  // namespace

std::unique_ptr<Function> additive_updates_as_atomic_adds(const Function &fn, const sema::TypeInfo &types,
                                                          std::vector<KeptAccumulator> &rewritten) {
  rewritten.clear();
  AdditionRewriter r(fn, types);
  std::optional<StmtList> body = r.rewrite(rewritten);
  if (!body) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  out->body = std::move(*body);
  return out;
}

std::unique_ptr<Function> keep_memory_accumulators_in_registers(const Function &fn, const sema::TypeInfo &types,
                                                                 std::vector<KeptAccumulator> &kept) {
  kept.clear();
  Rewriter r(fn, types, kept);
  StmtList body = r.block(fn.body);
  if (!r.changed()) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  out->body = std::move(body);
  return out;
}

}  // namespace tgrad::ad
