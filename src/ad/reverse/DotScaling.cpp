// Scalar factors of a loop's sum of tl.dot products, applied after the loop
// (DotScaling.h).
#include "src/ad/reverse/DotScaling.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::ad::reverse {

namespace {

// `acc = tl.zeros(...)` or `acc = tl.full(shape, 0, ...)`.
bool assigns_zeros(const Stmt &s, const std::string &acc) {
  auto *a = dyn_cast<Assign>(&s);
  if (!a || a->targets.size() != 1 || !is_name(a->targets[0].get(), acc)) return false;
  auto *c = dyn_cast<Call>(a->value.get());
  if (!c) return false;
  if (callee(*c) == "tl.zeros") return true;
  const Expr *value = callee(*c) == "tl.full" ? call_argument(*c, 1, "value") : nullptr;
  return value && is_zero_literal(*value);
}

class Scaler {
 public:
  Scaler(Function &kernel, const sema::TypeInfo &info) : kernel_(kernel), info_(info) {
    count_assignments(kernel.body, kernel_assigned_);
    count_reads(kernel.body, kernel_reads_);
  }

  int run() { return in_block(kernel_.body); }

 private:
  // A factor's multiplication: the product's slot, and which side is the factor.
  struct Factor {
    ExprPtr *product;
    bool on_the_right;
  };

  int in_block(StmtList &block) {
    int changed = 0;
    for (size_t k = 0; k < block.size(); ++k) {
      if (auto *i = dyn_cast<If>(block[k].get())) {
        changed += in_block(i->body) + in_block(i->orelse);
      } else if (auto *w = dyn_cast<While>(block[k].get())) {
        changed += in_block(w->body);
      } else if (auto *f = dyn_cast<For>(block[k].get())) {
        changed += in_block(f->body);
        std::vector<StmtPtr> after;
        changed += in_loop(block, k, *f, after);
        for (StmtPtr &s : after) block.insert(block.begin() + static_cast<long>(++k), std::move(s));
      }
    }
    return changed;
  }

  int in_loop(const StmtList &parent, size_t at, For &loop, std::vector<StmtPtr> &after) {
    loop_body_ = &loop.body;
    loop_assigned_.clear();
    count_assignments(loop.body, loop_assigned_);
    reads(*loop.target, loop_targets_);
    std::map<std::string, int> loop_reads;
    count_reads(loop.body, loop_reads);
    int changed = 0;
    for (StmtPtr &s : loop.body) {
      std::string acc;
      ExprPtr *sum = nullptr;  // the accumulated term's slot
      if (auto *a = dyn_cast<AugAssign>(s.get()); a && a->op == BinaryOpKind::Add && as_name(a->target.get())) {
        acc = as_name(a->target.get())->id;
        sum = &a->value;
      } else if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && as_name(a->targets[0].get())) {
        acc = as_name(a->targets[0].get())->id;
        auto *b = dyn_cast<BinOp>(a->value.get());
        if (b && b->op == BinaryOpKind::Add && is_name(b->lhs.get(), acc)) sum = &b->rhs;
        else if (b && b->op == BinaryOpKind::Add && is_name(b->rhs.get(), acc)) sum = &b->lhs;
      }
      if (!sum || loop_assigned_[acc] != 1 || loop_reads[acc] != 1 || !zero_at_entry(parent, at, acc)) continue;
      term_occurrences_.clear();
      visit_expr(**sum, [&](const Expr &e) {
        if (auto *n = dyn_cast<Name>(&e)) ++term_occurrences_[n->id];
      });
      std::vector<Factor> factors;
      ExprPtr *term = sum;
      while (true) {  // (`tl.dot(a, b) * s`)
        auto *b = dyn_cast<BinOp>(term->get());
        if (!b || b->op != BinaryOpKind::Mul) break;
        if (invariant_scalar(*b->rhs)) factors.push_back({term, true}), term = &b->lhs;
        else if (invariant_scalar(*b->lhs)) factors.push_back({term, false}), term = &b->rhs;
        else break;
      }
      auto *dot = dyn_cast<Call>(term->get());
      if (!dot || callee(*dot) != "tl.dot" || dot->args.size() != 2 || dot->keyword("acc") || !float_tile(dot)) continue;
      operand_factors(dot->args[0], factors);
      operand_factors(dot->args[1], factors);
      if (factors.empty()) continue;
      // The factors' product (in the order found), then each multiplication replaced by its other side, the
      // innermost first (an outer one's slot holds the inner ones).
      ExprPtr scale;
      for (const Factor &f : factors) {
        auto *b = cast<BinOp>(f.product->get());
        ExprPtr factor = clone(f.on_the_right ? *b->rhs : *b->lhs);
        scale = scale ? binary(BinaryOpKind::Mul, std::move(scale), std::move(factor)) : std::move(factor);
      }
      for (auto f = factors.rbegin(); f != factors.rend(); ++f) {
        auto *b = cast<BinOp>(f->product->get());
        ExprPtr kept = std::move(f->on_the_right ? b->lhs : b->rhs);
        *f->product = std::move(kept);
      }
      StmtPtr scaled = assign(acc, binary(BinaryOpKind::Mul, name(acc), std::move(scale)));
      scaled->leading_comment = "The loop's scalar factors, applied once to its sum (src/ad/reverse/DotScaling.h)";
      after.push_back(std::move(scaled));
      ++changed;
    }
    loop_targets_.clear();
    return changed;
  }

  // Whether `acc` is zero where the loop at `parent[at]` starts.
  static bool zero_at_entry(const StmtList &parent, size_t at, const std::string &acc) {
    for (size_t k = at; k-- > 0;)
      if (ast::assignments_of(*parent[k], acc) > 0) return assigns_zeros(*parent[k], acc);
    return false;
  }

  // A number the loop does not change: a float literal, or a scalar of names it does not assign. (An integer
  // scalar too: a generic backward's `scale` is int32 in one representative type and fp32 in another, and both
  // must be rewritten alike; a product with an integer scales after the sum as well.)
  bool invariant_scalar(const Expr &e) const {
    if (isa<FloatLit>(&e)) return true;
    const sema::SType *t = info_.type_of(&e);
    const bool scalar_number =
        t && ((t->is_tensor() && t->shape.empty() && !t->elem.is_pointer &&
               (sema::is_float(t->elem.dtype) || (sema::is_integer(t->elem.dtype) && t->elem.dtype != sema::DType::Int1))) ||
              t->kind == sema::SType::Kind::Float || t->kind == sema::SType::Kind::Int);
    if (!scalar_number) return false;
    std::set<std::string> read;
    reads(e, read);
    for (const std::string &n : read)
      if (loop_targets_.count(n) || (loop_assigned_.count(n) && loop_assigned_.at(n) > 0)) return false;
    return true;
  }

  // The scalar factors of a dot's operand: through casts, `tl.where(m, x, 0)`, and a name the loop assigns once
  // (its only definition, read only here).
  void operand_factors(ExprPtr &slot, std::vector<Factor> &out) {
    // Through a cast between float types only: `(x * 0.5).to(tl.int8)` rounds what the scale made.
    if (ExprPtr *receiver = cast_receiver(*slot))
      return float_tile(slot.get()) && float_tile(receiver->get()) ? operand_factors(*receiver, out) : void();
    if (auto *c = dyn_cast<Call>(slot.get())) {
      if (callee(*c) == "tl.where" && c->args.size() == 3 && c->keywords.empty() && is_zero_literal(*c->args[2]))
        operand_factors(c->args[1], out);
      return;
    }
    if (auto *b = dyn_cast<BinOp>(slot.get()); b && b->op == BinaryOpKind::Mul) {
      if (invariant_scalar(*b->rhs)) {
        out.push_back({&slot, true});
        operand_factors(b->lhs, out);
      } else if (invariant_scalar(*b->lhs)) {
        out.push_back({&slot, false});
        operand_factors(b->rhs, out);
      }
      return;
    }
    if (auto *n = as_name(slot.get())) {
      if (kernel_assigned_[n->id] != 1 || kernel_reads_[n->id] != 1 || term_occurrences_[n->id] != 1) return;
      if (ExprPtr *value = definition_in_loop(n->id)) operand_factors(*value, out);
    }
  }

  bool float_tile(const Expr *e) const {
    const sema::SType *t = info_.type_of(e);
    return t && t->is_tensor() && !t->elem.is_pointer && sema::is_float(t->elem.dtype);
  }

  ExprPtr *definition_in_loop(const std::string &n) {
    for (StmtPtr &s : *loop_body_)
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && is_name(a->targets[0].get(), n))
        return &a->value;
    return nullptr;
  }
  Function &kernel_;
  const sema::TypeInfo &info_;
  std::map<std::string, int> kernel_assigned_, kernel_reads_;
  std::map<std::string, int> loop_assigned_;
  std::set<std::string> loop_targets_;
  std::map<std::string, int> term_occurrences_;  // how often the accumulated term reads each name
  StmtList *loop_body_ = nullptr;  // the loop in_loop looks at: the definitions operand_factors may follow
};

}  // namespace

int scale_dot_sums_after_loops(Function &kernel, const Module &context, const sema::ParamTypes &types,
                               const SourceManager &sources) {
  bool sums_dots = false;
  visit_exprs(kernel.body, [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e)) sums_dots |= callee(*c) == "tl.dot";
  });
  if (!sums_dots) return 0;
  DiagEngine quiet(sources);
  std::optional<sema::TypeInfo> info = sema::analyze(context, kernel, types, quiet);
  if (!info || quiet.has_errors()) return 0;
  return Scaler(kernel, *info).run();
}

}  // namespace tgrad::ad::reverse
