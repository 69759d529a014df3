// What the adjoint of one statement is: the rule of its operation
// instantiated, calls of jit functions, scans, and the accumulation of
// contributions with unbroadcast.
#include <algorithm>
#include <functional>

#include "src/ad/Rules.h"
#include "src/ad/ScanCombine.h"
#include "src/ad/reverse/Engine.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::ad::reverse {

namespace {

// Operations that Triton broadcasts their operands for: their adjoint
// contributions have the output's shape and must be summed back.
bool broadcasts_operands(const std::string &op) {
  static const std::set<std::string> ops = {"add", "sub", "mul", "truediv", "where", "maximum", "minimum", "fma",
                                            "pow", "broadcast_to", "copy", "store", "join", "interleave"};
  return ops.count(op) > 0;
}

// Differentiable in principle but with a zero gradient almost everywhere.
bool zero_gradient(const std::string &op) {
  static const std::set<std::string> ops = {"floor", "ceil", "argmax", "argmin", "zeros_like", "full", "zeros",
                                            "arange", "program_id", "num_programs", "cdiv",
                                            "trunc", "rint", "nearbyint", "round"};
  return ops.count(op) > 0;
}

}  // namespace

struct Engine::Instance {
  Engine &engine;
  const Function &rule;
  const Op &op;
  const std::string &target;
  const Expr &forward;
  std::map<std::string, const Expr *> bound;
  std::map<std::string, std::string> locals;  // rule local -> fresh name

  bool is_param(const std::string &n) const { return bound.count(n) > 0; }

  ExprPtr subst(const Expr &e) {
    ExprPtr c = clone(e);
    replace(c);
    return fold(std::move(c));
  }

  void replace(ExprPtr &e) {
    switch (e->kind) {
      case NodeKind::Name: {
        const std::string id = cast<Name>(e.get())->id;
        if (id == "y") e = name(target, e->span);
        else if (id == "by") e = engine.adjoint_of_result(target);
        else if (bound.count(id)) e = bound[id] ? clone(*bound[id]) : std::make_unique<NoneLit>();
        else if (locals.count(id)) e = name(locals[id]);
        else if (id == "libdevice") engine.uses_libdevice_ = true;
        return;
      }
      case NodeKind::Attribute: replace(cast<Attribute>(e.get())->value); return;
      case NodeKind::Subscript: {
        auto *sub = cast<Subscript>(e.get());
        replace(sub->value);
        for (ExprPtr &i : sub->indices) replace(i);
        // `by[k]` of a tuple-valued operation: element k itself.
        if (auto *t = dyn_cast<Tuple>(sub->value.get()); t && sub->indices.size() == 1)
          if (auto *k = dyn_cast<IntLit>(sub->indices[0].get()); k && k->value < t->elts.size()) {
            ExprPtr element = std::move(t->elts[static_cast<size_t>(k->value)]);
            e = std::move(element);
          }
        return;
      }
      case NodeKind::Call:
        replace(cast<Call>(e.get())->func);
        for (ExprPtr &a : cast<Call>(e.get())->args) replace(a);
        for (Keyword &k : cast<Call>(e.get())->keywords) replace(k.value);
        return;
      case NodeKind::UnaryOp: replace(cast<UnaryOp>(e.get())->operand); return;
      case NodeKind::BinOp:
        replace(cast<BinOp>(e.get())->lhs);
        replace(cast<BinOp>(e.get())->rhs);
        return;
      case NodeKind::Compare:
        replace(cast<Compare>(e.get())->left);
        for (ExprPtr &c : cast<Compare>(e.get())->comparators) replace(c);
        return;
      case NodeKind::Tuple:
        for (ExprPtr &x : cast<Tuple>(e.get())->elts) replace(x);
        return;
      default: return;
    }
  }

  // `not False` -> True; keywords given None are left out (the callee's default).
  static ExprPtr fold(ExprPtr e) {
    if (auto *u = dyn_cast<UnaryOp>(e.get()); u && u->op == UnaryOpKind::Not) {
      u->operand = fold(std::move(u->operand));
      if (auto *b = dyn_cast<BoolLit>(u->operand.get())) return std::make_unique<BoolLit>(!b->value, e->span);
      return e;
    }
    if (auto *c = dyn_cast<Call>(e.get())) {
      for (ExprPtr &a : c->args) a = fold(std::move(a));
      std::vector<Keyword> kept;
      for (Keyword &k : c->keywords) {
        k.value = fold(std::move(k.value));
        if (!isa<NoneLit>(k.value.get())) kept.push_back(std::move(k));
      }
      c->keywords = std::move(kept);
      return e;
    }
    if (auto *b = dyn_cast<BinOp>(e.get())) {
      b->lhs = fold(std::move(b->lhs));
      b->rhs = fold(std::move(b->rhs));
    }
    if (auto *u = dyn_cast<UnaryOp>(e.get())) u->operand = fold(std::move(u->operand));
    return e;
  }

  // A rule's constexpr condition, after substitution.
  bool condition(const Expr &e) {
    ExprPtr c = subst(e);
    if (auto *b = dyn_cast<BoolLit>(c.get())) return b->value;
    if (auto *i = dyn_cast<IntLit>(c.get())) return i->value != 0;
    if (isa<NoneLit>(c.get())) return false;
    if (auto *cmp = dyn_cast<Compare>(c.get()); cmp && cmp->ops.size() == 1 &&
                                                (cmp->ops[0] == CompareOpKind::Is || cmp->ops[0] == CompareOpKind::IsNot) &&
                                                isa<NoneLit>(cmp->comparators[0].get())) {
      bool is_none = isa<NoneLit>(cmp->left.get());
      return cmp->ops[0] == CompareOpKind::Is ? is_none : !is_none;
    }
    if (auto *b = dyn_cast<BoolOp>(c.get())) {  // `a or b`, `a and b` of such conditions
      bool any = false, all = true;
      for (const ExprPtr &v : b->values) {
        const bool x = condition(*v);
        any |= x;
        all &= x;
      }
      return b->op == BoolOpKind::Or ? any : all;
    }
    if (std::optional<bool> known = static_comparison(*c)) return *known;
    // `x.shape[k] < n` where the dimension is a symbol: taken as not below
    // (tile sizes: Triton itself rejects the backward if one is).
    if (auto *cmp = dyn_cast<Compare>(c.get());
        cmp && cmp->ops.size() == 1 && cmp->ops[0] == CompareOpKind::Lt && shape_dimension(*cmp->left) &&
        static_int(*cmp->comparators[0]))
      return false;
    fail(forward.span, "the adjoint of '" + op.key + "' needs its keyword arguments to be literals (True, False, None, "
                       "an integer), not " + emit::print_expr(*c));
  }

  // The type of x in `x.shape`, an operand's tensor type.
  const SType *shape_owner(const Expr &e) const {
    auto *attr = dyn_cast<Attribute>(&e);
    auto *x = attr && attr->attr == "shape" ? dyn_cast<Name>(attr->value.get()) : nullptr;
    const SType *t = x ? engine.type_of_name(x->id) : nullptr;
    return t && t->is_tensor() ? t : nullptr;
  }

  // `x.shape[k]` (k may count from the end): that dimension, known or a symbol.
  const sema::Dim *shape_dimension(const Expr &e) const {
    auto *sub = dyn_cast<Subscript>(&e);
    const SType *t = sub && sub->indices.size() == 1 ? shape_owner(*sub->value) : nullptr;
    std::optional<long long> axis = t ? static_int(*sub->indices[0]) : std::nullopt;
    if (!axis) return nullptr;
    const long long rank = static_cast<long long>(t->shape.size());
    if (*axis < 0) *axis += rank;
    return *axis >= 0 && *axis < rank ? &t->shape[static_cast<size_t>(*axis)] : nullptr;
  }

  // An integer the rule knows when it is instantiated: a literal (negated
  // or not), `len(x.shape)` (an operand's rank) or a known `x.shape[k]`.
  std::optional<long long> static_int(const Expr &e) const {
    if (auto *k = dyn_cast<IntLit>(&e)) return static_cast<long long>(k->value);
    if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg)
      if (std::optional<long long> v = static_int(*u->operand)) return -*v;
    if (const sema::Dim *d = shape_dimension(e)) return d->value ? std::optional<long long>(*d->value) : std::nullopt;
    auto *call = dyn_cast<Call>(&e);
    auto *fn = call ? dyn_cast<Name>(call->func.get()) : nullptr;
    if (!fn || fn->id != "len" || call->args.size() != 1) return std::nullopt;
    const SType *t = shape_owner(*call->args[0]);
    return t ? std::optional<long long>(static_cast<long long>(t->shape.size())) : std::nullopt;
  }

  // `a == b` (or !=, <, <=, >, >=) of two such integers.
  std::optional<bool> static_comparison(const Expr &c) const {
    auto *cmp = dyn_cast<Compare>(&c);
    if (!cmp || cmp->ops.size() != 1) return std::nullopt;
    std::optional<long long> a = static_int(*cmp->left), b = static_int(*cmp->comparators[0]);
    if (!a || !b) return std::nullopt;
    switch (cmp->ops[0]) {
      case CompareOpKind::Eq: return *a == *b;
      case CompareOpKind::NotEq: return *a != *b;
      case CompareOpKind::Lt: return *a < *b;
      case CompareOpKind::LtE: return *a <= *b;
      case CompareOpKind::Gt: return *a > *b;
      case CompareOpKind::GtE: return *a >= *b;
      default: return std::nullopt;
    }
  }

  void block(const StmtList &body) {
    for (const StmtPtr &s : body) {
      if (auto *i = dyn_cast<If>(s.get())) {
        block(condition(*i->cond) ? i->body : i->orelse);
        continue;
      }
      auto *a = dyn_cast<Assign>(s.get());
      if (!a) continue;
      const std::string lhs = cast<Name>(a->targets[0].get())->id;
      // b<param>: a contribution to that operand.
      if (lhs.size() > 1 && lhs[0] == 'b' && is_param(lhs.substr(1))) {
        const Expr *operand = bound[lhs.substr(1)];
        const Name *n = operand ? dyn_cast<Name>(operand) : nullptr;
        if (!n) continue;  // a literal or None: no adjoint
        if (!engine.is_active(n->id)) continue;
        engine.contribute(n->id, subst(*a->value), op.key, target, forward.span);
        continue;
      }
      // A local of the rule.
      ExprPtr v = subst(*a->value);
      std::string fresh = engine.names_.fresh(lhs);
      locals[lhs] = fresh;
      engine.emit_stmt(assign(fresh, std::move(v)));
    }
  }
};

Engine::Op Engine::classify(const Expr &v) {
  Op op;
  switch (v.kind) {
    case NodeKind::Name:
      op.key = "copy";
      op.args = {&v};
      return op;
    case NodeKind::BinOp: {
      auto *b = cast<BinOp>(&v);
      switch (b->op) {
        case BinaryOpKind::Add: op.key = "add"; break;
        case BinaryOpKind::Sub: op.key = "sub"; break;
        case BinaryOpKind::Mul: op.key = "mul"; break;
        case BinaryOpKind::Div: op.key = "truediv"; break;
        default: op.key = std::string("operator ") + spelling(b->op);
      }
      op.args = {b->lhs.get(), b->rhs.get()};
      return op;
    }
    case NodeKind::UnaryOp: {
      auto *u = cast<UnaryOp>(&v);
      op.key = u->op == UnaryOpKind::Neg ? "neg" : u->op == UnaryOpKind::Pos ? "pos" : std::string("operator ") + spelling(u->op);
      op.args = {u->operand.get()};
      return op;
    }
    case NodeKind::Subscript: {
      auto *sub = cast<Subscript>(&v);
      const SType *base = anf_types_.type_of(sub->value.get());
      op.key = base && base->kind == SType::Kind::Tuple ? "tuple element" : "index";
      op.args = {sub->value.get()};
      if (op.key == "tuple element") op.args.push_back(sub->indices[0].get());
      return op;
    }
    case NodeKind::Call: {
      auto *c = cast<Call>(&v);
      const SType *f = anf_types_.type_of(c->func.get());
      if (f && f->kind == SType::Kind::Function) {
        op.key = "jit call";
        op.callee = f->fn;
        for (const ExprPtr &a : c->args) op.args.push_back(a.get());
        for (const Keyword &kw : c->keywords) op.kws.push_back(&kw);
        return op;
      }
      std::string full = f && f->kind == SType::Kind::Builtin ? f->s : "";
      if (full == "tl.inline_asm_elementwise" && classify_approximation(*c, op)) return op;
      if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && full.rfind("tensor.", 0) == 0)
        op.args.push_back(attr->value.get());  // the method's receiver
      std::string k = full.substr(full.find('.') + 1);
      if (full == "tensor.to" || full == "tl.cast") k = "cast";
      if (k == "view") k = "reshape";
      if (full == "min" || full == "max") k = full == "min" ? "minimum" : "maximum";  // Python's, on tensors
      op.key = k.empty() ? "call" : k;
      for (const ExprPtr &a : c->args) op.args.push_back(a.get());
      for (const Keyword &kw : c->keywords) op.kws.push_back(&kw);
      if (full.rfind("tl.", 0) == 0) operands_by_keyword(op);
      return op;
    }
    case NodeKind::Attribute: {
      // `x.T`: Triton's tl.trans(x). (Other attributes, x.dtype and x.shape,
      // hold no data: their key stays the node's kind.)
      auto *a = cast<Attribute>(&v);
      if (a->attr == "T") {
        op.key = "trans";
        op.args = {a->value.get()};
        return op;
      }
      op.key = kind_name(v.kind);
      return op;
    }
    default: op.key = kind_name(v.kind); return op;
  }
}

// Operands a tl function call names by keyword (`tl.sum(input=x, axis=0)`,
// `tl.where(condition=c, x=a, y=b)`) become positional, as the rules take
// them: Triton's names of each function's leading operands, in order.
void Engine::operands_by_keyword(Op &op) {
  static const std::map<std::string, std::vector<std::string>> kLeading = {
      {"where", {"condition", "x", "y"}}, {"maximum", {"x", "y"}}, {"minimum", {"x", "y"}},
      {"fma", {"x", "y", "z"}},           {"clamp", {"x", "min", "max"}}, {"dot", {"input", "other"}},
      {"atan2", {"x", "y"}},              {"pow", {"x", "y"}},            {"div_rn", {"x", "y"}},
      {"fdiv", {"x", "y"}}};
  auto leading = kLeading.find(op.key);
  // Otherwise one operand, which Triton calls `input` (reductions, scans, shape
  // functions) or `x` (elementwise math).
  const std::vector<std::string> one = {"input", "x"};
  const bool single = leading == kLeading.end();
  for (size_t k = op.args.size(); single ? k < 1 : k < leading->second.size(); ++k) {
    auto kw = std::find_if(op.kws.begin(), op.kws.end(), [&](const Keyword *w) {
      return single ? std::find(one.begin(), one.end(), w->name) != one.end() : w->name == leading->second[k];
    });
    if (kw == op.kws.end()) return;
    op.args.push_back((*kw)->value.get());
    op.kws.erase(kw);
  }
}

bool Engine::classify_approximation(const Call &c, Op &op) {
  const SType *t = anf_types_.type_of(&c);
  if (!t || !t->is_tensor()) return false;
  const Expr *text = call_argument(c, 0, "asm"), *spec = call_argument(c, 1, "constraints"),
             *operands = call_argument(c, 2, "args");
  auto *asm_text = text ? dyn_cast<StrLit>(text) : nullptr;
  auto *constraints = spec ? dyn_cast<StrLit>(spec) : nullptr;
  const ExprList *elts = !operands ? nullptr
                         : isa<List>(operands) ? &cast<List>(operands)->elts
                         : isa<Tuple>(operands) ? &cast<Tuple>(operands)->elts : nullptr;
  if (!asm_text || !constraints || !elts || elts->size() != 1) return false;
  const std::string function = sema::approximated_math_function(asm_text->value, constraints->value);
  if (function.empty()) return false;
  op.key = function;
  op.args = {(*elts)[0].get()};
  return true;
}

std::string Engine::generic_helper(const char *helper, const std::string &definition, const std::string &comment) {
  if (!generic_helpers_.insert(helper).second) return helper;
  if (module_.find_function(helper))
    fail(fn_->name_span, std::string("the file defines '") + helper +
                             "', the name of a helper generic backwards use: rename it or give the types with --arg");
  add_support_function(helper + definition, comment);
  return helper;
}

std::string Engine::unbroadcast_helper() {
  return generic_helper(sema::kUnbroadcastHelper,
                        "(g, x):\n"
                        "    for _ in tl.static_range(len(g.shape) - len(x.shape)):\n"
                        "        g = tl.sum(g, 0)\n"
                        "    for axis in tl.static_range(len(x.shape)):\n"
                        "        if x.shape[axis] == 1:\n"
                        "            if g.shape[axis] != 1:\n"
                        "                g = tl.sum(g, axis, keep_dims=True)\n"
                        "    return g\n",
                        "Sums g back to x's shape: over the leading axes x lacks and the axes where x has size 1, the "
                        "axes along which Triton broadcast x (resolved when Triton compiles each call).");
}

ExprPtr Engine::zero_adjoint(const std::string &x) {
  const SType *t = type_of_name(x);
  // Generic: the value may be half precision for another caller.
  const bool narrow = t && t->is_tensor() && !t->elem.is_pointer &&
                      (t->elem.dtype == sema::DType::FP16 || t->elem.dtype == sema::DType::BF16 || sema::is_fp8(t->elem.dtype) ||
                       (generic() && t->elem.dtype == sema::DType::FP32));
  // A value a loop carries (a matmul's accumulator, whose epilogue an if on a tl.constexpr guards: assigned before
  // the loop and in it): its zeros are written from its type where each dimension is a number or a tl.constexpr
  // parameter, so that the adjoint does not read the value, which would keep the loop's replay alive for its shape
  // alone. (Not a value of one iteration: its adjoint is made where the value is, and `x.shape` follows the
  // owners' reoriented tiles, src/ad/reverse/TileOrientation.h.)
  if (!loop_assigned_) {
    loop_assigned_.emplace();
    std::map<std::string, std::set<int>> depths;  // name -> the loop depths it is assigned at
    std::function<void(const StmtList &, int)> walk = [&](const StmtList &block, int depth) {
      for (const StmtPtr &s : block) {
        if (!isa<For>(s.get()) && !isa<While>(s.get()) && !isa<If>(s.get())) {  // (their own targets only)
          std::map<std::string, int> assigned;
          stmt_assignments(*s, assigned);
          for (const auto &kv : assigned) depths[kv.first].insert(depth);
        }
        if (auto *f = dyn_cast<For>(s.get())) walk(f->body, depth + 1);
        if (auto *w = dyn_cast<While>(s.get())) walk(w->body, depth + 1);
        if (auto *i = dyn_cast<If>(s.get())) {
          walk(i->body, depth);
          walk(i->orelse, depth);
        }
      }
    };
    walk(anf_.fn->body, 0);
    for (const auto &[n, at] : depths)
      if (at.size() > 1) loop_assigned_->insert(n);
  }
  ExprList dims;
  if (t && t->is_tensor() && !t->elem.is_pointer && !t->shape.empty() && loop_assigned_->count(x) &&
      sema::is_float(t->elem.dtype) && (narrow || !generic()))
    for (const sema::Dim &d : t->shape) {
      if (d.value) {
        dims.push_back(int_lit(*d.value));
        continue;
      }
      bool constexpr_param = false;
      for (size_t k = 0; k < fn_->params.size(); ++k)
        constexpr_param |= fn_->params[k].name == d.symbol && fn_->is_constexpr_param(k);
      if (!constexpr_param) {
        dims.clear();
        break;
      }
      dims.push_back(name(d.symbol));
    }
  if (!dims.empty()) {
    std::vector<Keyword> kws;
    kws.push_back({"dtype", {}, dotted_name(narrow ? "tl.float32" : std::string("tl.") + sema::tl_name(t->elem.dtype))});
    return call("tl.zeros", list(std::make_unique<List>(std::move(dims))), std::move(kws));
  }
  if (narrow) {
    std::vector<Keyword> kws;
    kws.push_back({"dtype", {}, dotted_name("tl.float32")});
    return call("tl.zeros", list(std::make_unique<Attribute>(name(x), "shape")), std::move(kws));
  }
  return call("tl.zeros_like", list(name(x)));
}

void Engine::own_adjoint_variable(const std::string &x) {
  auto it = adjoint_.find(x);
  if (it == adjoint_.end()) {
    std::string b = names_.fresh("b" + x);
    emit_stmt(assign(b, zero_adjoint(x)));
    adjoint_[x] = b;
  } else if (aliased_.count(x)) {
    std::string b = names_.fresh("b" + x);
    emit_stmt(assign(b, name(it->second)));
    adjoint_[x] = b;
    aliased_.erase(x);
  }
}

void Engine::begin_block(const Stmt *origin) {
  if (origin == current_block_) return;
  current_block_ = origin;
  pending_comment_ = origin ? "Grad of: " + first_line(*origin) : "";
}

std::string Engine::first_line(const Stmt &s) {
  std::string text = emit::print_stmts([&] {
    StmtList l;
    l.push_back(clone(s));
    return l;
  }());
  size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

void Engine::emit_stmt(StmtPtr s) {
  if (!pending_comment_.empty()) {
    s->leading_comment = s->leading_comment.empty() ? pending_comment_ : pending_comment_ + "\n" + s->leading_comment;
    pending_comment_.clear();
  }
  out_->push_back(std::move(s));
}

void Engine::differentiate_stmt(const std::string &target, const Expr &value, const std::set<std::string> &active) {
  Op op = classify(value);
  bool any_active_operand = false;
  for (const Expr *a : op.args) {
    if (auto *n = as_name(*a)) any_active_operand |= active.count(n->id) > 0;
    if (auto *t = dyn_cast<Tuple>(a))  // a scan's inputs
      for (const ExprPtr &e : t->elts)
        if (auto *n = as_name(*e)) any_active_operand |= active.count(n->id) > 0;
  }
  for (const Keyword *k : op.kws)
    if (auto *n = as_name(*k->value)) any_active_operand |= active.count(n->id) > 0;
  // A value that reads a differentiated name's data through an expression
  // the classification gives no operands (x.T did, before it was
  // tl.trans(x)): its gradient would be dropped without a word. (x.dtype,
  // x.shape: no data.)
  if (!any_active_operand && !zero_gradient(op.key)) {
    std::string reached;
    std::function<void(const Expr &)> data_reads = [&](const Expr &e) {
      if (auto *a = dyn_cast<Attribute>(&e); a && a->attr != "T") return;
      if (auto *n = dyn_cast<Name>(&e); n && active.count(n->id) && reached.empty()) reached = n->id;
      // (for_each_child takes a mutable node; this walk only reads.)
      for_each_child(const_cast<Expr &>(e), [&](ExprPtr &c) { data_reads(*c); });
    };
    data_reads(value);
    if (!reached.empty())
      fail(value.span, "tgrad has no adjoint rule for this " + op.key + " expression, through which '" + reached +
                           "' reaches the outputs; write it with the tl operations tgrad differentiates");
  }
  if (!any_active_operand || zero_gradient(op.key)) return;
  // No gradient reached the target (its only uses have a zero gradient,
  // like floor's): nothing flows back.
  auto reached = adjoint_.find(target);
  if (reached == adjoint_.end()) return;
  const std::string &bt = reached->second;

  if (op.key == "copy") {
    contribute(as_name(*op.args[0])->id, name(bt), op.key, target, value.span);
    return;
  }
  if (op.key == "tuple element") {
    // y = t[k]: y's adjoint is element k of t's (a tuple of adjoints).
    tuple_adjoint_[as_name(*op.args[0])->id][static_int(*op.args[1])] = bt;
    adjoint_.emplace(as_name(*op.args[0])->id, "");  // t is reached
    return;
  }
  if (op.key == "jit call") return differentiate_call(op, target, value, active);
  if (op.key == "associative_scan") return differentiate_scan(op, target, value);
  if (op.key == "reduce") return differentiate_reduce(op, target, value);
  if ((op.key == "trans" || op.key == "permute") && op.args.size() > 1) {
    // Explicit dims: the adjoint applies the inverse permutation.
    std::vector<int64_t> order;
    for (size_t k = 1; k < op.args.size(); ++k) {
      const Expr *d = op.args[k];
      if (auto *t = dyn_cast<Tuple>(d)) {
        for (const ExprPtr &x : t->elts) order.push_back(static_int(*x));
      } else if (auto *l = dyn_cast<List>(d)) {
        for (const ExprPtr &x : l->elts) order.push_back(static_int(*x));
      } else {
        order.push_back(static_int(*d));
      }
    }
    std::vector<int64_t> inverse(order.size());
    for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
    ExprList dims;
    for (int64_t d : inverse) dims.push_back(int_lit(d));
    contribute(as_name(*op.args[0])->id, call("tl.permute", list(name(bt), std::make_unique<Tuple>(std::move(dims)))),
               op.key, target, value.span);
    return;
  }
  if (op.key == "cast")
    for (const Keyword *k : op.kws)
      if (k->name == "bitcast" && !(isa<BoolLit>(k->value.get()) && !cast<BoolLit>(k->value.get())->value))
        fail(value.span, "a bitcast is not differentiable: it reinterprets bits, it does not convert values");
  // The cast of an fp8 value (`q.to(tl.float32)` after a quantizing `q = (x * s).to(tl.float8e4nv)`): its
  // gradient stays in float32. Cast back to fp8, as the rule casts back to the operand's dtype, it would keep 2 or
  // 3 bits of mantissa and saturate at 448 (e4m3): the straight-through gradient of the quantization, lost.
  if (op.key == "cast" && !op.args.empty())
    if (auto *x = as_name(*op.args[0]))
      if (const SType *t = type_of_name(x->id); t && t->is_tensor() && sema::is_fp8(t->elem.dtype)) {
        contribute(x->id, cast_to(name(bt), dotted_name("tl.float32")), op.key, target, value.span);
        return;
      }

  // `m, i = tl.max(x, axis, return_indices=True)`: the values' gradient is tl.max's, the indices have none.
  if ((op.key == "max" || op.key == "min") &&
      std::any_of(op.kws.begin(), op.kws.end(), [](const Keyword *k) {
        return k->name == "return_indices" && !(isa<BoolLit>(k->value.get()) && !cast<BoolLit>(k->value.get())->value);
      })) {
    const SType *result = type_of_name(target);
    std::optional<std::string> bv = element_adjoint(target, 0);
    if (!result || result->kind != SType::Kind::Tuple || !bv) return;  // only the indices were used
    // The values under the name the forward gave them (`m` of `m, i = ...`), else a name of their own.
    std::string values;
    std::map<std::string, int> assignments;
    count_assignments(anf_.fn->body, assignments);
    each_assignment(anf_.fn->body, [&](const std::string &n, const Expr &v) {
      if (assignments[n] != 1) return;  // (one value under that name: the one the replay computes)
      auto *sub = dyn_cast<Subscript>(&v);
      auto *of = sub ? dyn_cast<Name>(sub->value.get()) : nullptr;
      if (values.empty() && of && of->id == target && sub->indices.size() == 1 && isa<IntLit>(sub->indices[0].get()) &&
          cast<IntLit>(sub->indices[0].get())->value == 0)
        values = n;
    });
    if (values.empty()) {
      ExprList first;
      first.push_back(int_lit(0));
      values = names_.fresh(target + "_values");
      emit_stmt(assign(values, std::make_unique<Subscript>(name(target), std::move(first))));
      name_types_[values] = result->elems[0];
    }
    adjoint_[values] = *bv;  // (the forward's name already has it: the tuple's element 0 is its adjoint)
    Op as_values = op;
    as_values.kws.erase(std::remove_if(as_values.kws.begin(), as_values.kws.end(),
                                       [](const Keyword *k) { return k->name.rfind("return_indices", 0) == 0; }),
                        as_values.kws.end());
    return instantiate(*find_rule(op.key), as_values, values, value);
  }
  const Function *rule = find_rule(op.key);
  if (!rule) {
    std::string supported;
    for (const std::string &r : rule_names()) supported += (supported.empty() ? "" : ", ") + r;
    fail(value.span, "tgrad has no adjoint rule for '" + op.key + "'; supported operations: " + supported +
                         " (and the non-differentiable ones: comparisons, integer operations, floor, ceil, argmax, "
                         "argmin, arange, program_id)");
  }
  instantiate(*rule, op, target, value);
}

std::string Engine::add_callee_backward(Backward &b) {
  // A generic helper's backward does not depend on the types of the call
  // (its casts are kept): one already emitted for another signature that
  // is the same function serves this call too.
  if (const Function *made = b.module->find_function(b.backward_name); made && generic()) {
    std::unique_ptr<Function> renamed = clone(*made);  // compared under each emitted function's name
    for (const auto &e : extra_functions_) {
      renamed->name = e->name;
      if (equal(*renamed, *e)) return e->name;
    }
  }
  // Another specialisation of g already took the name: rename this one.
  NameAllocator taken;
  for (const auto &f : extra_functions_) taken.reserve(f->name);
  for (const auto &f : module_.functions) taken.reserve(f->name);
  const std::string unique = taken.fresh(b.backward_name);
  for (auto &f : b.module->functions) {
    if (f->name == b.backward_name) f->name = unique;
    bool dup = false;
    for (const auto &e : extra_functions_) dup |= e->name == f->name;
    if (!dup && f->name != fn_->name) extra_functions_.push_back(std::move(f));
  }
  return unique;
}

void Engine::differentiate_call(const Op &op, const std::string &target, const Expr &value, const std::set<std::string> &active) {
  const Function &g = *op.callee;
  std::map<std::string, const Expr *> arg_of;
  for (size_t k = 0; k < op.args.size() && k < g.params.size(); ++k) arg_of[g.params[k].name] = op.args[k];
  for (const Keyword *kw : op.kws) arg_of[kw->name] = kw->value.get();
  BackwardRequest sub;
  sub.function = g.name;
  std::string key = g.name + "(";
  std::vector<std::string> active_args;  // the caller's names, in g's wrt order
  for (const Param &p : g.params) {
    auto it = arg_of.find(p.name);
    if (it == arg_of.end()) continue;
    const Expr &arg = *it->second;
    // A name's recorded type, else the expression's (a tl.constexpr without a value: its symbol).
    const SType *t = isa<Name>(&arg) ? type_of_name(cast<Name>(&arg)->id) : nullptr;
    if (!t) t = anf_types_.type_of(&arg);
    if (t) sub.param_types[p.name] = *t;
    // A generic backward's helpers are generic too: their casts are kept.
    if (t && t->is_tensor() && generic()) sub.generic_params.insert(p.name);
    if (auto *n = dyn_cast<Name>(&arg); n && active.count(n->id) && is_float_tensor(t)) {
      sub.wrt.push_back(p.name);
      active_args.push_back(n->id);
    }
    key += p.name + ":" + (t ? t->str() : "?") + (n_active(arg, active) ? "*" : "") + ",";
  }
  key += ")";
  std::string bwd_name;
  std::vector<std::string> out_adjoint_params;
  auto cached = callee_backwards_.find(key);
  if (cached != callee_backwards_.end()) {
    bwd_name = cached->second.name;
  } else {
    Engine inner(module_, sources_, sub, diags_);
    inner.depth_ = depth_ + 1;
    if (depth_ > 16) fail(value.span, "jit function calls nested too deeply to differentiate");
    std::optional<Backward> b = inner.run();
    if (!b) fail(value.span, "cannot differentiate the call of '" + g.name + "' (see the errors above)");
    uses_libdevice_ |= inner.uses_libdevice_;
    bwd_name = add_callee_backward(*b);
    cached = callee_backwards_.emplace(key, CalleeBackward{bwd_name, inner.lane_wise_body()}).first;
  }
  const std::string call_op = cached->second.lane_wise ? kLaneWiseCall : "jit call";
  // g_bwd takes g's parameters and then the adjoints of g's outputs, all
  // positionally: a parameter the call left to its default gets it here (the
  // backward's parameters keep no defaults), else an adjoint would fill its slot.
  ExprList args;
  for (const Param &p : g.params) {
    auto it = arg_of.find(p.name);
    if (it != arg_of.end()) {
      args.push_back(clone(*it->second));
    } else if (p.default_value) {
      args.push_back(clone(*p.default_value));
    } else {
      fail(value.span, "the call of '" + g.name + "' gives no value for its parameter '" + p.name + "'");
    }
  }
  // The adjoints of g's outputs: this value's adjoint, or per element of a tuple.
  ExprPtr by = adjoint_of_result(target);
  if (auto *t = dyn_cast<Tuple>(by.get())) {
    for (ExprPtr &element : t->elts) args.push_back(std::move(element));
  } else {
    args.push_back(std::move(by));
  }
  ExprPtr the_call = std::make_unique<Call>(name(bwd_name), std::move(args), std::vector<Keyword>{}, value.span);
  if (active_args.empty()) return;
  if (active_args.size() == 1) {
    contribute(active_args[0], std::move(the_call), call_op, target, value.span);
    return;
  }
  ExprList targets;
  std::vector<std::string> parts;
  for (const std::string &a : active_args) {
    parts.push_back(names_.fresh("_b" + a));
    targets.push_back(name(parts.back()));
  }
  ExprList lhs;
  lhs.push_back(std::make_unique<Tuple>(std::move(targets)));
  emit_stmt(std::make_unique<Assign>(std::move(lhs), std::move(the_call)));
  for (size_t k = 0; k < active_args.size(); ++k) contribute(active_args[k], name(parts[k]), call_op, target, value.span);
}

ExprPtr Engine::adjoint_of_result(const std::string &target) {
  const SType *result = type_of_name(target);
  if (!result || result->kind != SType::Kind::Tuple) return name(adjoint_.at(target));
  ExprList parts;
  for (size_t k = 0; k < result->elems.size(); ++k) {
    if (std::optional<std::string> element = element_adjoint(target, k)) {
      parts.push_back(name(*element));
    } else {
      ExprList idx;
      idx.push_back(int_lit(static_cast<int64_t>(k)));
      parts.push_back(call("tl.zeros_like", list(std::make_unique<Subscript>(name(target), std::move(idx)))));
    }
  }
  return std::make_unique<Tuple>(std::move(parts));
}

std::optional<std::string> Engine::element_adjoint(const std::string &target, size_t k) const {
  auto t = tuple_adjoint_.find(target);
  if (t == tuple_adjoint_.end()) return std::nullopt;
  auto it = t->second.find(static_cast<int64_t>(k));
  if (it == t->second.end()) return std::nullopt;
  return it->second;
}

std::string Engine::affine_scan_helper() {
  static const char *kName = "_tgrad_affine_scan";
  if (has_affine_scan_helper_) return kName;
  if (module_.find_function(kName))
    fail(fn_->name_span, std::string("the file defines '") + kName + "', the name of a helper tgrad's scan backwards use: "
                         "rename it");
  add_support_function(std::string(kName) +
                           "(a1, b1, c1, d1, a2, b2, c2, d2):\n"
                           "    return a1 * a2, b1 * a2 + b2, a1 * c2, b1 * c2 + d2\n",
                       "Composes two steps of a first-order recurrence v -> a*v + b (and the value c*v + d read "
                       "from it): the combine function of the scans in the backward of tl.associative_scan.");
  has_affine_scan_helper_ = true;
  return kName;
}

void Engine::differentiate_scan(const Op &op, const std::string &target, const Expr &value) {
  const Expr *input = op.args.size() > 0 ? op.args[0] : nullptr;
  const Expr *axis = op.args.size() > 1 ? op.args[1] : nullptr;
  const Expr *combine = op.args.size() > 2 ? op.args[2] : nullptr;
  const Expr *reverse = op.args.size() > 3 ? op.args[3] : nullptr;
  for (const Keyword *k : op.kws) {
    if (k->name == "input") input = k->value.get();
    else if (k->name == "axis") axis = k->value.get();
    else if (k->name == "combine_fn") combine = k->value.get();
    else if (k->name == "reverse") reverse = k->value.get();
  }
  const SType *fn_type = combine ? anf_types_.type_of(combine) : nullptr;
  if (!input || !axis || !fn_type || fn_type->kind != SType::Kind::Function)
    fail(value.span, "tgrad cannot tell which combine function this tl.associative_scan uses");
  std::vector<const Expr *> inputs;
  if (auto *t = dyn_cast<Tuple>(input)) {
    for (const ExprPtr &e : t->elts) inputs.push_back(e.get());
  } else {
    inputs.push_back(input);
  }
  const ScanCombine kind = classify_scan_combine(module_, *fn_type->fn, inputs.size());
  auto reversed = [&](bool flip) -> ExprPtr {
    ExprPtr r = reverse ? clone(*reverse) : std::make_unique<BoolLit>(false);
    if (!flip) return r;
    if (auto *b = dyn_cast<BoolLit>(r.get())) return std::make_unique<BoolLit>(!b->value);
    return std::make_unique<UnaryOp>(UnaryOpKind::Not, std::move(r));
  };
  auto keyword = [](const std::string &k, ExprPtr v) {
    std::vector<Keyword> kws;
    kws.push_back({k, {}, std::move(v)});
    return kws;
  };
  auto adjoint_of = [&](size_t k) { return element_adjoint(target, k); };
  if (kind.kind == ScanCombine::Kind::Sum) {
    // A one-element tuple `(x,)` gives a one-element tuple.
    std::optional<std::string> by = isa<Tuple>(input) ? adjoint_of(0) : std::optional<std::string>(adjoint_.at(target));
    if (const Name *x = as_name(*inputs[0]); by && x && is_active(x->id))
      contribute(x->id, call("tl.cumsum", list(name(*by), clone(*axis)), keyword("reverse", reversed(true))),
                 "associative_scan", target, value.span);
    return;
  }
  if (kind.kind != ScanCombine::Kind::FirstOrderRecurrence)
    fail(value.span, "tgrad differentiates tl.associative_scan with a running sum (combine(a, b) = a + b) or a "
                     "first-order linear recurrence (combine((a1, h1), (a2, h2)) = (a1 * a2, h1 * a2 + h2)); '" +
                         fn_type->fn->name + "' computes neither. Write the scan as one of these, or as a loop");
  const Name *a = as_name(*inputs[kind.coefficient]), *x = as_name(*inputs[kind.state]);
  if (!a || !x) fail(value.span, "tgrad needs the inputs of this tl.associative_scan as names");
  const std::string helper = affine_scan_helper();
  // In fp32, whatever the inputs' dtypes: the four elements of a scan
  // keep one type through the combine function.
  auto f32_name = [&](const std::string &n, const std::string &hint) {
    std::string fresh = names_.fresh(hint);
    emit_stmt(assign(fresh, cast_to(name(n), dotted_name("tl.float32"))));
    return fresh;
  };
  const std::string a32 = f32_name(a->id, a->id + "_f32");
  const std::string ones = names_.fresh("ones");
  emit_stmt(assign(ones, std::make_unique<BinOp>(BinaryOpKind::Add, call("tl.zeros_like", list(name(a32))),
                                                 std::make_unique<FloatLit>(1.0, "1.0"))));
  // scan((a, b, c, d), axis, helper, reverse)[k]
  auto scan = [&](ExprPtr b, ExprPtr c, ExprPtr d, bool flip, int64_t k) {
    ExprList elts;
    elts.push_back(name(a32));
    elts.push_back(std::move(b));
    elts.push_back(std::move(c));
    elts.push_back(std::move(d));
    ExprList args;
    args.push_back(std::make_unique<Tuple>(std::move(elts)));
    args.push_back(clone(*axis));
    args.push_back(name(helper));
    ExprPtr s = call("tl.associative_scan", std::move(args), keyword("reverse", reversed(flip)));
    ExprList idx;
    idx.push_back(int_lit(k));
    return std::make_unique<Subscript>(std::move(s), std::move(idx));
  };
  auto mul = [](ExprPtr l, ExprPtr r) { return std::make_unique<BinOp>(BinaryOpKind::Mul, std::move(l), std::move(r)); };
  auto zeros = [&]() { return call("tl.zeros_like", list(name(a32))); };
  // The adjoint g of a recurrence with coefficients a, given the adjoint bv of its values.
  auto adjoint_recurrence = [&](const std::string &bv, const std::string &hint) {
    const std::string bv32 = f32_name(bv, bv + "_f32");
    const std::string g = names_.fresh(hint);
    emit_stmt(assign(g, scan(mul(name(a32), name(bv32)), name(ones), name(bv32), /*flip=*/true, 3)));
    return g;
  };
  if (std::optional<std::string> bh = adjoint_of(kind.state)) {
    const std::string g = adjoint_recurrence(*bh, "g_" + x->id);
    const std::string x32 = f32_name(x->id, x->id + "_f32");
    const std::string previous = names_.fresh(x->id + "_previous");  // h[t-1], 0 before the first
    emit_stmt(assign(previous, scan(name(x32), name(ones), zeros(), /*flip=*/false, 3)));
    if (is_active(x->id)) contribute(x->id, name(g), "associative_scan", target, value.span);
    if (is_active(a->id)) contribute(a->id, mul(name(g), name(previous)), "associative_scan", target, value.span);
  }
  if (std::optional<std::string> bp = adjoint_of(kind.coefficient); bp && is_active(a->id)) {
    const std::string g = adjoint_recurrence(*bp, "g_" + a->id);
    const std::string previous = names_.fresh(a->id + "_previous_product");  // 1 before the first
    emit_stmt(assign(previous, scan(zeros(), name(ones), zeros(), /*flip=*/false, 2)));
    contribute(a->id, mul(name(g), name(previous)), "associative_scan", target, value.span);
  }
}

bool Engine::n_active(const Expr &e, const std::set<std::string> &active) {
  auto *n = dyn_cast<Name>(&e);
  return n && active.count(n->id);
}

int64_t Engine::static_int(const Expr &e) {
  if (auto *i = dyn_cast<IntLit>(&e)) return static_cast<int64_t>(i->value);
  if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg) return -static_int(*u->operand);
  fail(e.span, "a permutation must be written with integer literals to be differentiated");
}

void Engine::differentiate_reduce(const Op &op, const std::string &target, const Expr &value) {
  const Expr *input = op.args.size() > 0 ? op.args[0] : nullptr;
  const Expr *axis = op.args.size() > 1 ? op.args[1] : nullptr;
  const Expr *combine = op.args.size() > 2 ? op.args[2] : nullptr;
  const Keyword *keep_dims = nullptr;
  for (const Keyword *k : op.kws) {
    if (k->name == "input") input = k->value.get();
    else if (k->name == "axis") axis = k->value.get();
    else if (k->name == "combine_fn") combine = k->value.get();
    else if (k->name == "keep_dims") keep_dims = k;
  }
  const SType *fn_type = combine ? anf_types_.type_of(combine) : nullptr;
  if (!input || !fn_type || fn_type->kind != SType::Kind::Function)
    fail(value.span, "tgrad cannot tell which combine function this tl.reduce uses");
  const SType *input_type = anf_types_.type_of(input);
  const bool several = isa<Tuple>(input) || (input_type && input_type->kind == SType::Kind::Tuple);
  const ReduceCombine kind = several ? ReduceCombine::Other : classify_reduce_combine(module_, *fn_type->fn);
  if (kind == ReduceCombine::Other)
    fail(value.span, "tgrad differentiates tl.reduce of one tensor whose combine function sums, multiplies, or takes "
                     "the maximum or the minimum of two elements; '" + fn_type->fn->name + "' " +
                         (several ? "reduces several tensors together (a Welford step, an index with its value)"
                                  : "computes none of these") +
                         ". Write the reduction with tl.sum, tl.max or tl.min (a mean and a variance as two sums), "
                         "or as a loop");
  // The rule of the reduction it computes, with the forward's operands: (x, axis) and keep_dims, and for a product
  // the combine function too (the rule reduces the nonzero lanes with it).
  Op as_rule = op;
  switch (kind) {
    case ReduceCombine::Sum: as_rule.key = "sum"; break;
    case ReduceCombine::Max: as_rule.key = "max"; break;
    case ReduceCombine::Min: as_rule.key = "min"; break;
    default: as_rule.key = "reduce_product"; break;
  }
  as_rule.args.clear();
  as_rule.kws.clear();
  as_rule.args.push_back(input);
  std::optional<NoneLit> no_axis;
  if (!axis) axis = &no_axis.emplace(value.span);
  as_rule.args.push_back(axis);
  if (kind == ReduceCombine::Product) as_rule.args.push_back(combine);
  if (keep_dims) as_rule.kws.push_back(keep_dims);
  const Function *rule = find_rule(as_rule.key);
  if (!rule) fail(value.span, "tgrad has no adjoint rule for '" + as_rule.key + "'");
  instantiate(*rule, as_rule, target, value);
}

void Engine::instantiate(const Function &rule, const Op &op, const std::string &target, const Expr &value) {
  std::map<std::string, const Expr *> bound;  // rule parameter -> forward expression
  std::vector<const Param *> inputs, keywords;
  bool seen_by = false;
  for (const Param &p : rule.params) {
    if (p.name == "y") continue;
    if (p.name == "by") {
      seen_by = true;
      continue;
    }
    (!seen_by ? inputs : keywords).push_back(&p);
  }
  if (op.args.size() < inputs.size())
    fail(value.span, "the adjoint rule of '" + op.key + "' needs " + std::to_string(inputs.size()) + " operands");
  size_t k = 0;
  for (; k < inputs.size(); ++k) bound[inputs[k]->name] = op.args[k];
  static const std::set<std::string> variadic = {"reshape", "broadcast_to", "trans", "permute", "expand_dims"};
  for (size_t j = 0; k < op.args.size(); ++k, ++j) {
    if (j < keywords.size()) bound[keywords[j]->name] = op.args[k];
    else if (!variadic.count(op.key))
      fail(value.span, "too many arguments for tgrad's adjoint of '" + op.key + "'");
  }
  for (const Keyword *kw : op.kws) {
    bool known = false;
    for (const Param *p : keywords) known |= p->name == kw->name;
    if (!known) {
      std::string supported;
      for (const Param *p : keywords) supported += (supported.empty() ? "" : ", ") + p->name;
      fail(kw->name_span, "tgrad's adjoint of '" + op.key + "' does not support the keyword '" + kw->name + "'" +
                              (supported.empty() ? "" : " (it supports: " + supported + ")"));
    }
    bound[kw->name] = kw->value.get();
  }
  for (const Param *p : keywords)
    if (!bound.count(p->name)) bound[p->name] = p->default_value.get();

  if (op.key == "gather") {  // the rule's one-hot sums are written for ranks 1 and 2
    const Name *src = dyn_cast<Name>(op.args[0]);
    const SType *t = src ? type_of_name(src->id) : nullptr;
    if (t && t->is_tensor() && t->shape.size() > 2)
      fail(value.span, "tgrad differentiates tl.gather on tensors of rank 1 and 2, not " + shape_str(t->shape) +
                           "; gather from a reshaped 2-D tensor");
  }
  Instance inst{*this, rule, op, target, value, bound, {}};
  inst.block(rule.body);
}


void Engine::contribute(const std::string &x, ExprPtr e, const std::string &op, const std::string &y, const SourceSpan &span) {
  (void)span;
  if (drops_contributions(x)) return;
  {
    std::optional<LaneMask> mask = mask_contribution(x, e, op, y);
    auto known = lane_masks_.find(x);
    if (!adjoint_.count(x)) lane_masks_[x] = mask;
    else if (known == lane_masks_.end() || known->second != mask) lane_masks_[x] = std::nullopt;
  }
  bool summed = false;
  const SType *gx = request_.generic_shapes ? type_of_name(x) : nullptr;
  if (gx && gx->is_tensor() && broadcasts_operands(op)) {
    // Shapes unknown until Triton compiles the backward: the helper sums
    // over whatever axes the operation broadcast x along.
    e = call(unbroadcast_helper(), list(std::move(e), name(x)));
    summed = true;
  } else if (broadcasts_operands(op)) {
    const SType *tx = type_of_name(x), *ty = type_of_name(y);
    if (tx && ty && tx->is_tensor() && ty->is_tensor()) {
      const sema::SymShape &sx = tx->shape;
      // The shape the operands were broadcast to: y's, less the axis tl.join adds (tl.interleave doubles the last).
      sema::SymShape sy = ty->shape;
      if ((op == "join" || op == "interleave") && !sy.empty()) {
        sema::Dim last = sy.back();
        sy.pop_back();
        if (op == "interleave" && !sy.empty()) {
          if (last.value) sy.push_back(sema::Dim::known(*last.value / 2));
          else if (last.symbol.rfind("2 * ", 0) == 0) sy.push_back(sema::Dim::symbolic(last.symbol.substr(4)));
          else sy.push_back(sema::Dim::symbolic("(" + last.symbol + ") // 2"));
        }
      }
      const size_t rx = sx.size(), ry = sy.size();
      if (rx == 0 && ry > 0) {
        e = call("tl.sum", list(std::move(e)));
        summed = true;
      } else {
        for (size_t i = 0; i + rx < ry; ++i) {
          e = call("tl.sum", list(std::move(e), int_lit(0)));
          summed = true;
        }
        for (size_t k = 0; k < rx && ry >= rx; ++k) {
          const sema::Dim &dx = sx[k], &dy = sy[ry - rx + k];
          bool x_one = dx.value && *dx.value == 1, y_one = dy.value && *dy.value == 1;
          if (x_one && !y_one) {
            std::vector<Keyword> kw;
            kw.push_back({"keep_dims", {}, std::make_unique<BoolLit>(true)});
            e = call("tl.sum", list(std::move(e), int_lit(static_cast<int64_t>(k))), std::move(kw));
            summed = true;
          } else if (dx != dy && !x_one) {
            summed = true;  // symbolic dimensions assumed equal: assert it
          }
        }
      }
    }
  }
  auto it = adjoint_.find(x);
  const bool first = it == adjoint_.end();
  if (first && !summed) {
    // The first contribution: a plain adjoint name is an alias, not a copy.
    if (auto *n = dyn_cast<Name>(e.get())) {
      adjoint_[x] = n->id;
      aliased_.insert(x);
      return;
    }
    std::string b = names_.fresh("b" + x);
    adjoint_[x] = b;
    emit_stmt(assign(b, std::move(e)));
    return;
  }
  // Where a sum undid a broadcast, assert the shape it relied on.
  std::string holder = first ? names_.fresh("b" + x) : names_.fresh("_b" + x);
  if (summed) {
    emit_stmt(assign(holder, std::move(e)));
    // (Not where x may be a Python number: `choice = lse if not SPLIT else 0.0` has no .shape with SPLIT.)
    const SType *xt = type_of_name(x);
    bool number = false;  // assigned a Python number on some path (through copies)
    std::set<std::string> seen;
    std::function<void(const std::string &)> look = [&](const std::string &n) {
      auto d = defs_of_.find(n);
      if (number || !seen.insert(n).second || d == defs_of_.end()) return;
      for (const Assign *a : d->second) {
        const Expr *v = a->value.get();
        if (auto *u = dyn_cast<UnaryOp>(v)) v = u->operand.get();
        number |= isa<FloatLit>(v) || isa<IntLit>(v) || isa<BoolLit>(v);
        if (auto *c = dyn_cast<Name>(v)) look(c->id);
      }
    };
    look(x);
    if (xt && xt->is_tensor() && !number) {
      ExprPtr cond =
          equals(std::make_unique<Attribute>(name(holder), "shape"), std::make_unique<Attribute>(name(x), "shape"));
      emit_stmt(std::make_unique<ExprStmt>(call("tl.static_assert", list(std::move(cond)))));
    }
    if (first) {
      adjoint_[x] = holder;
      return;
    }
    e = name(holder);
  }
  if (aliased_.count(x)) {
    // The adjoint so far is another value's adjoint: start a new one.
    aliased_.erase(x);
    std::string b = names_.fresh("b" + x);
    emit_stmt(assign(b, std::make_unique<BinOp>(BinaryOpKind::Add, name(it->second), std::move(e))));
    adjoint_[x] = b;
    return;
  }
  emit_stmt(std::make_unique<AugAssign>(name(it->second), BinaryOpKind::Add, std::move(e)));
}

}  // namespace tgrad::ad::reverse
