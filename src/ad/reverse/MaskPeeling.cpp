#include "src/ad/reverse/MaskPeeling.h"

#include <cstdlib>
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {
namespace {

// A run of lanes: [start, start + width - 1], with start `v` or `v * width` for
// the loop's lanes (loop = true), an invariant expression otherwise.
struct Lanes {
  bool loop = false;
  const Expr *start = nullptr;  // invariant lanes: their first value
  const Expr *width = nullptr;
};

// A condition on the loop's first lane b, of lanes [b, b + W - 1]: b + W <= bound (upper) or b >= bound (lower).
struct Constraint {
  bool upper = true;
  ExprPtr bound;
};

bool is_int(const Expr *e, uint64_t v) {
  auto *i = e ? dyn_cast<IntLit>(e) : nullptr;
  return i && i->value == v;
}

// The bounds' arithmetic without its identities (x - 0, 0 * W, (x - W) + W, (x + 1) - 1, x // 1), children first,
// so that what runs before the loop reads as a person would write it.
void simplify(ExprPtr &e) {
  for_each_child(*e, [](ExprPtr &c) { simplify(c); });
  auto *b = dyn_cast<BinOp>(e.get());
  if (!b) return;
  const bool add = b->op == BinaryOpKind::Add, sub = b->op == BinaryOpKind::Sub;
  if ((add || sub) && is_int(b->rhs.get(), 0)) {
    e = std::move(b->lhs);
  } else if (add && is_int(b->lhs.get(), 0)) {
    e = std::move(b->rhs);
  } else if (b->op == BinaryOpKind::Mul && (is_int(b->lhs.get(), 0) || is_int(b->rhs.get(), 0))) {
    e = int_lit(0);
  } else if (b->op == BinaryOpKind::Mul && is_int(b->rhs.get(), 1)) {
    e = std::move(b->lhs);
  } else if (b->op == BinaryOpKind::Mul && is_int(b->lhs.get(), 1)) {
    e = std::move(b->rhs);
  } else if (b->op == BinaryOpKind::FloorDiv && is_int(b->rhs.get(), 1)) {
    e = std::move(b->lhs);
  } else if (add || sub) {
    // (x - y) + y and (x + y) - y: x
    auto *inner = dyn_cast<BinOp>(b->lhs.get());
    if (inner && ((add && inner->op == BinaryOpKind::Sub) || (sub && inner->op == BinaryOpKind::Add)) &&
        equal(*inner->rhs, *b->rhs))
      e = std::move(inner->lhs);
  }
}

// Whether a block computes a tl.dot: only such loops are split.
bool computes_dot(const StmtList &block) {
  bool dot = false;
  visit_exprs(block, [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e)) dot |= callee(*c) == "tl.dot";
  });
  return dot;
}

class Peeler {
 public:
  // `written`: the kernel's types before any split; `generic`: its parameters whose types are representatives.
  // (`written` types the nodes of `original`, of which `kernel` is a copy.)
  Peeler(Function &kernel, NameAllocator &names, const Function &original, const sema::TypeInfo &written,
         const sema::ParamTypes &types, const std::set<std::string> &generic)
      : kernel_(kernel), names_(names) {
    count_assignments(kernel_.body, assigned_count_);
    collect(kernel_.body, assigned_count_);
    for (const auto &kv : assigned_count_) assigned_anywhere_.insert(kv.first);
    for (size_t k = 0; k < kernel_.params.size(); ++k) {
      const std::string &p = kernel_.params[k].name;
      params_.insert(p);
      // An integer whatever the representative: a tl.constexpr, a parameter given an integer type, or one the
      // kernel adds to a pointer or bounds a range() with (a float there does not compile).
      auto t = types.find(p);
      const bool given_int = !generic.count(p) && t != types.end() && t->second.is_tensor() &&
                             !t->second.elem.is_pointer && sema::is_integer(t->second.elem.dtype);
      if (kernel_.is_constexpr_param(k) || given_int) integers_.insert(p);
    }
    visit_exprs(original.body, [&](const Expr &e) {
      std::set<std::string> r;
      if (auto *b = dyn_cast<BinOp>(&e); b && (b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Sub)) {
        const sema::SType *t = written.type_of(&e);
        if (!t || !t->is_tensor() || !t->elem.is_pointer) return;
        for (const Expr *side : {b->lhs.get(), b->rhs.get()}) {
          const sema::SType *st = written.type_of(side);
          if (st && st->is_tensor() && !st->elem.is_pointer) parameters_read(*side, r);
        }
      } else if (auto *c = dyn_cast<Call>(&e); c && (callee(*c) == "range" || callee(*c) == "tl.range")) {
        for (const ExprPtr &a : c->args) parameters_read(*a, r);
      }
      integers_.insert(r.begin(), r.end());
    });
  }

  struct Split {
    size_t original = 0;              // the loop's index in the body before any split
    const For *fast = nullptr;        // the unmasked loop
    std::vector<const Expr *> order;  // its nodes before folding, in the order the written loop's body visits its own
  };
  std::vector<Split> run() {
    std::vector<Split> split;
    StmtList &body = kernel_.body;
    size_t original = 0;
    for (size_t k = 0; k < body.size(); ++k, ++original) {
      auto *f = dyn_cast<For>(body[k].get());
      if (!f) continue;
      const For *fast = nullptr;
      std::optional<StmtList> loops = peel(*f, k, fast);
      if (!loops) continue;
      const size_t n = loops->size();
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(k));
      for (size_t j = 0; j < n; ++j)
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(k + j), std::move((*loops)[j]));
      k += n - 1;
      split.push_back({original, fast, last_copy_order_});
    }
    return split;
  }

 private:
  Function &kernel_;
  NameAllocator &names_;
  std::map<std::string, const Expr *> single_;  // names assigned once in the kernel: their value
  std::vector<const Expr *> last_copy_order_;   // the last unmasked body's nodes before folding, in visit order
  std::set<std::string> integers_;              // parameters that are integers in every representative
  std::set<std::string> assigned_anywhere_;     // names the kernel assigns (others: parameters, modules like tl)
  // How often the kernel as written assigns each name (a loop's split copies only that loop's names, so a name of a
  // later loop assigned once here still is when that loop is split).
  std::map<std::string, int> assigned_count_;

  // The parameters `e` reads, through the names assigned once that it reads.
  void parameters_read(const Expr &e, std::set<std::string> &out, int depth = 0) const {
    std::set<std::string> names;
    reads(e, names);
    for (const std::string &n : names) {
      if (params_.count(n)) out.insert(n);
      else if (auto it = single_.find(n); it != single_.end() && depth < 16) parameters_read(*it->second, out, depth + 1);
    }
  }
  std::set<std::string> params_;

  void collect(const StmtList &block, const std::map<std::string, int> &count) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1)
        if (auto *n = as_name(a->targets[0].get()); n && count.at(n->id) == 1) single_[n->id] = a->value.get();
      if (auto *i = dyn_cast<If>(s.get())) {
        collect(i->body, count);
        collect(i->orelse, count);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        collect(f->body, count);
      }
    }
  }

  // Through names assigned once to what computes them (depth-limited).
  const Expr *resolve(const Expr *e) const {
    for (int depth = 0; e && depth < 16; ++depth) {
      auto *n = dyn_cast<Name>(e);
      if (!n) return e;
      auto it = single_.find(n->id);
      if (it == single_.end()) return e;
      e = it->second;
    }
    return e;
  }

  static const Expr *unbroadcast(const Expr *e) {
    auto *s = dyn_cast<Subscript>(e);
    return s && broadcast_axis(*s) != 0 ? s->value.get() : e;
  }

  // `tl.arange(0, W)`: W, else null.
  const Expr *arange_width(const Expr *e) const {
    e = resolve(e);
    auto *c = e ? dyn_cast<Call>(e) : nullptr;
    if (!c || callee(*c) != "tl.arange" || c->args.size() != 2 || !c->keywords.empty()) return nullptr;
    auto *zero = dyn_cast<IntLit>(c->args[0].get());
    return zero && zero->value == 0 ? c->args[1].get() : nullptr;
  }

  // Whether `e` is computed the same in every iteration and before the loop from scalars: parameters, program
  // ids, literals and arithmetic (through names assigned once outside the loop).
  bool invariant_scalar(const Expr &e, const std::set<std::string> &in_loop, int depth = 0) const {
    if (depth > 16) return false;
    if (isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e)) return true;
    if (auto *n = dyn_cast<Name>(&e)) {
      if (in_loop.count(n->id)) return false;
      if (params_.count(n->id)) return true;
      auto it = single_.find(n->id);
      return it != single_.end() && invariant_scalar(*it->second, in_loop, depth + 1);
    }
    if (auto *b = dyn_cast<BinOp>(&e))
      return invariant_scalar(*b->lhs, in_loop, depth + 1) && invariant_scalar(*b->rhs, in_loop, depth + 1);
    if (auto *u = dyn_cast<UnaryOp>(&e)) return invariant_scalar(*u->operand, in_loop, depth + 1);
    if (auto *c = dyn_cast<Call>(&e)) {
      const std::string f = callee(*c);
      if (f == "tl.program_id" || f == "tl.num_programs") return true;
      auto *m = dyn_cast<Attribute>(c->func.get());
      if (m && m->attr == "to") return invariant_scalar(*m->value, in_loop, depth + 1);
      if (f == "tl.cdiv" || f == "min" || f == "max" || f == "tl.multiple_of") {
        for (const ExprPtr &a : c->args)
          if (!isa<List>(a.get()) && !invariant_scalar(*a, in_loop, depth + 1)) return false;
        return true;
      }
    }
    return false;
  }

  // The lanes `e` holds, for the loop over `var` stepping `step` (null: by 1).
  std::optional<Lanes> lanes(const Expr *e, const std::string &var, const Expr *step,
                             const std::set<std::string> &in_loop) const {
    for (int depth = 0; e && depth < 8; ++depth) {  // through names and broadcasts, in any order
      const Expr *next = unbroadcast(resolve(e));
      if (next == e) break;
      e = next;
    }
    auto *b = e ? dyn_cast<BinOp>(e) : nullptr;
    if (!b || b->op != BinaryOpKind::Add) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const Expr *range = side == 0 ? b->rhs.get() : b->lhs.get();
      const Expr *start = side == 0 ? b->lhs.get() : b->rhs.get();
      const Expr *w = arange_width(range);
      if (!w) continue;
      const Expr *s = resolve(start);
      if (is_name(s, var) && step && equal(*step, *w)) return Lanes{true, nullptr, w};
      if (auto *m = dyn_cast<BinOp>(s); m && m->op == BinaryOpKind::Mul && !step) {
        const Expr *other = is_name(resolve(m->lhs.get()), var) ? m->rhs.get()
                            : is_name(resolve(m->rhs.get()), var) ? m->lhs.get()
                                                                   : nullptr;
        if (other && equal(*other, *w)) return Lanes{true, nullptr, w};
      }
      if (invariant_scalar(*start, in_loop)) return Lanes{false, start, w};
    }
    return std::nullopt;
  }

  // For a comparison that is true in all lanes exactly when the loop's first lane b is within a bound: that bound.
  std::optional<Constraint> constraint(const Compare &c, const std::string &var, const Expr *step,
                                       const std::set<std::string> &in_loop) const {
    if (c.ops.size() != 1 || c.comparators.size() != 1) return std::nullopt;
    CompareOpKind op = c.ops[0];
    if (op != CompareOpKind::Lt && op != CompareOpKind::LtE && op != CompareOpKind::Gt && op != CompareOpKind::GtE)
      return std::nullopt;
    const Expr *x = c.left.get(), *y = c.comparators[0].get();
    std::optional<Lanes> lx = lanes(x, var, step, in_loop), ly = lanes(y, var, step, in_loop);
    if (!(lx && lx->loop) && ly && ly->loop) {  // the loop's lanes on the left: mirror
      std::swap(x, y);
      std::swap(lx, ly);
      op = op == CompareOpKind::Lt ? CompareOpKind::Gt : op == CompareOpKind::LtE ? CompareOpKind::GtE
           : op == CompareOpKind::Gt ? CompareOpKind::Lt : CompareOpKind::LtE;
    }
    if (!lx || !lx->loop || (ly && ly->loop)) return std::nullopt;
    // The other side: its smallest and largest value.
    ExprPtr lo, hi;
    if (ly) {
      lo = clone(*ly->start);
      hi = binary(BinaryOpKind::Sub, binary(BinaryOpKind::Add, clone(*ly->start), clone(*ly->width)), int_lit(1));
    } else if (invariant_scalar(*unbroadcast(y), in_loop)) {
      lo = clone(*unbroadcast(y));
      hi = clone(*unbroadcast(y));
    } else {
      return std::nullopt;
    }
    // The loop's lanes are [b, b + W - 1].
    const Expr &w = *lx->width;
    (void)w;
    switch (op) {
      case CompareOpKind::Lt:  // b + W - 1 < min  <=>  b + W <= min
        return Constraint{true, std::move(lo)};
      case CompareOpKind::LtE:  // b + W - 1 <= min  <=>  b + W <= min + 1
        return Constraint{true, binary(BinaryOpKind::Add, std::move(lo), int_lit(1))};
      case CompareOpKind::Gt:  // b > max  <=>  b >= max + 1
        return Constraint{false, binary(BinaryOpKind::Add, std::move(hi), int_lit(1))};
      default:  // b >= max
        return Constraint{false, std::move(hi)};
    }
  }

  // The names assigned before statement `at` of the kernel's body, and its parameters: what code placed before
  // the loop may read.
  std::set<std::string> available_before(size_t at) const {
    std::set<std::string> out = params_;
    std::map<std::string, int> count;
    for (size_t k = 0; k < at; ++k) stmt_assignments(*kernel_.body[k], count);
    for (const auto &kv : count) out.insert(kv.first);
    return out;
  }

  std::optional<StmtList> peel(For &f, size_t at, const For *&fast) {
    auto *range = dyn_cast<Call>(f.iter.get());
    auto *var = as_name(f.target.get());
    const bool debug = std::getenv("TGRAD_DEBUG_PEEL") != nullptr;
    if (debug) std::cerr << "peel: loop " << emit::print_expr(*f.iter) << " in '" << kernel_.name << "'\n";
    if (!range || !var || (callee(*range) != "range" && callee(*range) != "tl.range") || range->args.size() < 2 ||
        range->args.size() > 3 || !computes_dot(f.body))
      return std::nullopt;
    for (const Keyword &k : range->keywords)  // (tl.range's num_stages, warp_specialize... are kept as they are)
      if (!k.value) return std::nullopt;
    const Expr *step = range->args.size() == 3 ? range->args[2].get() : nullptr;
    std::map<std::string, int> assigned_in_loop;
    count_assignments(f.body, assigned_in_loop);
    std::set<std::string> in_loop;
    for (const auto &kv : assigned_in_loop) in_loop.insert(kv.first);
    in_loop.insert(var->id);
    if (assigned_in_loop.count(var->id)) return std::nullopt;
    // The loop variable is not read after the loop (its last value is the same either way, but stay simple).
    std::set<std::string> after;
    for (size_t k = at + 1; k < kernel_.body.size(); ++k) deep_reads(*kernel_.body[k], after);
    if (after.count(var->id)) return std::nullopt;
    if (debug) std::cerr << "peel: looking at its masks\n";

    // The qualifying comparisons, and their bounds on the first lane.
    std::set<const Expr *> always_true;
    std::vector<ExprPtr> uppers, lowers;
    // Bounds of comparisons under a tl.constexpr if (a module generic over IS_CAUSAL): they bound the run only
    // where that branch is compiled, so a flag value without the causal mask keeps its whole unmasked run.
    struct Guarded {
      ExprPtr condition;
      bool upper;
      ExprPtr bound;
    };
    std::vector<Guarded> guarded;
    const std::set<std::string> available = available_before(at);
    const std::set<std::string> constexprs = constexpr_params(kernel_);
    auto on_constexprs = [&](const Expr &cond) {  // (a condition on tl.constexpr parameters, not a literal)
      std::set<std::string> r;
      reads(cond, r);
      return !r.empty() && reads_only(cond, constexprs);
    };
    // Each expression of the body with the tl.constexpr conditions it is under (null: none).
    std::vector<std::pair<const Expr *, ExprPtr>> exprs;
    std::function<void(const StmtList &, const ExprPtr &)> walk = [&](const StmtList &block, const ExprPtr &guard) {
      for (const StmtPtr &st : block) {
        if (auto *i = dyn_cast<If>(st.get()); i && on_constexprs(*i->cond)) {
          for (int side = 0; side < 2; ++side) {
            ExprPtr c = side == 0 ? clone(*i->cond) : std::make_unique<UnaryOp>(UnaryOpKind::Not, clone(*i->cond));
            if (guard) {
              ExprList both;
              both.push_back(clone(*guard));
              both.push_back(std::move(c));
              c = std::make_unique<BoolOp>(BoolOpKind::And, std::move(both));
            }
            walk(side == 0 ? i->body : i->orelse, c);
          }
          continue;
        }
        auto record = [&](const Expr &e) { exprs.emplace_back(&e, guard ? clone(*guard) : nullptr); };
        if (auto *a = dyn_cast<Assign>(st.get())) visit_expr(*a->value, record);
        else if (auto *g = dyn_cast<AugAssign>(st.get())) visit_expr(*g->value, record);
        else if (auto *x = dyn_cast<ExprStmt>(st.get())) visit_expr(*x->value, record);
        else if (auto *i = dyn_cast<If>(st.get())) visit_expr(*i->cond, record);
        else if (auto *l = dyn_cast<For>(st.get())) visit_expr(*l->iter, record);
        else if (auto *w = dyn_cast<While>(st.get())) visit_expr(*w->cond, record);
        else if (auto *r = dyn_cast<Return>(st.get()); r && r->value) visit_expr(*r->value, record);
        if (auto *i = dyn_cast<If>(st.get())) {
          walk(i->body, guard);
          walk(i->orelse, guard);
        } else if (auto *l = dyn_cast<For>(st.get())) {
          walk(l->body, guard);
        } else if (auto *w = dyn_cast<While>(st.get())) {
          walk(w->body, guard);
        }
      }
    };
    walk(f.body, nullptr);
    for (auto &entry : exprs) {
      const Expr &e = *entry.first;
      ExprPtr &guard = entry.second;
      auto *c = dyn_cast<Compare>(&e);
      if (!c) continue;
      std::optional<Constraint> k = constraint(*c, var->id, step, in_loop);
      if (debug) std::cerr << "peel: " << emit::print_expr(*c) << (k ? " qualifies" : " does not qualify") << "\n";
      if (!k) continue;
      std::set<std::string> r;
      reads(*k->bound, r);
      bool computed = true;
      for (const std::string &n : r)
        if (!available.count(n) && (in_loop.count(n) || assigned_anywhere_.count(n))) computed = false;
      if (!computed) continue;  // not yet computed before the loop
      // The same split for every representative type: the bound is an integer in all of them.
      std::set<std::string> from;
      parameters_read(*k->bound, from);
      bool integer = true;
      for (const std::string &n : from)
        if (!integers_.count(n)) {
          if (debug) std::cerr << "peel: '" << n << "' may not be an integer\n";
          integer = false;
        }
      if (!integer) continue;
      always_true.insert(&e);
      simplify(k->bound);
      if (guard) {
        auto same = [&](const Guarded &g) {
          return g.upper == k->upper && equal(*g.bound, *k->bound) && equal(*g.condition, *guard);
        };
        if (std::none_of(guarded.begin(), guarded.end(), same))
          guarded.push_back({std::move(guard), k->upper, std::move(k->bound)});
        continue;
      }
      std::vector<ExprPtr> &bounds = k->upper ? uppers : lowers;
      if (std::none_of(bounds.begin(), bounds.end(), [&](const ExprPtr &b) { return equal(*b, *k->bound); }))
        bounds.push_back(std::move(k->bound));
    }
    if (always_true.empty()) return std::nullopt;
    // A bound under an if's condition and again under its negation (both branches mask alike) holds unguarded.
    for (size_t a = 0; a < guarded.size(); ++a)
      for (size_t b = 0; b < guarded.size(); ++b) {
        if (a == b || !guarded[a].bound || !guarded[b].bound || guarded[a].upper != guarded[b].upper ||
            !equal(*guarded[a].bound, *guarded[b].bound))
          continue;
        auto *negation = dyn_cast<UnaryOp>(guarded[b].condition.get());
        if (!negation || negation->op != UnaryOpKind::Not || !equal(*negation->operand, *guarded[a].condition)) continue;
        std::vector<ExprPtr> &bounds = guarded[a].upper ? uppers : lowers;
        if (std::none_of(bounds.begin(), bounds.end(), [&](const ExprPtr &x) { return equal(*x, *guarded[a].bound); }))
          bounds.push_back(clone(*guarded[a].bound));
      }
    // A guarded bound that also holds unguarded adds nothing.
    guarded.erase(std::remove_if(guarded.begin(), guarded.end(),
                                 [&](const Guarded &g) {
                                   const std::vector<ExprPtr> &bounds = g.upper ? uppers : lowers;
                                   return std::any_of(bounds.begin(), bounds.end(),
                                                      [&](const ExprPtr &b) { return equal(*b, *g.bound); });
                                 }),
                  guarded.end());
    for (const ExprPtr &e : {std::cref(range->args[0]), std::cref(range->args[1])}) {
      std::set<std::string> r;
      reads(*e.get(), r);
      for (const std::string &n : r)
        if (in_loop.count(n) || (!available.count(n) && assigned_anywhere_.count(n))) return std::nullopt;
    }

    // Before the loop: the iteration count n and the run [first, last) of iterations whose lanes are within every
    // bound. Iteration k's first lane is b0 + k * W (b0 = lo, or lo * W for `v * W` lanes).
    const Expr &lo = *range->args[0], &hi = *range->args[1];
    const Expr &width = step ? *step : *width_of(f, var->id, in_loop);
    ExprPtr b0 = step ? clone(lo) : binary(BinaryOpKind::Mul, clone(lo), clone(width));
    auto step_expr = [&]() { return step ? clone(*step) : int_lit(1); };
    auto builtin2 = [](const char *fn, ExprPtr a, ExprPtr b) { return call(fn, list(std::move(a), std::move(b))); };
    StmtList out;
    const std::string n = names_.fresh(var->id + "_count");
    // n = (max(hi - lo, 0) + step - 1) // step
    out.push_back(assign(n, binary(BinaryOpKind::FloorDiv,
                                   binary(BinaryOpKind::Sub,
                                          binary(BinaryOpKind::Add,
                                                 builtin2("max", binary(BinaryOpKind::Sub, clone(hi), clone(lo)), int_lit(0)),
                                                 step_expr()),
                                          int_lit(1)),
                                   step_expr())));
    out.back()->leading_comment =
        "The iterations whose lanes are all within the masks' bounds run without them (src/ad/reverse/MaskPeeling.h)";
    std::string first, last;
    const bool guarded_lowers = std::any_of(guarded.begin(), guarded.end(), [](const Guarded &g) { return !g.upper; });
    auto first_of = [&](ExprPtr l) {  // (max(L - b0, 0) + W - 1) // W: the first iteration whose lanes are >= L
      return binary(BinaryOpKind::FloorDiv,
                    binary(BinaryOpKind::Sub,
                           binary(BinaryOpKind::Add,
                                  builtin2("max", binary(BinaryOpKind::Sub, std::move(l), clone(*b0)), int_lit(0)),
                                  clone(width)),
                           int_lit(1)),
                    clone(width));
    };
    auto last_of = [&](ExprPtr u) {  // max(U - b0, 0) // W: the iterations whose last lane is < U (b + W <= U)
      return binary(BinaryOpKind::FloorDiv,
                    builtin2("max", binary(BinaryOpKind::Sub, std::move(u), clone(*b0)), int_lit(0)), clone(width));
    };
    if (lowers.empty() && guarded_lowers) {
      first = names_.fresh(var->id + "_first_unmasked");
      out.push_back(assign(first, int_lit(0)));
    }
    if (!lowers.empty()) {
      // first = min(n, (max(L - b0, 0) + W - 1) // W) for each lower bound L: the largest.
      ExprPtr f_expr;
      for (ExprPtr &l : lowers) {
        ExprPtr k = first_of(std::move(l));
        f_expr = f_expr ? builtin2("max", std::move(f_expr), std::move(k)) : std::move(k);
      }
      first = names_.fresh(var->id + "_first_unmasked");
      out.push_back(assign(first, builtin2("min", name(n), std::move(f_expr))));
    }
    for (Guarded &g : guarded)
      if (!g.upper) {
        StmtList then;
        ExprPtr bounded = builtin2("min", name(n), builtin2("max", name(first), first_of(std::move(g.bound))));
        simplify(bounded);
        then.push_back(assign(first, std::move(bounded)));
        out.push_back(std::make_unique<If>(std::move(g.condition), std::move(then), StmtList{}));
      }
    {
      // last = max(first, min(n, max(U - b0, 0) // W)) for each upper bound U (b + W <= U): the smallest.
      ExprPtr l_expr = name(n);
      for (ExprPtr &u : uppers) l_expr = builtin2("min", std::move(l_expr), last_of(std::move(u)));
      if (!first.empty()) l_expr = builtin2("max", name(first), std::move(l_expr));
      last = names_.fresh(var->id + "_last_unmasked");
      out.push_back(assign(last, std::move(l_expr)));
      for (Guarded &g : guarded)
        if (g.upper) {
          ExprPtr bounded = builtin2("min", name(last), last_of(std::move(g.bound)));
          if (!first.empty()) bounded = builtin2("max", name(first), std::move(bounded));
          simplify(bounded);
          StmtList then;
          then.push_back(assign(last, std::move(bounded)));
          out.push_back(std::make_unique<If>(std::move(g.condition), std::move(then), StmtList{}));
        }
    }
    auto at_iteration = [&](const std::string &k) {
      ExprPtr at = binary(BinaryOpKind::Add, clone(lo), binary(BinaryOpKind::Mul, name(k), step_expr()));
      simplify(at);
      return at;
    };
    // The masked loops run a few iterations (a ragged tail, the blocks on a causal diagonal): software
    // pipelining gives them shared-memory buffers of their own for next to nothing, and three pipelined copies
    // of a loop with several dots ran slower than one (attention's dK/dV owner on the H100: 0.367 ms masked,
    // 0.427 split, 0.340 split with the masked loops at num_stages=1). Unless the loop chose its stages itself.
    const bool own_stages = std::any_of(range->keywords.begin(), range->keywords.end(),
                                        [](const Keyword &k) { return k.name == "num_stages"; });
    auto loop = [&](ExprPtr from, ExprPtr to, StmtList body, bool masked) {
      const bool unpipelined = masked && !own_stages;
      auto r = std::make_unique<Call>(unpipelined ? dotted_name("tl.range") : clone(*range->func),
                                      list(std::move(from), std::move(to)), std::vector<Keyword>{});
      if (step) r->args.push_back(clone(*step));
      for (const Keyword &k : range->keywords) r->keywords.push_back({k.name, k.name_span, clone(*k.value)});
      if (unpipelined) r->keywords.push_back({"num_stages", {}, int_lit(1)});
      auto l = std::make_unique<For>(clone(*f.target), std::move(r), std::move(body), f.span);
      return l;
    };
    for (StmtPtr &st : out)
      if (auto *a = dyn_cast<Assign>(st.get())) simplify(a->value);
    if (!first.empty()) {
      out.push_back(loop(clone(lo), at_iteration(first), clone(f.body), true));
      out.back()->leading_comment = "Masked: the iterations before the run";
    }
    out.push_back(loop(first.empty() ? clone(lo) : at_iteration(first), at_iteration(last), unmasked(f.body, always_true), false));
    fast = cast<For>(out.back().get());
    out.back()->leading_comment = f.leading_comment.empty() ? "Unmasked: every lane within the bounds"
                                                             : f.leading_comment + "\n(unmasked: every lane within the bounds)";
    out.push_back(loop(at_iteration(last), clone(hi), clone(f.body), true));
    out.back()->leading_comment = "Masked: the iterations after the run";
    return out;
  }

  // For `range(lo, hi)` over `v * W + tl.arange(0, W)` lanes: W (the width of the first such lanes).
  const Expr *width_of(const For &f, const std::string &var, const std::set<std::string> &in_loop) const {
    const Expr *w = nullptr;
    visit_exprs(f.body, [&](const Expr &e) {
      if (w) return;
      if (auto *c = dyn_cast<Compare>(&e); c && c->comparators.size() == 1)
        for (const Expr *side : {c->left.get(), c->comparators[0].get()})
          if (std::optional<Lanes> l = lanes(side, var, nullptr, in_loop); l && l->loop) w = l->width;
    });
    return w;
  }

  // `body` with the comparisons in `always_true` replaced by True, and what that makes trivial folded: a load or
  // store's mask (and a load's `other`), `x & True`, names assigned True.
  StmtList unmasked(const StmtList &body, const std::set<const Expr *> &always_true) {
    // Mark the comparisons in a copy by position: clone, then walk both in the same order.
    StmtList copy = clone(body);
    std::vector<const Expr *> order;
    visit_exprs(body, [&](const Expr &e) { order.push_back(&e); });
    size_t index = 0;
    std::set<size_t> marked;
    for (const Expr *e : order) {
      if (always_true.count(e)) marked.insert(index);
      ++index;
    }
    std::vector<Expr *> copy_order;
    visit_exprs(copy, [&](const Expr &e) { copy_order.push_back(const_cast<Expr *>(&e)); });
    last_copy_order_.assign(copy_order.begin(), copy_order.end());
    std::set<const Expr *> targets;
    for (size_t k : marked)
      if (k < copy_order.size()) targets.insert(copy_order[k]);
    rewrite_exprs(copy, [&](ExprPtr &e) {
      if (targets.count(e.get())) e = std::make_unique<BoolLit>(true);
    });
    // Names assigned True (once in the kernel, anywhere in this body) read as True, to a fixed point: `visible =
    // (offs_m >= offs_n) & keep` becomes `True & True`, then True.
    auto is_true = [](const Expr *e) {
      auto *b = e ? dyn_cast<BoolLit>(e) : nullptr;
      return b && b->value;
    };
    std::set<std::string> true_names;
    std::function<void(const StmtList &, bool &)> collect_true = [&](const StmtList &block, bool &grew) {
      for (const StmtPtr &s : block) {
        if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && is_true(a->value.get()))
          if (auto *nm = as_name(a->targets[0].get()); nm && assigned_count_[nm->id] == 1 && true_names.insert(nm->id).second)
            grew = true;
        if (auto *i = dyn_cast<If>(s.get())) {
          collect_true(i->body, grew);
          collect_true(i->orelse, grew);
        } else if (auto *f = dyn_cast<For>(s.get())) {
          collect_true(f->body, grew);
        }
      }
    };
    for (bool grew = true; grew;) {
      grew = false;
      collect_true(copy, grew);
      rewrite_exprs(copy, [&](ExprPtr &e) {
        if (auto *nm = dyn_cast<Name>(e.get()); nm && true_names.count(nm->id)) e = std::make_unique<BoolLit>(true);
      });
      rewrite_exprs(copy, [&](ExprPtr &e) {
        if (auto *b = dyn_cast<BinOp>(e.get()); b && b->op == BinaryOpKind::BitAnd) {
          if (is_true(b->lhs.get())) e = std::move(b->rhs);
          else if (is_true(b->rhs.get())) e = std::move(b->lhs);
        }
      });
    }
    rewrite_exprs(copy, [&](ExprPtr &e) {
      auto *c = dyn_cast<Call>(e.get());
      if (!c) return;
      const std::string fn = callee(*c);
      if (fn != "tl.load" && fn != "tl.store" && fn.rfind("tl.atomic_", 0) != 0) return;
      bool drop = false;
      for (const Keyword &k : c->keywords) drop |= k.name == "mask" && is_true(k.value.get());
      if (!drop) return;
      std::vector<Keyword> kept;
      for (Keyword &k : c->keywords)
        if (k.name != "mask" && !(fn == "tl.load" && k.name == "other")) kept.push_back(std::move(k));
      c->keywords = std::move(kept);
    });
    // The assignments of True are read nowhere now.
    std::function<void(StmtList &)> drop_true = [&](StmtList &block) {
      for (size_t k = block.size(); k-- > 0;) {
        if (auto *a = dyn_cast<Assign>(block[k].get()); a && a->targets.size() == 1 && is_true(a->value.get()))
          if (auto *nm = as_name(a->targets[0].get()); nm && true_names.count(nm->id)) {
            erase_keeping_comment(block, k);
            continue;
          }
        if (auto *i = dyn_cast<If>(block[k].get())) {
          drop_true(i->body);
          drop_true(i->orelse);
        } else if (auto *f = dyn_cast<For>(block[k].get())) {
          drop_true(f->body);
        }
      }
    };
    drop_true(copy);
    return copy;
  }
};

// Whether every value the unmasked loop computes that is not a mask has the type (dtype and shape) its
// counterpart has in the loop as written: a comparison replaced by True is a scalar, which must not change the
// shape of a value that reads it (`tl.where(mask, x_col, 0.0)` with x_col smaller than the mask, summed later).
// `origin`: each node of the unmasked body to its counterpart in the written one.
bool same_types(const StmtList &fast, const sema::TypeInfo &fast_types, const sema::TypeInfo &written_types,
                const std::map<const Expr *, const Expr *> &origin) {
  bool ok = true;
  visit_exprs(fast, [&](const Expr &e) {
    if (!ok || isa<BoolLit>(&e)) return;
    auto o = origin.find(&e);
    if (o == origin.end()) return;
    const sema::SType *before = written_types.type_of(o->second), *after = fast_types.type_of(&e);
    if (!before || !after) return;
    const bool mask = before->is_tensor() && before->elem.dtype == sema::DType::Int1 && !before->elem.is_pointer;
    if (mask || before->str() == after->str()) return;
    if (std::getenv("TGRAD_DEBUG_PEEL"))
      std::cerr << "peel: '" << emit::print_expr(e) << "' " << before->str() << " -> " << after->str() << "\n";
    ok = false;
  });
  return ok;
}

}  // namespace

int peel_masked_iterations(Function &kernel, NameAllocator &names, const Module &context,
                           const sema::ParamTypes &types, const std::set<std::string> &generic,
                           const SourceManager &sources) {
  // Peeler::run splits only loops at the kernel's top level that compute a
  // tl.dot (Peeler::peel returns at once for any other, before it names
  // anything): without one there is nothing to split, and the typing of the
  // whole kernel below (a long straight-line backward's largest cost) and the
  // copy of its names would decide nothing.
  if (std::none_of(kernel.body.begin(), kernel.body.end(), [](const StmtPtr &s) {
        auto *f = dyn_cast<For>(s.get());
        return f && computes_dot(f->body);
      }))
    return 0;
  DiagEngine quiet(sources), quiet_too(sources);
  std::optional<sema::TypeInfo> written = sema::analyze(context, kernel, types, quiet);
  if (!written || quiet.has_errors()) return 0;
  std::unique_ptr<Function> peeled = clone(kernel);
  NameAllocator trial = names;
  const std::vector<Peeler::Split> split = Peeler(*peeled, trial, kernel, *written, types, generic).run();
  if (split.empty()) return 0;
  std::optional<sema::TypeInfo> after = sema::analyze(context, *peeled, types, quiet_too);
  const bool debug = std::getenv("TGRAD_DEBUG_PEEL") != nullptr;
  if (!after || quiet_too.has_errors()) {
    if (debug) {
      quiet_too.print_all(std::cerr);
      std::cerr << emit::print_function(*peeled);
    }
    return 0;
  }
  for (const auto &sp : split) {
    std::vector<const Expr *> written_order;
    visit_exprs(cast<For>(kernel.body[sp.original].get())->body, [&](const Expr &e) { written_order.push_back(&e); });
    if (written_order.size() != sp.order.size()) return 0;
    std::map<const Expr *, const Expr *> origin;
    for (size_t k = 0; k < written_order.size(); ++k) origin[sp.order[k]] = written_order[k];
    if (!same_types(sp.fast->body, *after, *written, origin)) {
      if (debug) std::cerr << "peel: a type changes in '" << kernel.name << "'\n";
      return 0;
    }
  }
  // `tl.where(True, a, b)` is `a` where `a` has the where's type (its mask added no dimension).
  for (const auto &sp : split) {
    rewrite_exprs(const_cast<For *>(sp.fast)->body, [&](ExprPtr &e) {
      auto *c = dyn_cast<Call>(e.get());
      if (!c || callee(*c) != "tl.where" || c->args.size() != 3 || !c->keywords.empty()) return;
      auto *cond = dyn_cast<BoolLit>(c->args[0].get());
      const sema::SType *whole = after->type_of(c), *then = after->type_of(c->args[1].get());
      if (cond && cond->value && whole && then && whole->str() == then->str()) e = std::move(c->args[1]);
    });
    // (`s = tl.where(mask, s, 0.0)` is now `s = s`: gone; an if that only masked too.)
    drop_self_assignments(const_cast<For *>(sp.fast)->body);
  }
  kernel.body = std::move(peeled->body);
  names = trial;
  return static_cast<int>(split.size());
}

}  // namespace tgrad::ad::reverse
