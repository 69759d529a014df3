// Calls: tl builtins, math (libdevice), and jit helpers (inlined).
//
// Result types come from sema (the call's SType): the code here decides how
// each value is computed, never what type it has.
#include <map>

#include "llvm/IR/IntrinsicsNVPTX.h"

#include "src/codegen/Lower.h"
#include "tgrad/sema/Names.h"

namespace tgrad::codegen {

using sema::DType;
using sema::ElemType;
using sema::SType;

namespace {

// A call's arguments by position or keyword, bound to a signature.
struct Bound {
  std::map<std::string, const ast::Expr *> args;
  const ast::Expr *get(const std::string &name) const {
    auto it = args.find(name);
    return it == args.end() ? nullptr : it->second;
  }
};

Bound bind_args(const ast::Call &c, const std::vector<std::string> &signature, size_t skip_positional = 0,
                const ast::Expr *self = nullptr) {
  Bound b;
  size_t k = 0;
  if (self) b.args[signature[k++]] = self;
  for (size_t i = skip_positional; i < c.args.size(); ++i) {
    if (k >= signature.size()) unsupported(c.args[i]->span, "this many arguments");
    b.args[signature[k++]] = c.args[i].get();
  }
  for (const ast::Keyword &kw : c.keywords) b.args[kw.name] = kw.value.get();
  return b;
}

// libdevice's name of a math function for fp32 and fp64.
struct LibdeviceName {
  const char *f32;
  const char *f64;
};

const std::map<std::string, LibdeviceName> &libdevice_names() {
  static const std::map<std::string, LibdeviceName> names = {
      {"exp", {"__nv_expf", "__nv_exp"}},
      {"exp2", {"__nv_exp2f", "__nv_exp2"}},
      {"exp10", {"__nv_exp10f", "__nv_exp10"}},
      {"log", {"__nv_logf", "__nv_log"}},
      {"log2", {"__nv_log2f", "__nv_log2"}},
      {"log10", {"__nv_log10f", "__nv_log10"}},
      {"log1p", {"__nv_log1pf", "__nv_log1p"}},
      {"expm1", {"__nv_expm1f", "__nv_expm1"}},
      {"sqrt", {"__nv_sqrtf", "__nv_sqrt"}},
      {"sqrt_rn", {"__nv_fsqrt_rn", "__nv_dsqrt_rn"}},
      {"rsqrt", {"__nv_rsqrtf", "__nv_rsqrt"}},
      {"cbrt", {"__nv_cbrtf", "__nv_cbrt"}},
      {"sin", {"__nv_sinf", "__nv_sin"}},
      {"cos", {"__nv_cosf", "__nv_cos"}},
      {"tan", {"__nv_tanf", "__nv_tan"}},
      {"asin", {"__nv_asinf", "__nv_asin"}},
      {"acos", {"__nv_acosf", "__nv_acos"}},
      {"atan", {"__nv_atanf", "__nv_atan"}},
      {"atan2", {"__nv_atan2f", "__nv_atan2"}},
      {"sinh", {"__nv_sinhf", "__nv_sinh"}},
      {"cosh", {"__nv_coshf", "__nv_cosh"}},
      {"tanh", {"__nv_tanhf", "__nv_tanh"}},
      {"asinh", {"__nv_asinhf", "__nv_asinh"}},
      {"acosh", {"__nv_acoshf", "__nv_acosh"}},
      {"atanh", {"__nv_atanhf", "__nv_atanh"}},
      {"erf", {"__nv_erff", "__nv_erf"}},
      {"erfc", {"__nv_erfcf", "__nv_erfc"}},
      {"abs", {"__nv_fabsf", "__nv_fabs"}},
      {"floor", {"__nv_floorf", "__nv_floor"}},
      {"ceil", {"__nv_ceilf", "__nv_ceil"}},
      {"trunc", {"__nv_truncf", "__nv_trunc"}},
      {"rint", {"__nv_rintf", "__nv_rint"}},
      {"nearbyint", {"__nv_nearbyintf", "__nv_nearbyint"}},
      {"round", {"__nv_roundf", "__nv_round"}},
      {"fma", {"__nv_fmaf", "__nv_fma"}},
      {"div_rn", {"__nv_fdiv_rn", "__nv_ddiv_rn"}},
      {"fdiv", {"__nv_fast_fdividef", "__nv_ddiv_rn"}},
      {"pow", {"__nv_powf", "__nv_pow"}},
      {"fast_expf", {"__nv_fast_expf", "__nv_exp"}},
      {"fast_logf", {"__nv_fast_logf", "__nv_log"}},
      {"isnan", {"__nv_isnanf", "__nv_isnand"}},
      {"isinf", {"__nv_isinff", "__nv_isinfd"}},
      {"signbit", {"__nv_signbitf", "__nv_signbitd"}},
      {"finitef", {"__nv_finitef", "__nv_isfinited"}},
      {"isfinited", {"__nv_finitef", "__nv_isfinited"}},
  };
  return names;
}

// The argument `name` of a call, which the builtin cannot do without.
const ast::Expr &need(const Bound &b, const std::string &name, const ast::Call &c) {
  const ast::Expr *e = b.get(name);
  if (!e) throw Unsupported{c.span, "a call without its argument '" + name + "'"};
  return *e;
}

// How many arguments a math function takes.
size_t math_arity(const std::string &fn) {
  if (fn == "fma") return 3;
  if (fn == "atan2" || fn == "pow" || fn == "div_rn" || fn == "fdiv") return 2;
  return 1;
}

int64_t known_int(const SType &t, SourceSpan span, const char *what) {
  if (t.kind == SType::Kind::Int && t.known) return t.n;
  if (t.kind == SType::Kind::Bool && t.known) return t.b;
  unsupported(span, std::string(what) + " that is not a known constant");
}

}  // namespace

std::vector<Tile> Lowering::call(const ast::Call &c) {
  const SType &callee = type(*c.func);
  if (callee.kind == SType::Kind::Function && callee.fn) return call_helper(c, *callee.fn);
  if (callee.kind != SType::Kind::Builtin) unsupported(c.func->span, "calling '" + callee.str() + "'");
  std::string name = callee.s;
  const SType &result = type(c);
  if (result.kind == SType::Kind::Tuple) unsupported(c.span, "'" + name + "', which returns a tuple,");
  Tile t = call_builtin(c, name);
  return {t};
}

std::vector<Tile> Lowering::call_helper(const ast::Call &c, const ast::Function &fn) {
  // sema types a helper's body once per signature, into one table: a
  // second signature would read the first one's types.
  std::string signature;
  for (const auto &a : c.args) signature += type(*a).str() + ";";
  for (const auto &kw : c.keywords) signature += kw.name + "=" + type(*kw.value).str() + ";";
  auto [it, fresh] = helper_signatures_.emplace(&fn, signature);
  if (!fresh && it->second != signature)
    unsupported(c.span, "calling the helper '" + fn.name + "' with arguments of different types");
  for (size_t k = 0; k + 1 < fn.body.size(); ++k)
    if (ast::isa<ast::Return>(fn.body[k].get())) unsupported(fn.body[k]->span, "a return before a helper's end");
  std::function<void(const ast::StmtList &, bool)> check = [&](const ast::StmtList &body, bool nested) {
    for (const auto &s : body) {
      if (nested && ast::isa<ast::Return>(s.get())) unsupported(s->span, "a return inside a helper's if or loop");
      if (const auto *i = ast::dyn_cast<ast::If>(s.get())) {
        check(i->body, true);
        check(i->orelse, true);
      } else if (const auto *f = ast::dyn_cast<ast::For>(s.get())) {
        check(f->body, true);
      } else if (const auto *w = ast::dyn_cast<ast::While>(s.get())) {
        check(w->body, true);
      }
    }
  };
  check(fn.body, false);
  // The arguments, evaluated in the caller's scope.
  std::map<std::string, Tile> params;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const ast::Expr *arg = k < c.args.size() ? c.args[k].get() : c.keyword(fn.params[k].name);
    if (!arg) continue;  // a default: a constexpr sema knows
    if (type(*arg).is_tensor()) params[fn.params[k].name] = eval(*arg);
  }
  std::map<std::string, Var> saved;
  saved.swap(vars_);
  std::vector<Tile> results, *saved_returned = returned_;
  returned_ = &results;
  for (auto &[name, value] : params) store_var(name, value);
  lower_block(fn.body);
  returned_ = saved_returned;
  vars_.swap(saved);
  return results;
}

Tile Lowering::math(const std::string &fn, const std::vector<const ast::Expr *> &args, const SType &result,
                    SourceSpan span) {
  auto it = libdevice_names().find(fn);
  if (it == libdevice_names().end()) unsupported(span, "the math function '" + fn + "'");
  if (args.size() != math_arity(fn))
    unsupported(span, "'" + fn + "' with " + std::to_string(args.size()) + " arguments (it takes " +
                          std::to_string(math_arity(fn)) + ")");
  const std::vector<int64_t> shape = shape_of(result, span);
  const bool f64 = result.elem.dtype == DType::FP64 || std::any_of(args.begin(), args.end(), [&](const ast::Expr *a) {
                     return type(*a).is_tensor() && type(*a).elem.dtype == DType::FP64;
                   });
  const ElemType compute{f64 ? DType::FP64 : DType::FP32, false};
  std::vector<Tile> operands;
  for (const ast::Expr *a : args) operands.push_back(eval_as(*a, compute, shape));
  const bool classification = sema::is_math_classification(fn);
  llvm::Type *ret = classification ? b_.getInt32Ty() : e_.type_of(compute);
  Tile out{classification ? ElemType{DType::Int32, false} : compute, shape, {}, Pattern::Unknown};
  if (!f64 && fn == "exp") {
    // Triton's fp32 exp: ex2.approx of x * log2(e) (its ElementwiseOpToLLVM), not libdevice's exact expf.
    Tile e = e_.map(operands[0], compute, [&](llvm::Value *v) {
      llvm::Value *scaled = b_.CreateFMul(v, llvm::ConstantFP::get(v->getType(), 1.4426950408889634));
      return e_.intrinsic(llvm::Intrinsic::nvvm_ex2_approx_f, {}, {scaled});
    });
    return e_.cast(e, result.elem);
  }
  for (size_t r = 0; r < operands[0].regs.size(); ++r) {
    std::vector<llvm::Value *> values;
    for (const Tile &o : operands) values.push_back(o.regs[r]);
    out.regs.push_back(e_.call_libdevice(f64 ? it->second.f64 : it->second.f32, ret, values));
  }
  return e_.cast(out, result.elem);
}

Tile Lowering::call_builtin(const ast::Call &c, std::string name) {
  const SType &callee = type(*c.func);
  const SType &result = type(c);
  const ast::Expr *self = nullptr;
  if (callee.self) {
    const auto *attr = ast::dyn_cast<ast::Attribute>(c.func.get());
    if (!attr) unsupported(c.span, "this method call");
    self = attr->value.get();
    if (name.rfind("tensor.", 0) == 0 && name != "tensor.to") {
      const std::string method = name.substr(7);
      name = sema::is_tl_function(method) ? "tl." + method : "math." + method;
    }
  }
  if (name.rfind("tl.", 0) == 0 && sema::is_math_function(name.substr(3)) && name != "tl.abs" && name != "tl.sigmoid")
    name = "math." + name.substr(3);
  const SourceSpan span = c.span;
  auto void_result = [&] { return Tile{ElemType{DType::Int32, false}, {}, {}, Pattern::Unknown}; };

  if (name == "tl.program_id" || name == "tl.num_programs") {
    Bound a = bind_args(c, {"axis"});
    const int64_t axis = a.get("axis") ? known_int(type(need(a, "axis", c)), span, "an axis") : 0;
    if (axis < 0 || axis > 2) unsupported(span, "a program axis outside 0..2");
    llvm::Value *v =
        name == "tl.program_id" ? e_.program_id(static_cast<int>(axis)) : e_.num_programs(static_cast<int>(axis));
    return e_.splat({DType::Int32, false}, {}, v);
  }
  if (name == "tl.arange") {
    Bound a = bind_args(c, {"start", "end"});
    return e_.arange(known_int(type(need(a, "start", c)), span, "a start"),
                     known_int(type(need(a, "end", c)), span, "an end"));
  }
  if (name == "tl.zeros" || name == "tl.zeros_like") {
    const std::vector<int64_t> shape = shape_of(result, span);
    return e_.splat(result.elem, shape, llvm::Constant::getNullValue(e_.type_of(result.elem)));
  }
  if (name == "tl.full") {
    Bound a = bind_args(c, {"shape", "value", "dtype"});
    return eval_as(need(a, "value", c), result.elem, shape_of(result, span));
  }
  if (name == "tl.cast" || name == "tensor.to") {
    Bound a = bind_args(c, {"input", "dtype", "fp_downcast_rounding", "bitcast"}, 0, self);
    bool bitcast = false;
    if (const ast::Expr *bc = a.get("bitcast")) bitcast = known_int(type(*bc), span, "bitcast=") != 0;
    if (const ast::Expr *r = a.get("fp_downcast_rounding"); r && type(*r).kind != SType::Kind::None)
      unsupported(r->span, "fp_downcast_rounding");
    Tile x = eval(need(a, "input", c));
    return bitcast ? e_.cast(x, result.elem, true) : e_.cast(x, result.elem);
  }
  if (name == "tl.load") {
    Bound a = bind_args(c, {"pointer", "mask", "other", "boundary_check", "padding_option", "cache_modifier",
                            "eviction_policy", "volatile"});
    const std::vector<int64_t> shape = shape_of(result, span);
    Tile p = eval(need(a, "pointer", c));
    if (!p.elem.is_pointer) unsupported(a.get("pointer")->span, "loading through a value that is not a pointer");
    p = e_.broadcast(p, shape);
    std::optional<Tile> mask, other;
    if (const ast::Expr *m = a.get("mask"); m && type(*m).kind != SType::Kind::None)
      mask = eval_as(*m, {DType::Int1, false}, shape);
    if (const ast::Expr *o = a.get("other"); o && type(*o).kind != SType::Kind::None)
      other = eval_as(*o, ElemType{p.elem.dtype, false}, shape);
    if (const ast::Expr *bc = a.get("boundary_check"); bc && type(*bc).kind != SType::Kind::None)
      unsupported(bc->span, "boundary_check");
    return e_.cast(e_.load(p, mask ? &*mask : nullptr, other ? &*other : nullptr), result.elem);
  }
  if (name == "tl.store" || name == "tl.atomic_add" || name == "tl.atomic_xchg") {
    const bool store = name == "tl.store";
    Bound a = store ? bind_args(c, {"pointer", "value", "mask", "boundary_check", "cache_modifier", "eviction_policy"})
                    : bind_args(c, {"pointer", "val", "mask", "sem", "scope"});
    const ast::Expr *pe = a.get("pointer"), *ve = a.get(store ? "value" : "val"), *me = a.get("mask");
    if (!pe || !ve) unsupported(span, "'" + name + "' without a pointer and a value");
    if (me && type(*me).kind == SType::Kind::None) me = nullptr;
    const SType &pt = type(*pe), &vt = type(*ve);
    if (!pt.is_tensor() || !pt.elem.is_pointer) unsupported(pe->span, "storing through a value that is not a pointer");
    std::vector<int64_t> shape = shape_of(pt, pe->span);
    if (vt.is_tensor()) shape = broadcast_shapes_of(shape, shape_of(vt, ve->span), span);
    if (me) shape = broadcast_shapes_of(shape, shape_of(type(*me), me->span), span);
    Tile p = e_.broadcast(eval(*pe), shape);
    Tile v = eval_as(*ve, ElemType{pt.elem.dtype, false}, shape);
    std::optional<Tile> mask;
    if (me) mask = eval_as(*me, {DType::Int1, false}, shape);
    if (store) {
      e_.store(p, v, mask ? &*mask : nullptr);
      return void_result();
    }
    if (const ast::Expr *sem = a.get("sem"); sem && type(*sem).kind != SType::Kind::None) {
      const SType &s = type(*sem);
      if (s.kind != SType::Kind::Str || (s.s != "relaxed" && s.s != "acq_rel"))
        unsupported(sem->span, "this memory ordering of an atomic");
    }
    Tile old = name == "tl.atomic_add" ? e_.atomic_add(p, v, mask ? &*mask : nullptr)
                                       : e_.atomic_xchg(p, v, mask ? &*mask : nullptr);
    return result.is_tensor() ? e_.cast(old, result.elem) : old;
  }
  if (name.rfind("tl.atomic_", 0) == 0) unsupported(span, "'" + name + "'");
  if (name == "tl.where") {
    Bound a = bind_args(c, {"condition", "x", "y"});
    const std::vector<int64_t> shape = shape_of(result, span);
    Tile cond = eval_as(need(a, "condition", c), {DType::Int1, false}, shape);
    Tile x = eval_as(need(a, "x", c), result.elem, shape), y = eval_as(need(a, "y", c), result.elem, shape);
    Tile out{result.elem, shape, {}, Pattern::Unknown};
    for (size_t r = 0; r < x.regs.size(); ++r) out.regs.push_back(b_.CreateSelect(cond.regs[r], x.regs[r], y.regs[r]));
    if (cond.pattern == Pattern::ChunkUniform && x.pattern == Pattern::ChunkUniform &&
        y.pattern == Pattern::ChunkUniform)
      out.pattern = Pattern::ChunkUniform;
    return out;
  }
  if (name == "tl.maximum" || name == "tl.minimum") {
    Bound a = bind_args(c, {"x", "y", "propagate_nan"});
    const std::vector<int64_t> shape = shape_of(result, span);
    Tile x = eval_as(need(a, "x", c), result.elem, shape), y = eval_as(need(a, "y", c), result.elem, shape);
    const ReduceOp op = name == "tl.maximum" ? ReduceOp::Max : ReduceOp::Min;
    if (const ast::Expr *nan = a.get("propagate_nan"); nan && type(*nan).kind != SType::Kind::None) {
      const SType &n = type(*nan);
      if (!(n.kind == SType::Kind::Int && n.known && n.n == 0)) unsupported(nan->span, "propagate_nan");
    }
    return e_.zip(x, y, result.elem,
                  [&](llvm::Value *p, llvm::Value *q) { return e_.combine(op, p, q, result.elem.dtype); });
  }
  if (name == "tl.abs") {
    Bound a = bind_args(c, {"x"}, 0, self);
    Tile x = eval_as(need(a, "x", c), result.elem, shape_of(result, span));
    if (sema::is_float(result.elem.dtype))
      return e_.map(x, result.elem, [&](llvm::Value *v) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v); });
    if (!sema::is_signed(result.elem.dtype)) return x;
    return e_.map(x, result.elem,
                  [&](llvm::Value *v) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, v, b_.getFalse()); });
  }
  if (name == "tl.sigmoid") {
    Bound a = bind_args(c, {"x"}, 0, self);
    const std::vector<int64_t> shape = shape_of(result, span);
    const ElemType f{result.elem.dtype == DType::FP64 ? DType::FP64 : DType::FP32, false};
    Tile x = eval_as(need(a, "x", c), f, shape);
    const char *exp = f.dtype == DType::FP64 ? "__nv_exp" : "__nv_expf";
    Tile s = e_.map(x, f, [&](llvm::Value *v) {
      llvm::Value *one = llvm::ConstantFP::get(v->getType(), 1.0);
      return b_.CreateFDiv(one, b_.CreateFAdd(one, e_.call_libdevice(exp, v->getType(), {b_.CreateFNeg(v)})));
    });
    return e_.cast(s, result.elem);
  }
  if (name.rfind("math.", 0) == 0 || name.rfind("libdevice.", 0) == 0) {
    const std::string fn = name.substr(name.find('.') + 1);
    std::vector<const ast::Expr *> args;
    if (self) args.push_back(self);
    for (const auto &x : c.args) args.push_back(x.get());
    if (!c.keywords.empty()) unsupported(c.keywords[0].name_span, "keyword arguments of math functions");
    if (args.empty()) unsupported(span, "'" + name + "' without arguments");
    return math(fn, args, result, span);
  }
  if (name == "tl.argmax" || name == "tl.argmin") {
    Bound a = bind_args(c, {"input", "axis", "tie_break_left", "keep_dims"}, 0, self);
    if (const ast::Expr *t = a.get("tie_break_left"); t && !known_int(type(*t), t->span, "tie_break_left"))
      unsupported(t->span, "tie_break_left=False");
    Tile x = eval(need(a, "input", c));
    std::optional<int> axis;
    if (const ast::Expr *ax = a.get("axis"); ax && type(*ax).kind != SType::Kind::None) {
      int64_t v = known_int(type(*ax), ax->span, "an axis");
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      if (v < 0) v += rank;
      if (rank > 0 && (v < 0 || v >= rank)) unsupported(ax->span, "an axis outside the tile");
      axis = static_cast<int>(v);
    }
    return e_.reshape(e_.cast(e_.arg_reduce(x, axis, name == "tl.argmax"), result.elem), shape_of(result, span));
  }
  if (name == "tl.sum" || name == "tl.max" || name == "tl.min") {
    std::vector<std::string> sig = {"input", "axis"};
    if (name == "tl.sum")
      sig.insert(sig.end(), {"keep_dims", "dtype"});
    else
      sig.insert(sig.end(), {"return_indices", "return_indices_tie_break_left", "keep_dims"});
    Bound a = bind_args(c, sig, 0, self);
    if (const ast::Expr *ri = a.get("return_indices"); ri && known_int(type(*ri), ri->span, "return_indices"))
      unsupported(ri->span, "return_indices");
    Tile x = eval(need(a, "input", c));
    std::optional<int> axis;
    if (const ast::Expr *ax = a.get("axis"); ax && type(*ax).kind != SType::Kind::None) {
      int64_t v = known_int(type(*ax), ax->span, "an axis");
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      if (v < 0) v += rank;
      if (rank > 0 && (v < 0 || v >= rank)) unsupported(ax->span, "an axis outside the tile");
      axis = static_cast<int>(v);
    }
    const ReduceOp op = name == "tl.sum" ? ReduceOp::Sum : name == "tl.max" ? ReduceOp::Max : ReduceOp::Min;
    Tile r = e_.reduce(x, axis, op, result.elem.dtype);
    return e_.reshape(r, shape_of(result, span));
  }
  if (name == "tl.reshape" || name == "tl.view" || name == "tl.expand_dims") {
    // The new shape is sema's (reshape's may be variadic: x.reshape(M, N)); the order stays row-major.
    const ast::Expr *input = self ? self : c.args.empty() ? c.keyword("input") : c.args[0].get();
    if (!input) unsupported(span, "'" + name + "' without an input");
    if (const ast::Expr *r = c.keyword("can_reorder"); r && known_int(type(*r), r->span, "can_reorder"))
      unsupported(r->span, "can_reorder=True");
    return e_.reshape(eval(*input), shape_of(result, span));
  }
  if (name == "tl.broadcast_to") {
    Bound a = bind_args(c, {"input", "shape"}, 0, self);
    return e_.broadcast(e_.cast(eval(need(a, "input", c)), result.elem), shape_of(result, span));
  }
  if (sema::is_compiler_hint(name)) {
    Bound a = bind_args(c, {"input", "values"});
    return eval(need(a, "input", c));
  }
  if (name == "tl.debug_barrier") {
    e_.barrier();
    return void_result();
  }
  if (name == "tl.static_assert" || name == "tl.static_print" || name == "tl.device_assert" ||
      name == "tl.device_print" || name == "tl.assume")
    return void_result();  // checked when Triton compiles, or only in its debug mode
  if (name == "triton.cdiv" || name == "tl.cdiv") {
    Bound a = bind_args(c, {"x", "div"});
    Operand x = operand(need(a, "x", c)), d = operand(need(a, "div", c));
    const DType t = result.elem.dtype;
    Tile xt = materialize(x, t), dt = materialize(d, t);
    return e_.zip(xt, dt, result.elem, [&](llvm::Value *p, llvm::Value *q) {
      return b_.CreateSDiv(b_.CreateSub(b_.CreateAdd(p, q), llvm::ConstantInt::get(p->getType(), 1)), q);
    });
  }
  if (name == "tl.fma") {
    std::vector<const ast::Expr *> args;
    for (const auto &x : c.args) args.push_back(x.get());
    return math("fma", args, result, span);
  }
  unsupported(span, "'" + name + "'");
}

}  // namespace tgrad::codegen
