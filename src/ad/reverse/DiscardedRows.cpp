// Selections in rows a kernel computes and then throws away, dropped
// (DiscardedRows.h).
#include "src/ad/reverse/DiscardedRows.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::ad::reverse {

namespace {

// Functions whose lane (r, c) depends only on their operands' lanes (r, c), after broadcasting.
bool lane_wise_function(const Call &c) {
  static const std::set<std::string> names = {
      "exp",     "exp2",  "log",    "log2",    "sqrt",  "rsqrt", "sin",     "cos",     "tanh",    "sigmoid",
      "erf",     "abs",   "maximum", "minimum", "clamp", "fma",   "pow",     "div_rn",  "fdiv",    "sqrt_rn",
      "exp10",   "log10", "log1p",  "expm1",   "cbrt",  "tan",   "asin",    "acos",    "atan",    "atan2",
      "sinh",    "cosh",  "asinh",  "acosh",   "atanh", "erfc",  "where",   "broadcast_to", "fast_expf",
      "fast_dividef"};
  const std::string f = callee(c);
  const bool module_function = f.rfind("tl.", 0) == 0 || f.rfind("libdevice.", 0) == 0;
  return module_function && names.count(callee_last_part(c)) > 0;
}

// A store or an atomic read-modify-write: its pointer, value and mask.
struct Write {
  const Expr *value = nullptr;
  const Expr *mask = nullptr;
};

std::optional<Write> as_write(const Stmt &s) {
  auto *e = dyn_cast<ExprStmt>(&s);
  auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
  if (!c) return std::nullopt;
  const std::string f = callee(*c);
  if (f != "tl.store" && f.rfind("tl.atomic_", 0) != 0) return std::nullopt;
  Write w;
  w.value = call_argument(*c, 1, f == "tl.store" ? "value" : "val");
  w.mask = call_argument(*c, 2, "mask");
  return w;
}

class Rows {
 public:
  Rows(Function &kernel, const sema::TypeInfo &info) : kernel_(kernel), info_(info) {
    count_assignments(kernel.body, assigned_);
    for (const StmtPtr &s : kernel.body)
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1)
        if (auto *n = as_name(a->targets[0].get()); n && assigned_[n->id] == 1) top_level_[n->id] = a->value.get();
  }

  // A row predicate: a write mask's [rows, 1] conjunct, its names expanded.
  struct Predicate {
    ExprPtr expr;
    sema::Dim rows;
  };

  // Every distinct row predicate of the kernel's writes.
  std::vector<Predicate> predicates() {
    std::vector<Predicate> out;
    each_in(kernel_.body, [&](const Stmt &s) {
      std::optional<Write> w = as_write(s);
      if (!w || !w->mask || !w->value) return;
      std::vector<const Expr *> conjuncts;
      split_conjunction(*w->mask, conjuncts);
      for (const Expr *c : conjuncts) {
        const sema::SType *t = info_.type_of(c);
        if (!t || !t->is_tensor() || t->shape.size() != 2 || t->shape[1] != sema::Dim::known(1) ||
            t->shape[0] == sema::Dim::known(1))
          continue;
        ExprPtr canonical = expanded(*c);
        if (!canonical || !stable(*canonical)) continue;
        bool seen = false;
        for (const Predicate &p : out) seen |= equal(*p.expr, *canonical);
        if (!seen) out.push_back({std::move(canonical), t->shape[0]});
      }
    });
    return out;
  }

  // Drops the selections by `R` that choose only in rows discarded outside it.
  int drop(const Expr &R, const sema::Dim &rows) {
    R_ = &R;
    rows_ = rows;
    // The names that may hold discarded rows: every value assigned to them a [rows, *] tile.
    discarded_.clear();
    std::set<std::string> excluded;
    each_in(kernel_.body, [&](const Stmt &s) {
      const Expr *target = nullptr, *value = nullptr;
      if (auto *a = dyn_cast<Assign>(&s); a && a->targets.size() == 1) target = a->targets[0].get(), value = a->value.get();
      if (auto *a = dyn_cast<AugAssign>(&s)) target = a->target.get(), value = a->value.get();
      if (auto *f = dyn_cast<For>(&s)) reads(*f->target, excluded);
      if (!target) return;
      auto *n = as_name(target);
      if (!n) return reads(*target, excluded);
      (row_tile(value) ? discarded_ : excluded).insert(n->id);
    });
    for (const std::string &n : excluded) discarded_.erase(n);
    // Down to the greatest set whose every read keeps to discarded rows.
    for (bool changed = true; changed;) {
      changed = false;
      std::set<std::string> bad;
      each_in(kernel_.body, [&](const Stmt &s) { bad_reads(s, bad); });
      for (const std::string &n : bad) changed |= discarded_.erase(n) > 0;
    }
    if (discarded_.empty()) return 0;
    int dropped = 0;
    each_in(kernel_.body, [&](Stmt &s) {
      ExprPtr *value = nullptr;
      if (auto *a = dyn_cast<Assign>(&s); a && a->targets.size() == 1 && as_name(a->targets[0].get()) &&
                                          discarded_.count(as_name(a->targets[0].get())->id))
        value = &a->value;
      if (auto *a = dyn_cast<AugAssign>(&s); a && as_name(a->target.get()) && discarded_.count(as_name(a->target.get())->id))
        value = &a->value;
      if (value) dropped += drop_selections(*value);
    });
    // (`s = tl.where(R, s, b)` is now `s = s`: gone.)
    if (dropped) drop_self_assignments(kernel_.body);
    return dropped;
  }

 private:
  // Each statement at any depth, in order (a loop or an if before its body).
  template <class S, class Fn> static void each_in(S &block, const Fn &fn) {
    for (auto &s : block) {
      fn(*s);
      if (auto *i = dyn_cast<If>(s.get())) {
        each_in(i->body, fn);
        each_in(i->orelse, fn);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        each_in(f->body, fn);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        each_in(w->body, fn);
      }
    }
  }

  static void split_conjunction(const Expr &e, std::vector<const Expr *> &out) {
    if (auto *b = dyn_cast<BinOp>(&e); b && b->op == BinaryOpKind::BitAnd) {
      split_conjunction(*b->lhs, out);
      split_conjunction(*b->rhs, out);
      return;
    }
    out.push_back(&e);
  }

  // `e` with each name assigned once at the top level replaced by its value, at any depth.
  ExprPtr expanded(const Expr &e, int depth = 0) const {
    if (depth > 16) return nullptr;
    ExprPtr out = clone(e);
    bool ok = true;
    rewrite_expr(out, [&](ExprPtr &x) {
      auto *n = as_name(x.get());
      if (!n) return;
      auto it = top_level_.find(n->id);
      if (it == top_level_.end()) return;
      ExprPtr value = expanded(*it->second, depth + 1);
      if (!value) ok = false;
      else x = std::move(value);
    });
    return ok ? std::move(out) : nullptr;
  }

  // Whether an expanded predicate reads only names the kernel never assigns (parameters, modules).
  bool stable(const Expr &e) const {
    std::set<std::string> read;
    reads(e, read);
    for (const std::string &n : read)
      if (auto it = assigned_.find(n); it != assigned_.end() && it->second > 0) return false;
    return true;
  }

  bool is_predicate(const Expr &e) const {
    ExprPtr canonical = expanded(e);
    return canonical && equal(*canonical, *R_);
  }
  bool mask_implies_predicate(const Expr &mask) const {
    std::vector<const Expr *> conjuncts;
    split_conjunction(mask, conjuncts);
    for (const Expr *c : conjuncts)
      if (is_predicate(*c)) return true;
    return false;
  }

  // A [rows, *] tile.
  bool row_tile(const Expr *e) const {
    const sema::SType *t = e ? info_.type_of(e) : nullptr;
    return t && t->is_tensor() && t->shape.size() == 2 && t->shape[0] == rows_;
  }

  // The names of `discarded_` that `e` reads other than on a row-wise path (`row_wise`: `e` is on one).
  void off_path_reads(const Expr &e, bool row_wise, std::set<std::string> &bad) const {
    row_wise = row_wise && row_tile(&e);
    if (auto *n = dyn_cast<Name>(&e)) {
      if (!row_wise && discarded_.count(n->id)) bad.insert(n->id);
      return;
    }
    if (auto *a = dyn_cast<Attribute>(&e); a && (a->attr == "shape" || a->attr == "dtype" || a->attr == "type"))
      return;  // (what it reads is not the values)
    if (auto *c = dyn_cast<Call>(&e)) {
      const std::string f = callee(*c);
      if (const Expr *receiver = cast_receiver(e)) {  // (a cast: lane for lane)
        off_path_reads(*receiver, row_wise, bad);
        for (const ExprPtr &a : c->args) off_path_reads(*a, false, bad);
        for (const Keyword &k : c->keywords) off_path_reads(*k.value, false, bad);
        return;
      }
      const bool dot = f == "tl.dot";
      const bool lanes = lane_wise_function(*c);
      for (size_t k = 0; k < c->args.size(); ++k) {
        const bool broadcast_shape = callee_last_part(*c) == "broadcast_to" && k == 1;
        off_path_reads(*c->args[k], row_wise && !broadcast_shape && (lanes || (dot && (k == 0 || k == 2))), bad);
      }
      for (const Keyword &k : c->keywords) off_path_reads(*k.value, row_wise && dot && k.name == "acc", bad);
      off_path_reads(*c->func, false, bad);
      return;
    }
    // `a @ b` is a product like tl.dot's: its rows are a's, b's are contracted.
    if (auto *b = dyn_cast<BinOp>(&e); b && b->op == BinaryOpKind::MatMul) {
      off_path_reads(*b->lhs, row_wise, bad);
      off_path_reads(*b->rhs, false, bad);
      return;
    }
    const bool lanes = isa<BinOp>(&e) || isa<UnaryOp>(&e) || isa<Compare>(&e);
    auto &mutable_e = const_cast<Expr &>(e);
    for_each_child(mutable_e, [&](ExprPtr &child) { off_path_reads(*child, row_wise && lanes, bad); });
  }

  void bad_reads(const Stmt &s, std::set<std::string> &bad) const {
    if (std::optional<Write> w = as_write(s); w && w->value) {
      const bool sink = w->mask && mask_implies_predicate(*w->mask);
      auto *c = cast<Call>(cast<ExprStmt>(&s)->value.get());
      for (const ExprPtr &a : c->args) off_path_reads(*a, sink && a.get() == w->value, bad);
      for (const Keyword &k : c->keywords) off_path_reads(*k.value, sink && k.value.get() == w->value, bad);
      return;
    }
    const Expr *target = nullptr, *value = nullptr;
    if (auto *a = dyn_cast<Assign>(&s); a && a->targets.size() == 1) target = a->targets[0].get(), value = a->value.get();
    if (auto *a = dyn_cast<AugAssign>(&s)) target = a->target.get(), value = a->value.get();
    if (target && value) {
      auto *n = as_name(target);
      off_path_reads(*value, n && discarded_.count(n->id), bad);
      if (!n) off_path_reads(*target, false, bad);
      return;
    }
    // Any other statement: its own expressions (a loop's range, an if's condition), not its body's.
    if (auto *i = dyn_cast<If>(&s)) return off_path_reads(*i->cond, false, bad);
    if (auto *f = dyn_cast<For>(&s)) return off_path_reads(*f->iter, false, bad);
    if (auto *w = dyn_cast<While>(&s)) return off_path_reads(*w->cond, false, bad);
    std::set<std::string> read;
    stmt_reads(s, read);
    for (const std::string &n : read)
      if (discarded_.count(n)) bad.insert(n);
  }

  // Replaces `tl.where(R, a, b)` by `a` on the row-wise paths of `e`.
  int drop_selections(ExprPtr &e) {
    if (!row_tile(e.get())) return 0;
    int dropped = 0;
    if (auto *c = dyn_cast<Call>(e.get())) {
      if (callee(*c) == "tl.where" && c->args.size() == 3 && c->keywords.empty() && is_predicate(*c->args[0])) {
        const sema::SType *whole = info_.type_of(c), *then = info_.type_of(c->args[1].get());
        if (whole && then && whole->str() == then->str()) {
          ExprPtr chosen = std::move(c->args[1]);
          e = std::move(chosen);
          return 1 + drop_selections(e);
        }
      }
      if (ExprPtr *receiver = cast_receiver(*e)) return drop_selections(*receiver);
      const bool dot = callee(*c) == "tl.dot";
      const bool lanes = lane_wise_function(*c);
      for (size_t k = 0; k < c->args.size(); ++k)
        if ((lanes && !(callee_last_part(*c) == "broadcast_to" && k == 1)) || (dot && (k == 0 || k == 2)))
          dropped += drop_selections(c->args[k]);
      return dropped;
    }
    if (auto *b = dyn_cast<BinOp>(e.get()); b && b->op == BinaryOpKind::MatMul) return drop_selections(b->lhs);
    if (isa<BinOp>(e.get()) || isa<UnaryOp>(e.get()) || isa<Compare>(e.get()))
      for_each_child(*e, [&](ExprPtr &child) { dropped += drop_selections(child); });
    return dropped;
  }

  Function &kernel_;
  const sema::TypeInfo &info_;
  std::map<std::string, int> assigned_;
  std::map<std::string, const Expr *> top_level_;  // names assigned once, at the top level: their values
  const Expr *R_ = nullptr;
  sema::Dim rows_;
  std::set<std::string> discarded_;
};

// Whether `kernel` has both a masked write and a tl.where: without them there is nothing to drop (a cheap test
// before typing the kernel).
bool may_select_by_a_write_mask(const Function &kernel) {
  std::vector<const Expr *> masks;
  std::function<void(const StmtList &)> walk = [&](const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (std::optional<Write> w = as_write(*s); w && w->mask) masks.push_back(w->mask);
      if (auto *i = dyn_cast<If>(s.get())) walk(i->body), walk(i->orelse);
      if (auto *f = dyn_cast<For>(s.get())) walk(f->body);
      if (auto *w = dyn_cast<While>(s.get())) walk(w->body);
    }
  };
  walk(kernel.body);
  if (masks.empty()) return false;
  bool any = false;
  visit_exprs(kernel.body, [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e); c && callee(*c) == "tl.where" && !c->args.empty()) any = true;
  });
  return any;
}

}  // namespace

int drop_discarded_row_selections(Function &kernel, const Module &context, const sema::ParamTypes &types,
                                  const SourceManager &sources) {
  if (!may_select_by_a_write_mask(kernel)) return 0;
  DiagEngine quiet(sources);
  std::optional<sema::TypeInfo> info = sema::analyze(context, kernel, types, quiet);
  if (!info || quiet.has_errors()) return 0;
  Rows rows(kernel, *info);
  int dropped = 0;
  for (const Rows::Predicate &R : rows.predicates()) dropped += rows.drop(*R.expr, R.rows);
  return dropped;
}

}  // namespace tgrad::ad::reverse
