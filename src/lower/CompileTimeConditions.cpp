#include "src/lower/CompileTimeConditions.h"

#include <functional>
#include <set>

#include "src/lower/Walk.h"
#include "tgrad/sema/DType.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::lower {

using namespace ast;

CompileTimeConditions::CompileTimeConditions(const Function &kernel, const sema::ParamTypes &known) : kernel_(kernel) {
  for (size_t k = 0; k < kernel.params.size(); ++k) {
    auto it = known.find(kernel.params[k].name);
    if (!kernel.is_constexpr_param(k) || it == known.end()) continue;
    if (!it->second.known && it->second.kind != sema::SType::Kind::None) continue;
    const sema::SType &t = it->second;
    if (t.kind == sema::SType::Kind::None) values_[it->first] = {CompileTimeValue::Kind::None, 0, ""};
    else if (t.kind == sema::SType::Kind::Bool) values_[it->first] = {CompileTimeValue::Kind::Int, t.b ? 1 : 0, ""};
    else if (t.kind == sema::SType::Kind::Int) values_[it->first] = {CompileTimeValue::Kind::Int, t.n, ""};
    else if (t.kind == sema::SType::Kind::Str) values_[it->first] = {CompileTimeValue::Kind::Str, 0, t.s};
  }
}

// `isinstance(x, tl.tensor_descriptor)` (the Triton tutorial's
// _maybe_make_tensor_desc): what Triton decides when it compiles. A kernel
// parameter is a pointer to tgrad (a host TensorDescriptor argument is not
// differentiated); a name the kernel assigns a tl.make_tensor_descriptor
// is a descriptor. Anything else stays as written (sema refuses it).
std::optional<bool> CompileTimeConditions::descriptor_test(const Expr &e) const {
  auto *c = dyn_cast<Call>(&e);
  if (!c || c->args.size() != 2 || emit::print_expr(*c->func) != "isinstance") return std::nullopt;
  const std::string type = emit::print_expr(*c->args[1]);
  if (type != "tl.tensor_descriptor" && type != "triton.language.tensor_descriptor") return std::nullopt;
  auto *n = dyn_cast<Name>(c->args[0].get());
  if (!n) return std::nullopt;
  std::function<bool(const StmtList &)> assigns_descriptor = [&](const StmtList &block) {
    for (const StmtPtr &st : block) {
      if (auto *a = dyn_cast<Assign>(st.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()) &&
                                                 cast<Name>(a->targets[0].get())->id == n->id)
        if (auto *value = dyn_cast<Call>(a->value.get())) {
          const std::string callee = emit::print_expr(*value->func);
          if (callee == "tl.make_tensor_descriptor" || callee == "triton.language.make_tensor_descriptor") return true;
        }
      if (auto *i = dyn_cast<If>(st.get()); i && (assigns_descriptor(i->body) || assigns_descriptor(i->orelse)))
        return true;
      if (auto *f = dyn_cast<For>(st.get()); f && assigns_descriptor(f->body)) return true;
    }
    return false;
  };
  if (assigns_descriptor(kernel_.body)) return true;
  for (const Param &p : kernel_.params)
    if (p.name == n->id) return false;
  return std::nullopt;
}

// The value of an expression Triton computes when it compiles, or none.
std::optional<CompileTimeValue> CompileTimeConditions::value_of(const Expr &e) const {
  using K = CompileTimeValue::Kind;
  if (auto *i = dyn_cast<IntLit>(&e)) return CompileTimeValue{K::Int, static_cast<long long>(i->value), ""};
  if (auto *b = dyn_cast<BoolLit>(&e)) return CompileTimeValue{K::Int, b->value ? 1 : 0, ""};
  if (auto *t = dyn_cast<StrLit>(&e)) return CompileTimeValue{K::Str, 0, t->value};
  if (isa<NoneLit>(&e)) return CompileTimeValue{K::None, 0, ""};
  if (auto *n = dyn_cast<Name>(&e)) {
    auto it = values_.find(n->id);
    if (it != values_.end()) return it->second;
    return std::nullopt;
  }
  if (auto *a = dyn_cast<Attribute>(&e)) {
    auto *base = dyn_cast<Name>(a->value.get());
    if (base && (base->id == "tl") && sema::is_dtype_name(a->attr)) return CompileTimeValue{K::DType, 0, "tl." + a->attr};
    return std::nullopt;
  }
  if (std::optional<bool> d = descriptor_test(e)) return CompileTimeValue{K::Int, *d ? 1 : 0, ""};
  if (auto *u = dyn_cast<UnaryOp>(&e)) {
    std::optional<CompileTimeValue> v = value_of(*u->operand);
    if (!v || v->kind != K::Int) {
      if (v && u->op == UnaryOpKind::Not && v->kind == K::None) return CompileTimeValue{K::Int, 1, ""};
      return std::nullopt;
    }
    if (u->op == UnaryOpKind::Not) return CompileTimeValue{K::Int, v->n == 0 ? 1 : 0, ""};
    if (u->op == UnaryOpKind::Neg) return CompileTimeValue{K::Int, -v->n, ""};
    return std::nullopt;
  }
  if (auto *b = dyn_cast<BinOp>(&e)) {
    std::optional<CompileTimeValue> l = value_of(*b->lhs), r = value_of(*b->rhs);
    if (!l || !r || l->kind != K::Int || r->kind != K::Int) return std::nullopt;
    long long x = l->n, y = r->n;
    switch (b->op) {
      case BinaryOpKind::Add: return CompileTimeValue{K::Int, x + y, ""};
      case BinaryOpKind::Sub: return CompileTimeValue{K::Int, x - y, ""};
      case BinaryOpKind::Mul: return CompileTimeValue{K::Int, x * y, ""};
      case BinaryOpKind::BitAnd: return CompileTimeValue{K::Int, x & y, ""};
      case BinaryOpKind::BitOr: return CompileTimeValue{K::Int, x | y, ""};
      default: return std::nullopt;
    }
  }
  if (auto *b = dyn_cast<BoolOp>(&e)) {
    const bool is_and = b->op == BoolOpKind::And;
    for (const ExprPtr &v : b->values) {
      std::optional<CompileTimeValue> x = value_of(*v);
      if (!x || x->kind != K::Int) return std::nullopt;
      if ((x->n != 0) != is_and) return CompileTimeValue{K::Int, is_and ? 0 : 1, ""};
    }
    return CompileTimeValue{K::Int, is_and ? 1 : 0, ""};
  }
  if (auto *c = dyn_cast<Compare>(&e); c && c->ops.size() == 1) {
    std::optional<CompileTimeValue> l = value_of(*c->left), r = value_of(*c->comparators[0]);
    if (!l || !r) return std::nullopt;
    const CompareOpKind op = c->ops[0];
    if (op == CompareOpKind::Eq || op == CompareOpKind::Is || op == CompareOpKind::NotEq || op == CompareOpKind::IsNot) {
      const bool same = l->kind == r->kind && (*l == *r);
      if (l->kind != r->kind && !(l->kind == K::None || r->kind == K::None)) return std::nullopt;
      const bool eq = op == CompareOpKind::Eq || op == CompareOpKind::Is;
      return CompileTimeValue{K::Int, same == eq ? 1 : 0, ""};
    }
    if (l->kind != K::Int || r->kind != K::Int) return std::nullopt;
    switch (op) {
      case CompareOpKind::Lt: return CompileTimeValue{K::Int, l->n < r->n ? 1 : 0, ""};
      case CompareOpKind::LtE: return CompileTimeValue{K::Int, l->n <= r->n ? 1 : 0, ""};
      case CompareOpKind::Gt: return CompileTimeValue{K::Int, l->n > r->n ? 1 : 0, ""};
      case CompareOpKind::GtE: return CompileTimeValue{K::Int, l->n >= r->n ? 1 : 0, ""};
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

// `dtype = tl.float16` (or a conditional expression the values decide),
// assigned once in the kernel: a dtype the conditions may compare.
void CompileTimeConditions::note_dtype_locals(StmtList &body) {
  std::map<std::string, int> assigned;
  count_assignments(kernel_.body, assigned);
  for (StmtPtr &st : body) {
    auto *a = dyn_cast<Assign>(st.get());
    if (!a || a->targets.size() != 1 || !isa<Name>(a->targets[0].get())) continue;
    fold_expressions(a->value);
    const std::string &n = cast<Name>(a->targets[0].get())->id;
    std::optional<CompileTimeValue> v = value_of(*a->value);
    if (v && v->kind == CompileTimeValue::Kind::DType && assigned[n] == 1) values_[n] = *v;
  }
}

// The branch of an if or conditional expression whose condition is decided: true for the first.
std::optional<bool> CompileTimeConditions::taken(const Expr &cond) const {
  std::optional<CompileTimeValue> c = value_of(cond);
  if (!c || c->kind == CompileTimeValue::Kind::Str) return std::nullopt;
  return c->kind == CompileTimeValue::Kind::Int ? c->n != 0 : c->kind != CompileTimeValue::Kind::None;
}

// A value Triton knows when it compiles: a literal, a tl.constexpr parameter,
// a tl attribute (a dtype), arithmetic on them.
bool CompileTimeConditions::is_static(const Expr &e) const {
  if (isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e) || isa<StrLit>(&e) || isa<NoneLit>(&e)) return true;
  if (auto *n = dyn_cast<Name>(&e)) {
    for (size_t k = 0; k < kernel_.params.size(); ++k)
      if (kernel_.params[k].name == n->id) return kernel_.is_constexpr_param(k);
    return false;
  }
  if (auto *a = dyn_cast<Attribute>(&e)) return isa<Name>(a->value.get()) && cast<Name>(a->value.get())->id == "tl";
  if (auto *b = dyn_cast<BinOp>(&e)) return is_static(*b->lhs) && is_static(*b->rhs);
  if (auto *u = dyn_cast<UnaryOp>(&e)) return is_static(*u->operand);
  return false;
}

bool CompileTimeConditions::choose_branch(ExprPtr &x, bool static_only) const {
  auto *i = dyn_cast<IfExp>(x.get());
  if (!i || (static_only && (!is_static(*i->then_value) || !is_static(*i->else_value)))) return false;
  std::optional<bool> then = taken(*i->cond);
  if (!then) return false;
  ExprPtr chosen = std::move(*then ? i->then_value : i->else_value);
  x = std::move(chosen);
  return true;
}

void CompileTimeConditions::fold_expressions(ExprPtr &e) const {
  rewrite_expr(e, [&](ExprPtr &x) { choose_branch(x, false); });
}

// Ifs whose condition is decided reduced to the branch taken, at any depth.
void CompileTimeConditions::fold_decided(StmtList &body) const {
  StmtList out;
  for (StmtPtr &st : body) {
    if (auto *i = dyn_cast<If>(st.get())) {
      if (std::optional<bool> then = taken(*i->cond)) {
        StmtList &branch = *then ? i->body : i->orelse;
        fold_decided(branch);
        for (StmtPtr &x : branch) out.push_back(std::move(x));
        continue;
      }
      fold_decided(i->body);
      fold_decided(i->orelse);
    } else if (auto *f = dyn_cast<For>(st.get())) {
      fold_decided(f->body);
    } else if (auto *w = dyn_cast<While>(st.get())) {
      fold_decided(w->body);
    } else if (auto *a = dyn_cast<Assign>(st.get())) {
      fold_expressions(a->value);
    }
    out.push_back(std::move(st));
  }
  body = std::move(out);
}

// Only between values Triton knows when it compiles: a runtime branch (fla's
// `0 if not REVERSE else NT - 1`) stays, with the types its merge gives.
bool CompileTimeConditions::fold_static_conditionals(StmtList &body) const {
  bool any = false;
  rewrite_block(body, [&](ExprPtr &x) { any |= choose_branch(x, true); });
  return any;
}

}  // namespace tgrad::lower
