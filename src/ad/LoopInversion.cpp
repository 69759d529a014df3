#include "src/ad/LoopInversion.h"

#include "src/ad/AnfWalk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

// A subscript that only inserts axes or keeps them whole: `x[:, None]`.
bool is_axis_view(const Subscript &s) {
  for (const ExprPtr &i : s.indices) {
    if (isa<NoneLit>(i.get())) continue;
    auto *slice = dyn_cast<Slice>(i.get());
    if (!slice || slice->lower || slice->upper || slice->step) return false;
  }
  return true;
}

// The exponential that `name` is (or is a broadcast, reshaped or expanded
// view of), or "".
std::string exponential_behind(std::string name, const InversionContext &context) {
  for (int hops = 0; hops < 8; ++hops) {
    const Assign *def = context.definition(name);
    if (!def) return "";
    const Expr *value = def->value.get();
    if (auto *s = dyn_cast<Subscript>(value)) {
      const Name *inner = as_name(s->value.get());
      if (!inner || !is_axis_view(*s)) return "";
      name = inner->id;
      continue;
    }
    auto *call = dyn_cast<Call>(value);
    if (!call) return "";
    const std::string f = context.builtin(*call);
    if (f == "tl.exp" || f == "tl.exp2" || f == "math.exp" || f == "math.exp2") return name;
    if (f == "tl.expand_dims" || f == "tl.broadcast_to" || f == "tl.reshape") {
      const Name *inner = as_name(call_argument(*call, 0, "input"));
      if (!inner) return "";
      name = inner->id;
      continue;
    }
    return "";
  }
  return "";
}

bool same_shape(const sema::SType *a, const sema::SType *b) {
  return a && b && sema::shape_str(a->shape) == sema::shape_str(b->shape);
}

}  // namespace

std::map<std::string, InvertibleUpdate> find_invertible_updates(const For &f, const std::vector<LoopCarried> &carried,
                                                                const InversionContext &context) {
  std::map<std::string, InvertibleUpdate> result;
  std::map<std::string, int> reads;
  count_reads(f.body, reads);
  for (const LoopCarried &c : carried) {
    // The copy `c = c'` that ends the body, and the update that computes c'.
    const Assign *copy = top_level_assignment(f.body, c.name);
    const Name *updated = copy ? as_name(copy->value.get()) : nullptr;
    const Assign *update = updated ? top_level_assignment(f.body, updated->id) : nullptr;
    if (!update || reads[c.name] != 1) continue;

    InvertibleUpdate u;
    u.carried = c.name;
    u.updated = updated->id;
    // Peel the term: c' = w + t, t + w, w - t, tl.dot(a, b, w), or c' = w.
    const Expr *scaled = update->value.get();
    if (auto *b = dyn_cast<BinOp>(scaled)) {
      auto *lhs = as_name(b->lhs.get());
      auto *rhs = as_name(b->rhs.get());
      if (b->op == BinaryOpKind::Add && lhs && rhs) {
        // Whichever operand is the scaled carried value: the one defined as `c * s`.
        const Assign *l = top_level_assignment(f.body, lhs->id);
        bool left = l && isa<BinOp>(l->value.get()) &&
                    (is_name(cast<BinOp>(l->value.get())->lhs.get(), c.name) ||
                     is_name(cast<BinOp>(l->value.get())->rhs.get(), c.name));
        u.scaled = left ? lhs->id : rhs->id;
        u.term = clone(left ? *b->rhs : *b->lhs);
      } else if (b->op == BinaryOpKind::Sub && lhs) {
        u.scaled = lhs->id;
        u.term = clone(*b->rhs);
        u.subtracted = true;
      } else if (b->op == BinaryOpKind::Mul) {
        u.scaled = u.updated;
      }
    } else if (auto *call = dyn_cast<Call>(scaled)) {
      const Name *acc = as_name(call_argument(*call, 2, "acc"));
      if (context.builtin(*call) != "tl.dot" || !acc) continue;
      u.scaled = acc->id;
      // The product alone: the same call without its accumulator.
      ExprPtr product = clone(*call);
      auto *p = cast<Call>(product.get());
      if (p->args.size() > 2) p->args.erase(p->args.begin() + 2);
      for (size_t k = 0; k < p->keywords.size(); ++k)
        if (p->keywords[k].name == "acc") p->keywords.erase(p->keywords.begin() + k);
      u.term = std::move(product);
    }
    if (u.scaled.empty() || (u.scaled != u.updated && reads[u.scaled] != 1)) continue;

    // The scaled value: w = c * s or s * c, with s an exponential.
    const Assign *scaling = top_level_assignment(f.body, u.scaled);
    auto *product = scaling ? dyn_cast<BinOp>(scaling->value.get()) : nullptr;
    if (!product || product->op != BinaryOpKind::Mul) continue;
    const Expr *scale = is_name(product->lhs.get(), c.name)   ? product->rhs.get()
                        : is_name(product->rhs.get(), c.name) ? product->lhs.get()
                                                              : nullptr;
    if (!scale) continue;
    const Name *s = as_name(scale);
    if (s && s->id == c.name) continue;
    if (!s || !context.active(s->id)) {
      // No gradient for s: c is never read by the backward.
      if (!(s || isa<IntLit>(scale) || isa<FloatLit>(scale)) || reads[u.updated] != 1) continue;
      u.scale = s ? s->id : emit::print_expr(*scale);
      u.unneeded = true;
      result.emplace(c.name, std::move(u));
      continue;
    }
    u.scale = s->id;
    u.exponential = exponential_behind(s->id, context);
    if (u.exponential.empty()) continue;
    // The quotient must have the carried value's shape (never a broadcast of it).
    const sema::SType *type = context.type_of(c.name);
    if (!same_shape(type, context.type_of(u.updated)) || !same_shape(type, context.type_of(u.scaled))) continue;
    result.emplace(c.name, std::move(u));
  }
  return result;
}

std::string inversion_code(const InvertibleUpdate &u, const std::string &quotient, const std::string &cast) {
  std::string numerator = u.updated;
  if (u.term) numerator = "(" + u.updated + (u.subtracted ? " + " : " - ") + emit::print_expr(*u.term) + ")";
  // Below float32's normal range (2**-126) the scale counts as 0: a
  // subnormal s would turn the rounding error of c' - t into a finite but
  // huge c, whose products in the adjoint overflow.
  return quotient + " = " + numerator + " / " + u.scale + "\n" + u.carried + " = tl.where((" + u.scale +
         " >= 1.1754943508222875e-38) & (tl.abs(" + quotient + ") < float(\"inf\")), " + quotient + ", 0.0)" + cast +
         "\n";
}

}  // namespace tgrad::ad
