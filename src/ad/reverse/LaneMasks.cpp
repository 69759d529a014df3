// Lane masks: NaN safety for adjoints that are zero in the lanes the forward
// discarded (Engine.h, "Lane masks").
//
// A kernel pads a ragged tile with values of its choosing (`other=-inf` for
// a max, 0.0 for a sum) and later discards those lanes: a `tl.where`, a
// store's mask. The forward's results are finite; its intermediate values in
// the padding lanes need not be (`-inf - -inf` is NaN, `log(0.0)` is -inf).
// The backward's adjoint is exactly zero in those lanes, and a rule that
// multiplies it by such a value (`by * b`, `by / b`) makes NaN there, which
// an unbroadcasting sum or a reduction's adjoint then spreads over every
// lane. Where that can happen the contribution is selected instead:
// `tl.where(mask, by * b, 0.0)`.
#include <cmath>
#include <functional>

#include "src/ad/reverse/Engine.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::ad::reverse {

namespace {

// Operations whose output lane i depends only on their operands' lane i
// (after broadcasting): a mask on the output's lanes is one on theirs.
bool lane_wise(const std::string &op) {
  static const std::set<std::string> ops = {
      "add",   "sub",    "mul",   "truediv", "neg",     "pos",   "exp",     "exp2",    "log",   "log2",  "sqrt",
      "rsqrt", "sin",    "cos",   "tanh",    "sigmoid", "erf",   "abs",     "maximum", "minimum", "clamp", "fma",
      "pow",   "div_rn", "fdiv",  "sqrt_rn", "exp10",   "log10", "log1p",   "expm1",   "cbrt",  "tan",   "asin",
      "acos",  "atan",   "atan2", "sinh",    "cosh",    "asinh", "acosh",   "atanh",   "erfc",  "where", "cast",
      "copy"};
  return ops.count(op) > 0;
}

// Functions that give inf or NaN for some finite arguments (0, negative,
// outside [-1, 1]): of a padding value, their result may not be finite.
bool singular(const std::string &function) {
  static const std::set<std::string> names = {"log",     "log2",  "log10", "log1p", "sqrt", "rsqrt", "sqrt_rn",
                                              "pow",     "fdiv",  "div_rn", "tan",  "acos", "asin",  "atanh",
                                              "acosh"};
  return names.count(function) > 0;
}


// A tile, not a scalar: a value with lanes.
bool is_tile(const SType *t) { return t && t->is_tensor() && !t->shape.empty(); }


// `tl.where(c, v, 0.0)`, `tl.where(c, 0.0, v)` or `tl.load(p, mask=c, other=0.0)`
// (also cast with .to) with c a name: the mask `e` is zero outside of.
std::optional<LaneMask> zero_outside(const Expr &e) {
  auto *c = dyn_cast<Call>(&e);
  if (!c) return std::nullopt;
  if (auto *to = dyn_cast<Attribute>(c->func.get()); to && to->attr == "to") return zero_outside(*to->value);
  const std::string f = emit::print_expr(*c->func);
  if (f == "tl.where" && c->args.size() == 3 && c->keywords.empty()) {
    auto *cond = dyn_cast<Name>(c->args[0].get());
    if (!cond) return std::nullopt;
    if (is_zero_literal(*c->args[2])) return LaneMask{cond->id, false, nullptr};
    if (is_zero_literal(*c->args[1])) return LaneMask{cond->id, true, nullptr};
    return std::nullopt;
  }
  if (f == "tl.load") {
    const Name *mask = nullptr;
    bool zero_other = false;
    for (const Keyword &k : c->keywords) {
      if (k.name == "mask") mask = dyn_cast<Name>(k.value.get());
      if (k.name == "other") zero_other = is_zero_literal(*k.value);
    }
    if (mask && zero_other) return LaneMask{mask->id, false, nullptr};
  }
  return std::nullopt;
}

// The adjoint passed on unchanged in every lane (`by`, `-by`, `by.to(...)`):
// zero wherever the adjoint it names is.
bool passes_adjoint_through(const Expr &e) {
  if (isa<Name>(&e)) return true;
  if (auto *u = dyn_cast<UnaryOp>(&e)) return u->op == UnaryOpKind::Neg && passes_adjoint_through(*u->operand);
  if (auto *c = dyn_cast<Call>(&e)) {
    auto *a = dyn_cast<Attribute>(c->func.get());
    return a && a->attr == "to" && passes_adjoint_through(*a->value);
  }
  return false;
}

}  // namespace

namespace {

// What a value may hold in the lanes the forward discards: finite values,
// finite values or -inf (a max's padding), or anything (inf, NaN).
enum class Padding { Finite = 0, FiniteOrNegInf = 1, Any = 2 };

Padding worst(Padding a, Padding b) { return a > b ? a : b; }

bool is_positive_literal(const Expr &e) {
  if (auto *f = dyn_cast<FloatLit>(&e)) return f->value > 0;
  if (auto *i = dyn_cast<IntLit>(&e)) return i->value > 0;
  return false;
}

// The padding of a literal: float('-inf') and -float('inf') are -inf.
std::optional<Padding> literal_padding(const Expr &e) {
  if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg) {
    std::optional<Padding> p = literal_padding(*u->operand);
    if (!p || *p == Padding::Finite) return p;
    auto *c = dyn_cast<Call>(u->operand.get());
    auto *s = c && c->args.size() == 1 ? dyn_cast<StrLit>(c->args[0].get()) : nullptr;
    if (auto *f = dyn_cast<FloatLit>(u->operand.get()); f && std::isinf(f->value) && f->value > 0)
      return Padding::FiniteOrNegInf;
    return s && (s->value == "inf" || s->value == "+inf") ? Padding::FiniteOrNegInf : Padding::Any;
  }
  if (auto *c = dyn_cast<Call>(&e)) {
    auto *f = dyn_cast<Name>(c->func.get());
    auto *s = c->args.size() == 1 ? dyn_cast<StrLit>(c->args[0].get()) : nullptr;
    if (f && f->id == "float" && s) {
      if (s->value == "-inf") return Padding::FiniteOrNegInf;
      if (s->value.find("inf") != std::string::npos || s->value == "nan") return Padding::Any;
      return Padding::Finite;
    }
    return std::nullopt;
  }
  if (auto *f = dyn_cast<FloatLit>(&e)) {
    if (std::isfinite(f->value)) return Padding::Finite;
    return f->value < 0 ? Padding::FiniteOrNegInf : Padding::Any;
  }
  if (isa<IntLit>(&e) || isa<BoolLit>(&e)) return Padding::Finite;
  return std::nullopt;
}

}  // namespace

const std::set<std::string> &Engine::padding_may_be_nonfinite(bool overflow) {
  std::optional<std::set<std::string>> &cached = overflow ? overflow_nonfinite_ : padding_nonfinite_;
  if (cached) return *cached;
  std::map<std::string, Padding> padding;  // names not listed: finite
  std::function<Padding(const Expr &)> of = [&](const Expr &e) -> Padding {
    if (std::optional<Padding> p = literal_padding(e)) return *p;
    if (auto *n = dyn_cast<Name>(&e)) {
      auto it = padding.find(n->id);
      return it == padding.end() ? Padding::Finite : it->second;
    }
    if (auto *a = dyn_cast<Attribute>(&e)) return of(*a->value);
    if (auto *s = dyn_cast<Subscript>(&e)) return of(*s->value);
    if (isa<Compare>(&e) || isa<BoolOp>(&e)) return Padding::Finite;
    if (auto *i = dyn_cast<IfExp>(&e)) return worst(of(*i->then_value), of(*i->else_value));
    if (auto *u = dyn_cast<UnaryOp>(&e)) {
      Padding p = of(*u->operand);
      return u->op == UnaryOpKind::Neg && p == Padding::FiniteOrNegInf ? Padding::Any : p;
    }
    if (auto *b = dyn_cast<BinOp>(&e)) {
      const Padding l = of(*b->lhs), r = of(*b->rhs);
      switch (b->op) {
        case BinaryOpKind::Add:
          return worst(l, r);
        case BinaryOpKind::Sub:
          return r == Padding::Finite ? l : Padding::Any;
        case BinaryOpKind::Mul:
          if (l == Padding::Finite && r == Padding::Finite) return Padding::Finite;
          if (l == Padding::FiniteOrNegInf && r == Padding::Finite && is_positive_literal(*b->rhs)) return l;
          if (r == Padding::FiniteOrNegInf && l == Padding::Finite && is_positive_literal(*b->lhs)) return r;
          return Padding::Any;
        case BinaryOpKind::Div:
        case BinaryOpKind::FloorDiv:
        case BinaryOpKind::Mod:
        case BinaryOpKind::Pow:
          // A lane-varying divisor (or exponent) may be 0 in the padding.
          if (reads_tile(*b->rhs) || r != Padding::Finite) return Padding::Any;
          if (b->op == BinaryOpKind::Div && is_positive_literal(*b->rhs)) return l;
          return l == Padding::Finite ? Padding::Finite : Padding::Any;
        default:
          return worst(l, r) == Padding::Finite ? Padding::Finite : Padding::Any;
      }
    }
    if (auto *c = dyn_cast<Call>(&e)) {
      const std::string f = callee_last_part(*c);
      Padding args = Padding::Finite;
      for (const ExprPtr &a : c->args) args = worst(args, of(*a));
      if (f == "load") {
        // A masked load pads with `other`; without one its padding is undefined.
        const Expr *mask = call_argument(*c, 1, "mask"), *other = call_argument(*c, 2, "other");
        if (!mask || isa<NoneLit>(mask)) return Padding::Finite;
        return other && !isa<NoneLit>(other) ? of(*other) : Padding::Any;
      }
      // A method of a value (x.to(...), x.reshape(...)), not a function of a module (tl.exp): the value's.
      if (auto *attr = dyn_cast<Attribute>(c->func.get())) {
        auto *object = dyn_cast<Name>(attr->value.get());
        if (!object || type_of_name(object->id)) return of(*attr->value);
      }
      if (singular(f)) return reads_tile(e) ? Padding::Any : Padding::Finite;
      // Functions that overflow to inf for large finite arguments: where the
      // lanes discarded hold real values (a where on a predicate of the data:
      // softplus's x > 20 discards the lanes where exp(x) is inf).
      static const std::set<std::string> overflowing = {"exp", "exp2", "exp10", "expm1", "sinh", "cosh",
                                                        "fast_expf", "fast_exp2f"};
      if (overflow && overflowing.count(f) && reads_tile(e)) return Padding::Any;
      // Functions that map -inf to a finite value (exp(-inf) = 0, tanh(-inf) = -1).
      static const std::set<std::string> tame = {"exp", "exp2", "sigmoid", "tanh", "erf", "erfc", "fast_expf",
                                                 "fast_exp2f"};
      if (tame.count(f)) return args == Padding::Any ? Padding::Any : Padding::Finite;
      if (f == "maximum") {
        Padding a = c->args.size() == 2 ? of(*c->args[0]) : Padding::Any, b = c->args.size() == 2 ? of(*c->args[1]) : Padding::Any;
        if (a == Padding::Any || b == Padding::Any) return Padding::Any;
        return a == Padding::Finite || b == Padding::Finite ? Padding::Finite : Padding::FiniteOrNegInf;
      }
      // Selections, reductions and reshapes keep their operands' values.
      static const std::set<std::string> keep = {
          "where",   "minimum", "max",   "min",    "sum",   "reshape", "view",   "trans", "permute", "expand_dims",
          "broadcast_to", "cast", "to",  "join",   "split", "interleave", "cumsum", "cummax", "flip", "ravel",
          "abs",     "clamp",   "gather", "cumprod"};
      if (keep.count(f)) {
        Padding p = Padding::Finite;
        for (const ExprPtr &a : c->args) p = worst(p, of(*a));
        return p;
      }
      if (c->func->kind == NodeKind::Name && !sema::namespace_member("builtins", f))
        return Padding::Any;  // a jit helper: what it computes is not looked into
      return args == Padding::Finite ? Padding::Finite : Padding::Any;
    }
    Padding p = Padding::Finite;  // a tuple or list (a shape): its elements
    auto elements = [&](const ExprList &l) {
      for (const ExprPtr &x : l) p = worst(p, of(*x));
    };
    if (auto *t = dyn_cast<Tuple>(&e)) elements(t->elts);
    else if (auto *l = dyn_cast<List>(&e)) elements(l->elts);
    else p = Padding::Any;
    return p;
  };
  // Loops and ifs assign a name more than once: repeat until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    std::function<void(const StmtList &)> block = [&](const StmtList &body) {
      for (const StmtPtr &s : body) {
        if (auto *a = dyn_cast<Assign>(s.get())) {
          const std::string t = assigned_name(*a);
          if (t.empty() || !is_tile(type_of_name(t))) continue;  // a scalar is a value the kernel computes, not padding
          const Padding now = padding.count(t) ? padding[t] : Padding::Finite;
          const Padding p = worst(now, of(*a->value));
          if (p != now) {
            padding[t] = p;
            changed = true;
          }
        } else if (auto *f = dyn_cast<For>(s.get())) {
          block(f->body);
        } else if (auto *i = dyn_cast<If>(s.get())) {
          block(i->body);
          block(i->orelse);
        }
      }
    };
    block(anf_.fn->body);
  }
  cached.emplace();
  for (const auto &[n, p] : padding)
    if (p != Padding::Finite) cached->insert(n);
  return *cached;
}

bool Engine::reads_tile(const Expr &e) {
  std::set<std::string> names;
  reads(e, names);
  // Generic: a scalar representative stands for tiles too.
  return std::any_of(names.begin(), names.end(), [&](const std::string &n) {
    const SType *t = type_of_name(n);
    return request_.generic_shapes ? t && t->is_tensor() && !t->elem.is_pointer : is_tile(t);
  });
}

bool Engine::loads_pad_under(const std::string &mask) const {
  return std::any_of(memory_.begin(), memory_.end(), [&](const MemoryOp &m) { return !m.store && m.mask == mask; });
}

bool Engine::may_make_nan(const Expr &contribution, bool overflow) {
  const std::set<std::string> &nonfinite = padding_may_be_nonfinite(overflow);
  bool result = false;
  visit_expr(contribution, [&](const Expr &e) {
    if (result) return;
    if (auto *n = dyn_cast<Name>(&e)) {
      result = nonfinite.count(n->id) > 0;
    } else if (auto *b = dyn_cast<BinOp>(&e)) {
      // 0 / 0: a lane-varying divisor may be zero in the padding.
      if (b->op == BinaryOpKind::Div || b->op == BinaryOpKind::Pow) result = reads_tile(*b->rhs);
    } else if (auto *c = dyn_cast<Call>(&e)) {
      if (singular(callee_last_part(*c)))
        for (const ExprPtr &a : c->args) result |= reads_tile(*a);
    }
  });
  return result;
}

std::optional<LaneMask> Engine::mask_contribution(const std::string &x, ExprPtr &e, const std::string &op,
                                                  const std::string &y) {
  // Shapes unknown until Triton compiles the backward (a generic tile
  // function): a mask is carried on as if x had y's lanes, and each
  // selection made under it checks at compile time that the mask has the
  // contribution's shape (select_lanes_helper). Where it has, every value
  // between the tl.where and the contribution had at least the mask's lanes,
  // so the adjoint is zero outside it there too.
  const bool generic_lanes = request_.generic_shapes;
  // The contribution has y's shape until it is summed back to x's: a mask
  // on y's lanes carries over to x's only where the two are the same.
  const SType *tx = type_of_name(x), *ty = type_of_name(y);
  const bool same_lanes = generic_lanes || (is_tile(tx) && is_tile(ty) && tx->shape == ty->shape);
  // A call of a jit helper made of lane-wise operations: its backward is
  // lane-wise too, and returns the contribution already summed to x's shape.
  const bool helper = op == kLaneWiseCall;
  if (std::optional<LaneMask> m = zero_outside(*e)) {
    if (!same_lanes || (op != "store" && !lane_wise(op))) return std::nullopt;
    m->block = out_;
    return m;
  }
  if (!lane_wise(op) && !helper) return std::nullopt;
  auto it = lane_masks_.find(y);
  if (it == lane_masks_.end() || !it->second || it->second->block != out_) return std::nullopt;
  const LaneMask m = *it->second;
  if (helper && !same_lanes) return std::nullopt;  // (its result has x's lanes, fewer than the mask's)
  // A mask some load pads under discards padding lanes, whose values the
  // padding lattice follows; any other (x > 20.0) discards lanes of real
  // data, where the forward may have overflowed too (exp(x) = inf).
  const bool real_lanes = !loads_pad_under(m.cond);
  // The helper's backward may divide by its operand: it is not looked into.
  if (helper || (!passes_adjoint_through(*e) && may_make_nan(*e, real_lanes))) {
    if (generic_lanes) {
      e = call(select_lanes_helper(), list(name(m.cond), std::move(e), std::make_unique<BoolLit>(!m.negated)));
    } else {
      ExprPtr zero = std::make_unique<FloatLit>(0.0, "0.0");
      e = m.negated ? call("tl.where", list(name(m.cond), std::move(zero), std::move(e)))
                    : call("tl.where", list(name(m.cond), std::move(e), std::move(zero)));
    }
  }
  if (!same_lanes) return std::nullopt;
  return m;
}

bool Engine::lane_wise_body() {
  const StmtList &body = anf_.fn->body;
  for (const StmtPtr &s : body) {
    if (isa<Return>(s.get())) continue;
    auto *a = dyn_cast<Assign>(s.get());
    if (!a || assigned_name(*a).empty()) return false;
    const Expr &v = *a->value;
    if (isa<Name>(&v) || isa<Compare>(&v) || isa<Attribute>(&v) || isa<FloatLit>(&v) || isa<IntLit>(&v) ||
        isa<BoolLit>(&v))
      continue;
    const Op op = classify(v);
    if (!lane_wise(op.key) && op.key != "operator ~" && op.key != "operator &" && op.key != "operator |") return false;
  }
  return true;
}

std::string Engine::select_lanes_helper() {
  return generic_helper(sema::kSelectLanesHelper,
                        "(mask, g, KEEP_WHERE_TRUE: tl.constexpr):\n"
                        "    if mask.shape == g.shape:\n"
                        "        if KEEP_WHERE_TRUE:\n"
                        "            g = tl.where(mask, g, 0.0)\n"
                        "        else:\n"
                        "            g = tl.where(mask, 0.0, g)\n"
                        "    return g\n",
                        "g where the forward kept its lanes, 0.0 where it discarded them (its values there may "
                        "be inf or NaN); g unchanged where the mask is not g's shape.");
}

}  // namespace tgrad::ad::reverse
