#include "tgrad/sema/Sema.h"

#include "tgrad/sema/Names.h"

#include "tgrad/ast/Walk.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace tgrad::sema {

using namespace ast;

// ------------------------------------------------------------------ SType

std::string shape_str(const SymShape &s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + s[k].str();
  return out + "]";
}

SType SType::none() {
  SType t;
  t.kind = Kind::None;
  t.known = true;
  return t;
}
SType SType::of_int(long long v) {
  SType t;
  t.kind = Kind::Int;
  t.known = true;
  t.n = v;
  return t;
}
SType SType::int_symbol(std::string sym) {
  SType t;
  t.kind = Kind::Int;
  t.sym = std::move(sym);
  return t;
}
SType SType::of_float(double v, bool known) {
  SType t;
  t.kind = Kind::Float;
  t.known = known;
  t.x = v;
  return t;
}
SType SType::of_bool(bool v, bool known) {
  SType t;
  t.kind = Kind::Bool;
  t.known = known;
  t.b = v;
  return t;
}
SType SType::of_str(std::string v) {
  SType t;
  t.kind = Kind::Str;
  t.known = true;
  t.s = std::move(v);
  return t;
}
SType SType::of_dtype(DType d, bool pointer) {
  SType t;
  t.kind = Kind::DType;
  t.known = true;
  t.dtype = d;
  t.dtype_is_pointer = pointer;
  return t;
}
SType SType::tensor(ElemType e, SymShape shape) {
  SType t;
  t.kind = Kind::Tensor;
  t.elem = e;
  t.shape = std::move(shape);
  return t;
}
SType SType::tuple(std::vector<SType> elems) {
  SType t;
  t.kind = Kind::Tuple;
  t.elems = std::move(elems);
  return t;
}
SType SType::namespace_(std::string name) {
  SType t;
  t.kind = Kind::Namespace;
  t.s = std::move(name);
  return t;
}
SType SType::builtin(std::string name, std::shared_ptr<SType> self) {
  SType t;
  t.kind = Kind::Builtin;
  t.s = std::move(name);
  t.self = std::move(self);
  return t;
}

std::string SType::str() const {
  switch (kind) {
    case Kind::Unknown: return "?";
    case Kind::None: return "None";
    case Kind::Bool: return known ? std::string("constexpr bool ") + (b ? "True" : "False") : "constexpr bool";
    case Kind::Int: return known ? "constexpr int " + std::to_string(n) : sym.empty() ? "constexpr int" : "constexpr int " + sym;
    case Kind::Float: {
      if (!known) return "constexpr float";
      std::ostringstream o;
      o << "constexpr float " << x;
      return o.str();
    }
    case Kind::Str: return "constexpr str '" + s + "'";
    case Kind::DType: return std::string("dtype ") + (dtype_is_pointer ? "*" : "") + short_name(dtype);
    case Kind::Tensor: return elem.str() + (shape.empty() ? "" : shape_str(shape));
    case Kind::Tuple: {
      std::string out = "tuple(";
      for (size_t k = 0; k < elems.size(); ++k) out += (k ? ", " : "") + elems[k].str();
      return out + ")";
    }
    case Kind::Function: return "jit function " + fn->name;
    case Kind::Namespace: return "module " + s;
    case Kind::Builtin: return "function " + s;
    case Kind::Slice: return "slice";
  }
  return "?";
}

namespace {

struct SemaError {
  SourceSpan span;
  std::string message;
};

bool same_type(const SType &a, const SType &b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case SType::Kind::Tensor: return a.elem == b.elem && a.shape == b.shape;
    case SType::Kind::Tuple:
      if (a.elems.size() != b.elems.size()) return false;
      for (size_t k = 0; k < a.elems.size(); ++k)
        if (!same_type(a.elems[k], b.elems[k])) return false;
      return true;
    case SType::Kind::DType: return a.dtype == b.dtype && a.dtype_is_pointer == b.dtype_is_pointer;
    default: return true;  // constants of one kind: a loop may change their value
  }
}

class Checker {
 public:
  Checker(const Module &m, TypeInfo &info) : module_(m), info_(info) {}

  // `entry`: `fn` is the kernel analysed, launched from the host, where a tl.constexpr parameter's default is
  // only what a launch that leaves it out gets (Liger's rope kernel defaults BACKWARD_PASS to False and its
  // backward launches it with True): without a value given, it is a constexpr of unknown value like one
  // without a default. A call from another jit function that leaves it out gets the default.
  SType call_function(const Function &fn, const std::map<std::string, SType> &args, const SourceSpan &span,
                      bool entry = false) {
    if (depth_ > 32) fail(span, "jit function calls nested more than 32 deep (recursion is not supported by Triton)");
    ++depth_;
    Env env;
    for (size_t k = 0; k < fn.params.size(); ++k) {
      const Param &p = fn.params[k];
      auto it = args.find(p.name);
      if (it != args.end()) env[p.name] = it->second;
      else if (entry && fn.is_constexpr_param(k)) env[p.name] = SType::int_symbol(p.name);
      else if (p.default_value) env[p.name] = eval(*p.default_value, env);
      else if (fn.is_constexpr_param(k)) env[p.name] = SType::int_symbol(p.name);
      else env[p.name] = SType::unknown();
    }
    std::optional<SType> result;
    exec_block(fn.body, env, result);
    --depth_;
    return result ? *result : SType::none();
  }

 private:
  using Env = std::map<std::string, SType>;
  static constexpr const char *kUndefinedOnSomePath = "\x01undefined";

  [[noreturn]] void fail(const SourceSpan &span, const std::string &message) { throw SemaError{span, message}; }

  // ------------------------------------------------------------ statements

  // Returns true when the block ends in a return on every path.
  bool exec_block(const StmtList &body, Env &env, std::optional<SType> &result) {
    for (const StmtPtr &s : body)
      if (exec(*s, env, result)) return true;
    return false;
  }

  void merge_return(std::optional<SType> &result, const SType &t, const SourceSpan &span) {
    // Constants of different kinds from returns under conditions tgrad cannot decide (FlagGems' limits: -inf for a
    // float dtype, 0 for an unsigned one, typed without the dtype): Triton compiles one of them per specialization;
    // the value is unknown here.
    auto constant = [](const SType &x) {
      return !x.is_tensor() && (x.kind == SType::Kind::Int || x.kind == SType::Kind::Float ||
                                x.kind == SType::Kind::Bool || x.kind == SType::Kind::DType);
    };
    if (result && constant(*result) && constant(t) && !same_type(*result, t)) {
      result = SType::unknown();
      return;
    }
    if (result && result->kind != SType::Kind::Unknown && t.kind != SType::Kind::Unknown && !same_type(*result, t))
      fail(span, "this return gives " + t.str() + ", an earlier one " + result->str() + "; every return must give one type");
    if (!result || result->kind == SType::Kind::Unknown) result = t;
  }

  bool exec(const Stmt &s, Env &env, std::optional<SType> &result) {
    switch (s.kind) {
      case NodeKind::ExprStmt: eval(*cast<ExprStmt>(&s)->value, env); return false;
      case NodeKind::Assign: {
        auto *n = cast<Assign>(&s);
        SType v = eval(*n->value, env);
        for (const ExprPtr &t : n->targets) assign(*t, v, env);
        return false;
      }
      case NodeKind::AugAssign: {
        auto *n = cast<AugAssign>(&s);
        if (!isa<Name>(n->target.get())) fail(n->target->span, "augmented assignment to this target is not supported");
        SType v = binary(n->op, eval(*n->target, env), eval(*n->value, env), s.span);
        assign(*n->target, v, env);
        return false;
      }
      case NodeKind::AnnAssign: {
        auto *n = cast<AnnAssign>(&s);
        if (n->value) assign(*n->target, eval(*n->value, env), env);
        return false;
      }
      case NodeKind::If: {
        auto *n = cast<If>(&s);
        SType c = eval(*n->cond, env);
        if (c.is_tensor() && !c.shape.empty())
          fail(n->cond->span, "a condition must be a scalar, not a tensor of shape " + shape_str(c.shape) +
                                  "; use tl.where for element-wise choice");
        if (c.known && c.kind != SType::Kind::Str) {  // a constexpr condition selects one branch
          const bool taken = known_truth(c).value_or(c.kind != SType::Kind::None);
          return exec_block(taken ? n->body : n->orelse, env, result);
        }
        Env then_env = env, else_env = env;
        bool then_returns = exec_block(n->body, then_env, result);
        bool else_returns = exec_block(n->orelse, else_env, result);
        if (then_returns && else_returns) return true;
        if (then_returns) env = else_env;
        else if (else_returns) env = then_env;
        // A tl.constexpr condition without a value: Triton takes one branch at
        // compile time, so the branches may disagree; only runtime ifs must agree.
        else if (n->guards_early_return) env = join_dead(then_env, else_env);
        else env = join(then_env, else_env, s.span, /*strict=*/c.is_tensor(), n->cond.get());
        return false;
      }
      case NodeKind::For: {
        auto *n = cast<For>(&s);
        SType var = loop_variable(*n, env);
        auto *name = dyn_cast<Name>(n->target.get());
        if (!name) fail(n->target->span, "the loop variable must be a single name");
        loop(n->body, env, result, name->id, var, s.span);
        return false;
      }
      case NodeKind::While: {
        auto *n = cast<While>(&s);
        SType c = eval(*n->cond, env);
        if (c.is_tensor() && !c.shape.empty())
          fail(n->cond->span, "a while condition must be a scalar, not a tensor of shape " + shape_str(c.shape));
        loop(n->body, env, result, "", SType(), s.span);
        eval(*n->cond, env);
        return false;
      }
      case NodeKind::Return: {
        auto *n = cast<Return>(&s);
        merge_return(result, n->value ? eval(*n->value, env) : SType::none(), s.span);
        return true;
      }
      case NodeKind::Pass: return false;
      case NodeKind::Assert: {
        auto *n = cast<Assert>(&s);
        eval(*n->test, env);
        if (n->msg) eval(*n->msg, env);
        return false;
      }
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        break;
    }
    return false;
  }

  // Variables after an if that ends the function (an early return's guard):
  // nothing reads them, as the early return itself (`if c: return` then
  // `NC = min(NC, ...)`: Triton joins no types there), so a name whose
  // types differ is simply not defined after it.
  Env join_dead(const Env &a, const Env &b) {
    Env out;
    for (const auto &kv : a) {
      auto it = b.find(kv.first);
      out[kv.first] = it != b.end() && same_type(kv.second, it->second) ? kv.second : undefined_marker();
    }
    for (const auto &kv : b)
      if (!out.count(kv.first)) out[kv.first] = undefined_marker();
    return out;
  }

  // Variables after an if: one type on both paths, or not defined after it.
  // `strict` is false for a tl.constexpr condition without a value: Triton
  // keeps one branch per specialization, so a name one branch defines is
  // defined in the specializations that take it (`if HAS_BIAS: b = ...`
  // ... `if HAS_BIAS: y += b` is valid Triton), and the branches' types
  // need not agree.
  Env join(const Env &a, const Env &b, const SourceSpan &span, bool strict, const Expr *cond = nullptr) {
    Env out;
    for (const auto &kv : a) {
      auto it = b.find(kv.first);
      if (it == b.end()) {
        out[kv.first] = strict ? undefined_marker() : kv.second;
        continue;
      }
      const SType &x = kv.second, &y = it->second;
      if (!strict && (is_undefined(x) || is_undefined(y))) {
        out[kv.first] = is_undefined(x) ? y : x;
      } else if (is_undefined(x) || is_undefined(y)) {
        out[kv.first] = undefined_marker();
      } else if (std::optional<SType> t = literal_merge(x, y)) {
        out[kv.first] = *t;
      } else if (x.kind == SType::Kind::Unknown || y.kind == SType::Kind::Unknown) {
        out[kv.first] = SType::unknown();
      } else if (!same_type(x, y)) {
        if (!strict && same_kind_number_and_scalar(x, y)) {
          // `if REVERSE: o = T - 1 else: o = 0` (a tl.constexpr condition, a
          // Python number and a Triton scalar, both integers or both
          // floats): the scalar's type, as for the conditional expression
          // this comes from; arithmetic with either promotes alike.
          out[kv.first] = is_scalar_value(x) ? x : y;
          continue;
        }
        if (!strict) {
          out[kv.first] = SType::unknown();
          if (cond) info_.divergent_names[cond].push_back(kv.first);
          continue;
        }
        fail(span, "'" + kv.first + "' is " + x.str() + " on one path of this if and " + y.str() +
                       " on the other; Triton needs one type after the if");
      } else {
        SType merged = x;
        // A constant that differs between the paths is no longer known.
        if (x.known && (x.n != y.n || x.x != y.x || x.b != y.b || x.s != y.s)) merged.known = false;
        out[kv.first] = merged;
      }
    }
    for (const auto &kv : b)
      if (!out.count(kv.first)) out[kv.first] = strict ? undefined_marker() : kv.second;
    return out;
  }

  // A Python number on one side and a scalar tensor on the other (`d = 0.0`
  // before a loop that adds fp32 scalars to it, or on one branch of a runtime
  // if): Triton makes the number a tensor (semantic.to_tensor: 0.0 is fp32,
  // 0 int32), which must then have the other side's type: `s = 0.0` against
  // the fp16 sum of fp16 data is a type mismatch Triton rejects (measured
  // on the H100, Triton 3.6).
  // The dtype Triton gives a Python number assigned to a variable.
  static std::optional<DType> number_dtype(const SType &t) {
    if (t.kind == SType::Kind::Float) return t.known ? python_float_dtype(t.x) : DType::FP32;
    if (t.kind == SType::Kind::Int) return t.known ? python_int_dtype(t.n) : DType::Int32;
    if (t.kind == SType::Kind::Bool) return DType::Int1;
    return std::nullopt;
  }

  static bool is_scalar_value(const SType &t) { return t.is_tensor() && t.shape.empty() && !t.elem.is_pointer; }
  static bool same_kind_number_and_scalar(const SType &x, const SType &y) {
    auto fits = [](const SType &number, const SType &scalar) {
      if (!is_scalar_value(scalar)) return false;
      const bool float_scalar = sema::is_float(scalar.elem.dtype);
      if (number.kind == SType::Kind::Int) return !float_scalar && scalar.elem.dtype != DType::Int1;
      if (number.kind == SType::Kind::Float) return float_scalar;
      return false;
    };
    return fits(x, y) || fits(y, x);
  }

  static std::optional<SType> literal_merge(const SType &x, const SType &y) {
    auto scalar = [](const SType &t) { return t.is_tensor() && t.shape.empty() && !t.elem.is_pointer; };
    if (std::optional<DType> d = number_dtype(x); d && scalar(y) && *d == y.elem.dtype) return y;
    if (std::optional<DType> d = number_dtype(y); d && scalar(x) && *d == x.elem.dtype) return x;
    return std::nullopt;
  }

  // Two tensors of one element type and rank whose shapes differ only where
  // a dimension is symbolic (K against BK): equal for some constexpr values.
  static bool equal_if_symbols_agree(const SType &x, const SType &y) {
    if (!x.is_tensor() || !y.is_tensor() || !(x.elem == y.elem) || x.shape.size() != y.shape.size()) return false;
    for (size_t k = 0; k < x.shape.size(); ++k)
      if (x.shape[k].value && y.shape[k].value && *x.shape[k].value != *y.shape[k].value) return false;
    return true;
  }

  static SType undefined_marker() {
    SType t;
    t.kind = SType::Kind::Unknown;
    t.s = kUndefinedOnSomePath;
    return t;
  }
  static bool is_undefined(const SType &t) { return t.kind == SType::Kind::Unknown && t.s == kUndefinedOnSomePath; }

  // A loop body is analysed with the types at entry; a loop-carried variable
  // must come out of the body with the type it went in with.
  void loop(const StmtList &body, Env &env, std::optional<SType> &result, const std::string &var, const SType &var_type,
            const SourceSpan &span) {
    Env inner = env;
    if (!var.empty()) inner[var] = var_type;
    Env before = inner;
    exec_block(body, inner, result);
    // A Python number carried into a loop that makes it a scalar tensor
    // (`d = 0.0` before `d += tl.sum(x)`): Triton made the number a tensor
    // when it was assigned (0.0 is fp32), so the body runs on that tensor:
    // analyse it again so (fp32 + an fp16 sum is fp32, as on the GPU).
    bool again = false;
    for (auto &kv : before) {
      auto it = inner.find(kv.first);
      if (it == inner.end() || kv.first == var || !it->second.is_tensor() || !it->second.shape.empty()) continue;
      if (std::optional<DType> d = number_dtype(kv.second)) {
        kv.second = SType::tensor(ElemType{*d, false}, {});
        again = true;
      }
    }
    if (again) {
      inner = before;
      exec_block(body, inner, result);
    }
    for (const auto &kv : before) {
      auto it = inner.find(kv.first);
      if (it == inner.end() || kv.first == var) continue;
      const SType &x = kv.second, &y = it->second;
      if (x.kind == SType::Kind::Unknown || y.kind == SType::Kind::Unknown || is_undefined(y)) continue;
      if (literal_merge(x, y)) continue;
      if (!same_type(x, y) && equal_if_symbols_agree(x, y)) {
        // `b_dq = tl.zeros([BT, K])` that leaves as [BT, BK] (a dot with a
        // [BK, BK] tile): Triton compiles it only where K == BK, as it does
        // the dot; so the code assumes it, as a broadcast of the two does.
        for (size_t k = 0; k < x.shape.size(); ++k)
          if (x.shape[k] != y.shape[k]) info_.assumptions.push_back({span, x.shape[k], y.shape[k]});
        continue;
      }
      if (!same_type(x, y))
        fail(span, "loop-carried variable '" + kv.first + "' enters the loop as " + x.str() + " and leaves an iteration as " +
                       y.str() + "; Triton needs one type (cast it, e.g. .to(...), before the loop)");
    }
    // After the loop (zero or more iterations), values assigned inside are the
    // loop's: keep their types; constants assigned inside are no longer known.
    for (auto &kv : inner) {
      if (kv.first == var) continue;
      auto it = env.find(kv.first);
      SType t = kv.second;
      if (it == env.end() || is_undefined(it->second)) {
        // Assigned only inside: Triton drops it after the loop (its scope is
        // the body's), as it would be undefined if the loop ran zero times.
        env[kv.first] = undefined_marker();
        continue;
      }
      if (t.known && (t.n != it->second.n || t.x != it->second.x || t.b != it->second.b)) t.known = false;
      env[kv.first] = t;
    }
  }

  SType loop_variable(const For &s, Env &env) {
    auto *call = dyn_cast<Call>(s.iter.get());
    if (!call) fail(s.iter->span, "a for loop in a @triton.jit function must iterate over range, tl.range or tl.static_range");
    SType fn = eval(*call->func, env);
    std::string name = fn.kind == SType::Kind::Builtin ? fn.s : "";
    if (name != "range" && name != "tl.range" && name != "tl.static_range")
      fail(s.iter->span, "a for loop in a @triton.jit function must iterate over range, tl.range or tl.static_range");
    bool wide = false;
    for (const ExprPtr &a : call->args) {
      SType b = eval(*a, env);
      if (b.is_tensor() && (!b.shape.empty() || b.elem.is_pointer || is_float(b.elem.dtype)))
        fail(a->span, "a loop bound must be an integer scalar, not " + b.str());
      if (b.kind == SType::Kind::Float) fail(a->span, "a loop bound must be an integer, not " + b.str());
      if (name == "tl.static_range" && b.is_tensor())
        fail(a->span, "tl.static_range needs bounds known before the kernel runs (tl.constexpr)");
      wide |= b.is_tensor() && b.elem.dtype == DType::Int64;
    }
    for (const Keyword &k : call->keywords) eval(*k.value, env);
    if (name == "tl.static_range") return SType::int_symbol(cast<Name>(s.target.get()) ? cast<Name>(s.target.get())->id : "i");
    return SType::tensor(ElemType{wide ? DType::Int64 : DType::Int32, false}, {});
  }

  void assign(const Expr &target, const SType &value, Env &env) {
    if (auto *n = dyn_cast<Name>(&target)) {
      info_.types.insert_or_assign(&target, value);
      env[n->id] = value;
      return;
    }
    const ExprList *elts = nullptr;
    if (auto *t = dyn_cast<Tuple>(&target)) elts = &t->elts;
    if (auto *l = dyn_cast<List>(&target)) elts = &l->elts;
    if (elts) {
      if (value.kind == SType::Kind::Unknown) {
        for (const ExprPtr &e : *elts) assign(*e, SType::unknown(), env);
        return;
      }
      if (value.kind != SType::Kind::Tuple)
        fail(target.span, "cannot unpack " + value.str() + " into " + std::to_string(elts->size()) + " names");
      if (value.elems.size() != elts->size())
        fail(target.span, "cannot unpack " + std::to_string(value.elems.size()) + " values into " +
                              std::to_string(elts->size()) + " names");
      for (size_t k = 0; k < elts->size(); ++k) assign(*(*elts)[k], value.elems[k], env);
      return;
    }
    fail(target.span, "assignment to subscripts or attributes is not supported in a @triton.jit function");
  }

  // ----------------------------------------------------------- expressions

  SType eval(const Expr &e, Env &env) {
    SType t = eval_uncached(e, env);
    info_.types.insert_or_assign(&e, t);
    return t;
  }

  SType eval_uncached(const Expr &e, Env &env) {
    switch (e.kind) {
      case NodeKind::Name: return name(*cast<Name>(&e), env);
      case NodeKind::IntLit: {
        uint64_t v = cast<IntLit>(&e)->value;
        if (v > static_cast<uint64_t>(INT64_MAX)) fail(e.span, "integer literal does not fit in int64");
        return SType::of_int(static_cast<long long>(v));
      }
      case NodeKind::FloatLit: return SType::of_float(cast<FloatLit>(&e)->value);
      case NodeKind::BoolLit: return SType::of_bool(cast<BoolLit>(&e)->value);
      case NodeKind::NoneLit: return SType::none();
      case NodeKind::StrLit: return SType::of_str(cast<StrLit>(&e)->value);
      case NodeKind::EllipsisLit: fail(e.span, "'...' is not supported");
      case NodeKind::Attribute: return attribute(*cast<Attribute>(&e), env);
      case NodeKind::Subscript: return subscript(*cast<Subscript>(&e), env);
      case NodeKind::Slice: {
        auto *s = cast<Slice>(&e);
        if (s->lower || s->upper || s->step) fail(e.span, "only ':' (a whole axis) is supported as a slice");
        SType t;
        t.kind = SType::Kind::Slice;
        return t;
      }
      case NodeKind::Call: return call(*cast<Call>(&e), env);
      case NodeKind::UnaryOp: {
        auto *n = cast<UnaryOp>(&e);
        return unary(n->op, eval(*n->operand, env), e.span);
      }
      case NodeKind::BinOp: {
        auto *n = cast<BinOp>(&e);
        SType a = eval(*n->lhs, env);
        return binary(n->op, a, eval(*n->rhs, env), e.span);
      }
      case NodeKind::BoolOp: {
        auto *n = cast<BoolOp>(&e);
        // Python's and/or on values known when Triton compiles: the first
        // operand that decides (falsy for `and`, truthy for `or`), else the
        // last; a constexpr `if` on the result takes one branch.
        // On tiles, Triton's and/or are element-wise (logical_and / logical_or; Triton 3.9 warns that they are
        // deprecated there, for & and |), int1 lane by lane; operands known when Triton compiles still decide as in
        // Python, lazily (a later operand is not evaluated).
        SType last;
        bool all_known = true;
        std::vector<std::pair<const Expr *, SType>> tiles;
        for (const ExprPtr &x : n->values) {
          last = eval(*x, env);
          if (last.is_tensor() && !last.shape.empty()) {
            if (last.elem.is_pointer || last.elem.dtype != DType::Int1)
              fail(x->span, std::string("'") + spelling(n->op) + "' on " + last.elem.str() +
                                " tiles: Triton reinterprets their bits as int1; compare them first (x != 0), or use '" +
                                (n->op == BoolOpKind::And ? "&" : "|") + "'");
            tiles.push_back({x.get(), last});
            all_known = false;
            continue;
          }
          all_known &= last.known;
          if (!all_known) continue;
          std::optional<bool> truth = known_truth(last);
          if (truth && *truth == (n->op == BoolOpKind::Or)) return last;
        }
        if (!tiles.empty()) {
          SymShape shape = tiles[0].second.shape;
          for (size_t k = 1; k < tiles.size(); ++k) shape = broadcast_shapes(shape, tiles[k].second.shape, tiles[k].first->span);
          return SType::tensor(ElemType{DType::Int1, false}, shape);
        }
        if (all_known) return last;
        return SType::of_bool(false, false);
      }
      case NodeKind::Compare: {
        auto *n = cast<Compare>(&e);
        SType left = eval(*n->left, env);
        SType r;
        for (size_t k = 0; k < n->ops.size(); ++k) {
          SType right = eval(*n->comparators[k], env);
          if (n->ops.size() > 1 && (left.is_tensor() || right.is_tensor()))
            fail(e.span, "chained comparisons are not supported by Triton on tensors; combine two comparisons with '&'");
          r = compare(n->ops[k], left, right, e.span);
          left = right;
        }
        return r;
      }
      case NodeKind::IfExp: {
        auto *n = cast<IfExp>(&e);
        SType c = eval(*n->cond, env);
        SType a = eval(*n->then_value, env), b = eval(*n->else_value, env);
        if (c.known && c.kind == SType::Kind::Bool) return c.b ? a : b;
        if (c.known && c.kind == SType::Kind::Int) return c.n ? a : b;
        if (a.kind == SType::Kind::Unknown || b.kind == SType::Kind::Unknown) return SType::unknown();
        if (a.is_tensor() || b.is_tensor()) {
          // A Python number against a Triton scalar of its type (`(BT - 1) if c
          // else (T % BT - 1)` with T int32): Triton makes the number a tensor
          // of that type, as after an if.
          if (std::optional<SType> t = literal_merge(a, b)) return *t;
          if (!same_type(a, b)) {
            // A constexpr condition without a value picks one at compile time.
            // A Python number against a Triton scalar (`(T - 1) if REVERSE
            // else 0`) reads as the scalar: in arithmetic both promote alike.
            if (!c.is_tensor() && same_kind_number_and_scalar(a, b)) return is_scalar_value(a) ? a : b;
            if (!c.is_tensor()) {
              auto &seen = info_.divergent_conditions;
              if (std::find(seen.begin(), seen.end(), n->cond.get()) == seen.end()) seen.push_back(n->cond.get());
              return SType::unknown();
            }
            fail(e.span, "the two values of this conditional expression have different types: " + a.str() + " and " + b.str());
          }
          return a;
        }
        if (a.kind != b.kind) return SType::unknown();
        // Two constexpr numbers a tl.constexpr condition without a value
        // chooses between (a block shape, `BV if STATE_V_FIRST else BK`):
        // what they size differs with the condition's value, so the flags it
        // reads are specialized, as for tensors of different types.
        // Only for a flag (`FLAG`, `not FLAG`): mamba's `BLOCK_SIZE_DSTATE if BLOCK_SIZE_DSTATE <= 128 else
        // BLOCK_SIZE_K` picks a size by a size, which the generic backward keeps symbolic.
        const Expr *flag = n->cond.get();
        if (auto *u = dyn_cast<UnaryOp>(flag); u && u->op == UnaryOpKind::Not) flag = u->operand.get();
        // And only between sizes (symbols): `1 if not REVERSE else -1` (a step) stays one generic value.
        if (a.is_constexpr_number() && !a.known && !b.known && a.sym != b.sym && !c.is_tensor() && isa<Name>(flag)) {
          auto &seen = info_.divergent_conditions;
          if (std::find(seen.begin(), seen.end(), n->cond.get()) == seen.end()) seen.push_back(n->cond.get());
        }
        SType m = a;
        m.known = false;
        m.sym.clear();
        return m;
      }
      case NodeKind::Tuple:
      case NodeKind::List: {
        const ExprList &elts = isa<Tuple>(&e) ? cast<Tuple>(&e)->elts : cast<List>(&e)->elts;
        std::vector<SType> v;
        for (const ExprPtr &x : elts) v.push_back(eval(*x, env));
        return SType::tuple(std::move(v));
      }
#define TGRAD_STMT(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        break;
    }
    fail(e.span, "unsupported expression");
  }

  SType name(const Name &n, Env &env) {
    auto it = env.find(n.id);
    if (it != env.end()) {
      if (is_undefined(it->second))
        fail(n.span, "'" + n.id + "' is not assigned on every path that reaches here (Triton needs it defined on all of them)");
      return it->second;
    }
    // A name outside the environment means one thing for the whole analysis (the module does not change): found
    // once (`tl` is read at every call of a long function).
    if (auto known = outside_env_.find(n.id); known != outside_env_.end()) return known->second;
    SType t = name_outside_env(n);
    outside_env_.emplace(n.id, t);
    return t;
  }

  SType name_outside_env(const Name &n) {
    for (const Constant &c : module_.constants)
      if (c.name == n.id) {
        Env empty;
        const Stmt &s = *c.stmt;
        const Expr *value = isa<AnnAssign>(&s) ? cast<AnnAssign>(&s)->value.get() : cast<Assign>(&s)->value.get();
        return eval(*value, empty);
      }
    if (const Function *f = module_.find_function(n.id)) {
      SType t;
      t.kind = SType::Kind::Function;
      t.fn = f;
      return t;
    }
    sema::ImportedName imported = resolve_import(module_, n.id);
    if (imported.bound) {
      if (imported.target) return known_type(*imported.target);
      if (imported.known_module)
        fail(n.span, "'" + imported.member + "' is imported from '" + imported.module + "', but tgrad does not know that "
                     "function yet (it knows the tl.math and libdevice functions listed in the README)");
      // A name from a module tgrad does not follow (a project's own): unknown.
      // Reading the kernel needs no more; differentiating a value computed
      // from it is an error (the reverse mode's dependence check).
      return SType::unknown();
    }
    if (std::optional<SType> t = member_of("builtins", n.id)) return *t;
    // A host function of the file (a constant computed on the host by
    // `tl.constexpr(_make_asm(1))`): its result is not known to tgrad, as a
    // name from a module it does not read.
    if (std::find(module_.host_names.begin(), module_.host_names.end(), n.id) != module_.host_names.end())
      return SType::unknown();
    fail(n.span, "name '" + n.id + "' is not defined");
  }

  // member_of, found once per namespace and name for the whole analysis (`tl.exp` at every call).
  const std::optional<SType> &namespace_attribute(const std::string &ns, const std::string &attr) {
    const std::string key = ns + "." + attr;
    auto known = members_.find(key);
    if (known == members_.end()) known = members_.emplace(key, member_of(ns, attr)).first;
    return known->second;
  }

  std::optional<SType> member_of(const std::string &ns, const std::string &attr) {
    std::optional<KnownName> k = namespace_member(ns, attr);
    if (!k) return std::nullopt;
    return known_type(*k);
  }

  static SType known_type(const KnownName &k) {
    switch (k.kind) {
      case KnownName::Kind::Namespace: return SType::namespace_(k.name);
      case KnownName::Kind::Function: return SType::builtin(k.name);
      case KnownName::Kind::DType: return SType::of_dtype(k.dtype);
      case KnownName::Kind::Float: return SType::of_float(k.value);
      case KnownName::Kind::Int: return SType::of_int(static_cast<long long>(k.value));
    }
    return SType::unknown();
  }

  SType attribute(const Attribute &a, Env &env) {
    SType base = eval(*a.value, env);
    switch (base.kind) {
      case SType::Kind::Unknown: return SType::unknown();
      case SType::Kind::Namespace:
        if (const std::optional<SType> &t = namespace_attribute(base.s, a.attr)) return *t;
        // Kernels written for Triton 2.0 call tl.libdevice.NAME; Triton 3.6 has no such attribute.
        if (a.attr == "libdevice" && (base.s == "tl" || base.s == "triton.language"))
          fail(a.span, "'tl.libdevice' is not in Triton 3.6 (kernels written for Triton 2.0 use it): write "
                       "`from triton.language.extra import libdevice` and call libdevice." +
                           std::string("NAME(...), or the tl and tl.math function of the same name"));
        fail(a.span, "'" + base.s + "." + a.attr + "' is not known to tgrad");
      case SType::Kind::Tensor: {
        if (a.attr == "shape") {
          std::vector<SType> dims;
          for (const Dim &d : base.shape) dims.push_back(d.value ? SType::of_int(*d.value) : SType::int_symbol(d.symbol));
          return SType::tuple(std::move(dims));
        }
        if (a.attr == "dtype" || a.attr == "type") {
          SType d = SType::of_dtype(base.elem.dtype, base.elem.is_pointer);
          d.dtype_is_tensor_type = a.attr == "type";
          return d;
        }
        if (a.attr == "T") {
          if (base.shape.size() != 2) fail(a.span, ".T needs a 2-D tensor");
          return SType::tensor(base.elem, {base.shape[1], base.shape[0]});
        }
        if (a.attr == "numel") {  // the element count, known when Triton compiles
          long long count = 1;
          std::string product;
          for (const Dim &d : base.shape) {
            if (d.value) count *= *d.value;
            else product += (product.empty() ? "" : " * ") + d.symbol;
          }
          if (product.empty()) return SType::of_int(count);
          return SType::int_symbol(count == 1 ? product : std::to_string(count) + " * " + product);
        }
        return SType::builtin("tensor." + a.attr, std::make_shared<SType>(base));
      }
      case SType::Kind::DType:
        if (a.attr == "element_ty" || (a.attr == "scalar" && base.dtype_is_tensor_type)) {
          if (!base.dtype_is_pointer && !base.dtype_is_tensor_type)
            fail(a.span, std::string("'") + short_name(base.dtype) + "' is not a pointer type");
          return SType::of_dtype(base.dtype, a.attr == "scalar" && base.dtype_is_pointer);
        }
        if (a.attr == "primitive_bitwidth") return SType::of_int(base.dtype_is_pointer ? 64 : bits(base.dtype));
        // A constexpr's `.value` is what it wraps (FlagGems' `dtype.value.is_floating()`).
        if (a.attr == "value") return base;
        if (!base.dtype_is_pointer && !base.dtype_is_tensor_type) {
          if (a.attr == "int_bitwidth") {
            if (kind(base.dtype) == DKind::Float) fail(a.span, std::string("'") + short_name(base.dtype) + "' has no int_bitwidth");
            return SType::of_int(bits(base.dtype));
          }
          if (a.attr == "fp_mantissa_width") {
            const std::optional<int> width = fp_mantissa_width(base.dtype);
            if (!width) fail(a.span, std::string("'") + short_name(base.dtype) + "' is not a floating-point dtype");
            return SType::of_int(*width);
          }
          if (dtype_predicate(a.attr, base.dtype)) return SType::builtin("dtype." + a.attr, std::make_shared<SType>(base));
        }
        return SType::unknown();
      case SType::Kind::Int:
      case SType::Kind::Float:
      case SType::Kind::Bool:
        // `i_s.to(tl.int64)` on a constexpr number: Triton makes it a scalar
        // tensor first (semantic.to_tensor), then casts (measured on the H100,
        // Triton 3.6: `(i // NTS).to(tl.int64)` in a tl.static_range loop).
        if (a.attr == "value") return base;  // (a constexpr's value: what it wraps)
        // A tl.constexpr parameter given no value may be a dtype or anything else Triton passes (FlagGems' limits
        // read `dtype.value.is_floating()`): its attributes are unknown, not errors.
        if (!base.known && a.attr != "to") return SType::unknown();
        if (a.attr == "to") {
          if (std::optional<DType> d = number_dtype(base))
            return SType::builtin("tensor.to", std::make_shared<SType>(SType::tensor(ElemType{*d, false}, {})));
        }
        [[fallthrough]];
      default: fail(a.span, base.str() + " has no attribute '" + a.attr + "'");
    }
  }


  SType subscript(const Subscript &s, Env &env) {
    SType base = eval(*s.value, env);
    std::vector<SType> idx;
    for (const ExprPtr &i : s.indices) idx.push_back(eval(*i, env));
    if (base.kind == SType::Kind::Unknown) return SType::unknown();
    if (base.kind == SType::Kind::Tuple) {
      if (idx.size() != 1 || idx[0].kind != SType::Kind::Int) fail(s.span, "a tuple takes one integer index");
      if (!idx[0].known) return SType::unknown();
      long long n = static_cast<long long>(base.elems.size()), k = idx[0].n;
      if (k < -n || k >= n) fail(s.indices[0]->span, "tuple index " + std::to_string(k) + " out of range");
      return base.elems[k < 0 ? k + n : k];
    }
    // A tl.constexpr parameter without a value: a jit helper's caller may pass a tensor there (attorch's
    // `last_dim_mask: tl.constexpr` receives a mask; Triton reads the annotation only on kernels), a kernel's a tuple.
    if (is_unknown_constexpr(base)) return SType::unknown();
    if (!base.is_tensor()) fail(s.value->span, base.str() + " cannot be indexed");
    // `stride_q[0]`, `res[i]` on a parameter: Triton passes tuples to kernels; tgrad types its parameters as
    // pointers, numbers and constexprs only.
    if (base.shape.empty() && idx.size() == 1 && (idx[0].kind == SType::Kind::Int || idx[0].is_tensor()))
      if (auto *n = dyn_cast<Name>(s.value.get()))
        fail(s.span, "'" + n->id + "' is indexed like a tuple, and tgrad reads it as " + base.str() +
                         ": tuple parameters are not supported yet; pass its elements as separate parameters");
    // Triton 3.6's indexing (measured): the k-th index, None, inserts an axis of size 1 at position k of the
    // shape so far (past its end: at the end); ':' keeps what is there. So a program id's `pid[:, None]` is a
    // tensor of shape [1], as is `pid[None, :]` (torchao's and FlagGems' kernels rely on it; Triton 3.9 refuses
    // a ':' beyond the rank).
    SymShape shape = base.shape;
    for (size_t k = 0; k < idx.size(); ++k) {
      if (idx[k].kind == SType::Kind::None)
        shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(std::min(k, shape.size())), Dim::known(1));
      else if (idx[k].kind != SType::Kind::Slice)
        fail(s.indices[k]->span, "tensors can only be indexed with ':' and None in Triton");
    }
    return SType::tensor(base.elem, shape);
  }

  SType call(const Call &c, Env &env) {
    SType callee = eval(*c.func, env);
    std::vector<SType> args;
    for (const ExprPtr &a : c.args) args.push_back(eval(*a, env));
    std::map<std::string, SType> kwargs;
    for (const Keyword &k : c.keywords) kwargs[k.name] = eval(*k.value, env);
    if (callee.kind == SType::Kind::Unknown) return SType::unknown();
    if (callee.kind == SType::Kind::Function) {
      const Function &fn = *callee.fn;
      // A generic backward's unbroadcast: its body is resolved by Triton for
      // the operands' shapes; its result has the gradient's dtype and the
      // operand's shape.
      if (fn.name == kUnbroadcastHelper && args.size() == 2 && args[0].is_tensor() && args[1].is_tensor())
        return SType::tensor(args[0].elem, args[1].shape);
      if (fn.name == kSelectLanesHelper && args.size() == 3 && args[1].is_tensor()) return args[1];
      if (args.size() > fn.params.size())
        fail(c.span, "'" + fn.name + "' takes " + std::to_string(fn.params.size()) + " arguments, " +
                         std::to_string(args.size()) + " given");
      std::map<std::string, SType> bound;
      for (size_t k = 0; k < args.size(); ++k) bound[fn.params[k].name] = args[k];
      for (auto &kv : kwargs) {
        bool known = false;
        for (const Param &p : fn.params) known |= p.name == kv.first;
        if (!known) fail(c.span, "'" + fn.name + "' has no parameter '" + kv.first + "'");
        bound[kv.first] = kv.second;
      }
      for (size_t k = 0; k < fn.params.size(); ++k)
        if (!bound.count(fn.params[k].name) && !fn.params[k].default_value)
          fail(c.span, "missing argument '" + fn.params[k].name + "' of '" + fn.name + "'");
      return call_function(fn, bound, c.span);
    }
    if (callee.kind == SType::Kind::Builtin) return builtin(callee, args, kwargs, c.span);
    if (callee.kind == SType::Kind::DType)  // measured: Triton 3.6 raises "'dtype' object is not callable" too
      fail(c.func->span, callee.str() + " is not callable (Triton 3.6 refuses it too); for a scalar of that type write "
                                        "tl.full([], value, tl." + std::string(sema::tl_name(callee.dtype)) + ")");
    fail(c.func->span, callee.str() + " is not callable");
  }

  // ------------------------------------------------------------ operators

  // A tl.constexpr parameter given no value is modelled as an integer symbol
  // (it usually sizes blocks); where another kind is needed, it is unknown.
  static bool is_unknown_constexpr(const SType &t) { return t.kind == SType::Kind::Int && !t.known; }

  // A Python number's or tensor's element type, with whether it is a Python number.
  std::pair<ElemType, bool> elem_of(const SType &t, const SourceSpan &span) {
    switch (t.kind) {
      case SType::Kind::Tensor: return {t.elem, false};
      case SType::Kind::Bool: return {ElemType{DType::Int1, false}, true};
      case SType::Kind::Int: return {ElemType{t.known ? python_int_dtype(t.n) : DType::Int32, false}, true};
      case SType::Kind::Float: return {ElemType{t.known ? python_float_dtype(t.x) : DType::FP32, false}, true};
      default: fail(span, "expected a tensor or a number, got " + t.str());
    }
  }

  SymShape broadcast_shapes(const SymShape &a, const SymShape &b, const SourceSpan &span) {
    size_t rank = std::max(a.size(), b.size());
    SymShape out(rank);
    for (size_t k = 0; k < rank; ++k) {
      Dim da = k + a.size() >= rank ? a[k + a.size() - rank] : Dim::known(1);
      Dim db = k + b.size() >= rank ? b[k + b.size() - rank] : Dim::known(1);
      if (da == db || (db.value && *db.value == 1)) out[k] = da;
      else if (da.value && *da.value == 1) out[k] = db;
      else if (da.value && db.value)
        fail(span, "shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast together");
      else {
        info_.assumptions.push_back({span, da, db});  // equal for the code to be valid
        out[k] = da.value ? da : db;
      }
    }
    return out;
  }

  SymShape shape_of(const SType &t) { return t.is_tensor() ? t.shape : SymShape{}; }

  // The computation type of two operands (Triton's promotion), or fails.
  DType promote(const SType &a, const SType &b, bool div_or_mod, const SourceSpan &span) {
    auto [ea, pa] = elem_of(a, span);
    auto [eb, pb] = elem_of(b, span);
    if (ea.is_pointer || eb.is_pointer)
      fail(span, "this operation is not defined on pointers (" + ea.str() + ", " + eb.str() + ")");
    std::string error;
    std::optional<DType> d = computation_type(ea.dtype, pa, eb.dtype, pb, div_or_mod, error);
    if (!d) fail(span, error);
    return *d;
  }

  static std::string paren(const SType &t) {
    const std::string s = t.known ? std::to_string(t.n) : t.sym;
    return s.find(' ') == std::string::npos ? s : "(" + s + ")";
  }

  SType constexpr_binary(BinaryOpKind op, const SType &a, const SType &b, const SourceSpan &span) {
    const bool floats = a.kind == SType::Kind::Float || b.kind == SType::Kind::Float;
    if (!a.known || !b.known) {
      if (floats || op == BinaryOpKind::Div) return SType::of_float(0, false);
      if ((a.known || !a.sym.empty()) && (b.known || !b.sym.empty()))
        return SType::int_symbol(paren(a) + " " + spelling(op) + " " + paren(b));
      SType t;
      t.kind = SType::Kind::Int;
      return t;
    }
    if (floats) {
      double x = a.kind == SType::Kind::Float ? a.x : a.kind == SType::Kind::Int ? a.n : a.b;
      double y = b.kind == SType::Kind::Float ? b.x : b.kind == SType::Kind::Int ? b.n : b.b;
      switch (op) {
        case BinaryOpKind::Add: return SType::of_float(x + y);
        case BinaryOpKind::Sub: return SType::of_float(x - y);
        case BinaryOpKind::Mul: return SType::of_float(x * y);
        case BinaryOpKind::Div:
          if (y == 0) fail(span, "float division by zero");
          return SType::of_float(x / y);
        case BinaryOpKind::Pow: return SType::of_float(std::pow(x, y));
        default: return SType::of_float(0, false);
      }
    }
    long long x = a.kind == SType::Kind::Int ? a.n : a.b, y = b.kind == SType::Kind::Int ? b.n : b.b, r = 0;
    switch (op) {
      case BinaryOpKind::Add:
        if (__builtin_add_overflow(x, y, &r)) fail(span, "integer overflow in a tl.constexpr computation");
        return SType::of_int(r);
      case BinaryOpKind::Sub:
        if (__builtin_sub_overflow(x, y, &r)) fail(span, "integer overflow in a tl.constexpr computation");
        return SType::of_int(r);
      case BinaryOpKind::Mul:
        if (__builtin_mul_overflow(x, y, &r)) fail(span, "integer overflow in a tl.constexpr computation");
        return SType::of_int(r);
      case BinaryOpKind::Div:
        if (y == 0) fail(span, "division by zero");
        return SType::of_float(static_cast<double>(x) / static_cast<double>(y));
      case BinaryOpKind::FloorDiv:
      case BinaryOpKind::Mod: {
        if (y == 0) fail(span, "integer division by zero");
        long long q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return SType::of_int(op == BinaryOpKind::FloorDiv ? q : x - q * y);
      }
      case BinaryOpKind::Pow: {
        if (y < 0) return SType::of_float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        long long p = 1;
        for (long long k = 0; k < y; ++k)
          if (__builtin_mul_overflow(p, x, &p)) fail(span, "integer overflow in a tl.constexpr computation");
        return SType::of_int(p);
      }
      case BinaryOpKind::LShift:
        if (y < 0 || y > 62) fail(span, "shift count out of range");
        return SType::of_int(x << y);
      case BinaryOpKind::RShift:
        if (y < 0) fail(span, "negative shift count");
        return SType::of_int(y > 62 ? (x < 0 ? -1 : 0) : x >> y);
      case BinaryOpKind::BitAnd: return SType::of_int(x & y);
      case BinaryOpKind::BitOr: return SType::of_int(x | y);
      case BinaryOpKind::BitXor: return SType::of_int(x ^ y);
      case BinaryOpKind::MatMul: fail(span, "'@' needs tensors");
    }
    return SType::unknown();
  }

  SType binary(BinaryOpKind op, const SType &a, const SType &b, const SourceSpan &span) {
    if (a.kind == SType::Kind::Unknown || b.kind == SType::Kind::Unknown) return SType::unknown();
    if (a.is_constexpr_number() && b.is_constexpr_number()) return constexpr_binary(op, a, b, span);
    if ((!a.is_constexpr_number() && !a.is_tensor()) || (!b.is_constexpr_number() && !b.is_tensor()))
      fail(span, std::string("unsupported operands for '") + spelling(op) + "': " + a.str() + " and " + b.str());
    SymShape shape = broadcast_shapes(shape_of(a), shape_of(b), span);
    auto [ea, pa] = elem_of(a, span);
    auto [eb, pb] = elem_of(b, span);
    if (ea.is_pointer || eb.is_pointer) {
      const ElemType &offset = ea.is_pointer ? eb : ea;
      bool ok = (op == BinaryOpKind::Add && ea.is_pointer != eb.is_pointer) ||
                (op == BinaryOpKind::Sub && ea.is_pointer && !eb.is_pointer);
      if (!ok || offset.is_pointer || is_float(offset.dtype))
        fail(span, std::string("'") + spelling(op) + "' between " + ea.str() + " and " + eb.str() +
                       ": a pointer only takes + and - of integers");
      return SType::tensor(ea.is_pointer ? ea : eb, shape);
    }
    switch (op) {
      case BinaryOpKind::Add:
      case BinaryOpKind::Sub:
      case BinaryOpKind::Mul: return SType::tensor(ElemType{promote(a, b, false, span), false}, shape);
      case BinaryOpKind::Div: {
        if (!is_float(ea.dtype) && !is_float(eb.dtype)) return SType::tensor(ElemType{DType::FP32, false}, shape);
        return SType::tensor(ElemType{promote(a, b, true, span), false}, shape);
      }
      case BinaryOpKind::FloorDiv:
      case BinaryOpKind::Mod: {
        DType d = promote(a, b, true, span);
        if (is_float(d) && op == BinaryOpKind::FloorDiv)
          fail(span, "'//' on floating-point tensors is not supported; use tl.floor(a / b) (or tl.math.floor)");
        return SType::tensor(ElemType{d, false}, shape);
      }
      case BinaryOpKind::BitAnd:
      case BinaryOpKind::BitOr:
      case BinaryOpKind::BitXor:
      case BinaryOpKind::LShift:
      case BinaryOpKind::RShift: {
        DType d = promote(a, b, false, span);
        if (is_float(d)) fail(span, std::string("'") + spelling(op) + "' needs integer operands, not " + short_name(d));
        return SType::tensor(ElemType{d, false}, shape);
      }
      case BinaryOpKind::Pow:
        fail(span, "'**' on tensors is not supported by Triton; multiply (x * x) or use libdevice.pow");
      case BinaryOpKind::MatMul: return matmul(a, b, nullptr, ElemType{DType::FP32, false}, span);
    }
    return SType::unknown();
  }

  SType unary(UnaryOpKind op, const SType &a, const SourceSpan &span) {
    if (a.kind == SType::Kind::Unknown) return a;
    if (op == UnaryOpKind::Not) {
      // On a tile, Triton's `not` is its element-wise negation (tensor.__not__: logical not of int1 lanes).
      if (a.is_tensor() && !a.shape.empty()) {
        if (a.elem.is_pointer || a.elem.dtype != DType::Int1)
          fail(span, "'not' on " + a.elem.str() + " tiles: Triton reinterprets their bits as int1; compare them first "
                     "(x == 0)");
        return SType::tensor(ElemType{DType::Int1, false}, a.shape);
      }
      if (a.known && a.kind == SType::Kind::Bool) return SType::of_bool(!a.b);
      if (a.known && a.kind == SType::Kind::Int) return SType::of_bool(a.n == 0);
      return a.is_tensor() ? SType::tensor(ElemType{DType::Int1, false}, {}) : SType::of_bool(false, false);
    }
    if (a.is_constexpr_number()) {
      if (op == UnaryOpKind::Neg && a.kind == SType::Kind::Float) return SType::of_float(-a.x, a.known);
      if (op == UnaryOpKind::Invert && a.kind == SType::Kind::Float) fail(span, "'~' needs an integer");
      if (!a.known) return a.sym.empty() ? a : SType::int_symbol(std::string(spelling(op)) + paren(a));
      long long v = a.kind == SType::Kind::Int ? a.n : a.b;
      return SType::of_int(op == UnaryOpKind::Neg ? -v : op == UnaryOpKind::Invert ? ~v : v);
    }
    if (!a.is_tensor()) fail(span, std::string("unsupported operand for '") + spelling(op) + "': " + a.str());
    if (a.elem.is_pointer) fail(span, std::string("'") + spelling(op) + "' is not defined on pointers");
    if (op == UnaryOpKind::Invert && is_float(a.elem.dtype)) fail(span, "'~' needs an integer tensor, not " + a.elem.str());
    return a;
  }

  SType compare(CompareOpKind op, const SType &a, const SType &b, const SourceSpan &span) {
    if (a.kind == SType::Kind::Unknown || b.kind == SType::Kind::Unknown) return SType::unknown();
    if (op == CompareOpKind::Is || op == CompareOpKind::IsNot || op == CompareOpKind::In || op == CompareOpKind::NotIn) {
      // Against None, a tile of numbers need not have a known value, only a
      // known kind: it `is not None` whatever its elements (fla's helper `if
      // b_lamb is not None:` called with a loaded tile). A pointer is another
      // matter: the kernel's caller may pass None for it (Triton specializes
      // on that), and the backward stays generic over it, unless it is known
      // to be a tensor (an optional pointer's specialization,
      // src/ad/SpecializationFlags.h).
      // Two dtypes: Triton's are one object per dtype (a pointer's element_ty is tl.bfloat16 itself, measured on
      // Triton 3.6), so `dtype is tl.bfloat16` is their equality (FlagGems' `acc_type = tl.float32 if dtype is
      // tl.bfloat16 else dtype`).
      if (a.kind == SType::Kind::DType && b.kind == SType::Kind::DType && (op == CompareOpKind::Is || op == CompareOpKind::IsNot)) {
        if (!a.known || !b.known) return SType::of_bool(false, false);
        const bool same = a.dtype == b.dtype && a.dtype_is_pointer == b.dtype_is_pointer;
        return SType::of_bool(op == CompareOpKind::Is ? same : !same);
      }
      auto tile_of_numbers = [](const SType &t) { return t.is_tensor() && (!t.elem.is_pointer || t.not_none); };
      const bool against_none = a.kind == SType::Kind::None || b.kind == SType::Kind::None;
      bool known = against_none && ((a.known && b.known) || tile_of_numbers(a) || tile_of_numbers(b));
      bool same = a.kind == b.kind;
      return SType::of_bool(op == CompareOpKind::Is ? same : !same, known && (op == CompareOpKind::Is || op == CompareOpKind::IsNot));
    }
    if (a.kind == SType::Kind::Tuple && b.kind == SType::Kind::Tuple &&
        (op == CompareOpKind::Eq || op == CompareOpKind::NotEq)) {
      // Shapes: equal when every element is provably equal (same value or same symbol).
      bool known = true, eq = a.elems.size() == b.elems.size();
      for (size_t k = 0; eq && k < a.elems.size(); ++k) {
        const SType &x = a.elems[k], &y = b.elems[k];
        if (x.kind == SType::Kind::Int && y.kind == SType::Kind::Int) {
          if (x.known && y.known) eq = x.n == y.n;
          else if (!x.known && !y.known && !x.sym.empty() && x.sym == y.sym) eq = true;
          else known = false;
        } else {
          known = false;
        }
      }
      if (!known) return SType::of_bool(false, false);
      return SType::of_bool(op == CompareOpKind::Eq ? eq : !eq);
    }
    if (!a.is_tensor() && !b.is_tensor()) {
      if (a.known && b.known && a.is_constexpr_number() && b.is_constexpr_number()) {
        double x = a.kind == SType::Kind::Float ? a.x : a.kind == SType::Kind::Int ? a.n : a.b;
        double y = b.kind == SType::Kind::Float ? b.x : b.kind == SType::Kind::Int ? b.n : b.b;
        bool r = op == CompareOpKind::Lt ? x < y : op == CompareOpKind::Gt ? x > y : op == CompareOpKind::LtE ? x <= y
                 : op == CompareOpKind::GtE ? x >= y : op == CompareOpKind::Eq ? x == y : x != y;
        return SType::of_bool(r);
      }
      if (a.known && b.known && (a.kind == SType::Kind::Str || a.kind == SType::Kind::None || a.kind == SType::Kind::DType)) {
        bool eq = a.kind == b.kind && a.s == b.s && a.dtype == b.dtype && a.dtype_is_pointer == b.dtype_is_pointer;
        if (op == CompareOpKind::Eq) return SType::of_bool(eq);
        if (op == CompareOpKind::NotEq) return SType::of_bool(!eq);
      }
      return SType::of_bool(false, false);
    }
    SymShape shape = broadcast_shapes(shape_of(a), shape_of(b), span);
    auto [ea, pa] = elem_of(a, span);
    auto [eb, pb] = elem_of(b, span);
    if (ea.is_pointer || eb.is_pointer) {
      if (ea != eb) fail(span, "cannot compare " + ea.str() + " with " + eb.str());
    } else {
      promote(a, b, false, span);
    }
    return SType::tensor(ElemType{DType::Int1, false}, shape);
  }

  SType matmul(const SType &a, const SType &b, const SType *acc, ElemType out, const SourceSpan &span) {
    if (!a.is_tensor() || !b.is_tensor()) return SType::unknown();
    const size_t r = a.shape.size();
    if ((r != 2 && r != 3) || b.shape.size() != r)
      fail(span, "tl.dot needs two 2-D (or two 3-D) tensors, got " + shape_str(a.shape) + " and " + shape_str(b.shape));
    if (a.elem != b.elem) fail(span, "tl.dot operands must have one dtype, got " + a.elem.str() + " and " + b.elem.str());
    const Dim &k1 = a.shape[r - 1], &k2 = b.shape[r - 2];
    if (k1 != k2) {
      if (k1.value && k2.value)
        fail(span, "tl.dot inner dimensions differ: " + shape_str(a.shape) + " and " + shape_str(b.shape));
      info_.assumptions.push_back({span, k1, k2});
    }
    // Triton 3.6 on the H100 (measured): M and N from 1, K of at least 16 (32 for int8).
    const int64_t min_k = a.elem.dtype == DType::Int8 ? 32 : 16;
    if (k1.value && *k1.value < min_k)
      fail(span, "tl.dot needs an inner dimension K of at least " + std::to_string(min_k) + ", got " +
                     shape_str(a.shape) + " @ " + shape_str(b.shape));
    SymShape shape = r == 3 ? SymShape{a.shape[0], a.shape[1], b.shape[2]} : SymShape{a.shape[0], b.shape[1]};
    if (acc && acc->is_tensor()) {
      if (acc->shape.size() != shape.size()) fail(span, "tl.dot accumulator has shape " + shape_str(acc->shape) + ", the product " + shape_str(shape));
      for (size_t k = 0; k < shape.size(); ++k)
        if (acc->shape[k] != shape[k]) {
          if (acc->shape[k].value && shape[k].value)
            fail(span, "tl.dot accumulator has shape " + shape_str(acc->shape) + ", the product " + shape_str(shape));
          info_.assumptions.push_back({span, acc->shape[k], shape[k]});
        }
      return SType::tensor(acc->elem, shape);
    }
    return SType::tensor(out, shape);
  }

  // --------------------------------------------------------------- builtins

  struct Args {
    std::map<std::string, SType> v;
    std::vector<SType> rest;
    bool has(const std::string &p) const {
      auto it = v.find(p);
      return it != v.end() && it->second.kind != SType::Kind::None;
    }
    const SType &get(const std::string &p) const {
      static const SType none = SType::none();
      auto it = v.find(p);
      return it == v.end() ? none : it->second;
    }
  };

  Args bind(const std::string &fn, const std::vector<std::string> &params, const std::vector<SType> &args,
            const std::map<std::string, SType> &kwargs, const SourceSpan &span, bool variadic = false) {
    Args out;
    size_t fixed = variadic ? params.size() - 1 : params.size();
    for (size_t k = 0; k < args.size(); ++k) {
      if (k < fixed) out.v[params[k]] = args[k];
      else if (variadic) out.rest.push_back(args[k]);
      else fail(span, fn + "() takes at most " + std::to_string(params.size()) + " positional arguments, " + std::to_string(args.size()) + " given");
    }
    for (const auto &kv : kwargs) {
      bool known = false;
      for (const std::string &p : params) known |= p == kv.first;
      // Triton 2.0's tl.dot(a, b, trans_a=..., trans_b=...), gone from Triton 3.6 (flash-attention's Triton kernels).
      if (!known && fn == "tl.dot" && (kv.first == "trans_a" || kv.first == "trans_b"))
        fail(span, "tl.dot() has no keyword argument '" + kv.first + "' in Triton 3.6 (Triton 2.0 had it): transpose "
                   "the operand instead, tl.dot(a, tl.trans(b)) for trans_b=True");
      if (!known) fail(span, fn + "() has no keyword argument '" + kv.first + "'");
      if (out.v.count(kv.first)) fail(span, fn + "() got two values for '" + kv.first + "'");
      out.v[kv.first] = kv.second;
    }
    return out;
  }

  // A shape with a dimension sema could not type (a helper read without its
  // caller: `x.numel >> n_dims` of an untyped x): the tensor it makes has no
  // type either, as when its dtype is unknown.
  static bool shape_unknown(const SType &t) {
    if (t.kind == SType::Kind::Unknown) return true;
    if (t.kind == SType::Kind::Tuple)
      for (const SType &d : t.elems)
        if (d.kind == SType::Kind::Unknown) return true;
    return false;
  }

  SymShape shape_arg(const SType &t, const SourceSpan &span) {
    SymShape shape;
    auto dim = [&](const SType &d) {
      if (d.kind != SType::Kind::Int) fail(span, "a shape needs integers known before the kernel runs (tl.constexpr), got " + d.str());
      if (d.known && (d.n <= 0 || (d.n & (d.n - 1)) != 0))
        fail(span, "every dimension of a Triton tensor must be a power of 2, got " + std::to_string(d.n));
      shape.push_back(d.known ? Dim::known(d.n) : Dim::symbolic(d.sym.empty() ? "?" : d.sym));
    };
    if (t.kind == SType::Kind::Tuple) for (const SType &d : t.elems) dim(d);
    else dim(t);
    return shape;
  }

  // The shape a reduction along `axis` leaves (all axes where none is given): without that axis, or with it of
  // length 1 where keep_dims.
  SymShape reduced_shape(const SymShape &shape, std::optional<int> axis, bool keep, const SourceSpan &span) {
    if (!axis) return keep ? SymShape(shape.size(), Dim::known(1)) : SymShape{};
    const int k = normalize_axis(*axis, shape.size(), span);
    SymShape out = shape;
    if (keep) out[k] = Dim::known(1);
    else out.erase(out.begin() + k);
    return out;
  }

  std::optional<int> axis_arg(const Args &a, const std::string &p, const std::string &fn, const SourceSpan &span) {
    if (!a.has(p)) return std::nullopt;
    const SType &t = a.get(p);
    if (t.kind != SType::Kind::Int || !t.known) fail(span, fn + "() argument '" + p + "' must be an integer known before the kernel runs");
    return static_cast<int>(t.n);
  }

  int normalize_axis(int axis, size_t rank, const SourceSpan &span) {
    int r = static_cast<int>(rank);
    if (axis < -r || axis >= r) fail(span, "axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(r));
    return axis < 0 ? axis + r : axis;
  }

  bool flag(const Args &a, const std::string &p, bool fallback) {
    if (!a.has(p)) return fallback;
    const SType &t = a.get(p);
    if (t.kind == SType::Kind::Bool && t.known) return t.b;
    if (t.kind == SType::Kind::Int && t.known) return t.n != 0;
    return fallback;
  }

  // tl.inline_asm_elementwise: a one-instruction PTX approximation of a math
  // function on one fp32 tensor has that tensor's type; any other assembly is
  // opaque (unknown: differentiating through it is a located error).
  SType inline_asm(const std::vector<SType> &args, const std::map<std::string, SType> &kwargs, const SourceSpan &span) {
    Args a = bind("tl.inline_asm_elementwise", {"asm", "constraints", "args", "dtype", "is_pure", "pack"}, args, kwargs, span);
    if (!a.has("asm") || !a.has("constraints") || !a.has("args") || !a.has("dtype")) return SType::unknown();
    const SType &text = a.get("asm"), &spec = a.get("constraints"), &operands = a.get("args"), &dtype = a.get("dtype");
    if (text.kind != SType::Kind::Str || spec.kind != SType::Kind::Str ||
        approximated_math_function(text.s, spec.s).empty())
      return SType::unknown();
    if (a.has("pack") && !(a.get("pack").kind == SType::Kind::Int && a.get("pack").known && a.get("pack").n == 1))
      return SType::unknown();
    if (operands.kind != SType::Kind::Tuple || operands.elems.size() != 1) return SType::unknown();
    const SType &x = operands.elems[0];
    // On another dtype the assembly's meaning is not the function's (and a
    // generic helper is typed with representatives): opaque too.
    if (!x.is_tensor() || x.elem.is_pointer || x.elem.dtype != DType::FP32 || dtype.kind != SType::Kind::DType ||
        dtype.dtype != DType::FP32 || dtype.dtype_is_pointer)
      return SType::unknown();
    return SType::tensor(ElemType{DType::FP32, false}, x.shape);
  }

  SType builtin(const SType &callee, std::vector<SType> args, std::map<std::string, SType> kwargs, const SourceSpan &span) {
    std::string name = callee.s;
    if (name.rfind("dtype.", 0) == 0 && callee.self) {
      if (!args.empty() || !kwargs.empty()) fail(span, "tl.dtype." + name.substr(6) + "() takes no arguments");
      return SType::of_bool(*dtype_predicate(name.substr(6), callee.self->dtype));
    }
    if (callee.self) {
      args.insert(args.begin(), *callee.self);
      if (name.rfind("tensor.", 0) == 0 && name != "tensor.to") {
        std::string m = name.substr(7);
        if (!is_tl_function(m) && !is_math_function(m)) fail(span, "tensors have no method '" + m + "'");
        name = is_tl_function(m) ? "tl." + m : "math." + m;
      }
    }
    if (name.rfind("tl.", 0) == 0 && is_math_function(name.substr(3)) && name != "tl.abs" && name != "tl.sigmoid")
      name = "math." + name.substr(3);
    for (const SType &a : args)
      if (a.kind == SType::Kind::Unknown && name != "tl.static_print" && name != "tl.device_print") return SType::unknown();
    for (const auto &kv : kwargs)
      if (kv.second.kind == SType::Kind::Unknown) return SType::unknown();
    const ElemType i32{DType::Int32, false};

    if (name == "range" || name == "tl.range" || name == "tl.static_range")
      fail(span, name + "() can only be used as the iterable of a for loop");
    if (name == "print") fail(span, "print() is not supported in a @triton.jit function; use tl.device_print or tl.static_print");
    if (name == "tl.inline_asm_elementwise") return inline_asm(args, kwargs, span);
    if (name.rfind("tl.", 0) == 0 && is_untyped_tl_builtin(name.substr(3))) return SType::unknown();
    // Triton maps Python's min and max on tensors to tl.minimum and tl.maximum
    // (the tutorial matmul's `min(num_pid_m - first_pid_m, GROUP_SIZE_M)`).
    if ((name == "min" || name == "max") && (args.size() > 0 && (args[0].is_tensor() || (args.size() > 1 && args[1].is_tensor())))) {
      if (args.size() != 2 || !kwargs.empty())
        fail(span, name + "() of tensors takes two arguments in Triton (it is tl." + (name == "min" ? "minimum" : "maximum") + ")");
      return builtin(SType::builtin(name == "min" ? "tl.minimum" : "tl.maximum"), args, kwargs, span);
    }
    if (name == "min" || name == "max" || name == "float" || name == "int" || name == "bool" || name == "abs" ||
        name == "len" || name.rfind("pymath.", 0) == 0) {
      for (const SType &a : args)
        if (a.is_tensor()) fail(span, name + "() works on values known before the kernel runs; use tl functions on tensors");
      if (name == "float") {
        if (args.size() == 1 && args[0].kind == SType::Kind::Str) {
          const std::string &s = args[0].s;
          if (s == "inf" || s == "+inf") return SType::of_float(INFINITY);
          if (s == "-inf") return SType::of_float(-INFINITY);
          if (s == "nan") return SType::of_float(NAN);
          fail(span, "float() of the string '" + s + "' is not supported");
        }
        if (args.size() == 1 && args[0].known) return SType::of_float(args[0].kind == SType::Kind::Float ? args[0].x : static_cast<double>(args[0].n));
        return SType::of_float(0, false);
      }
      if (name == "len" && args.size() == 1 && args[0].kind == SType::Kind::Tuple) return SType::of_int(static_cast<long long>(args[0].elems.size()));
      if (name == "bool") return SType::of_bool(false, false);
      if ((name == "min" || name == "max") && args.size() >= 2) {
        bool known = true, floats = false;
        for (const SType &a : args) known &= a.known, floats |= a.kind == SType::Kind::Float;
        if (known && !floats) {
          long long best = args[0].n;
          for (const SType &a : args) best = name == "min" ? std::min(best, a.n) : std::max(best, a.n);
          return SType::of_int(best);
        }
        return floats ? SType::of_float(0, false) : SType::int_symbol(name + "(...)");
      }
      SType t;
      t.kind = (name == "pymath.ceil" || name == "pymath.floor" || name == "int") ? SType::Kind::Int : SType::Kind::Float;
      return t;
    }
    // Random numbers (Triton's random.py): Philox counters from an integer
    // seed and integer offsets; the results have the offsets' shape, uint32
    // counters for offsets of 32 bits or fewer and uint64 ones otherwise.
    if (is_random_draw(name)) {
      const bool philox = name == "tl.philox";
      Args a = bind(name, philox ? std::vector<std::string>{"seed", "c0", "c1", "c2", "c3", "n_rounds"}
                                 : std::vector<std::string>{"seed", "offset", "n_rounds"},
                    args, kwargs, span);
      auto integer = [&](const std::string &p) {
        const SType &t = a.get(p);
        const bool ok = (t.kind == SType::Kind::Int || t.kind == SType::Kind::Bool) ||
                        (t.is_tensor() && !t.elem.is_pointer && is_integer(t.elem.dtype));
        if (!ok) fail(span, name + "() needs an integer " + p + ", got " + t.str());
        return t;
      };
      integer("seed");
      const SType counter = integer(philox ? "c0" : "offset");
      if (a.has("n_rounds") && !(a.get("n_rounds").kind == SType::Kind::Int))
        fail(span, name + "() needs n_rounds known before the kernel runs (an int or a tl.constexpr)");
      const SymShape shape = counter.is_tensor() ? counter.shape : SymShape{};
      const bool wide = counter.is_tensor() && bits(counter.elem.dtype) > 32;
      if (name == "tl.rand" || name == "tl.randn") return SType::tensor(ElemType{DType::FP32, false}, shape);
      const SType draw = SType::tensor(ElemType{wide ? DType::UInt64 : DType::UInt32, false}, shape);
      if (name == "tl.randint") return draw;
      return SType::tuple({draw, draw, draw, draw});
    }
    if (name == "triton.cdiv" || name == "tl.cdiv") {
      Args a = bind(name, {"x", "div"}, args, kwargs, span);
      const SType &x = a.get("x"), &d = a.get("div");
      if (x.is_constexpr_number() && d.is_constexpr_number()) {
        if (x.known && d.known) {
          if (d.n == 0) fail(span, "cdiv by zero");
          return SType::of_int(x.n / d.n + ((x.n % d.n != 0) && ((x.n < 0) == (d.n < 0)) ? 1 : 0));
        }
        return SType::int_symbol("cdiv(" + paren(x) + ", " + paren(d) + ")");
      }
      return binary(BinaryOpKind::FloorDiv, binary(BinaryOpKind::Add, x, d, span), d, span);
    }
    if (name == "tl.standard._log2") {
      // floor(log2(n)) of a number known at compile time (Triton's helper
      // for the depth of a bitonic sort).
      Args a = bind(name, {"i"}, args, kwargs, span);
      const SType &n = a.get("i");
      if (n.known && n.kind == SType::Kind::Int) {
        long long depth = 0;
        for (long long v = n.n; v > 1; v >>= 1) ++depth;
        return SType::of_int(depth);
      }
      if (n.kind != SType::Kind::Int) fail(span, name + "() needs an integer known before the kernel runs, got " + n.str());
      return SType::int_symbol("log2(" + paren(n) + ")");
    }
    if (name == "tl.core.get_int_dtype") {
      Args a = bind(name, {"bitwidth", "signed"}, args, kwargs, span);
      const SType &width = a.get("bitwidth"), &is_signed = a.get("signed");
      if (!(width.known && width.kind == SType::Kind::Int) || !(is_signed.known && is_signed.kind == SType::Kind::Bool))
        fail(span, name + "() needs its bit width and signedness known before the kernel runs");
      const std::optional<DType> d = integer_dtype(width.n, is_signed.b);
      if (!d) fail(span, "there is no integer dtype of " + std::to_string(width.n) + " bits");
      return SType::of_dtype(*d);
    }
    if (name == "tl.swizzle2d") {
      // The grouped program order (the tutorial matmul's, as a builtin): the
      // index (i, j) of a size_i x size_j grid renumbered so that groups of
      // size_g rows are walked column by column. Integer arithmetic only.
      Args a = bind(name, {"i", "j", "size_i", "size_j", "size_g"}, args, kwargs, span);
      const SType index = binary(BinaryOpKind::Add, binary(BinaryOpKind::Mul, a.get("i"), a.get("size_j"), span),
                                 a.get("j"), span);
      const SType group_size = binary(BinaryOpKind::Mul, a.get("size_g"), a.get("size_j"), span);
      const SType first_row = binary(BinaryOpKind::Mul, binary(BinaryOpKind::FloorDiv, index, group_size, span),
                                     a.get("size_g"), span);
      const SType rows = builtin(SType::builtin("tl.minimum"),
                                 {binary(BinaryOpKind::Sub, a.get("size_i"), first_row, span), a.get("size_g")}, {}, span);
      const SType in_group = binary(BinaryOpKind::Mod, index, group_size, span);
      return SType::tuple({binary(BinaryOpKind::Add, first_row, binary(BinaryOpKind::Mod, in_group, rows, span), span),
                           binary(BinaryOpKind::FloorDiv, in_group, rows, span)});
    }
    if (name == "triton.next_power_of_2") {
      Args a = bind(name, {"n"}, args, kwargs, span);
      const SType &n = a.get("n");
      if (n.known && n.kind == SType::Kind::Int) {
        long long p = 1;
        while (p < n.n) p <<= 1;
        return SType::of_int(p);
      }
      return SType::int_symbol("next_power_of_2(" + paren(n) + ")");
    }
    if (name == "tl.constexpr") return args.empty() ? SType::unknown() : args[0];
    if (name == "tl.static_assert") {
      Args a = bind(name, {"cond", "msg"}, args, kwargs, span);
      const SType &c = a.get("cond");
      if (c.is_tensor()) {
        // (A `raise` reads as a failing assertion, asserted away where a branch avoids it: src/lower/FailingBranches.h.)
        if (a.has("msg") && a.get("msg").kind == SType::Kind::Str && a.get("msg").s.rfind("raise", 0) == 0)
          fail(span, "'raise' compiles only in a branch that a tl.constexpr condition rules out (Triton's code "
                     "generator has no raise); this one is under a condition known only when the kernel runs: check "
                     "it with tl.device_assert(condition, message) instead");
        fail(span, "tl.static_assert needs a condition known before the kernel runs; use tl.device_assert for tensors");
      }
      if (c.known && ((c.kind == SType::Kind::Bool && !c.b) || (c.kind == SType::Kind::Int && c.n == 0)))
        fail(span, "static assertion failed" + (a.has("msg") && a.get("msg").kind == SType::Kind::Str ? ": " + a.get("msg").s : std::string()));
      return SType::none();
    }
    if (name == "tl.device_assert" || name == "tl.static_print" || name == "tl.device_print" ||
        name == "tl.debug_barrier" || name == "tl.assume")
      return SType::none();
    if (is_compiler_hint(name)) {
      Args a = bind(name, {"input", "values"}, args, kwargs, span);
      return a.get("input");
    }
    if (name == "tl.program_id" || name == "tl.num_programs") {
      Args a = bind(name, {"axis"}, args, kwargs, span);
      const SType &ax = a.get("axis");
      if (ax.kind != SType::Kind::Int || !ax.known || ax.n < 0 || ax.n > 2) fail(span, name + "() axis must be 0, 1 or 2");
      return SType::tensor(i32, {});
    }
    if (name == "tl.arange") {
      Args a = bind(name, {"start", "end"}, args, kwargs, span);
      const SType &s = a.get("start"), &e = a.get("end");
      if (s.kind != SType::Kind::Int || e.kind != SType::Kind::Int)
        fail(span, "tl.arange needs integer bounds known before the kernel runs (tl.constexpr)");
      if (s.known && e.known) {
        long long n = e.n - s.n;
        if (n <= 0 || (n & (n - 1)) != 0)
          fail(span, "tl.arange(" + std::to_string(s.n) + ", " + std::to_string(e.n) + "): the range must be a power of 2");
        return SType::tensor(i32, {Dim::known(n)});
      }
      std::string len = (s.known && s.n == 0) ? (e.known ? std::to_string(e.n) : e.sym) : paren(e) + " - " + paren(s);
      return SType::tensor(i32, {Dim::symbolic(len.empty() ? "?" : len)});
    }
    if (name == "tl.zeros" || name == "tl.full") {
      Args a = bind(name, name == "tl.zeros" ? std::vector<std::string>{"shape", "dtype"} : std::vector<std::string>{"shape", "value", "dtype"}, args, kwargs, span);
      if (a.has("dtype") && is_unknown_constexpr(a.get("dtype"))) return SType::unknown();
      if (shape_unknown(a.get("shape"))) return SType::unknown();
      if (!a.has("dtype") || a.get("dtype").kind != SType::Kind::DType) fail(span, name + "() needs a dtype such as tl.float32");
      if (name == "tl.full" && a.get("value").is_tensor() && !a.get("value").shape.empty()) fail(span, "tl.full() needs a scalar value");
      return SType::tensor(ElemType{a.get("dtype").dtype, false}, shape_arg(a.get("shape"), span));
    }
    if (name == "tl.zeros_like") {
      Args a = bind(name, {"input"}, args, kwargs, span);
      return a.get("input");
    }
    if (name == "tl.cast" || name == "tensor.to") {
      Args a = bind(name == "tl.cast" ? "tl.cast" : "to", {"input", "dtype", "fp_downcast_rounding", "bitcast"}, args, kwargs, span);
      const SType &x = a.get("input"), &d = a.get("dtype");
      if (is_unknown_constexpr(d)) return SType::unknown();  // a constexpr parameter without a value
      if (d.kind != SType::Kind::DType) fail(span, "the target of a cast must be a dtype such as tl.float16");
      auto [e, py] = elem_of(x, span);
      (void)e;
      (void)py;
      if (flag(a, "bitcast", false) && x.is_tensor() && bits(x.elem.dtype) != bits(d.dtype))
        fail(span, "bitcast needs types of one width: " + x.elem.str() + " and " + short_name(d.dtype));
      return SType::tensor(ElemType{d.dtype, d.dtype_is_pointer}, shape_of(x));
    }
    if (name == "tl.load") {
      Args a = bind(name, {"pointer", "mask", "other", "boundary_check", "padding_option", "cache_modifier", "eviction_policy", "volatile"}, args, kwargs, span);
      const SType &p = a.get("pointer");
      if (!p.is_tensor() || !p.elem.is_pointer) fail(span, "tl.load needs a pointer (or a tensor of pointers), got " + p.str());
      SymShape shape = p.shape;
      if (a.has("mask")) {
        SymShape m = broadcast_shapes(shape, shape_of(a.get("mask")), span);
        if (m.size() != shape.size()) fail(span, "the mask " + shape_str(shape_of(a.get("mask"))) + " has more dimensions than the pointer " + shape_str(shape));
      }
      const bool has_other = a.has("other") && a.get("other").kind != SType::Kind::None;
      if (has_other && (!a.has("mask") || a.get("mask").kind == SType::Kind::None))
        fail(span, "tl.load: `other` cannot be provided without `mask` (Triton rejects it); give the mask, or drop `other`");
      if (has_other) broadcast_shapes(shape, shape_of(a.get("other")), span);
      return SType::tensor(ElemType{p.elem.dtype, false}, shape);
    }
    if (name == "tl.store" || name.rfind("tl.atomic_", 0) == 0) {
      const bool store = name == "tl.store", cas = name == "tl.atomic_cas";
      std::vector<std::string> sig = store ? std::vector<std::string>{"pointer", "value", "mask", "boundary_check", "cache_modifier", "eviction_policy"}
                                     : cas ? std::vector<std::string>{"pointer", "cmp", "val", "sem", "scope"}
                                           : std::vector<std::string>{"pointer", "val", "mask", "sem", "scope"};
      Args a = bind(name, sig, args, kwargs, span);
      const SType &p = a.get("pointer");
      if (!p.is_tensor() || !p.elem.is_pointer) fail(span, name + " needs a pointer (or a tensor of pointers), got " + p.str());
      const SType &v = a.get(store ? "value" : "val");
      SymShape vs = shape_of(v);
      SymShape joined = broadcast_shapes(p.shape, vs, span);
      if (joined.size() != p.shape.size())
        fail(span, "the value " + shape_str(vs) + " has more dimensions than the pointer " + shape_str(p.shape));
      if (a.has("mask")) broadcast_shapes(p.shape, shape_of(a.get("mask")), span);
      return store ? SType::none() : SType::tensor(ElemType{p.elem.dtype, false}, p.shape);
    }
    if (name == "tl.where") {
      Args a = bind(name, {"condition", "x", "y"}, args, kwargs, span);
      DType d = promote(a.get("x"), a.get("y"), false, span);
      SymShape s = broadcast_shapes(shape_of(a.get("condition")), broadcast_shapes(shape_of(a.get("x")), shape_of(a.get("y")), span), span);
      return SType::tensor(ElemType{d, false}, s);
    }
    if (name == "tl.maximum" || name == "tl.minimum") {
      Args a = bind(name, {"x", "y", "propagate_nan"}, args, kwargs, span);
      return SType::tensor(ElemType{promote(a.get("x"), a.get("y"), false, span), false},
                           broadcast_shapes(shape_of(a.get("x")), shape_of(a.get("y")), span));
    }
    if (name == "tl.clamp") {
      Args a = bind(name, {"x", "min", "max", "propagate_nan"}, args, kwargs, span);
      SType lo = SType::tensor(ElemType{promote(a.get("x"), a.get("min"), false, span), false}, broadcast_shapes(shape_of(a.get("x")), shape_of(a.get("min")), span));
      return SType::tensor(ElemType{promote(lo, a.get("max"), false, span), false}, broadcast_shapes(lo.shape, shape_of(a.get("max")), span));
    }
    auto fp32_or_64 = [&](const std::string &fn, const SType &x) {
      if (!x.is_tensor()) return;
      if (x.elem.is_pointer || (x.elem.dtype != DType::FP32 && x.elem.dtype != DType::FP64))
        fail(span, fn + " expects fp32 or fp64, got " + x.elem.str() + "; cast with .to(tl.float32) first");
    };
    if (name == "tl.abs") {
      Args a = bind(name, {"x"}, args, kwargs, span);
      return a.get("x");
    }
    if (name == "tl.sigmoid" || name == "math.sigmoid") {
      Args a = bind(name, {"x"}, args, kwargs, span);
      fp32_or_64("tl.sigmoid", a.get("x"));
      return a.get("x");
    }
    if (name.rfind("math.", 0) == 0) {
      const std::string f = name.substr(5);
      if (f == "abs") return builtin(SType::builtin("tl.abs"), args, kwargs, span);
      if (f == "fma") {
        Args a = bind(name, {"x", "y", "z"}, args, kwargs, span);
        SType xy = SType::tensor(ElemType{promote(a.get("x"), a.get("y"), false, span), false}, broadcast_shapes(shape_of(a.get("x")), shape_of(a.get("y")), span));
        SType r = SType::tensor(ElemType{promote(xy, a.get("z"), false, span), false}, broadcast_shapes(xy.shape, shape_of(a.get("z")), span));
        fp32_or_64("fma", r);
        return r;
      }
      if (f == "div_rn" || f == "fdiv" || f == "pow" || f == "atan2") {
        Args a = bind(name, {"x", "y", "ieee_rounding"}, args, kwargs, span);
        SType r = SType::tensor(ElemType{promote(a.get("x"), a.get("y"), true, span), false}, broadcast_shapes(shape_of(a.get("x")), shape_of(a.get("y")), span));
        fp32_or_64(f, r);
        return r;
      }
      Args a = bind(name, {"x"}, args, kwargs, span);
      SType x = a.get("x");
      // A Python number becomes a tensor as Triton's math functions convert it
      // (semantic.to_tensor: a float is fp32, an int int32): tl.math.rsqrt(2.0).
      if (x.kind == SType::Kind::Float) x = SType::tensor(ElemType{DType::FP32, false}, {});
      else if (x.kind == SType::Kind::Int) x = SType::tensor(i32, {});
      if (!x.is_tensor()) fail(span, name + " needs a tensor or a number");
      fp32_or_64(name, x);
      // libdevice's classifications return int32 (1 or 0).
      if (is_math_classification(f)) return SType::tensor(i32, x.shape);
      return x;
    }
    if (name == "tl.gather") {
      // out[..., i, ...] = src[..., index[..., i, ...], ...] along axis: the
      // index's shape, the source's dtype; the other dimensions agree.
      Args a = bind(name, {"src", "index", "axis"}, args, kwargs, span);
      const SType &src = a.get("src"), &index = a.get("index");
      if (!src.is_tensor() || src.shape.empty() || !index.is_tensor())
        fail(span, "tl.gather needs a source tensor and an index tensor");
      if (index.elem.is_pointer || !is_integer(index.elem.dtype))
        fail(span, "tl.gather needs an integer index, got " + index.elem.str());
      if (index.shape.size() != src.shape.size())
        fail(span, "tl.gather needs an index of the source's rank, got " + shape_str(index.shape) + " for " +
                       shape_str(src.shape));
      const std::optional<int> axis = axis_arg(a, "axis", name, span);
      if (!axis) fail(span, "tl.gather needs the axis to gather along");
      const int k = normalize_axis(*axis, src.shape.size(), span);
      // Measured with Triton 3.6 on the H100: other dimensions must agree (a
      // compile error), and an index longer than the source along the axis
      // stops Triton's compiler (a pass pipeline failure).
      for (size_t d = 0; d < src.shape.size(); ++d)
        if (static_cast<int>(d) != k && src.shape[d] != index.shape[d] && src.shape[d].value && index.shape[d].value)
          fail(span, "tl.gather's index " + shape_str(index.shape) + " and source " + shape_str(src.shape) +
                         " differ outside the gathered axis " + std::to_string(k));
      const Dim &along = index.shape[static_cast<size_t>(k)], &source = src.shape[static_cast<size_t>(k)];
      if (along.value && source.value && *along.value > *source.value)
        fail(span, "tl.gather's index " + shape_str(index.shape) + " is longer than its source " + shape_str(src.shape) +
                       " along the gathered axis; Triton 3.6 fails to compile that (measured on the H100)");
      return SType::tensor(src.elem, index.shape);
    }
    if (name == "tl.trans" || name == "tl.permute") {
      Args a = bind(name, {"input", "dims"}, args, kwargs, span, true);
      const SType &x = a.get("input");
      if (!x.is_tensor()) fail(span, name + " needs a tensor");
      std::vector<SType> dims = a.rest;
      if (a.has("dims")) dims.insert(dims.begin(), a.get("dims"));
      if (dims.size() == 1 && dims[0].kind == SType::Kind::Tuple) dims = dims[0].elems;
      std::vector<int> order;
      for (const SType &d : dims) {
        if (d.kind != SType::Kind::Int || !d.known) fail(span, name + " needs dimensions known before the kernel runs");
        order.push_back(static_cast<int>(d.n));
      }
      if (order.empty()) {
        if (name == "tl.permute") fail(span, "tl.permute needs the new order of the dimensions");
        if (x.shape.size() != 2) fail(span, "tl.trans without dims needs a 2-D tensor, got " + shape_str(x.shape));
        order = {1, 0};
      }
      if (order.size() != x.shape.size()) fail(span, "permutation of length " + std::to_string(order.size()) + " for a tensor of rank " + std::to_string(x.shape.size()));
      std::vector<bool> seen(order.size());
      SymShape shape;
      for (int o : order) {
        if (o < 0 || o >= static_cast<int>(order.size()) || seen[o]) fail(span, "invalid permutation");
        seen[o] = true;
        shape.push_back(x.shape[o]);
      }
      return SType::tensor(x.elem, shape);
    }
    if (name == "tl.reshape" || name == "tl.view" || name == "tl.broadcast_to") {
      if (name == "tl.reshape") kwargs.erase("can_reorder");  // keyword-only; keeping the order is always allowed
      Args a = bind(name, {"input", "shape"}, args, kwargs, span, /*variadic=*/true);
      const SType &x = a.get("input");
      // The shape: one tuple, or the dimensions as separate arguments.
      SType shape_value = a.get("shape");
      if (a.rest.size() == 1) shape_value = a.rest[0];
      else if (a.rest.size() > 1) shape_value = SType::tuple(a.rest);
      if (shape_value.kind == SType::Kind::None) fail(span, name + "() needs a shape");
      if (shape_unknown(shape_value)) return SType::unknown();
      SymShape shape = shape_arg(shape_value, span);
      if (!x.is_tensor()) return SType::tensor(elem_of(x, span).first, shape);
      if (name == "tl.broadcast_to") {
        SymShape b = broadcast_shapes(x.shape, shape, span);
        if (b.size() != shape.size()) fail(span, "cannot broadcast " + shape_str(x.shape) + " to " + shape_str(shape));
        return SType::tensor(x.elem, shape);
      }
      int64_t from = 1, to = 1;
      bool all_known = true;
      for (const Dim &d : x.shape) all_known &= d.value.has_value(), from *= d.value.value_or(1);
      for (const Dim &d : shape) all_known &= d.value.has_value(), to *= d.value.value_or(1);
      if (all_known && from != to)
        fail(span, "cannot reshape " + shape_str(x.shape) + " (" + std::to_string(from) + " elements) to " + shape_str(shape));
      return SType::tensor(x.elem, shape);
    }
    if (name == "tl.ravel") {
      Args a = bind(name, {"x"}, args, kwargs, span);
      const SType &x = a.get("x");
      std::string len;
      int64_t n = 1;
      bool known = true;
      for (const Dim &d : x.shape) {
        known &= d.value.has_value();
        n *= d.value.value_or(1);
        len += (len.empty() ? "" : " * ") + d.str();
      }
      return SType::tensor(x.elem, {known ? Dim::known(n) : Dim::symbolic(len)});
    }
    if (name == "tl.expand_dims") {
      Args a = bind(name, {"input", "axis"}, args, kwargs, span);
      SType x = a.get("input");
      if (!x.is_tensor()) fail(span, "tl.expand_dims needs a tensor");
      std::vector<SType> axes = a.get("axis").kind == SType::Kind::Tuple ? a.get("axis").elems : std::vector<SType>{a.get("axis")};
      for (const SType &ax : axes) {
        if (ax.kind != SType::Kind::Int || !ax.known) fail(span, "tl.expand_dims needs an axis known before the kernel runs");
        int rank = static_cast<int>(x.shape.size()) + 1;
        int k = static_cast<int>(ax.n);
        if (k < -rank || k >= rank) fail(span, "expand_dims axis " + std::to_string(k) + " out of range for rank " + std::to_string(rank - 1));
        if (k < 0) k += rank;
        x.shape.insert(x.shape.begin() + k, Dim::known(1));
      }
      return x;
    }
    if (name == "tl.broadcast") {
      Args a = bind(name, {"input", "other"}, args, kwargs, span);
      SymShape s = broadcast_shapes(shape_of(a.get("input")), shape_of(a.get("other")), span);
      return SType::tuple({SType::tensor(elem_of(a.get("input"), span).first, s), SType::tensor(elem_of(a.get("other"), span).first, s)});
    }
    if (name == "tl.sum" || name == "tl.max" || name == "tl.min" || name == "tl.argmax" || name == "tl.argmin") {
      const bool arg = name == "tl.argmax" || name == "tl.argmin";
      std::vector<std::string> sig = {"input", "axis"};
      if (name == "tl.sum") sig.insert(sig.end(), {"keep_dims", "dtype"});
      else if (arg) sig.insert(sig.end(), {"tie_break_left", "keep_dims"});
      else sig.insert(sig.end(), {"return_indices", "return_indices_tie_break_left", "keep_dims", "propagate_nan"});
      Args a = bind(name, sig, args, kwargs, span);
      const SType &x = a.get("input");
      if (!x.is_tensor()) fail(span, name + " needs a tensor");
      if (x.elem.is_pointer) fail(span, name + " cannot reduce pointers");
      std::optional<int> axis = axis_arg(a, "axis", name, span);
      if (arg && !axis) fail(span, name + " needs an axis");
      bool keep = flag(a, "keep_dims", false);
      DType in = x.elem.dtype;
      const bool with_indices = !arg && name != "tl.sum" && flag(a, "return_indices", false);
      DType out = name == "tl.sum" && a.has("dtype") ? a.get("dtype").dtype : reduction_dtype(name.substr(3), in, with_indices);
      SType r = SType::tensor(ElemType{out, false}, reduced_shape(x.shape, axis, keep, span));
      if (with_indices) return SType::tuple({r, SType::tensor(i32, r.shape)});
      return r;
    }
    if (name == "tl.flip") {
      // Triton 3.6 (standard.py): the elements reversed along `dim`, through a bitcast to integers and xor-sums over
      // the axis split into twos: a power-of-two length, any element type. Its default dim=None fails the
      // function's first assertion (`-len(x.shape) <= dim`), measured on the H200: the axis must be given.
      Args a = bind(name, {"x", "dim"}, args, kwargs, span);
      const SType &x = a.get("x");
      if (!x.is_tensor() || x.shape.empty()) fail(span, "tl.flip needs a tensor of at least one dimension");
      if (x.elem.is_pointer) fail(span, "tl.flip cannot reverse pointers");
      if (!a.has("dim"))
        fail(span, "tl.flip needs its axis: Triton 3.6 refuses dim=None (its assertion compares None with the rank); "
                   "write tl.flip(x, " + std::to_string(x.shape.size() - 1) + ") for the last axis");
      const int axis = normalize_axis(*axis_arg(a, "dim", name, span), x.shape.size(), span);
      if (const std::optional<long long> len = x.shape[axis].value; len && (*len & (*len - 1)) != 0)
        fail(span, "tl.flip needs a power-of-two length along its axis, got " + std::to_string(*len));
      return x;
    }
    if (name == "tl.cumsum" || name == "tl.cumprod") {
      Args a = bind(name, {"input", "axis", "reverse", "dtype"}, args, kwargs, span);
      const SType &x = a.get("input");
      if (!x.is_tensor()) fail(span, name + " needs a tensor");
      normalize_axis(axis_arg(a, "axis", name, span).value_or(0), x.shape.size(), span);
      DType out = a.has("dtype") ? a.get("dtype").dtype : scan_dtype(x.elem.dtype);
      return SType::tensor(ElemType{out, false}, x.shape);
    }
    if (name == "tl.join" || name == "tl.interleave") {
      // Measured on the H100 (Triton 3.6): the operands broadcast to one
      // shape and must have one dtype; a Python number is refused.
      Args a = bind(name, {"a", "b"}, args, kwargs, span);
      const SType &x = a.get("a"), &y = a.get("b");
      if (!x.is_tensor() || !y.is_tensor()) fail(span, name + " needs two tensors (a Python number is not joined)");
      if (x.elem != y.elem)
        fail(span, name + " needs operands of one type, got " + x.elem.str() + " and " + y.elem.str() + " (cast one with .to())");
      SymShape s = broadcast_shapes(x.shape, y.shape, span);
      if (name == "tl.join") {
        s.push_back(Dim::known(2));
      } else if (s.empty()) {
        s.push_back(Dim::known(2));
      } else {
        Dim &last = s.back();
        last = last.value ? Dim::known(2 * *last.value) : Dim::symbolic("2 * " + last.symbol);
      }
      return SType::tensor(x.elem, s);
    }
    if (name == "tl.split") {
      Args a = bind(name, {"a"}, args, kwargs, span);
      const SType &x = a.get("a");
      if (!x.is_tensor() || x.shape.empty() || x.shape.back() != Dim::known(2))
        fail(span, "tl.split needs a tensor whose last dimension is 2, got " + x.str());
      SymShape s(x.shape.begin(), x.shape.end() - 1);
      return SType::tuple({SType::tensor(x.elem, s), SType::tensor(x.elem, s)});
    }
    if (name == "tl.associative_scan" || name == "tl.reduce") {
      const bool scan = name == "tl.associative_scan";
      Args a = bind(name, {"input", "axis", "combine_fn", scan ? "reverse" : "keep_dims"}, args, kwargs, span);
      const SType &in = a.get("input");
      std::vector<SType> inputs = in.kind == SType::Kind::Tuple ? in.elems : std::vector<SType>{in};
      const std::string verb = scan ? "scans" : "reduces";
      if (inputs.empty()) fail(span, name + " needs at least one tensor");
      // (A helper read without its caller: inputs of unknown type give an unknown result.)
      for (const SType &t : inputs)
        if (t.kind == SType::Kind::Unknown) return SType::unknown();
      for (const SType &t : inputs) {
        if (!t.is_tensor() || t.shape.empty()) fail(span, name + " " + verb + " tensors, got " + t.str());
        if (t.shape != inputs[0].shape)
          fail(span, name + " needs inputs of one shape, got " + shape_str(inputs[0].shape) + " and " +
                         shape_str(t.shape));
      }
      std::optional<int> axis = axis_arg(a, "axis", name, span);
      if (!axis && scan) fail(span, "tl.associative_scan needs an axis");
      if (axis) normalize_axis(*axis, inputs[0].shape.size(), span);
      const SType &combine = a.get("combine_fn");
      if (combine.kind != SType::Kind::Function)
        fail(span, name + " needs a @triton.jit combine function, got " + combine.str());
      // The combine function takes two elements (each as many scalars as
      // there are inputs) and returns one of the same types.
      const Function &fn = *combine.fn;
      if (fn.params.size() != 2 * inputs.size())
        fail(span, "the combine function '" + fn.name + "' must take " + std::to_string(2 * inputs.size()) +
                       " arguments (two elements of " + std::to_string(inputs.size()) + ")");
      std::map<std::string, SType> scalars;
      for (size_t k = 0; k < fn.params.size(); ++k)
        scalars[fn.params[k].name] = SType::tensor(inputs[k % inputs.size()].elem, {});
      SType r = call_function(fn, scalars, span);
      std::vector<SType> results = r.kind == SType::Kind::Tuple ? r.elems : std::vector<SType>{r};
      if (results.size() != inputs.size())
        fail(span, "the combine function '" + fn.name + "' returns " + std::to_string(results.size()) + " values; " +
                       name + " has " + std::to_string(inputs.size()) + " inputs");
      for (size_t k = 0; k < results.size(); ++k)
        // (`a and b` on two int1 elements: tgrad types Python's and/or on 0-d tensors as an unknown bool; Triton
        // computes an int1.)
        if (results[k].kind != SType::Kind::Unknown && (!results[k].is_tensor() || results[k].elem != inputs[k].elem) &&
            !(results[k].kind == SType::Kind::Bool && inputs[k].elem == ElemType{DType::Int1, false}))
          fail(span, "the combine function '" + fn.name + "' returns " + results[k].str() + " for an input of " +
                         inputs[k].elem.str() + ": Triton needs the input's type");
      if (!scan)  // the reduced shape, as tl.sum's
        for (SType &t : inputs) t.shape = reduced_shape(t.shape, axis, flag(a, "keep_dims", false), span);
      if (in.kind != SType::Kind::Tuple) return inputs[0];
      return SType::tuple(inputs);
    }
    // triton-ascend's slices of a tile (fla's ascend causal conv takes one row of its weights): the shape is `sizes`.
    if (name == "tl.extract_slice" || name == "tl.insert_slice") {
      const bool insert = name == "tl.insert_slice";
      Args a = bind(name,
                    insert ? std::vector<std::string>{"ful", "sub", "offsets", "sizes", "strides"}
                           : std::vector<std::string>{"ful", "offsets", "sizes", "strides"},
                    args, kwargs, span);
      const SType &ful = a.get("ful");
      if (ful.kind == SType::Kind::Unknown || shape_unknown(a.get("sizes"))) return SType::unknown();
      if (!ful.is_tensor() || ful.shape.empty()) fail(span, name + " slices a tensor, got " + ful.str());
      const SymShape sizes = shape_arg(a.get("sizes"), span);
      for (const char *p : {"offsets", "sizes", "strides"}) {
        const SType &t = a.get(p);
        const size_t n = t.kind == SType::Kind::Tuple ? t.elems.size() : 1;
        if (n != ful.shape.size())
          fail(span, name + " needs " + std::to_string(ful.shape.size()) + " " + p + " for " + ful.str() + ", got " +
                         std::to_string(n));
      }
      if (!insert) return SType::tensor(ful.elem, sizes);
      const SType &sub = a.get("sub");
      if (sub.kind == SType::Kind::Unknown) return ful;
      if (!sub.is_tensor() || sub.shape != sizes)
        fail(span, name + " inserts a tensor of the slice's shape " + shape_str(sizes) + ", got " + sub.str());
      return ful;
    }
    if (name == "tl.softmax") {
      Args a = bind(name, {"x", "dim", "keep_dims", "ieee_rounding"}, args, kwargs, span);
      fp32_or_64("tl.softmax", a.get("x"));
      return a.get("x");
    }
    if (name == "tl.dot") {
      Args a = bind(name, {"input", "other", "acc", "input_precision", "allow_tf32", "max_num_imprecise_acc", "out_dtype"}, args, kwargs, span);
      const SType &x = a.get("input"), &y = a.get("other");
      if (x.is_tensor()) {
        DType in = x.elem.dtype;
        if (in != DType::FP16 && in != DType::BF16 && in != DType::FP32 && in != DType::Int8 && in != DType::FP64 &&
            !is_fp8(in))
          fail(span, "tl.dot does not take " + x.elem.str() + " operands (fp8, fp16, bf16, fp32, int8)");
      }
      if (a.has("input_precision") && a.get("input_precision").kind == SType::Kind::Str) {
        const std::string &p = a.get("input_precision").s;
        if (p != "tf32" && p != "ieee" && p != "tf32x3") fail(span, "tl.dot input_precision must be \"tf32\", \"tf32x3\" or \"ieee\"");
      }
      DType out = a.has("out_dtype") ? a.get("out_dtype").dtype : (x.is_tensor() && x.elem.dtype == DType::Int8 ? DType::Int32 : DType::FP32);
      const SType *acc = a.has("acc") ? &a.get("acc") : nullptr;
      return matmul(x, y, acc, ElemType{out, false}, span);
    }
    fail(span, name + "() is not known to tgrad's semantic analysis yet");
  }

  const Module &module_;
  std::unordered_map<std::string, SType> outside_env_;  // names(): those the module defines or imports, or builtins
  std::unordered_map<std::string, std::optional<SType>> members_;  // namespace_attribute()
  TypeInfo &info_;
  int depth_ = 0;
};

}  // namespace

std::optional<bool> known_truth(const SType &t) {
  if (!t.known) return std::nullopt;
  switch (t.kind) {
    case SType::Kind::Bool: return t.b;
    case SType::Kind::Int: return t.n != 0;
    case SType::Kind::Float: return t.x != 0.0;
    case SType::Kind::Str: return !t.s.empty();
    default: return std::nullopt;
  }
}

namespace {

// How many expression nodes a block holds, at any depth: sema types each
// one, so its table is sized once rather than rehashed as it grows (a long
// backward has hundreds of thousands).
size_t count_expressions(const StmtList &block) {
  size_t n = 0;
  auto expr = [&n](const ExprPtr &e) {
    if (e) visit_expr(*e, [&n](const Expr &) { ++n; });
  };
  for (const StmtPtr &s : block) {
    switch (s->kind) {
      case NodeKind::ExprStmt: expr(cast<ExprStmt>(s.get())->value); break;
      case NodeKind::Assign:
        for (const ExprPtr &t : cast<Assign>(s.get())->targets) expr(t);
        expr(cast<Assign>(s.get())->value);
        break;
      case NodeKind::AugAssign:
        expr(cast<AugAssign>(s.get())->target);
        expr(cast<AugAssign>(s.get())->value);
        break;
      case NodeKind::AnnAssign: expr(cast<AnnAssign>(s.get())->value); break;
      case NodeKind::If:
        expr(cast<If>(s.get())->cond);
        n += count_expressions(cast<If>(s.get())->body) + count_expressions(cast<If>(s.get())->orelse);
        break;
      case NodeKind::For:
        expr(cast<For>(s.get())->target);
        expr(cast<For>(s.get())->iter);
        n += count_expressions(cast<For>(s.get())->body);
        break;
      case NodeKind::While:
        expr(cast<While>(s.get())->cond);
        n += count_expressions(cast<While>(s.get())->body);
        break;
      case NodeKind::Return: expr(cast<Return>(s.get())->value); break;
      case NodeKind::Assert: expr(cast<Assert>(s.get())->test); break;
      default: break;
    }
  }
  return n;
}

}  // namespace

std::optional<TypeInfo> analyze(const Module &module, const Function &fn, const ParamTypes &params, DiagEngine &diags) {
  TypeInfo info;
  info.types.reserve(count_expressions(fn.body));
  Checker checker(module, info);
  for (const auto &kv : params) {
    bool known = false;
    for (const Param &p : fn.params) known |= p.name == kv.first;
    if (!known) {
      diags.error(fn.name_span, "'" + fn.name + "' has no parameter '" + kv.first + "'");
      return std::nullopt;
    }
  }
  try {
    info.result = checker.call_function(fn, params, fn.name_span, /*entry=*/true);
  } catch (const SemaError &e) {
    diags.error(e.span, e.message);
    return std::nullopt;
  }
  return info;
}

}  // namespace tgrad::sema
