#include "src/ad/StoredValueForwarding.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "src/ad/AnfWalk.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::ad {
namespace {

using namespace ast;
using sema::SType;

// What both loops' variables become when the addresses of two loops are compared.
const char kIteration[] = "__tgrad_iteration__";
// How many nodes one expansion of an address may have (definitions expand into trees).
const int kExpansionBudget = 4000;

std::string name_of(const Expr *e) {
  auto *n = e ? dyn_cast<Name>(e) : nullptr;
  return n ? n->id : "";
}

// A load, store or atomic statement of the kernel.
struct Access {
  const Stmt *stmt = nullptr;
  const Call *call = nullptr;
  std::string builtin;   // "tl.load", "tl.store", "tl.atomic_add", ...
  std::string pointer;   // a name, or "" where the pointer is not one
  std::string mask;      // a name, or ""
  bool mask_given = false;
  const Expr *value = nullptr;  // a store's value
  const Expr *other = nullptr;  // a load's `other`
  std::string target;    // a load's name
  bool load() const { return builtin == "tl.load"; }
  bool writes() const { return !load(); }
};

// An expansion of a name into the expression tree that defines it, and the names it stopped at.
struct Expansion {
  ExprPtr tree;
  std::set<std::string> leaves;
};

class Forwarder {
 public:
  Forwarder(AnfFunction &anf, const sema::TypeInfo &types, const std::map<std::string, SType> &name_types,
            const AccessAnalysis &access, NameAllocator &names)
      : anf_(anf), types_(types), name_types_(name_types), access_(access), names_(names) {}

  std::vector<ForwardedLoad> run() {
    count_assignments(anf_.fn->body, assignment_counts_);
    each_assignment(anf_.fn->body, [&](const std::string &target, const Expr &value) {
      if (assignment_counts_[target] == 1) definition_[target] = &value;
    });
    survey(anf_.fn->body);
    if (loaded_and_written_.empty()) return {};
    visit(anf_.fn->body);
    if (!replacements_.empty()) apply(anf_.fn->body);
    return std::move(out_);
  }

 private:
  AnfFunction &anf_;
  const sema::TypeInfo &types_;
  const std::map<std::string, SType> &name_types_;
  const AccessAnalysis &access_;
  NameAllocator &names_;
  std::unordered_map<std::string, int> assignment_counts_;
  std::unordered_map<std::string, const Expr *> definition_;  // names assigned once -> their value
  std::set<std::string> written_bases_;                        // buffers the kernel stores to or updates atomically
  std::set<std::string> loaded_and_written_;
  std::set<const Stmt *> rewritten_loads_;
  std::map<const Stmt *, StmtList> replacements_;  // a load statement -> what takes its place
  std::vector<ForwardedLoad> out_;

  std::string builtin(const Call &c) const {
    const SType *f = types_.type_of(c.func.get());
    return f && f->kind == SType::Kind::Builtin ? f->s : "";
  }

  std::optional<Access> access_of(const Stmt &s) const {
    const Call *c = nullptr;
    std::string target;
    if (auto *a = dyn_cast<Assign>(&s)) {
      c = dyn_cast<Call>(a->value.get());
      target = assigned_name(s);
    } else if (auto *e = dyn_cast<ExprStmt>(&s)) {
      c = dyn_cast<Call>(e->value.get());
    }
    if (!c) return std::nullopt;
    Access m;
    m.builtin = builtin(*c);
    if (m.builtin != "tl.load" && m.builtin != "tl.store" && m.builtin.rfind("tl.atomic_", 0) != 0) return std::nullopt;
    m.stmt = &s;
    m.call = c;
    m.target = target;
    m.pointer = name_of(call_argument(*c, 0, "pointer"));
    const Expr *mask = call_argument(*c, m.load() ? 1 : 2, "mask");
    m.mask_given = mask != nullptr;
    m.mask = name_of(mask);
    if (m.load()) m.other = call_argument(*c, 2, "other");
    if (m.builtin == "tl.store") m.value = call_argument(*c, 1, "value");
    return m;
  }

  std::string base_of(const Access &m) const { return m.pointer.empty() ? "" : access_.base_of(m.pointer); }

  // `fn` on each memory access of `s` and of the blocks nested in it, in program order.
  void each_access(const Stmt &s, const std::function<void(const Access &)> &fn) const {
    if (auto *f = dyn_cast<For>(&s))
      for (const StmtPtr &x : f->body) each_access(*x, fn);
    if (auto *i = dyn_cast<If>(&s)) {
      for (const StmtPtr &x : i->body) each_access(*x, fn);
      for (const StmtPtr &x : i->orelse) each_access(*x, fn);
    }
    if (auto *w = dyn_cast<While>(&s))
      for (const StmtPtr &x : w->body) each_access(*x, fn);
    if (std::optional<Access> m = access_of(s)) fn(*m);
  }

  void survey(const StmtList &block) {
    std::set<std::string> loaded;
    for (const StmtPtr &s : block)
      each_access(*s, [&](const Access &m) {
        if (std::string base = base_of(m); !base.empty()) (m.load() ? loaded : written_bases_).insert(base);
      });
    for (const std::string &b : loaded)
      if (written_bases_.count(b)) loaded_and_written_.insert(b);
  }

  // Whether a definition may be expanded: anything but a memory access (whose value depends on when it runs).
  bool expandable(const Expr &value) const {
    bool ok = true;
    visit_expr(value, [&](const Expr &e) {
      if (auto *c = dyn_cast<Call>(&e)) {
        std::string b = builtin(*c);
        if (b == "tl.load" || b.rfind("tl.atomic_", 0) == 0 || b == "tl.rand" || b == "tl.randn" ||
            b == "tl.randint" || b == "tl.randint4x")
          ok = false;
      }
    });
    return ok;
  }

  // `name`'s value as a tree over the names it was computed from (loop variables in `loops` become one
  // placeholder), or null past the budget.
  ExprPtr expand(const std::string &name, const std::set<std::string> &loops, std::set<std::string> &leaves,
                 int &budget) const {
    if (--budget < 0) return nullptr;
    if (loops.count(name)) return std::make_unique<Name>(kIteration);
    auto d = definition_.find(name);
    if (d == definition_.end() || !expandable(*d->second)) {
      leaves.insert(name);
      return std::make_unique<Name>(name);
    }
    ExprPtr tree = clone(*d->second);
    bool ok = true;
    rewrite_expr(tree, [&](ExprPtr &e) {
      auto *n = dyn_cast<Name>(e.get());
      if (!n || !ok) return;
      ExprPtr sub = expand(n->id, loops, leaves, budget);
      if (!sub) ok = false;
      else e = std::move(sub);
    });
    return ok ? std::move(tree) : nullptr;
  }

  std::optional<Expansion> expansion(const std::string &name, const std::set<std::string> &loops) const {
    Expansion x;
    int budget = kExpansionBudget;
    x.tree = expand(name, loops, x.leaves, budget);
    if (!x.tree) return std::nullopt;
    return x;
  }

  // Whether `a` (in the scope of loop variables `la`) and `b` (in `lb`) are the same value, given that no name
  // the expansions stop at changes in between: those names are added to `leaves`.
  bool same_value(const std::string &a, const std::set<std::string> &la, const std::string &b,
                  const std::set<std::string> &lb, std::set<std::string> &leaves) const {
    if (a.empty() || b.empty()) return a.empty() && b.empty();
    std::optional<Expansion> x = expansion(a, la), y = expansion(b, lb);
    if (!x || !y || !equal(*x->tree, *y->tree)) return false;
    leaves.insert(x->leaves.begin(), x->leaves.end());
    leaves.insert(y->leaves.begin(), y->leaves.end());
    return true;
  }

  const SType *type_of_name(const std::string &n) const {
    auto it = name_types_.find(n);
    return it == name_types_.end() ? nullptr : &it->second;
  }

  // The store's value fills the loaded tile: a name of the pointer's shape (a store broadcasts a smaller value
  // over its addresses, which a load would read back in the pointer's shape).
  bool value_fills_pointer(const Access &store) const {
    std::string v = name_of(store.value);
    const SType *vt = type_of_name(v), *pt = type_of_name(store.pointer);
    if (v.empty() || !vt || !pt) return false;
    if (!pt->is_tensor()) return !vt->is_tensor() || vt->shape.empty();
    return vt->is_tensor() && sema::shape_str(vt->shape) == sema::shape_str(pt->shape);
  }

  static std::set<std::string> assigned_in(const Stmt &s) {
    std::map<std::string, int> counts;
    stmt_assignments(s, counts);
    std::set<std::string> out;
    for (const auto &kv : counts) out.insert(kv.first);
    return out;
  }

  static bool meets(const std::set<std::string> &a, const std::set<std::string> &b) {
    for (const std::string &x : a)
      if (b.count(x)) return true;
    return false;
  }

  bool writes_base(const Stmt &s, const std::string &base) const { return touches_base(s, base, false); }

  // Whether `s` (at any depth) loads (`loads`) or writes `base`.
  bool touches_base(const Stmt &s, const std::string &base, bool loads) const {
    bool found = false;
    each_access(s, [&](const Access &m) { found = found || (m.writes() != loads && base_of(m) == base); });
    return found;
  }

  // A statement of a loop's body as the statements that run in it: itself, or the statements of both branches of
  // an if (none for a nested loop).
  static std::vector<const Stmt *> statements_of(const Stmt &s) {
    std::vector<const Stmt *> out;
    if (auto *iff = dyn_cast<If>(&s)) {
      for (const StmtList *list : {&iff->body, &iff->orelse})
        for (const StmtPtr &x : *list) out.push_back(x.get());
    } else if (!isa<For>(&s) && !isa<While>(&s)) {
      out.push_back(&s);
    }
    return out;
  }

  void visit(StmtList &block) {
    for (size_t k = 0; k < block.size(); ++k) {
      Stmt &s = *block[k];
      if (auto *f = dyn_cast<For>(&s)) {
        visit(f->body);
        for (size_t i = 0; i < f->body.size(); ++i) try_two_loops(block, k, i);
        continue;
      }
      if (auto *i = dyn_cast<If>(&s)) {
        visit(i->body);
        visit(i->orelse);
        continue;
      }
      if (auto *w = dyn_cast<While>(&s)) {
        visit(w->body);
        continue;
      }
      try_same_block(block, k);
    }
  }

  // The store that is `block[k]`, if it is one whose value later loads may read back.
  std::optional<Access> forwardable_store(const Stmt &s) const {
    std::optional<Access> st = access_of(s);
    if (!st || st->builtin != "tl.store" || st->pointer.empty() || (st->mask_given && st->mask.empty())) return std::nullopt;
    if (!loaded_and_written_.count(base_of(*st))) return std::nullopt;
    // (Lanes or programs whose addresses meet would leave one of their values at the address: a race in the
    // forward itself, whose loads then read an unspecified value. Such a kernel has no gradient to keep.)
    if (!value_fills_pointer(*st)) return std::nullopt;
    return st;
  }

  // Whether `load` reads what `store` wrote, given the addresses compared as values: the masks agree, and what
  // the load's lanes outside its mask get is its `other`.
  bool same_lanes(const Access &store, const std::set<std::string> &ls, const Access &load,
                  const std::set<std::string> &ll, std::set<std::string> &leaves) const {
    if (load.pointer.empty() || (load.mask_given && load.mask.empty())) return false;
    if (call_argument(*load.call, 3, "boundary_check")) return false;
    if (!same_value(store.pointer, ls, load.pointer, ll, leaves)) return false;
    if (store.mask_given != load.mask_given) return false;  // lanes the store skipped hold the old contents
    return !store.mask_given || same_value(store.mask, ls, load.mask, ll, leaves);
  }

  // `x_stored = value.to(P.dtype.element_ty)` into `out`: the store rounds to the buffer's type, the load reads that.
  std::string cast_as_stored(StmtList &out, const Access &load, const std::string &value, const std::string &hint) {
    ExprPtr element = std::make_unique<Attribute>(
        std::make_unique<Attribute>(std::make_unique<Name>(load.pointer), "dtype"), "element_ty");
    ExprList cast_args;
    cast_args.push_back(std::move(element));
    std::string stored = names_.fresh(hint);
    auto cast = std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>(value), "to"),
                                       std::move(cast_args), std::vector<Keyword>{}, load.call->span);
    ExprList target;
    target.push_back(std::make_unique<Name>(stored));
    out.push_back(std::make_unique<Assign>(std::move(target), std::move(cast), load.stmt->span));
    return stored;
  }

  // What the load gives for the value `read`: `tl.where(mask, read, other)` where it has a mask and an `other`
  // (lanes outside the mask without `other` are undefined in Triton).
  static ExprPtr as_loaded(const Access &load, const std::string &read) {
    if (!load.mask_given || !load.other) return std::make_unique<Name>(read);
    ExprList args;
    args.push_back(std::make_unique<Name>(load.mask));
    args.push_back(std::make_unique<Name>(read));
    args.push_back(clone(*load.other));
    return std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>("tl"), "where"), std::move(args),
                                  std::vector<Keyword>{}, load.call->span);
  }

  // `out` (ending with the assignment to the load's name) takes the load statement's place.
  void replace_load(const Access &store, const Access &load, StmtList out, bool recomputed, bool one_lane) {
    if (const Stmt *origin = anf_.origin_of(load.stmt))
      for (const StmtPtr &s : out) anf_.origin[s.get()] = origin;
    rewritten_loads_.insert(load.stmt);
    replacements_[load.stmt] = std::move(out);
    out_.push_back({base_of(store), load.call->span.begin.line, store.call->span.begin.line, recomputed, one_lane});
  }

  void record(const Access &store, const Access &load, const std::string &value, StmtList prefix, bool recomputed) {
    StmtList out = std::move(prefix);
    const std::string stored = cast_as_stored(out, load, value, load.target + "_stored");
    ExprList target;
    target.push_back(std::make_unique<Name>(load.target));
    out.push_back(std::make_unique<Assign>(std::move(target), as_loaded(load, stored), load.stmt->span));
    replace_load(store, load, std::move(out), recomputed, false);
  }

  // One lane of a stored row: the store writes `B + o` (o a 1-D tile of distinct offsets: `tl.arange(0, N)`, plus a
  // scalar), the load reads the scalar address `B + i` (the triton-lang/kernels cross entropy reads back the
  // probability at the row's label, `PROBS + row * N + idx`). Where o's lane equal to i is one the store's mask
  // kept, the load reads that lane's stored value. Any other i reads another program's store (a race of the
  // forward itself) or past the buffer: nothing with a gradient to keep.
  struct OneLane {
    std::string offsets, index;   // o and i
    std::set<std::string> leaves; // names the store read that must not change before the load
  };

  // `pointer`'s definition as `base + offset` (either order): the two names, the pointer's first.
  std::optional<std::pair<std::string, std::string>> base_plus_offset(const std::string &pointer) const {
    auto d = definition_.find(pointer);
    auto *add = d == definition_.end() ? nullptr : dyn_cast<BinOp>(d->second);
    if (!add || add->op != BinaryOpKind::Add) return std::nullopt;
    std::string l = name_of(add->lhs.get()), r = name_of(add->rhs.get());
    const SType *lt = type_of_name(l), *rt = type_of_name(r);
    if (!lt || !rt || !lt->is_tensor() || !rt->is_tensor()) return std::nullopt;
    if (lt->elem.is_pointer && !rt->elem.is_pointer) return std::make_pair(l, r);
    if (rt->elem.is_pointer && !lt->elem.is_pointer) return std::make_pair(r, l);
    return std::nullopt;
  }

  // Whether the 1-D integer tile `offsets` holds distinct values: `tl.arange(a, b)`, or a scalar added to one
  // (the definitions as typed, followed through names assigned once).
  bool distinct_lanes(const std::string &offsets) const {
    auto definition = [&](const std::string &n) -> const Expr * {
      auto d = definition_.find(n);
      return d == definition_.end() ? nullptr : d->second;
    };
    auto is_arange = [&](const std::string &n) {
      const Expr *d = definition(n);
      auto *c = d ? dyn_cast<Call>(d) : nullptr;
      return c && builtin(*c) == "tl.arange";
    };
    if (is_arange(offsets)) return true;
    const Expr *d = definition(offsets);
    auto *add = d ? dyn_cast<BinOp>(d) : nullptr;
    if (!add || add->op != BinaryOpKind::Add) return false;
    const std::string l = name_of(add->lhs.get()), r = name_of(add->rhs.get());
    const std::string other = is_arange(l) ? r : is_arange(r) ? l : "";
    const SType *t = other.empty() ? nullptr : type_of_name(other);
    return t && (!t->is_tensor() || t->shape.empty());
  }

  std::optional<OneLane> one_lane(const Access &store, const Access &load) const {
    if (load.pointer.empty() || (load.mask_given && load.mask.empty())) return std::nullopt;
    if (call_argument(*load.call, 3, "boundary_check")) return std::nullopt;
    const SType *sp = type_of_name(store.pointer), *lp = type_of_name(load.pointer);
    if (!sp || !lp || !sp->is_tensor() || !lp->is_tensor() || sp->shape.size() != 1 || !lp->shape.empty())
      return std::nullopt;
    auto s = base_plus_offset(store.pointer), l = base_plus_offset(load.pointer);
    if (!s || !l) return std::nullopt;
    const SType *ot = type_of_name(s->second), *it = type_of_name(l->second);
    if (!ot || !it || ot->shape.size() != 1 || !it->shape.empty() || !sema::is_integer(ot->elem.dtype) ||
        !sema::is_integer(it->elem.dtype))
      return std::nullopt;
    OneLane lane;
    lane.offsets = s->second;
    lane.index = l->second;
    if (!same_value(s->first, {}, l->first, {}, lane.leaves) || !distinct_lanes(lane.offsets)) return std::nullopt;
    // (Not the index: the load reads it where it runs, computed after the store or not.)
    lane.leaves.insert({lane.offsets, name_of(store.value)});
    if (!store.mask.empty()) lane.leaves.insert(store.mask);
    return lane;
  }

  // x = tl.sum(tl.where((o == i) & M, value.to(P.dtype.element_ty), 0.0), 0), then the load's own mask and `other`.
  void record_one_lane(const Access &store, const Access &load, const std::string &value, const OneLane &lane) {
    const SourceSpan span = load.call->span;
    StmtList out;
    auto assign = [&](const std::string &target, ExprPtr e) {
      ExprList t;
      t.push_back(std::make_unique<Name>(target));
      out.push_back(std::make_unique<Assign>(std::move(t), std::move(e), load.stmt->span));
    };
    auto call = [&](const std::string &fn, ExprList args) {
      return std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>("tl"), fn), std::move(args),
                                    std::vector<Keyword>{}, span);
    };
    // Named after the buffer and the index (`PROBS_row`, `idx_lane`, `PROBS_at_idx`), the load's own name
    // being A-normal form's for an expression (`tl_load_out_plus_label`).
    const std::string base = base_of(store);
    const std::string stored = cast_as_stored(out, load, value, base + "_row");
    std::string hit = names_.fresh(lane.index + "_lane");
    ExprList index;
    index.push_back(std::make_unique<Name>(lane.index));
    assign(hit, std::make_unique<Compare>(std::make_unique<Name>(lane.offsets),
                                          std::vector<CompareOpKind>{CompareOpKind::Eq}, std::move(index), span));
    if (!store.mask.empty()) {
      const std::string kept = names_.fresh(lane.index + "_lane_stored");
      assign(kept, std::make_unique<BinOp>(BinaryOpKind::BitAnd, std::make_unique<Name>(hit),
                                           std::make_unique<Name>(store.mask), span));
      hit = kept;
    }
    const std::string picked = names_.fresh(base + "_row_at_" + lane.index);
    ExprList where;
    where.push_back(std::make_unique<Name>(hit));
    where.push_back(std::make_unique<Name>(stored));
    where.push_back(std::make_unique<FloatLit>(0.0, "0.0"));
    assign(picked, call("where", std::move(where)));
    ExprList sum;
    sum.push_back(std::make_unique<Name>(picked));
    sum.push_back(std::make_unique<IntLit>(0, "0"));
    const std::string gathered = names_.fresh(base + "_at_" + lane.index);
    assign(gathered, call("sum", std::move(sum)));
    assign(load.target, as_loaded(load, gathered));
    replace_load(store, load, std::move(out), false, true);
  }

  // Same block: `block[k]` stores, a later statement of the block (or one nested in it) loads the same addresses.
  void try_same_block(StmtList &block, size_t k) {
    std::optional<Access> st = forwardable_store(*block[k]);
    if (!st) return;
    const std::string base = base_of(*st), value = name_of(st->value);
    std::set<std::string> assigned;                   // since the store, in program order
    std::vector<const std::set<std::string> *> loops;  // what the loops around the current statement assign
    bool stop = false;                                 // a write to the buffer: later loads read it
    std::function<void(const StmtList &, size_t, bool)> walk = [&](const StmtList &list, size_t from,
                                                                   bool in_writing_loop) {
      for (size_t j = from; j < list.size() && !stop; ++j) {
        const Stmt &s = *list[j];
        if (isa<For>(&s) || isa<While>(&s)) {
          // A loop that writes the buffer anywhere: a later iteration's loads may read that write.
          const bool writes = writes_base(s, base);
          std::set<std::string> inside = assigned_in(s);
          loops.push_back(&inside);
          if (auto *f = dyn_cast<For>(&s)) walk(f->body, 0, in_writing_loop || writes);
          loops.pop_back();
          assigned.insert(inside.begin(), inside.end());
          if (writes) stop = true;
          continue;
        }
        if (auto *i = dyn_cast<If>(&s)) {
          walk(i->body, 0, in_writing_loop);
          walk(i->orelse, 0, in_writing_loop);
          std::set<std::string> inside = assigned_in(s);
          assigned.insert(inside.begin(), inside.end());
          continue;
        }
        std::optional<Access> m = access_of(s);
        if (m && m->load() && !in_writing_loop && base_of(*m) == base && !rewritten_loads_.count(&s)) {
          std::set<std::string> leaves = {value};
          auto unchanged = [&](const std::set<std::string> &names) {
            bool changed = meets(names, assigned);
            for (const std::set<std::string> *l : loops) changed = changed || meets(names, *l);
            return !changed;
          };
          if (same_lanes(*st, {}, *m, {}, leaves)) {
            if (unchanged(leaves)) record(*st, *m, value, {}, false);
          } else if (std::optional<OneLane> lane = one_lane(*st, *m); lane && unchanged(lane->leaves)) {
            record_one_lane(*st, *m, value, *lane);
          }
        }
        if (m && m->writes() && base_of(*m) == base) {
          stop = true;
          return;
        }
        std::set<std::string> here = assigned_in(s);
        assigned.insert(here.begin(), here.end());
      }
    };
    walk(block, k + 1, false);
  }

  // Whether each iteration of the loop over `var` touches through `a` and `b` addresses of its own.
  bool iterations_own(const Access &a, const Access &b, const std::string &var) const {
    if ((a.stmt == b.stmt && access_.iterations_write_apart(a.pointer, a.mask, var)) ||
        access_.iterations_own_blocks(a.pointer, b.pointer, var, a.mask, b.mask) ||
        access_.iterations_touch_their_own(a.pointer, b.pointer, var, a.mask, b.mask))
      return true;
    AccessDecision x = access_.classify(a.pointer, a.mask), y = access_.classify(b.pointer, b.mask);
    return x.walks_loop && y.walks_loop && x.walked_loop_var == var && y.walked_loop_var == var &&
           x.offset_key == y.offset_key;
  }

  // The statements of the first loop's body, before the store at `store_index`, that compute `value` from the
  // loop index and from names the body does not assign; loads in it read buffers the kernel never writes.
  // `outside`: the names it reads that the body does not assign.
  std::optional<std::vector<const Stmt *>> value_slice(const For &loop, size_t store_index, const std::string &value,
                                                       std::set<std::string> &outside) const {
    std::set<std::string> body_assigned;
    for (const StmtPtr &s : loop.body) {
      std::set<std::string> a = assigned_in(*s);
      body_assigned.insert(a.begin(), a.end());
    }
    std::set<std::string> needed;
    (body_assigned.count(value) ? needed : outside).insert(value);
    std::vector<const Stmt *> slice;
    for (size_t k = store_index; k-- > 0 && !needed.empty();) {
      const Stmt &s = *loop.body[k];
      std::set<std::string> defines = assigned_in(s);
      if (!meets(defines, needed)) continue;
      const std::string target = assigned_name(s);
      if (target.empty() || !isa<Assign>(&s)) return std::nullopt;  // an if or a loop defines it
      bool pure = true;
      visit_expr(*cast<Assign>(&s)->value, [&](const Expr &e) {
        auto *c = dyn_cast<Call>(&e);
        if (!c) return;
        std::string b = builtin(*c);
        if (b.rfind("tl.atomic_", 0) == 0 || b == "tl.store" || b == "tl.debug_barrier") pure = false;
        if (b == "tl.load") {
          std::string p = name_of(call_argument(*c, 0, "pointer"));
          if (p.empty() || access_.base_of(p).empty() || written_bases_.count(access_.base_of(p))) pure = false;
        }
      });
      if (!pure) return std::nullopt;
      needed.erase(target);
      std::set<std::string> r;
      stmt_reads(s, r);
      for (const std::string &n : r) (body_assigned.count(n) ? needed : outside).insert(n);
      slice.push_back(&s);
    }
    if (!needed.empty()) return std::nullopt;  // carried from the previous iteration, or assigned after the store
    std::reverse(slice.begin(), slice.end());
    return slice;
  }

  // Two loops: the store is `first->body[i]`, `block[a]` is the first loop; a later loop of `block` over the same
  // range loads the addresses the store wrote in the iteration with the same index.
  void try_two_loops(StmtList &block, size_t a, size_t i) {
    auto *first = cast<For>(block[a].get());
    std::optional<Access> st = forwardable_store(*first->body[i]);
    const std::string var1 = name_of(first->target.get());
    if (!st || var1.empty()) return;
    const std::string base = base_of(*st), value = name_of(st->value);
    // The store is the loop's only write to the buffer (another, later in the body or in another iteration, could
    // overwrite what it wrote), and its iterations write addresses of their own.
    int writes = 0;
    for (const StmtPtr &x : first->body) writes += writes_base(*x, base) ? 1 : 0;
    if (writes != 1 || !iterations_own(*st, *st, var1)) return;
    std::set<std::string> between;  // assigned after the first loop's end and before the load
    for (size_t b = a + 1; b < block.size(); ++b) {
      const Stmt &s = *block[b];
      auto *second = dyn_cast<For>(&s);
      if (!second || !touches_base(s, base, /*loads=*/true)) {  // (a loop over other buffers in between)
        if (writes_base(s, base)) return;
        std::set<std::string> x = assigned_in(s);
        between.insert(x.begin(), x.end());
        continue;
      }
      // A load the kernel's last write to the buffer precedes reads the buffer's final contents, which the
      // backward reads back as the forward left it (src/ad/reverse/InPlace.cpp: cheaper than computing the value
      // again): only a load that a later write makes an intermediate version is taken here.
      bool written_later = writes_base(s, base);
      for (size_t c = b + 1; c < block.size() && !written_later; ++c) written_later = writes_base(*block[c], base);
      if (written_later) try_second_loop(*first, i, *st, value, *second, between);
      return;
    }
  }

  void try_second_loop(const For &first, size_t store_index, const Access &st, const std::string &value,
                       const For &second, const std::set<std::string> &between) {
    const std::string var1 = name_of(first.target.get()), var2 = name_of(second.target.get()), base = base_of(st);
    if (var2.empty()) return;
    std::set<std::string> first_assigned = assigned_in(first), second_assigned = assigned_in(second);
    first_assigned.erase(var1);
    second_assigned.erase(var2);
    // The same range: its names unchanged from the first loop's start to the second's.
    {
      std::set<std::string> r1;
      reads(*first.iter, r1);
      if (!equal(*first.iter, *second.iter) || meets(r1, first_assigned) || meets(r1, between)) return;
    }
    // The load: a statement of the second loop's body (or of an if in it), before any write to the buffer there.
    for (size_t j = 0; j < second.body.size(); ++j) {
      for (const Stmt *c : statements_of(*second.body[j])) {
        std::optional<Access> m = access_of(*c);
        if (!m) continue;
        if (m->writes() && base_of(*m) == base) return;  // written before the load in the same iteration
        if (!m->load() || base_of(*m) != base || rewritten_loads_.count(c)) continue;
        std::set<std::string> leaves;
        if (!same_lanes(st, {var1}, *m, {var2}, leaves)) continue;
        leaves.erase(kIteration);
        if (meets(leaves, first_assigned) || meets(leaves, between) || meets(leaves, second_assigned)) continue;
        if (!later_writes_own_iterations(second, j, *m, var2, base, second_assigned)) return;
        std::set<std::string> outside;
        std::optional<std::vector<const Stmt *>> slice = value_slice(first, store_index, value, outside);
        if (!slice) return;
        outside.erase(var1);
        if (meets(outside, between) || meets(outside, second_assigned) || meets(outside, first_assigned)) return;
        // The slice again, in the second loop, under names of its own.
        std::map<std::string, std::string> rename = {{var1, var2}};
        for (const Stmt *x : *slice) rename[assigned_name(*x)] = names_.fresh(assigned_name(*x));
        StmtList prefix;
        for (const Stmt *x : *slice) {
          StmtPtr copy = clone(*x);
          auto *as = cast<Assign>(copy.get());
          cast<Name>(as->targets[0].get())->id = rename.at(assigned_name(*x));
          rewrite_expr(as->value, [&](ExprPtr &e) {
            auto *n = dyn_cast<Name>(e.get());
            if (!n) return;
            auto it = rename.find(n->id);
            if (it != rename.end()) e = std::make_unique<Name>(it->second, n->span);
          });
          if (const Stmt *o = anf_.origin_of(x)) anf_.origin[copy.get()] = o;
          prefix.push_back(std::move(copy));
        }
        auto it = rename.find(value);
        // The recomputed statements go right before the load (inside the if where the load is in one).
        record(st, *m, it == rename.end() ? value : it->second, std::move(prefix), true);
        return;
      }
    }
  }

  // The second loop's writes to the buffer: none before the load's statement `j`, and each one touching
  // addresses its own iteration's load touches (a later iteration's load must not read them). `assigned`: the
  // names the loop's body assigns.
  bool later_writes_own_iterations(const For &second, size_t j, const Access &load, const std::string &var,
                                   const std::string &base, const std::set<std::string> &assigned) const {
    for (size_t k = 0; k < second.body.size(); ++k) {
      const Stmt &s = *second.body[k];
      if (!writes_base(s, base)) continue;
      if (k < j || isa<For>(&s) || isa<While>(&s)) return false;
      for (const Stmt *w : statements_of(s)) {
        std::optional<Access> m = access_of(*w);
        if (!m || !m->writes() || base_of(*m) != base) continue;
        if (m->builtin != "tl.store" || m->pointer.empty()) return false;
        // The load's own addresses written back (an update), the loop's iterations writing apart.
        std::set<std::string> leaves;
        const bool same = same_lanes(*m, {var}, load, {var}, leaves) && !meets(leaves, assigned) &&
                          access_.iterations_write_apart(m->pointer, m->mask, var);
        if (!same && !iterations_own(*m, load, var)) return false;
      }
      if (k == j) {
        // The load's own statement (an if holding both): the write must come after the load.
        bool seen_load = false;
        for (const Stmt *x : statements_of(s)) {
          if (x == load.stmt) seen_load = true;
          std::optional<Access> m = access_of(*x);
          if (m && m->writes() && base_of(*m) == base && !seen_load) return false;
        }
      }
    }
    return true;
  }

  void apply(StmtList &block) {
    StmtList out;
    out.reserve(block.size());
    for (StmtPtr &s : block) {
      if (auto *f = dyn_cast<For>(s.get())) apply(f->body);
      if (auto *i = dyn_cast<If>(s.get())) {
        apply(i->body);
        apply(i->orelse);
      }
      if (auto *w = dyn_cast<While>(s.get())) apply(w->body);
      auto it = replacements_.find(s.get());
      if (it == replacements_.end()) {
        out.push_back(std::move(s));
        continue;
      }
      for (StmtPtr &r : it->second) out.push_back(std::move(r));
      anf_.origin.erase(s.get());
    }
    block = std::move(out);
  }
};

}  // namespace

std::vector<ForwardedLoad> forward_stored_values(AnfFunction &anf, const sema::TypeInfo &types,
                                                 const std::map<std::string, sema::SType> &name_types,
                                                 const AccessAnalysis &access, NameAllocator &names) {
  return Forwarder(anf, types, name_types, access, names).run();
}

}  // namespace tgrad::ad
