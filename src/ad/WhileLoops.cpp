#include "src/ad/WhileLoops.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/ad/reverse/AstHelpers.h"
#include "src/lower/Walk.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

using reverse::assign;
using reverse::list;
using reverse::name;

// The counted loop's new nodes carry the while loop's span: an error in them points at the loop.
ExprPtr integer(long long v, SourceSpan span) {
  if (v < 0) return std::make_unique<UnaryOp>(UnaryOpKind::Neg, integer(-v, span), span);
  return std::make_unique<IntLit>(static_cast<uint64_t>(v), std::to_string(v), span);
}
ExprPtr binop(BinaryOpKind op, ExprPtr a, ExprPtr b, SourceSpan span) {
  return reverse::binary(op, std::move(a), std::move(b), span);
}
ExprPtr call(const std::string &callee, ExprList args, SourceSpan span) {
  return reverse::call(callee, std::move(args), {}, span);
}
ExprPtr compare(ExprPtr a, CompareOpKind op, ExprPtr b, SourceSpan span) {
  return std::make_unique<Compare>(std::move(a), std::vector<CompareOpKind>{op}, list(std::move(b)), span);
}
ExprPtr where(ExprPtr c, ExprPtr a, ExprPtr b, SourceSpan span) {
  return call("tl.where", list(std::move(c), std::move(a), std::move(b)), span);
}
// Whether a statement of `block`, at any depth, is one `pred` holds for.
bool any_statement(const StmtList &block, const std::function<bool(const Stmt &)> &pred) {
  for (const StmtPtr &s : block) {
    if (pred(*s)) return true;
    if (auto *i = dyn_cast<If>(s.get()); i && (any_statement(i->body, pred) || any_statement(i->orelse, pred)))
      return true;
    if (auto *f = dyn_cast<For>(s.get()); f && any_statement(f->body, pred)) return true;
    if (auto *w = dyn_cast<While>(s.get()); w && any_statement(w->body, pred)) return true;
  }
  return false;
}

bool reads_name(const Expr &e, const std::string &id) {
  bool found = false;
  visit_expr(e, [&](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x); n && n->id == id) found = true;
  });
  return found;
}

// Whether `e` reads nothing the loop body changes and nothing from memory: it
// has the same value before the loop and at each test of the condition. Its
// calls must be Triton's own (not loads or atomics) or min/max: a jit helper
// may read memory the body writes.
bool invariant(const Expr &e, const std::map<std::string, int> &changed) {
  bool ok = true;
  visit_expr(e, [&](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x); n && changed.count(n->id)) ok = false;
    if (auto *c = dyn_cast<Call>(&x)) {
      const std::string callee = emit::print_expr(*c->func);
      const bool triton = callee.rfind("tl.", 0) == 0 || callee.rfind("triton.", 0) == 0;
      if (!(triton || callee == "min" || callee == "max") || callee.find("load") != std::string::npos ||
          callee.find("atomic") != std::string::npos)
        ok = false;
    }
  });
  return ok;
}

// The comparisons of the condition, sorted: v's bounds and the tests without v.
struct Bounds {
  std::vector<const Expr *> below, below_or_equal;  // v < e, v <= e (upper bounds)
  std::vector<const Expr *> above, above_or_equal;  // v > e, v >= e (lower bounds)
  std::vector<const Expr *> other;                  // conditions that do not read v
};

// `l op r` as a bound of v (or a condition without v); false if it reads v otherwise.
bool add_comparison(const Expr &l, CompareOpKind op, const Expr &r, const std::string &v, Bounds &out,
                    const std::map<std::string, int> &changed, const Expr &whole) {
  auto *ln = dyn_cast<Name>(&l);
  auto *rn = dyn_cast<Name>(&r);
  const Expr *bound = nullptr;
  CompareOpKind o = op;
  if (ln && ln->id == v && !reads_name(r, v)) {
    bound = &r;
  } else if (rn && rn->id == v && !reads_name(l, v)) {
    bound = &l;
    switch (op) {  // e op v  ==  v flipped(op) e
      case CompareOpKind::Lt: o = CompareOpKind::Gt; break;
      case CompareOpKind::LtE: o = CompareOpKind::GtE; break;
      case CompareOpKind::Gt: o = CompareOpKind::Lt; break;
      case CompareOpKind::GtE: o = CompareOpKind::LtE; break;
      default: return false;
    }
  } else if (!reads_name(l, v) && !reads_name(r, v)) {
    if (!invariant(whole, changed)) return false;
    out.other.push_back(&whole);
    return true;
  } else {
    return false;
  }
  if (!invariant(*bound, changed)) return false;
  switch (o) {
    case CompareOpKind::Lt: out.below.push_back(bound); return true;
    case CompareOpKind::LtE: out.below_or_equal.push_back(bound); return true;
    case CompareOpKind::Gt: out.above.push_back(bound); return true;
    case CompareOpKind::GtE: out.above_or_equal.push_back(bound); return true;
    default: return false;
  }
}

bool add_conjuncts(const Expr &cond, const std::string &v, Bounds &out, const std::map<std::string, int> &changed) {
  if (auto *b = dyn_cast<BoolOp>(&cond)) {
    if (b->op != BoolOpKind::And) return false;
    for (const ExprPtr &e : b->values)
      if (!add_conjuncts(*e, v, out, changed)) return false;
    return true;
  }
  if (auto *c = dyn_cast<Compare>(&cond)) {
    const Expr *left = c->left.get();
    for (size_t k = 0; k < c->ops.size(); ++k) {
      // A chained comparison `a < v < b` is `a < v and v < b`; a single one is the whole condition.
      if (!add_comparison(*left, c->ops[k], *c->comparators[k], v, out, changed, cond)) return false;
      left = c->comparators[k].get();
    }
    return true;
  }
  if (reads_name(cond, v) || !invariant(cond, changed)) return false;
  out.other.push_back(&cond);
  return true;
}

// A step as written: `v += amount` (or `v = v + amount`), or `v -= amount` (subtract).
struct Step {
  std::string variable;
  ExprPtr amount;
  bool subtract = false;
};

// The step of a body's last statement, if it is one.
std::optional<Step> stepped_variable(const Stmt &last) {
  if (auto *a = dyn_cast<AugAssign>(&last)) {
    auto *v = dyn_cast<Name>(a->target.get());
    if (!v || (a->op != BinaryOpKind::Add && a->op != BinaryOpKind::Sub)) return std::nullopt;
    return Step{v->id, clone(*a->value), a->op == BinaryOpKind::Sub};
  }
  if (auto *a = dyn_cast<Assign>(&last)) {
    if (a->targets.size() != 1) return std::nullopt;
    auto *v = dyn_cast<Name>(a->targets[0].get());
    auto *sum = dyn_cast<BinOp>(a->value.get());
    if (!v || !sum || (sum->op != BinaryOpKind::Add && sum->op != BinaryOpKind::Sub)) return std::nullopt;
    auto *l = dyn_cast<Name>(sum->lhs.get());
    auto *r = dyn_cast<Name>(sum->rhs.get());
    if (l && l->id == v->id) return Step{v->id, clone(*sum->rhs), sum->op == BinaryOpKind::Sub};
    if (r && r->id == v->id && sum->op == BinaryOpKind::Add) return Step{v->id, clone(*sum->lhs), false};
  }
  return std::nullopt;
}

// The sign of an amount written as a number (`1`, `-1`) or a grid size; 0 where only the run knows it.
int known_sign(const Expr &amount) {
  if (auto *i = dyn_cast<IntLit>(&amount)) return i->value > 0 ? 1 : 0;
  // A grid size (`pid += tl.num_programs(0)`, the persistent kernel's step) is at least one.
  if (auto *c = dyn_cast<Call>(&amount); c && emit::print_expr(*c->func) == "tl.num_programs") return 1;
  if (auto *u = dyn_cast<UnaryOp>(&amount); u && u->op == UnaryOpKind::Neg) return -known_sign(*u->operand);
  return 0;
}

bool is_literal(const Expr &e, uint64_t value) {
  auto *i = dyn_cast<IntLit>(&e);
  return i && i->value == value;
}

// `a - b`, folded where b is 0 or a negative number.
ExprPtr difference(ExprPtr a, ExprPtr b, SourceSpan span) {
  if (is_literal(*b, 0)) return a;
  if (auto *u = dyn_cast<UnaryOp>(b.get()); u && u->op == UnaryOpKind::Neg && isa<IntLit>(u->operand.get()))
    return binop(BinaryOpKind::Add, std::move(a), clone(*u->operand), span);
  return binop(BinaryOpKind::Sub, std::move(a), std::move(b), span);
}

// `e + k` for an integer k, folded where e is a number.
ExprPtr plus(ExprPtr e, long long k, SourceSpan span) {
  if (k == 0) return e;
  if (auto *i = dyn_cast<IntLit>(e.get()); i && i->value < (1ull << 62)) return integer(static_cast<long long>(i->value) + k, span);
  return binop(k > 0 ? BinaryOpKind::Add : BinaryOpKind::Sub, std::move(e), integer(k > 0 ? k : -k, span), span);
}

class Rewriter {
 public:
  explicit Rewriter(const Function &fn) {
    lower::collect_names(fn.body, taken_);
    for (const Param &p : fn.params) taken_.insert(p.name);
  }

  bool changed() const { return changed_; }

  StmtList block(const StmtList &in) {
    StmtList out;
    for (const StmtPtr &s : in) statement(*s, out);
    return out;
  }

 private:
  void statement(const Stmt &s, StmtList &out) {
    if (auto *i = dyn_cast<If>(&s)) {
      auto copy = std::make_unique<If>(clone(*i->cond), block(i->body), block(i->orelse), i->span);
      copy->guards_early_return = i->guards_early_return;
      out.push_back(std::move(copy));
      return;
    }
    if (auto *f = dyn_cast<For>(&s)) {
      out.push_back(std::make_unique<For>(clone(*f->target), clone(*f->iter), block(f->body), f->span));
      return;
    }
    auto *w = dyn_cast<While>(&s);
    if (!w) {
      out.push_back(clone(s));
      return;
    }
    StmtList body = block(w->body);  // inner while loops first
    if (!counted(*w, body, out)) out.push_back(std::make_unique<While>(clone(*w->cond), std::move(body), w->span));
  }

  std::string fresh(const std::string &base) {
    std::string n = base;
    for (int k = 2; taken_.count(n); ++k) n = base + "_" + std::to_string(k);
    taken_.insert(n);
    return n;
  }

  // Appends the counted form of `w` (its body already rewritten: `body`) to `out`; false where it does not apply.
  bool counted(const While &w, StmtList &body, StmtList &out) {
    if (body.empty()) return false;
    std::optional<Step> step = stepped_variable(*body.back());
    if (!step) return false;
    const std::string v = step->variable;
    const Expr &amount = *step->amount;
    std::map<std::string, int> changed;
    count_assignments(body, changed);
    if (changed[v] != 1 || !invariant(amount, changed) || reads_name(amount, v)) return false;
    // A float step (`t += 0.5`) counts no integer trips; such a loop is refused as it stands.
    bool float_step = false;
    visit_expr(amount, [&](const Expr &x) { float_step |= isa<FloatLit>(&x); });
    if (float_step) return false;
    if (any_statement(body, [](const Stmt &x) { return isa<Return>(&x); })) return false;
    Bounds bounds;
    if (!add_conjuncts(*w.cond, v, bounds, changed)) return false;
    // The sign of the step v takes (the amount's, or its opposite for `-=`).
    const int sign = known_sign(amount) * (step->subtract ? -1 : 1);
    const bool has_upper = !bounds.below.empty() || !bounds.below_or_equal.empty();
    const bool has_lower = !bounds.above.empty() || !bounds.above_or_equal.empty();
    if ((sign > 0 && !has_upper) || (sign < 0 && !has_lower) || (!has_upper && !has_lower)) return false;

    const SourceSpan span = w.span;
    const std::string start = fresh(v + "_start"), trips = fresh(v + "_trips"), k = fresh(v + "_k");
    // `e` moved by `times` steps: e + times * amount (e - ... for `-=`).
    auto stepped = [&](ExprPtr e, ExprPtr times) {
      return binop(step->subtract ? BinaryOpKind::Sub : BinaryOpKind::Add, std::move(e),
                   binop(BinaryOpKind::Mul, std::move(times), clone(amount), span), span);
    };
    // The step's size upwards (`amount`, or `-amount` for `-=`) and downwards (the opposite).
    auto negated = [&]() { return std::make_unique<UnaryOp>(UnaryOpKind::Neg, clone(amount), span); };
    auto upwards = [&]() -> ExprPtr { return step->subtract ? ExprPtr(negated()) : clone(amount); };
    auto downwards = [&]() -> ExprPtr { return step->subtract ? clone(amount) : ExprPtr(negated()); };
    // v_start = v
    out.push_back(assign(start, name(v, span), span));
    // Whether the first test passes (the loop runs at all): the condition at v_start.
    ExprPtr enter = clone(*w.cond);
    rewrite_expr(enter, [&](ExprPtr &e) {
      if (auto *n = dyn_cast<Name>(e.get()); n && n->id == v) e = name(start, n->span);
    });
    // The steps from v_start up to the least exclusive upper bound (v < e; v <= e is v < e + 1):
    // cdiv(limit - v_start, size) = (limit - v_start + size - 1) // size.
    auto up = [&]() {
      ExprList args;
      for (const Expr *b : bounds.below) args.push_back(clone(*b));
      for (const Expr *b : bounds.below_or_equal) args.push_back(plus(clone(*b), 1, span));
      ExprPtr limit = args.size() == 1 ? std::move(args.front()) : call("min", std::move(args), span);
      ExprPtr distance = binop(BinaryOpKind::Sub, std::move(limit), name(start, span), span);
      if (sign > 0 && !step->subtract && is_literal(amount, 1)) return distance;  // steps of one: the distance
      ExprPtr numerator = plus(step->subtract ? binop(BinaryOpKind::Sub, std::move(distance), clone(amount), span)
                                              : binop(BinaryOpKind::Add, std::move(distance), clone(amount), span),
                               -1, span);
      ExprPtr size = sign > 0 ? upwards() : call("tl.maximum", list(upwards(), integer(1, span)), span);
      return binop(BinaryOpKind::FloorDiv, std::move(numerator), std::move(size), span);
    };
    // ... down to the greatest exclusive lower bound (v > e; v >= e is v > e - 1):
    // cdiv(v_start - limit, size) = (v_start - limit + size - 1) // size, size the step's size downwards.
    auto down = [&]() {
      ExprList args;
      for (const Expr *b : bounds.above) args.push_back(clone(*b));
      for (const Expr *b : bounds.above_or_equal) args.push_back(plus(clone(*b), -1, span));
      ExprPtr limit = args.size() == 1 ? std::move(args.front()) : call("max", std::move(args), span);
      ExprPtr distance = difference(name(start, span), std::move(limit), span);
      if (sign < 0 && step->subtract && is_literal(amount, 1)) return distance;
      ExprPtr numerator = plus(step->subtract ? binop(BinaryOpKind::Add, std::move(distance), clone(amount), span)
                                              : binop(BinaryOpKind::Sub, std::move(distance), clone(amount), span),
                               -1, span);
      ExprPtr size = sign < 0 ? downwards() : call("tl.maximum", list(downwards(), integer(1, span)), span);
      return binop(BinaryOpKind::FloorDiv, std::move(numerator), std::move(size), span);
    };
    ExprPtr count;
    if (sign > 0) {
      count = up();
    } else if (sign < 0) {
      count = down();
    } else {
      // The step's sign is known at run time only. A zero step runs the forward forever once entered, and so does
      // a step away from the only bound there is (until v overflows, its addresses far outside any tensor).
      auto rising = [&]() {
        return compare(clone(amount), step->subtract ? CompareOpKind::Lt : CompareOpKind::Gt, integer(0, span), span);
      };
      auto falling = [&]() {
        return compare(clone(amount), step->subtract ? CompareOpKind::Gt : CompareOpKind::Lt, integer(0, span), span);
      };
      if (!has_lower)
        count = where(rising(), up(), integer(0, span), span);
      else if (!has_upper)
        count = where(falling(), down(), integer(0, span), span);
      else
        count = where(rising(), up(), where(falling(), down(), integer(0, span), span), span);
    }
    out.push_back(assign(trips, where(std::move(enter), std::move(count), integer(0, span), span), span));
    // for v_k in range(0, v_trips): v = v_start + v_k * step; body
    StmtList loop_body;
    loop_body.push_back(assign(v, stepped(name(start, span), name(k, span)), span));
    body.pop_back();
    for (StmtPtr &s : body) loop_body.push_back(std::move(s));
    out.push_back(std::make_unique<For>(name(k, span), call("range", list(integer(0, span), name(trips, span)), span),
                                        std::move(loop_body), span));
    // v as the while loop leaves it: the first value that fails the condition (v_start where it never ran).
    out.push_back(assign(v, stepped(name(start, span), name(trips, span)), span));
    changed_ = true;
    return true;
  }

  std::set<std::string> taken_;
  bool changed_ = false;
};

}  // namespace

std::unique_ptr<Function> while_loops_as_counted_fors(const Function &fn) {
  if (!any_statement(fn.body, [](const Stmt &s) { return isa<While>(&s); })) return nullptr;
  Rewriter r(fn);
  StmtList body = r.block(fn.body);
  if (!r.changed()) return nullptr;
  std::unique_ptr<Function> out = clone_signature(fn);
  out->body = std::move(body);
  return out;
}

}  // namespace tgrad::ad
