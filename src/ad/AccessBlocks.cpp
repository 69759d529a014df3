// AccessAnalysis::iterations_own_blocks: a loop whose iteration t touches an
// address block [U + t * S, U + t * S + S) of its own, shown by bounding the
// rest of the offset with the masks (fla's chunk reductions update
// `h + ((boh + i_t) * H + i_h) * K * V + o_k * V + o_v` in place, under
// `o_k < K` and `o_v < V`, with `i_h = i_nh % H`).
//
// The offsets are expanded into polynomials over atoms (names the expansion
// stops at) with integer coefficients. An atom that a mask bounds (`o_k < K`,
// o_k never negative), a remainder (`x % H`, x never negative) or lanes
// (`tl.arange(0, B)`) is in [0, bound - 1]; a masked index is read either by
// its mask's bound or through its lanes (two attempts); parameters and products of them count as at least 1 (sizes
// and block sizes: a negative one addresses nothing). The proof:
//   - offset = t * S + R + U: S free of t and of names the loop assigns,
//     U free of t, of names the loop assigns and of lanes, the same U for the
//     load and the store;
//   - every term of R non-negative (non-negative coefficients, atoms >= 0),
//     and S - max(R) a polynomial with non-negative coefficients and a
//     positive constant (so at least 1).
// Then R lies in [0, S): iteration t's addresses are U + t * S + [0, S),
// which no other iteration's meet.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/ad/AccessAnalysis.h"
#include "src/ad/AccessText.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

// A monomial: the atoms multiplied, sorted (repeats kept).
using Monomial = std::vector<std::string>;
using Polynomial = std::map<Monomial, int64_t>;

Polynomial constant(int64_t c) { return c == 0 ? Polynomial{} : Polynomial{{Monomial{}, c}}; }
Polynomial atom(const std::string &n) { return Polynomial{{Monomial{n}, 1}}; }

Polynomial add(const Polynomial &a, const Polynomial &b, int64_t sign = 1) {
  Polynomial out = a;
  for (const auto &[m, c] : b) {
    out[m] += sign * c;
    if (out[m] == 0) out.erase(m);
  }
  return out;
}

Polynomial multiply(const Polynomial &a, const Polynomial &b) {
  Polynomial out;
  for (const auto &[ma, ca] : a)
    for (const auto &[mb, cb] : b) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      out[m] += ca * cb;
      if (out[m] == 0) out.erase(m);
    }
  return out;
}

bool mentions(const Polynomial &p, const std::set<std::string> &names) {
  for (const auto &[m, c] : p)
    for (const std::string &a : m)
      if (names.count(a)) return true;
  return false;
}

}  // namespace

bool AccessAnalysis::iterations_own_blocks(const std::string &a, const std::string &b, const std::string &loop_var,
                                           const std::string &mask_a, const std::string &mask_b) const {
  // Two readings of a masked index `o = i * B + tl.arange(0, B)` under `o < E`: o itself in [0, E) (where the loop
  // steps over another index: fla's `o_k < K` inside a chunk's [K, V] block), or its lanes in [0, B) (where the
  // loop is i itself: `o_d = i_d * BD + tl.arange(0, BD)`).
  return blocks_by_bounds(a, b, loop_var, mask_a, mask_b, true) ||
         blocks_by_bounds(a, b, loop_var, mask_a, mask_b, false);
}

// Offsets as polynomials over atoms, with the bounds the masks, remainders and lanes put on atoms.
class OffsetPolynomials {
 public:
  OffsetPolynomials(const AccessAnalysis &access, const std::string &loop_var) : a_(access), loop_var_(loop_var) {
    for (const Param &p : a_.fn_.params) params_.insert(p.name);
  }

  // Names that stand for bounded values, with their bound (the polynomial `bound`: the value is < bound).
  std::map<std::string, Polynomial> bounded;
  std::set<std::string> lanes_or_loop;  // atoms that vary in the loop or across lanes

  bool nonnegative(const std::string &n, int depth) const {
    if (depth > 24) return false;
    if (auto loop = a_.loops_.find(n); loop != a_.loops_.end()) {  // range(lo, hi, step), lo >= 0 and step > 0
      std::optional<long long> lo = access_text::integer_text(loop->second.lo),
                               step = access_text::integer_text(loop->second.step);
      // A step that is a parameter (a block size, `range(0, N, BLOCK_N)`): never negative as parameters are
      // read here, and never 0, which range() refuses.
      const bool step_positive = step ? *step > 0 : nonnegative(loop->second.step, depth + 1);
      return lo && *lo >= 0 && step_positive;
    }
    auto it = a_.defs_.find(n);
    if (it == a_.defs_.end()) {  // a parameter: a size or a block size (a negative one addresses nothing)
      auto t = a_.types_.find(n);
      return params_.count(n) && !(t != a_.types_.end() && t->second.is_tensor() && t->second.elem.is_pointer);
    }
    if (a_.redefined_.count(n)) return false;
    const Expr &v = *it->second;
    if (isa<IntLit>(&v)) return true;
    if (auto *m = dyn_cast<Name>(&v)) return nonnegative(m->id, depth + 1);
    if (auto *s = dyn_cast<Subscript>(&v))  // x[:, None]: the same values
      if (auto *m = dyn_cast<Name>(s->value.get())) return nonnegative(m->id, depth + 1);
    if (auto *c = dyn_cast<Call>(&v)) {
      const std::string f = emit::print_expr(*c->func);
      if (f == "tl.program_id" || f == "tl.num_programs" || f == "tl.arange") return true;
      if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && attr->attr == "to")
        if (auto *m = dyn_cast<Name>(attr->value.get())) return nonnegative(m->id, depth + 1);
      return false;
    }
    if (auto *bin = dyn_cast<BinOp>(&v)) {
      if (bin->op != BinaryOpKind::Add && bin->op != BinaryOpKind::Mul && bin->op != BinaryOpKind::FloorDiv &&
          bin->op != BinaryOpKind::Mod)
        return false;
      for (const Expr *side : {bin->lhs.get(), bin->rhs.get()}) {
        if (isa<IntLit>(side)) continue;
        auto *m = dyn_cast<Name>(side);
        if (!m || !nonnegative(m->id, depth + 1)) return false;
      }
      return true;
    }
    return false;
  }

  // The masks' bounds: `x < E` (x, or x[:, None], never negative) bounds x by E.
  void note_bounds(const std::string &mask) {
    if (mask.empty()) return;
    for (const Compare *cmp : a_.mask_conjuncts(mask)) {
      if (cmp->ops.size() != 1 || cmp->ops[0] != CompareOpKind::Lt) continue;
      const Name *n = through_broadcasts(dyn_cast<Name>(cmp->left.get()));
      auto *bound = dyn_cast<Name>(cmp->comparators[0].get());
      if (!n || !bound || !nonnegative(n->id, 0)) continue;
      std::optional<Polynomial> e = expand(bound->id, 0);
      if (e && !mentions(*e, lanes_or_loop)) bounded[n->id] = *e;
    }
  }

  // Through x[:, None] to x.
  const Name *through_broadcasts(const Name *n) const {
    for (int hops = 0; n && hops < 4; ++hops) {
      auto d = a_.defs_.find(n->id);
      auto *s = d == a_.defs_.end() || a_.redefined_.count(n->id) ? nullptr : dyn_cast<Subscript>(d->second);
      auto *inner = s ? dyn_cast<Name>(s->value.get()) : nullptr;
      if (!inner) break;
      n = inner;
    }
    return n;
  }

  std::optional<Polynomial> expand(const std::string &n, int depth) {
    if (depth > 32) return std::nullopt;
    if (n == loop_var_) {
      lanes_or_loop.insert(n);
      return atom(n);
    }
    if (bounded.count(n)) {
      lanes_or_loop.insert(n);
      return atom(n);
    }
    auto it = a_.defs_.find(n);
    if (it == a_.defs_.end()) return params_.count(n) ? std::optional<Polynomial>(atom(n)) : std::nullopt;
    if (a_.redefined_.count(n) || a_.loops_.count(n)) return std::nullopt;
    const Expr &v = *it->second;
    if (auto *i = dyn_cast<IntLit>(&v)) return constant(static_cast<int64_t>(i->value));
    if (auto *m = dyn_cast<Name>(&v)) return expand(m->id, depth + 1);
    if (auto *c = dyn_cast<Call>(&v)) {
      if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && attr->attr == "to")
        if (auto *m = dyn_cast<Name>(attr->value.get())) return expand(m->id, depth + 1);
      const std::string f = emit::print_expr(*c->func);
      if (f == "tl.arange") {
        // tl.arange(0, B): lanes in [0, B).
        auto *start = c->args.size() == 2 ? dyn_cast<IntLit>(c->args[0].get()) : nullptr;
        std::optional<Polynomial> extent;
        if (start && start->value == 0) {
          if (auto *i = dyn_cast<IntLit>(c->args[1].get())) extent = constant(static_cast<int64_t>(i->value));
          else if (auto *e = dyn_cast<Name>(c->args[1].get())) extent = expand(e->id, depth + 1);
        }
        if (!extent || mentions(*extent, lanes_or_loop)) return std::nullopt;
        bounded[n] = *extent;
        lanes_or_loop.insert(n);
        return atom(n);
      }
      if (a_.in_loops_.count(n)) return std::nullopt;
      return atom(n);  // a program id, a loaded scalar: the same in every iteration of this program's loop
    }
    if (auto *bin = dyn_cast<BinOp>(&v)) {
      if (bin->op == BinaryOpKind::Mod) {
        // x % H, x never negative: in [0, H - 1].
        auto *x = dyn_cast<Name>(bin->lhs.get());
        std::optional<Polynomial> h = side(*bin->rhs, depth);
        if (!x || !h || !nonnegative(x->id, 0) || mentions(*h, lanes_or_loop) || a_.in_loops_.count(n))
          return std::nullopt;
        bounded[n] = *h;
        lanes_or_loop.insert(n);
        return atom(n);
      }
      if (bin->op == BinaryOpKind::FloorDiv) {
        if (a_.in_loops_.count(n)) return std::nullopt;
        return atom(n);  // x // H outside the loop: the same in every iteration
      }
      return side(v, depth);
    }
    if (auto *s = dyn_cast<Subscript>(&v))  // x[:, None]: the same values
      if (auto *m = dyn_cast<Name>(s->value.get())) return expand(m->id, depth + 1);
    return std::nullopt;
  }

  // An operand: a number, a name, or sums and products of them written inline (`o_t * (H * K)`: A-normal form
  // keeps products of tl.constexpr parameters as written).
  std::optional<Polynomial> side(const Expr &e, int depth) {
    if (auto *i = dyn_cast<IntLit>(&e)) return constant(static_cast<int64_t>(i->value));
    if (auto *m = dyn_cast<Name>(&e)) return expand(m->id, depth + 1);
    auto *bin = dyn_cast<BinOp>(&e);
    if (!bin || depth > 32) return std::nullopt;
    std::optional<Polynomial> l = side(*bin->lhs, depth + 1), r = side(*bin->rhs, depth + 1);
    if (!l || !r) return std::nullopt;
    if (bin->op == BinaryOpKind::Add) return add(*l, *r);
    if (bin->op == BinaryOpKind::Sub) return add(*l, *r, -1);
    if (bin->op == BinaryOpKind::Mul) return multiply(*l, *r);
    return std::nullopt;
  }

  // A pointer's offset from its base: the sum of the offsets added along the chain.
  std::optional<Polynomial> offset(const std::string &pointer) {
    Polynomial total;
    std::string at = pointer;
    for (int hops = 0; hops < 64; ++hops) {
      if (a_.redefined_.count(at)) return std::nullopt;
      auto it = a_.defs_.find(at);
      if (it == a_.defs_.end()) return total;  // the base parameter
      const Expr &v = *it->second;
      if (auto *m = dyn_cast<Name>(&v)) {
        at = m->id;
        continue;
      }
      auto *bin = dyn_cast<BinOp>(&v);
      if (!bin || bin->op != BinaryOpKind::Add) return std::nullopt;
      const Name *ptr = nullptr, *off = nullptr;
      for (auto [p, o] : {std::pair<const Expr *, const Expr *>{bin->lhs.get(), bin->rhs.get()},
                          {bin->rhs.get(), bin->lhs.get()}}) {
        auto *pn = dyn_cast<Name>(p);
        auto t = pn ? a_.types_.find(pn->id) : a_.types_.end();
        if (pn && t != a_.types_.end() && t->second.is_tensor() && t->second.elem.is_pointer) {
          ptr = pn;
          off = dyn_cast<Name>(o);
          break;
        }
      }
      if (!ptr || !off) return std::nullopt;
      std::optional<Polynomial> e = expand(off->id, 0);
      if (!e) return std::nullopt;
      total = add(total, *e);
      at = ptr->id;
    }
    return std::nullopt;
  }

  bool defined(const std::string &n) const { return a_.defs_.count(n) > 0; }

 private:
  const AccessAnalysis &a_;
  std::string loop_var_;
  std::set<std::string> params_;
};

bool AccessAnalysis::blocks_by_bounds(const std::string &a, const std::string &b, const std::string &loop_var,
                                      const std::string &mask_a, const std::string &mask_b, bool masks) const {
  OffsetPolynomials polys(*this, loop_var);
  std::map<std::string, Polynomial> &bounded = polys.bounded;
  std::set<std::string> &lanes_or_loop = polys.lanes_or_loop;
  auto offset = [&](const std::string &pointer) { return polys.offset(pointer); };
  auto note_bounds = [&](const std::string &mask) { polys.note_bounds(mask); };

  if (mask_a != mask_b || base_of(a) != base_of(b) || base_of(a).empty()) return false;
  if (masks) note_bounds(mask_a);
  std::optional<Polynomial> pa = offset(a), pb = offset(b);
  if (!pa || !pb) return false;

  // Split each into t * S, the bounded rest R and the uniform rest U.
  struct Split {
    Polynomial step, rest, uniform;
  };
  auto split = [&](const Polynomial &p) -> std::optional<Split> {
    Split s;
    for (const auto &[m, c] : p) {
      const size_t t = static_cast<size_t>(std::count(m.begin(), m.end(), loop_var));
      if (t > 1) return std::nullopt;
      Monomial rest;
      for (const std::string &x : m)
        if (x != loop_var) rest.push_back(x);
      if (t == 1) {
        for (const std::string &x : rest)
          if (lanes_or_loop.count(x)) return std::nullopt;  // the step varies
        s.step[rest] += c;
      } else if (mentions(Polynomial{{m, c}}, lanes_or_loop)) {
        s.rest[m] += c;
      } else {
        s.uniform[m] += c;
      }
    }
    return s;
  };
  std::optional<Split> sa = split(*pa), sb = split(*pb);
  if (!sa || !sb || sa->step != sb->step || sa->uniform != sb->uniform || sa->step.empty()) return false;
  // The largest value of each R: every bounded atom at its bound minus 1, every coefficient non-negative.
  auto largest = [&](const Polynomial &r) -> std::optional<Polynomial> {
    Polynomial out;
    for (const auto &[m, c] : r) {
      if (c < 0) return std::nullopt;
      Polynomial term = constant(c);
      for (const std::string &x : m) {
        auto bd = bounded.find(x);
        if (bd == bounded.end()) {
          if (lanes_or_loop.count(x)) return std::nullopt;
          term = multiply(term, atom(x));  // a parameter, at least 1
        } else {
          term = multiply(term, add(bd->second, constant(1), -1));
        }
      }
      out = add(out, term);
    }
    return out;
  };
  for (const Split *s : {&*sa, &*sb}) {
    std::optional<Polynomial> top = largest(s->rest);
    if (!top) return false;
    const Polynomial gap = add(s->step, *top, -1);  // S - max(R): at least 1?
    bool positive = false;
    for (const auto &[m, c] : gap) {
      if (c < 0) return false;
      if (m.empty() && c > 0) positive = true;
    }
    if (!positive) return false;
    // (Every atom of the step and of the gap a parameter or a value the loop does not change: at least 1 is
    // assumed for parameters only.)
    for (const auto &[m, c] : gap)
      for (const std::string &x : m)
        if (polys.defined(x)) return false;
  }
  return true;
}

bool AccessAnalysis::iterations_write_apart(const std::string &pointer, const std::string &mask,
                                            const std::string &loop_var) const {
  auto range = loops_.find(loop_var);
  if (range == loops_.end() || range->second.lo != "0") return false;
  // The loop's step as a polynomial: a positive number, or a name (a tl.constexpr block size).
  std::optional<Polynomial> loop_step;
  if (std::optional<long long> n = access_text::integer_text(range->second.step)) {
    if (*n > 0) loop_step = constant(*n);
  } else if (!range->second.step.empty() && !defs_.count(range->second.step)) {
    loop_step = atom(range->second.step);
  }
  if (!loop_step) return false;
  const bool by_one = *loop_step == constant(1);
  // o's range in an iteration: loop_var * B + [0, B) with the loop stepping by 1, or loop_var + [0, B) with the
  // loop stepping by B (`n0 + tl.arange(0, BLOCK_N)` in `range(0, N, BLOCK_N)`). Read without the masks' bounds
  // (o itself expands).
  OffsetPolynomials plain(*this, loop_var);
  auto walked = [&](const std::string &o) {
    std::optional<Polynomial> p = plain.expand(o, 0);
    if (!p || p->size() != 2) return false;
    std::optional<Polynomial> step, lanes;
    for (const auto &[m, c] : *p) {
      if (m == Monomial{loop_var}) step = by_one ? constant(c) : (c == 1 ? loop_step : std::nullopt);
      else if (by_one && m.size() == 2 && std::count(m.begin(), m.end(), loop_var) == 1) {
        step = atom(m[0] == loop_var ? m[1] : m[0]);
        if (c != 1) return false;
      } else if (m.size() == 1 && c == 1 && plain.bounded.count(m[0])) {
        lanes = plain.bounded.at(m[0]);
      }
    }
    return step && lanes && *step == *lanes;
  };
  // The offset with the mask's bounds: o an atom under its bound E.
  OffsetPolynomials polys(*this, loop_var);
  polys.note_bounds(mask);
  std::optional<Polynomial> offset = polys.offset(pointer);
  if (!offset) return false;
  // The one term of a walked index, c * o (c a positive number), and the other terms.
  std::string o;
  int64_t c = 0;
  Polynomial others;
  for (const auto &[m, k] : *offset) {
    if (m.size() == 1 && !o.empty() && m[0] == o) return false;
    if (m.size() == 1 && o.empty() && k > 0 && polys.bounded.count(m[0]) && walked(m[0])) {
      o = m[0];
      c = k;
      continue;
    }
    others[m] = k;
  }
  if (o.empty()) return false;
  bool varying = false;
  for (const auto &[m, k] : others)
    for (const std::string &x : m) {
      if (x == o || x == loop_var) return false;  // o or the iteration elsewhere: not this form
      if (polys.lanes_or_loop.count(x)) varying = true;
    }
  if (!varying) return true;  // c * o plus values the same for every lane and iteration
  // The other terms that vary (lanes of other axes): multiples of c * E, E a monomial of parameters or a number.
  const Polynomial &bound = polys.bounded.at(o);
  if (bound.size() != 1) return false;
  const Monomial &e_atoms = bound.begin()->first;
  const int64_t e_number = bound.begin()->second * c;
  if (e_number <= 0) return false;
  for (const std::string &x : e_atoms)
    if (defs_.count(x)) return false;  // parameters only (sizes)
  for (const auto &[m, k] : others) {
    bool varies = false;
    for (const std::string &x : m) varies = varies || polys.lanes_or_loop.count(x);
    if (!varies) continue;  // the same in every iteration
    if (k % e_number != 0) return false;
    Monomial rest = m;
    for (const std::string &x : e_atoms) {
      auto at = std::find(rest.begin(), rest.end(), x);
      if (at == rest.end()) return false;
      rest.erase(at);
    }
  }
  return true;
}

}  // namespace tgrad::ad
