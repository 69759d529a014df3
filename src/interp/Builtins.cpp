// The functions a jit function can call: tl.*, tl.math.* and libdevice.*,
// triton.cdiv / next_power_of_2, tensor methods (x.to, x.sum, ...) and the
// Python builtins Triton allows on constants (range, min, max, float, ...).
// Argument binding follows each function's Triton 3.6 signature; a keyword
// the interpreter does not know is an error, never silently ignored.
#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <set>

#include "src/interp/Evaluator.h"
#include "tgrad/sema/Names.h"

namespace tgrad::interp {

using sema::DType;
using sema::ElemType;

namespace {

// Arguments bound to a signature: positional then keyword, each at most once.
class Bound {
 public:
  Bound(Evaluator &ev, const std::string &fn, const std::vector<std::string> &params, std::vector<Value> args,
        std::map<std::string, Value> kwargs, const SourceSpan &span, bool variadic_tail = false)
      : ev_(ev), fn_(fn), span_(span) {
    size_t fixed = variadic_tail ? params.size() - 1 : params.size();
    for (size_t k = 0; k < args.size(); ++k) {
      if (k < fixed) {
        values_[params[k]] = args[k];
      } else if (variadic_tail) {
        rest_.push_back(args[k]);
      } else {
        ev.fail(span, fn + "() takes at most " + std::to_string(params.size()) + " positional arguments, " +
                          std::to_string(args.size()) + " given");
      }
    }
    for (auto &kv : kwargs) {
      bool known = false;
      for (const std::string &p : params) known |= p == kv.first;
      if (!known) ev.fail(span, fn + "() has no keyword argument '" + kv.first + "' (tgrad's interpreter knows: " + list(params) + ")");
      if (values_.count(kv.first)) ev.fail(span, fn + "() got two values for '" + kv.first + "'");
      values_[kv.first] = kv.second;
    }
  }

  bool has(const std::string &p) const {
    auto it = values_.find(p);
    return it != values_.end() && it->second.kind != Value::Kind::None;
  }
  const Value &get(const std::string &p) const {
    auto it = values_.find(p);
    if (it == values_.end()) ev_.fail(span_, fn_ + "() is missing its argument '" + p + "'");
    return it->second;
  }
  const std::vector<Value> &rest() const { return rest_; }

  long long integer(const std::string &p, long long fallback) const {
    return has(p) ? ev_.to_int(get(p), span_, fn_ + "() argument '" + p + "'") : fallback;
  }
  bool flag(const std::string &p, bool fallback) const { return has(p) ? ev_.truth(get(p), span_) : fallback; }
  std::optional<int> axis(const std::string &p) const {
    if (!has(p)) return std::nullopt;
    const Value &v = get(p);
    if (v.kind != Value::Kind::Int)
      ev_.fail(span_, fn_ + "() argument '" + p + "' must be an integer known before the kernel runs, not " + v.describe());
    return static_cast<int>(v.n);
  }
  TensorRef tensor(const std::string &p) const {
    const Value &v = get(p);
    if (v.kind == Value::Kind::None) ev_.fail(span_, fn_ + "() needs '" + p + "'");
    return ev_.to_tensor(v, span_);
  }
  DType dtype(const std::string &p, DType fallback) const {
    if (!has(p)) return fallback;
    const Value &v = get(p);
    if (v.kind != Value::Kind::DType || v.b) ev_.fail(span_, fn_ + "() argument '" + p + "' must be a dtype such as tl.float32");
    return v.dtype;
  }
  std::string str(const std::string &p, const std::string &fallback) const {
    if (!has(p)) return fallback;
    const Value &v = get(p);
    if (v.kind != Value::Kind::Str) ev_.fail(span_, fn_ + "() argument '" + p + "' must be a string");
    return v.s;
  }

 private:
  static std::string list(const std::vector<std::string> &ps) {
    std::string s;
    for (const std::string &p : ps) s += (s.empty() ? "" : ", ") + p;
    return s;
  }
  Evaluator &ev_;
  std::string fn_;
  SourceSpan span_;
  std::map<std::string, Value> values_;
  std::vector<Value> rest_;
};

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Philox-4x32 as Triton's random.py computes it for 32-bit counters: the key
// is the seed's low and high words; each round multiplies, xors and raises
// the key by the Weyl constants.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, uint64_t seed, long long rounds) {
  uint32_t k0 = static_cast<uint32_t>(seed & 0xffffffffu), k1 = static_cast<uint32_t>(seed >> 32);
  const uint32_t round_a = 0xD2511F53u, round_b = 0xCD9E8D57u, key_a = 0x9E3779B9u, key_b = 0xBB67AE85u;
  for (long long r = 0; r < rounds; ++r) {
    const uint32_t c0 = c[0], c2 = c[2];
    const uint64_t pb = static_cast<uint64_t>(round_b) * c2, pa = static_cast<uint64_t>(round_a) * c0;
    c[0] = static_cast<uint32_t>(pb >> 32) ^ c[1] ^ k0;
    c[2] = static_cast<uint32_t>(pa >> 32) ^ c[3] ^ k1;
    c[1] = static_cast<uint32_t>(pb);
    c[3] = static_cast<uint32_t>(pa);
    k0 += key_a;
    k1 += key_b;
  }
  return c;
}

// Triton's uint_to_uniform_float for 32-bit draws: in [0, 1), in float32.
float uniform_of(uint32_t draw) {
  int32_t x = static_cast<int32_t>(draw);
  if (x < 0) x = -x - 1;
  return static_cast<float>(x) * 4.6566127342e-10f;
}

ElemType et(DType d) { return ElemType{d, false}; }

}  // namespace

std::optional<Value> Evaluator::namespace_member(const std::string &ns, const std::string &attr) {
  std::optional<sema::KnownName> k = sema::namespace_member(ns, attr);
  if (!k) return std::nullopt;
  return known_value(*k);
}

Value Evaluator::known_value(const sema::KnownName &k) {
  switch (k.kind) {
    case sema::KnownName::Kind::Namespace: return Value::of_namespace(k.name);
    case sema::KnownName::Kind::Function: return Value::of_builtin(k.name);
    case sema::KnownName::Kind::DType: return Value::of_dtype(k.dtype);
    case sema::KnownName::Kind::Float: return Value::of_float(k.value);
    case sema::KnownName::Kind::Int: return Value::of_int(static_cast<long long>(k.value));
  }
  return Value::none();
}

namespace {

// Elementwise math that Triton accepts on fp32 and fp64 only.
double apply_math(const std::string &f, double x) {
  if (f == "exp") return std::exp(x);
  if (f == "exp2") return std::exp2(x);
  if (f == "log") return std::log(x);
  if (f == "log2") return std::log2(x);
  if (f == "sqrt" || f == "sqrt_rn") return std::sqrt(x);
  if (f == "rsqrt") return 1.0 / std::sqrt(x);
  if (f == "sin") return std::sin(x);
  if (f == "cos") return std::cos(x);
  if (f == "erf") return std::erf(x);
  if (f == "floor") return std::floor(x);
  if (f == "ceil") return std::ceil(x);
  if (f == "tanh") return std::tanh(x);
  if (f == "log1p") return std::log1p(x);
  if (f == "expm1") return std::expm1(x);
  if (f == "fast_expf") return std::exp(x);
  if (f == "fast_logf") return std::log(x);
  if (f == "exp10") return std::pow(10.0, x);
  if (f == "log10") return std::log10(x);
  if (f == "cbrt") return std::cbrt(x);
  if (f == "tan") return std::tan(x);
  if (f == "asin") return std::asin(x);
  if (f == "acos") return std::acos(x);
  if (f == "atan") return std::atan(x);
  if (f == "sinh") return std::sinh(x);
  if (f == "cosh") return std::cosh(x);
  if (f == "asinh") return std::asinh(x);
  if (f == "acosh") return std::acosh(x);
  if (f == "atanh") return std::atanh(x);
  if (f == "erfc") return std::erfc(x);
  if (f == "trunc") return std::trunc(x);
  if (f == "rint" || f == "nearbyint") return std::nearbyint(x);  // round half to even
  if (f == "round") return std::round(x);                         // half away from zero
  return NAN;
}

}  // namespace

Value Evaluator::call_builtin(const Value &callee, std::vector<Value> args, std::map<std::string, Value> kwargs,
                              const SourceSpan &span) {
  std::string name = callee.s;
  if (callee.self && callee.self->kind == Value::Kind::DType && name.rfind("dtype.", 0) == 0) {
    // A tl.dtype's predicate (`dtype.is_floating()`).
    const std::optional<bool> holds = callee.self->b ? std::optional<bool>() : sema::dtype_predicate(name.substr(6), callee.self->dtype);
    if (!holds) fail(span, "'" + name.substr(6) + "' of a dtype is not known to tgrad's interpreter");
    if (!args.empty() || !kwargs.empty()) fail(span, "tl.dtype." + name.substr(6) + "() takes no arguments");
    return Value::of_bool(*holds);
  }
  if (callee.self) {
    args.insert(args.begin(), *callee.self);
    // Tensor methods are the tl functions of the same name.
    if (name.rfind("tensor.", 0) == 0 && name != "tensor.to") {
      std::string method = name.substr(7);
      if (!sema::is_tl_function(method) && !sema::is_math_function(method))
        fail(span, "tensors have no method '" + method + "' in tgrad's interpreter");
      name = sema::is_tl_function(method) ? "tl." + method : "math." + method;
    }
  }
  // tl.exp and tl.math.exp are one function.
  if (name.rfind("tl.", 0) == 0 && sema::is_math_function(name.substr(3)) && name != "tl.abs" && name != "tl.sigmoid")
    name = "math." + name.substr(3);
  const std::string short_name = name.substr(name.find('.') + 1);
  const bool f64 = float64();

  // Inline PTX runs here only where it is a one-instruction approximation of
  // a math function (sema's reading): the interpreter computes the function.
  if (name == "tl.inline_asm_elementwise") {
    Bound b(*this, name, {"asm", "constraints", "args", "dtype", "is_pure", "pack"}, args, kwargs, span);
    const Value &text = b.get("asm"), &spec = b.get("constraints"), &operands = b.get("args");
    const std::string function = text.kind == Value::Kind::Str && spec.kind == Value::Kind::Str
                                     ? sema::approximated_math_function(text.s, spec.s) : "";
    if (function.empty() || operands.kind != Value::Kind::Tuple || operands.elems->size() != 1)
      fail(span, "tgrad's interpreter cannot run inline assembly; it runs only one-instruction approximations of "
                 "math functions on one fp32 operand (\"tanh.approx.f32 $0, $1;\", constraints \"=f,f\")");
    return call_builtin(Value::of_builtin("math." + function), {(*operands.elems)[0]}, {}, span);
  }

  // ---------------------------------------------------- Python builtins
  if (name == "range" || name == "tl.range" || name == "tl.static_range")
    fail(span, name + "() can only be used as the iterable of a for loop");
  if (name == "print") fail(span, "print() is not supported in a @triton.jit function; use tl.device_print or tl.static_print");
  if ((name == "min" || name == "max") && args.size() == 2 && kwargs.empty() &&
      (args[0].kind == Value::Kind::Tensor || args[1].kind == Value::Kind::Tensor))
    return call_builtin(Value::of_builtin(name == "min" ? "tl.minimum" : "tl.maximum"), args, kwargs, span);  // as Triton maps them
  if (name == "min" || name == "max") {
    if (!kwargs.empty() || args.size() < 2) fail(span, name + "() takes two or more numbers");
    Value best = args[0];
    for (size_t k = 1; k < args.size(); ++k) {
      if (!args[k].is_python_number() || !best.is_python_number())
        fail(span, name + "() works on numbers known before the kernel runs; use tl.maximum / tl.minimum on tensors");
      bool less = truth(compare(ast::CompareOpKind::Lt, args[k], best, span), span);
      if (name == "min" ? less : (!less && !truth(compare(ast::CompareOpKind::Eq, args[k], best, span), span))) best = args[k];
    }
    return best;
  }
  if (name == "float") {
    if (args.size() != 1) fail(span, "float() takes one argument");
    if (args[0].kind == Value::Kind::Str) {
      const std::string &s = args[0].s;
      if (s == "inf" || s == "+inf") return Value::of_float(INFINITY);
      if (s == "-inf") return Value::of_float(-INFINITY);
      if (s == "nan") return Value::of_float(NAN);
      fail(span, "float() of the string '" + s + "' is not supported");
    }
    if (!args[0].is_python_number()) fail(span, "float() needs a number known before the kernel runs");
    return Value::of_float(args[0].kind == Value::Kind::Float ? args[0].x : static_cast<double>(to_int(args[0], span, "float()")));
  }
  if (name == "int") {
    if (args.size() != 1 || !args[0].is_python_number()) fail(span, "int() needs one number known before the kernel runs");
    return Value::of_int(args[0].kind == Value::Kind::Float ? static_cast<long long>(std::trunc(args[0].x)) : to_int(args[0], span, "int()"));
  }
  if (name == "bool") {
    if (args.size() != 1) fail(span, "bool() takes one argument");
    return Value::of_bool(truth(args[0], span));
  }
  if (name == "len") {
    if (args.size() != 1 || args[0].kind != Value::Kind::Tuple) fail(span, "len() needs a tuple");
    return Value::of_int(static_cast<long long>(args[0].elems->size()));
  }
  if (name == "abs" && args.size() == 1 && args[0].is_python_number())
    return args[0].kind == Value::Kind::Float ? Value::of_float(std::fabs(args[0].x)) : Value::of_int(std::llabs(to_int(args[0], span, "abs()")));
  if (name.rfind("pymath.", 0) == 0) {
    if (args.size() != 1 || !args[0].is_python_number()) fail(span, name.substr(2) + "() needs one number known before the kernel runs");
    double x = args[0].kind == Value::Kind::Float ? args[0].x : static_cast<double>(to_int(args[0], span, "math"));
    if (short_name == "ceil") return Value::of_int(static_cast<long long>(std::ceil(x)));
    if (short_name == "floor") return Value::of_int(static_cast<long long>(std::floor(x)));
    return Value::of_float(apply_math(short_name, x));
  }

  // ------------------------------------------------------- constants
  if (name == "triton.cdiv" || name == "tl.cdiv") {
    Bound b(*this, name, {"x", "div"}, args, kwargs, span);
    const Value &x = b.get("x"), &d = b.get("div");
    if (x.is_python_number() && d.is_python_number()) {
      long long p = to_int(x, span, "cdiv"), q = to_int(d, span, "cdiv");
      if (q == 0) fail(span, "cdiv by zero");
      long long r = p / q + ((p % q != 0) && ((p < 0) == (q < 0)) ? 1 : 0);
      return Value::of_int(r);
    }
    // (x + div - 1) // div on tensors, as tl.cdiv computes it.
    Value sum = binary(ast::BinaryOpKind::Sub, binary(ast::BinaryOpKind::Add, x, d, span), Value::of_int(1), span);
    return binary(ast::BinaryOpKind::FloorDiv, sum, d, span);
  }
  if (name == "tl.standard._log2") {
    Bound b(*this, name, {"i"}, args, kwargs, span);
    long long depth = 0;
    for (long long v = b.integer("i", 0); v > 1; v >>= 1) ++depth;
    return Value::of_int(depth);
  }
  if (name == "tl.core.get_int_dtype") {
    Bound b(*this, name, {"bitwidth", "signed"}, args, kwargs, span);
    const std::optional<sema::DType> d = sema::integer_dtype(b.integer("bitwidth", 0), b.get("signed").b);
    if (!d) fail(span, "there is no integer dtype of " + std::to_string(b.integer("bitwidth", 0)) + " bits");
    return Value::of_dtype(*d);
  }
  if (name == "tl.swizzle2d") {
    // Rows in groups of size_g, each group walked column by column (Sema.cpp
    // types the same steps).
    Bound b(*this, name, {"i", "j", "size_i", "size_j", "size_g"}, args, kwargs, span);
    using ast::BinaryOpKind;
    const Value index = binary(BinaryOpKind::Add, binary(BinaryOpKind::Mul, b.get("i"), b.get("size_j"), span),
                               b.get("j"), span);
    const Value group_size = binary(BinaryOpKind::Mul, b.get("size_g"), b.get("size_j"), span);
    const Value first_row = binary(BinaryOpKind::Mul, binary(BinaryOpKind::FloorDiv, index, group_size, span),
                                   b.get("size_g"), span);
    const Value rows = call_builtin(Value::of_builtin("tl.minimum"),
                                    {binary(BinaryOpKind::Sub, b.get("size_i"), first_row, span), b.get("size_g")}, {},
                                    span);
    const Value in_group = binary(BinaryOpKind::Mod, index, group_size, span);
    return Value::of_tuple({binary(BinaryOpKind::Add, first_row, binary(BinaryOpKind::Mod, in_group, rows, span), span),
                         binary(BinaryOpKind::FloorDiv, in_group, rows, span)});
  }
  if (name == "triton.next_power_of_2") {
    Bound b(*this, name, {"n"}, args, kwargs, span);
    long long n = b.integer("n", 0);
    long long p = 1;
    while (p < n) p <<= 1;
    return Value::of_int(p);
  }
  if (name == "tl.constexpr") {
    if (args.size() != 1) fail(span, "tl.constexpr() takes one value");
    return args[0];
  }
  if (name == "tl.static_assert") {
    Bound b(*this, name, {"cond", "msg"}, args, kwargs, span);
    const Value &c = b.get("cond");
    if (is_tensor(c)) fail(span, "tl.static_assert needs a condition known before the kernel runs; use tl.device_assert for tensors");
    if (!truth(c, span)) fail(span, "static assertion failed" + (b.has("msg") ? ": " + b.str("msg", "") : std::string()));
    return Value::none();
  }
  if (name == "tl.device_assert") {
    Bound b(*this, name, {"cond", "msg", "mask"}, args, kwargs, span);
    TensorRef c = b.tensor("cond");
    TensorRef m = b.has("mask") ? broadcast(b.tensor("mask"), c->shape, span) : nullptr;
    for (int64_t k = 0; k < c->size(); ++k)
      if ((!m || m->as_double(k) != 0) && c->as_double(k) == 0)
        fail(span, "device assertion failed" + (b.has("msg") ? ": " + b.str("msg", "") : std::string()) + " (lane " +
                       std::to_string(k) + ", program (" + std::to_string(pid_[0]) + ", " + std::to_string(pid_[1]) +
                       ", " + std::to_string(pid_[2]) + "))");
    return Value::none();
  }
  if (name == "tl.static_print" || name == "tl.device_print") {
    std::cerr << "[program " << pid_[0] << "," << pid_[1] << "," << pid_[2] << "]";
    for (const Value &v : args) {
      if (v.kind == Value::Kind::Str) std::cerr << ' ' << v.s;
      else if (is_tensor(v)) {
        std::cerr << ' ' << v.t->type_str() << '{';
        for (int64_t k = 0; k < std::min<int64_t>(v.t->size(), 16); ++k) std::cerr << (k ? ", " : "") << v.t->as_double(k);
        std::cerr << (v.t->size() > 16 ? ", ...}" : "}");
      } else std::cerr << ' ' << v.describe();
    }
    std::cerr << '\n';
    return Value::none();
  }
  if (sema::is_compiler_hint(name)) {
    Bound b(*this, name, {"input", "values"}, args, kwargs, span);
    return b.get("input");  // compiler hints: no effect on values
  }
  if (name == "tl.debug_barrier" || name == "tl.assume") return Value::none();

  // ------------------------------------------------------- program
  if (name == "tl.program_id" || name == "tl.num_programs") {
    Bound b(*this, name, {"axis"}, args, kwargs, span);
    long long axis = b.integer("axis", -1);
    if (axis < 0 || axis > 2) fail(span, name + "() axis must be 0, 1 or 2");
    int64_t v = name == "tl.program_id" ? pid_[axis] : grid_[axis];
    return Value::of_tensor(make_scalar(et(DType::Int32), 0, v, f64));
  }

  // ------------------------------------------------------- creation
  if (name == "tl.arange") {
    Bound b(*this, name, {"start", "end"}, args, kwargs, span);
    if (!b.get("start").is_python_number() || !b.get("end").is_python_number())
      fail(span, "tl.arange needs bounds known before the kernel runs (tl.constexpr)");
    long long start = b.integer("start", 0), end = b.integer("end", 0);
    if (!is_pow2(end - start)) fail(span, "tl.arange(" + std::to_string(start) + ", " + std::to_string(end) + "): the range must be a power of 2");
    auto t = std::make_shared<Tensor>();
    t->type = et(DType::Int32);
    t->shape = {end - start};
    for (long long k = start; k < end; ++k) t->i.push_back(k);
    return Value::of_tensor(t);
  }
  if (name == "tl.zeros" || name == "tl.full") {
    Bound b(*this, name, name == "tl.zeros" ? std::vector<std::string>{"shape", "dtype"}
                                            : std::vector<std::string>{"shape", "value", "dtype"},
            args, kwargs, span);
    Shape shape = to_shape(b.get("shape"), span);
    if (!b.has("dtype")) fail(span, name + "() needs a dtype");
    DType d = b.dtype("dtype", DType::FP32);
    if (name == "tl.zeros") return Value::of_tensor(make_full(et(d), shape, 0, 0, f64));
    const Value &v = b.get("value");
    TensorRef value = convert(*to_tensor(v, span), et(d), f64);
    if (!value->shape.empty()) fail(span, "tl.full() needs a scalar value");
    return Value::of_tensor(broadcast(value, shape, span));
  }
  if (name == "tl.zeros_like") {
    Bound b(*this, name, {"input"}, args, kwargs, span);
    TensorRef t = b.tensor("input");
    return Value::of_tensor(make_full(t->type, t->shape, 0, 0, f64));
  }
  if (name == "tl.cast" || name == "tensor.to") {
    Bound b(*this, name == "tl.cast" ? "tl.cast" : "to", {"input", "dtype", "fp_downcast_rounding", "bitcast"}, args, kwargs, span);
    TensorRef t = b.tensor("input");
    const Value &d = b.get("dtype");
    if (d.kind != Value::Kind::DType) fail(span, "the target of a cast must be a dtype such as tl.float16");
    if (b.has("fp_downcast_rounding") && b.str("fp_downcast_rounding", "rtne") != "rtne")
      fail(span, "only round-to-nearest-even downcasts are supported by the interpreter");
    try {
      if (b.flag("bitcast", false)) return Value::of_tensor(bitcast(*t, d.dtype));
      return Value::of_tensor(convert(*t, ElemType{d.dtype, d.b}, f64));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }

  // ------------------------------------------------------- memory
  if (name == "tl.load") {
    Bound b(*this, name, {"pointer", "mask", "other", "boundary_check", "padding_option", "cache_modifier",
                          "eviction_policy", "volatile"},
            args, kwargs, span);
    TensorRef p = b.tensor("pointer");
    if (!p->type.is_pointer) fail(span, "tl.load needs a pointer (or a tensor of pointers), got " + p->type_str());
    if (b.has("boundary_check") && b.get("boundary_check").kind == Value::Kind::Tuple && !b.get("boundary_check").elems->empty())
      fail(span, "block pointers (boundary_check) are not supported by the interpreter yet");
    TensorRef mask = b.has("mask") ? broadcast(convert(*b.tensor("mask"), et(DType::Int1), f64), p->shape, span) : nullptr;
    ElemType elem{p->type.dtype, false};
    TensorRef other = b.has("other") ? broadcast(convert(*b.tensor("other"), elem, f64), p->shape, span) : nullptr;
    auto out = std::make_shared<Tensor>();
    out->type = elem;
    out->shape = p->shape;
    if (out->is_float()) out->f.assign(p->size(), 0.0);
    else out->i.assign(p->size(), 0);
    for (int64_t k = 0; k < p->size(); ++k) {
      if (mask && mask->i[k] == 0) {
        // A masked-off lane takes `other`; without it Triton leaves it undefined (0 here).
        if (other) {
          if (out->is_float()) out->f[k] = other->f[k];
          else out->i[k] = other->i[k];
        }
        continue;
      }
      auto where = memory_.resolve(p->i[k]);
      if (!where || where->second < 0 || where->second >= memory_.buffers()[where->first].size()) {
        std::string buffer = where ? "'" + memory_.buffers()[where->first].name + "'" : "no buffer";
        std::string extent = where ? " (it has " + std::to_string(memory_.buffers()[where->first].size()) + " elements)" : "";
        fail(span, "out-of-bounds load from " + buffer + ": element " +
                       std::to_string(where ? where->second : p->i[k]) + extent + ", lane " + std::to_string(k) +
                       " of " + std::to_string(p->size()) + ", program (" + std::to_string(pid_[0]) + ", " +
                       std::to_string(pid_[1]) + ", " + std::to_string(pid_[2]) + "); mask the access");
      }
      if (options_.loaded) (*options_.loaded)[where->first].insert(where->second);
      double v = memory_.buffers()[where->first].get(where->second);
      if (out->is_float()) out->f[k] = round_float(elem.dtype, v, f64);
      else out->i[k] = memory_.buffers()[where->first].i[where->second];
    }
    return Value::of_tensor(out);
  }
  if (name == "tl.store" || name.rfind("tl.atomic_", 0) == 0) {
    const bool store = name == "tl.store";
    const bool cas = name == "tl.atomic_cas";
    std::vector<std::string> sig = store ? std::vector<std::string>{"pointer", "value", "mask", "boundary_check",
                                                                    "cache_modifier", "eviction_policy"}
                                   : cas ? std::vector<std::string>{"pointer", "cmp", "val", "sem", "scope"}
                                         : std::vector<std::string>{"pointer", "val", "mask", "sem", "scope"};
    Bound b(*this, name, sig, args, kwargs, span);
    TensorRef p = b.tensor("pointer");
    if (!p->type.is_pointer) fail(span, name + " needs a pointer (or a tensor of pointers), got " + p->type_str());
    ElemType elem{p->type.dtype, false};
    TensorRef value = broadcast(convert(*b.tensor(store ? "value" : "val"), elem, f64), p->shape, span);
    TensorRef cmp = cas ? broadcast(convert(*b.tensor("cmp"), elem, f64), p->shape, span) : nullptr;
    TensorRef mask = (!cas && b.has("mask")) ? broadcast(convert(*b.tensor("mask"), et(DType::Int1), f64), p->shape, span) : nullptr;
    auto old = std::make_shared<Tensor>();
    old->type = elem;
    old->shape = p->shape;
    if (old->is_float()) old->f.assign(p->size(), 0.0);
    else old->i.assign(p->size(), 0);
    const std::string op = store ? "" : name.substr(10);
    for (int64_t k = 0; k < p->size(); ++k) {
      if (mask && mask->i[k] == 0) continue;
      auto where = memory_.resolve(p->i[k]);
      if (!where || where->second < 0 || where->second >= memory_.buffers()[where->first].size()) {
        std::string buffer = where ? "'" + memory_.buffers()[where->first].name + "'" : "no buffer";
        fail(span, std::string("out-of-bounds ") + (store ? "store" : "atomic") + " to " + buffer + ": element " +
                       std::to_string(where ? where->second : p->i[k]) + ", lane " + std::to_string(k) +
                       ", program (" + std::to_string(pid_[0]) + ", " + std::to_string(pid_[1]) + ", " +
                       std::to_string(pid_[2]) + "); mask the access");
      }
      Buffer &buf = memory_.buffers()[where->first];
      const int64_t at = where->second;
      const bool fl = sema::is_float(buf.dtype);
      double cur = buf.get(at);
      double v = value->as_double(k);
      if (old->is_float()) old->f[k] = cur;
      else old->i[k] = static_cast<int64_t>(cur);
      double next = v;
      if (op == "add") next = cur + v;
      else if (op == "max") next = std::max(cur, v);
      else if (op == "min") next = std::min(cur, v);
      else if (op == "and" || op == "or" || op == "xor") {
        if (fl) fail(span, name + " needs an integer buffer");
        int64_t c = buf.i[at], w = value->i[k];
        buf.i[at] = wrap_int(buf.dtype, op == "and" ? (c & w) : op == "or" ? (c | w) : (c ^ w));
        continue;
      } else if (op == "cas") next = cur == cmp->as_double(k) ? v : cur;
      // "xchg" and store: next = v
      if (fl) buf.f[at] = round_float(buf.dtype, next, f64);
      else buf.i[at] = wrap_int(buf.dtype, static_cast<int64_t>(next));
    }
    return store ? Value::none() : Value::of_tensor(old);
  }

  // ------------------------------------------------------- elementwise
  if (name == "tl.where") {
    Bound b(*this, name, {"condition", "x", "y"}, args, kwargs, span);
    TensorRef c = convert(*b.tensor("condition"), et(DType::Int1), f64);
    auto [x, y] = promote_pair(b.get("x"), b.get("y"), false, span);
    std::optional<Shape> shape = broadcast_shape(c->shape, x->shape);
    if (!shape) fail(span, "tl.where: condition " + shape_str(c->shape) + " and values " + shape_str(x->shape) + " cannot be broadcast together");
    return Value::of_tensor(select(*broadcast(c, *shape, span), *broadcast(x, *shape, span), *broadcast(y, *shape, span)));
  }
  if (name == "tl.maximum" || name == "tl.minimum") {
    Bound b(*this, name, {"x", "y", "propagate_nan"}, args, kwargs, span);
    auto [x, y] = promote_pair(b.get("x"), b.get("y"), false, span);
    const bool is_max = name == "tl.maximum";
    // tl.PropagateNan.ALL (nonzero): a NaN operand yields NaN.
    const bool propagate = b.has("propagate_nan") && b.integer("propagate_nan", 0) != 0;
    if (x->is_float())
      return Value::of_tensor(zip_float(*x, *y, x->type, f64, [is_max, propagate](double p, double q) {
        // Triton's default (PropagateNan.NONE) follows the hardware: a NaN operand yields the other one.
        if (std::isnan(p)) return propagate ? p : q;
        if (std::isnan(q)) return propagate ? q : p;
        return is_max ? std::max(p, q) : std::min(p, q);
      }));
    return Value::of_tensor(zip_int(*x, *y, x->type, [is_max](int64_t p, int64_t q) { return is_max ? std::max(p, q) : std::min(p, q); }));
  }
  if (name == "tl.clamp") {
    Bound b(*this, name, {"x", "min", "max", "propagate_nan"}, args, kwargs, span);
    std::map<std::string, Value> nan;
    if (b.has("propagate_nan")) nan.emplace("propagate_nan", b.get("propagate_nan"));
    Value lo = call_builtin(Value::of_builtin("tl.maximum"), {b.get("x"), b.get("min")}, nan, span);
    return call_builtin(Value::of_builtin("tl.minimum"), {lo, b.get("max")}, nan, span);
  }
  if (name == "tl.abs") {
    Bound b(*this, name, {"x"}, args, kwargs, span);
    TensorRef x = b.tensor("x");
    if (x->is_float()) return Value::of_tensor(map_float(*x, x->type, f64, [](double v) { return std::fabs(v); }));
    return Value::of_tensor(zip_int(*x, *x, x->type, [](int64_t v, int64_t) { return v < 0 ? -v : v; }));
  }
  auto require_fp32_or_64 = [&](const std::string &fn, const TensorRef &x) {
    if (x->type.is_pointer || (x->type.dtype != DType::FP32 && x->type.dtype != DType::FP64))
      fail(span, fn + " expects fp32 or fp64, got " + x->type.str() + "; cast with .to(tl.float32) first");
  };
  if (name == "tl.sigmoid") {
    // 1 / (1 + exp(-x)), as Triton defines it: fp32/fp64 only.
    Bound b(*this, name, {"x"}, args, kwargs, span);
    TensorRef x = b.tensor("x");
    require_fp32_or_64("tl.sigmoid", x);
    return Value::of_tensor(map_float(*x, x->type, f64, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }));
  }
  if (name.rfind("math.", 0) == 0) {
    if (short_name == "abs") return call_builtin(Value::of_builtin("tl.abs"), args, kwargs, span);
    if (short_name == "sigmoid") return call_builtin(Value::of_builtin("tl.sigmoid"), args, kwargs, span);
    if (short_name == "fma") {
      Bound b(*this, name, {"x", "y", "z"}, args, kwargs, span);
      auto [x, y] = promote_pair(b.get("x"), b.get("y"), false, span);
      auto [xy, z] = promote_pair(Value::of_tensor(x), b.get("z"), false, span);
      require_fp32_or_64("fma", xy);
      TensorRef xx = broadcast(x, xy->shape, span), yy = broadcast(y, xy->shape, span);
      auto out = std::make_shared<Tensor>(*xy);
      for (int64_t k = 0; k < out->size(); ++k) out->f[k] = round_float(out->type.dtype, std::fma(xx->f[k], yy->f[k], z->f[k]), f64);
      return Value::of_tensor(out);
    }
    if (short_name == "div_rn" || short_name == "fdiv" || short_name == "pow" || short_name == "atan2") {
      Bound b(*this, name, {"x", "y", "ieee_rounding"}, args, kwargs, span);
      auto [x, y] = promote_pair(b.get("x"), b.get("y"), true, span);
      require_fp32_or_64(short_name, x);
      const std::string f = short_name;
      return Value::of_tensor(zip_float(*x, *y, x->type, f64, [f](double p, double q) {
        return f == "pow" ? std::pow(p, q) : f == "atan2" ? std::atan2(p, q) : p / q;
      }));
    }
    Bound b(*this, name, {"x"}, args, kwargs, span);
    TensorRef x = b.tensor("x");
    require_fp32_or_64(name, x);
    const std::string f = short_name;
    if (sema::is_math_classification(f)) {
      // libdevice's classifications: int32 1 or 0.
      auto out = std::make_shared<Tensor>();
      out->type = sema::ElemType{sema::DType::Int32, false};
      out->shape = x->shape;
      for (double v : x->f)
        out->i.push_back(f == "isnan"   ? std::isnan(v)
                         : f == "isinf" ? std::isinf(v)
                         : f == "signbit" ? std::signbit(v)
                                          : std::isfinite(v));
      return Value::of_tensor(out);
    }
    return Value::of_tensor(map_float(*x, x->type, f64, [f](double v) { return apply_math(f, v); }));
  }
  if (name == "tl.umulhi") fail(span, "tl.umulhi is not supported by the interpreter yet");
  if (sema::is_random_draw(name)) return random_numbers(name, args, kwargs, span);

  // ------------------------------------------------------- shapes
  if (name == "tl.gather") {
    Bound b(*this, name, {"src", "index", "axis"}, args, kwargs, span);
    TensorRef src = b.tensor("src"), index = b.tensor("index");
    const int rank = static_cast<int>(src->shape.size());
    if (rank == 0 || index->shape.size() != src->shape.size())
      fail(span, "tl.gather needs an index of the source's rank, got " + shape_str(index->shape) + " for " +
                     shape_str(src->shape));
    int axis = static_cast<int>(b.integer("axis", 0));
    if (axis < -rank || axis >= rank) fail(span, "tl.gather's axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    for (int d = 0; d < rank; ++d)
      if (d != axis && src->shape[static_cast<size_t>(d)] != index->shape[static_cast<size_t>(d)])
        fail(span, "tl.gather's index " + shape_str(index->shape) + " and source " + shape_str(src->shape) +
                       " differ outside the gathered axis");
    const AxisLayout from(src->shape, axis), at(index->shape, axis);
    auto out = std::make_shared<Tensor>();
    out->type = src->type;
    out->shape = index->shape;
    for (int64_t o = 0; o < at.outer; ++o)
      for (int64_t k = 0; k < at.len; ++k)
        for (int64_t i = 0; i < at.inner; ++i) {
          const int64_t which = index->i[static_cast<size_t>(at.at(o, k, i))];
          if (which < 0 || which >= from.len)
            fail(span, "tl.gather reads index " + std::to_string(which) + " of an axis of " + std::to_string(from.len));
          const size_t source = static_cast<size_t>(from.at(o, which, i));
          if (src->is_float()) out->f.push_back(src->f[source]);
          else out->i.push_back(src->i[source]);
        }
    return Value::of_tensor(out);
  }
  if (name == "tl.trans" || name == "tl.permute") {
    Bound b(*this, name, {"input", "dims"}, args, kwargs, span, /*variadic_tail=*/true);
    TensorRef t = b.tensor("input");
    std::vector<int> order;
    std::vector<Value> dims = b.rest();
    if (b.has("dims")) dims.insert(dims.begin(), b.get("dims"));
    if (dims.size() == 1 && dims[0].kind == Value::Kind::Tuple) dims = *dims[0].elems;
    for (const Value &d : dims) order.push_back(static_cast<int>(to_int(d, span, "a dimension")));
    if (order.empty()) {
      if (name == "tl.permute") fail(span, "tl.permute needs the new order of the dimensions");
      if (t->shape.size() != 2) fail(span, "tl.trans without dims needs a 2-D tensor, got " + shape_str(t->shape));
      order = {1, 0};
    }
    try {
      return Value::of_tensor(permute(*t, order));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }
  if (name == "tl.reshape" || name == "tl.view" || name == "tl.broadcast_to") {
    // reshape(input, *shape, can_reorder=False): can_reorder is keyword-only,
    // and only allows an element order that tgrad keeps anyway.
    if (name == "tl.reshape") kwargs.erase("can_reorder");
    Bound b(*this, name, {"input", "shape"}, args, kwargs, span, /*variadic_tail=*/true);
    TensorRef t = b.tensor("input");
    // The shape: one tuple, or the dimensions as separate arguments.
    Value shape_value = b.has("shape") ? b.get("shape") : Value::none();
    if (b.rest().size() == 1) shape_value = b.rest()[0];
    else if (b.rest().size() > 1) shape_value = Value::of_tuple(b.rest());
    if (shape_value.kind == Value::Kind::None) fail(span, name + "() needs a shape");
    Shape shape = to_shape(shape_value, span);
    if (name == "tl.broadcast_to") return Value::of_tensor(broadcast(t, shape, span));
    try {
      return Value::of_tensor(reshape(*t, shape));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }
  if (name == "tl.ravel") {
    Bound b(*this, name, {"x"}, args, kwargs, span);
    TensorRef t = b.tensor("x");
    return Value::of_tensor(reshape(*t, {numel(t->shape)}));
  }
  if (name == "tl.expand_dims") {
    Bound b(*this, name, {"input", "axis"}, args, kwargs, span);
    TensorRef t = b.tensor("input");
    const Value &ax = b.get("axis");
    std::vector<Value> axes = ax.kind == Value::Kind::Tuple ? *ax.elems : std::vector<Value>{ax};
    try {
      for (const Value &a : axes) t = expand_dims(*t, static_cast<int>(to_int(a, span, "an axis")));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
    return Value::of_tensor(t);
  }
  if (name == "tl.broadcast") {
    Bound b(*this, name, {"input", "other"}, args, kwargs, span);
    TensorRef x = b.tensor("input"), y = b.tensor("other");
    std::optional<Shape> shape = broadcast_shape(x->shape, y->shape);
    if (!shape) fail(span, "shapes " + shape_str(x->shape) + " and " + shape_str(y->shape) + " cannot be broadcast together");
    return Value::of_tuple({Value::of_tensor(broadcast(x, *shape, span)), Value::of_tensor(broadcast(y, *shape, span))});
  }

  // ------------------------------------------------------- reductions
  if (name == "tl.sum" || name == "tl.max" || name == "tl.min" || name == "tl.argmax" || name == "tl.argmin") {
    const bool arg = name == "tl.argmax" || name == "tl.argmin";
    std::vector<std::string> sig = {"input", "axis"};
    if (name == "tl.sum") sig.insert(sig.end(), {"keep_dims", "dtype"});
    else if (arg) sig.insert(sig.end(), {"tie_break_left", "keep_dims"});
    else sig.insert(sig.end(), {"return_indices", "return_indices_tie_break_left", "keep_dims", "propagate_nan"});
    Bound b(*this, name, sig, args, kwargs, span);
    TensorRef t = b.tensor("input");
    if (t->type.is_pointer) fail(span, name + " cannot reduce pointers");
    std::optional<int> axis = b.axis("axis");
    if (arg && !axis) fail(span, name + " needs an axis");
    bool keep = b.flag("keep_dims", false);
    DType in = t->type.dtype;
    const bool with_indices = !arg && name != "tl.sum" && b.flag("return_indices", false);
    DType out = name == "tl.sum" && b.has("dtype") ? b.dtype("dtype", in) : sema::reduction_dtype(name.substr(3), in, with_indices);
    if (!arg && out != in) t = convert(*t, et(out), f64);  // values reduce in the result dtype
    ReduceKind kind = name == "tl.sum" ? ReduceKind::Sum : name == "tl.max" ? ReduceKind::Max
                      : name == "tl.min" ? ReduceKind::Min : name == "tl.argmax" ? ReduceKind::ArgMax : ReduceKind::ArgMin;
    try {
      if (arg)
        return Value::of_tensor(reduce(*t, axis, keep, kind, et(out), f64, b.flag("tie_break_left", true)));
      TensorRef values = reduce(*t, axis, keep, kind, et(out), f64);
      if (name != "tl.sum" && b.has("propagate_nan") && b.integer("propagate_nan", 0) != 0 && t->is_float()) {
        // tl.PropagateNan.ALL: a row holding a NaN reduces to NaN (its NaNs summed: NaN where there is one, else 0).
        TensorRef nans = map_float(*t, t->type, f64, [](double v) { return std::isnan(v) ? v : 0.0; });
        TensorRef any = reduce(*nans, axis, keep, ReduceKind::Sum, et(out), f64);
        values = zip_float(*values, *any, values->type, f64, [](double v, double n) { return std::isnan(n) ? n : v; });
      }
      if (with_indices) {
        TensorRef idx = reduce(*t, axis, keep, kind == ReduceKind::Max ? ReduceKind::ArgMax : ReduceKind::ArgMin,
                               et(DType::Int32), f64, b.flag("return_indices_tie_break_left", true));
        return Value::of_tuple({Value::of_tensor(values), Value::of_tensor(idx)});
      }
      return Value::of_tensor(values);
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }
  if (name == "tl.flip") {
    Bound b(*this, name, {"x", "dim"}, args, kwargs, span);
    TensorRef t = b.tensor("x");
    if (t->shape.empty()) fail(span, "tl.flip needs a tensor of at least one dimension");
    if (!b.has("dim")) fail(span, "tl.flip needs its axis: Triton 3.6 refuses dim=None");
    try {
      return Value::of_tensor(flip(*t, static_cast<int>(b.integer("dim", -1))));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }
  if (name == "tl.cumsum" || name == "tl.cumprod") {
    Bound b(*this, name, {"input", "axis", "reverse", "dtype"}, args, kwargs, span);
    TensorRef t = b.tensor("input");
    DType in = t->type.dtype;
    DType out = b.has("dtype") ? b.dtype("dtype", in) : sema::scan_dtype(in);
    t = convert(*t, et(out), f64);
    try {
      return Value::of_tensor(scan(*t, static_cast<int>(b.integer("axis", 0)), b.flag("reverse", false),
                                   name == "tl.cumsum" ? ScanKind::Sum : ScanKind::Prod, et(out), f64));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }
  if (name == "tl.join" || name == "tl.interleave") {
    Bound b(*this, name, {"a", "b"}, args, kwargs, span);
    TensorRef x = b.tensor("a"), y = b.tensor("b");
    if (x->type != y->type) fail(span, name + " needs operands of one type, got " + x->type.str() + " and " + y->type.str());
    std::optional<Shape> s = broadcast_shape(x->shape, y->shape);
    if (!s) fail(span, name + ": cannot broadcast " + shape_str(x->shape) + " and " + shape_str(y->shape));
    x = broadcast_to(x, *s);
    y = broadcast_to(y, *s);
    auto joined = std::make_shared<Tensor>();
    joined->type = x->type;
    joined->shape = *s;
    if (name == "tl.join" || s->empty()) joined->shape.push_back(2);
    else joined->shape.back() *= 2;
    for (int64_t k = 0; k < numel(*s); ++k) {
      if (x->is_float()) joined->f.insert(joined->f.end(), {x->f[k], y->f[k]});
      else joined->i.insert(joined->i.end(), {x->i[k], y->i[k]});
    }
    return Value::of_tensor(joined);
  }
  if (name == "tl.split") {
    Bound b(*this, name, {"a"}, args, kwargs, span);
    TensorRef x = b.tensor("a");
    if (x->shape.empty() || x->shape.back() != 2)
      fail(span, "tl.split needs a tensor whose last dimension is 2, got " + x->type_str());
    std::array<std::shared_ptr<Tensor>, 2> halves;
    for (int h = 0; h < 2; ++h) {
      halves[h] = std::make_shared<Tensor>();
      halves[h]->type = x->type;
      halves[h]->shape.assign(x->shape.begin(), x->shape.end() - 1);
      for (int64_t k = h; k < x->size(); k += 2) {
        if (x->is_float()) halves[h]->f.push_back(x->f[k]);
        else halves[h]->i.push_back(x->i[k]);
      }
    }
    return Value::of_tuple({Value::of_tensor(halves[0]), Value::of_tensor(halves[1])});
  }
  if (name == "tl.associative_scan") return associative_scan(args, kwargs, span);
  if (name == "tl.reduce") return combine_reduce(args, kwargs, span);
  if (name == "tl.extract_slice" || name == "tl.insert_slice") return slice_op(name, args, kwargs, span);
  if (name == "tl.softmax") {
    Bound b(*this, name, {"x", "dim", "keep_dims", "ieee_rounding"}, args, kwargs, span);
    TensorRef x = b.tensor("x");
    require_fp32_or_64("tl.softmax", x);
    Value dim = b.has("dim") ? b.get("dim") : Value::of_int(0);
    Value keep = Value::of_bool(b.flag("keep_dims", false));
    Value m = call_builtin(Value::of_builtin("tl.max"), {Value::of_tensor(x), dim}, {{"keep_dims", keep}}, span);
    Value z = binary(ast::BinaryOpKind::Sub, Value::of_tensor(x), m, span);
    Value num = call_builtin(Value::of_builtin("math.exp"), {z}, {}, span);
    Value den = call_builtin(Value::of_builtin("tl.sum"), {num, dim}, {{"keep_dims", keep}}, span);
    return binary(ast::BinaryOpKind::Div, num, den, span);
  }
  if (name == "tl.dot") {
    Bound b(*this, name, {"input", "other", "acc", "input_precision", "allow_tf32", "max_num_imprecise_acc", "out_dtype"},
            args, kwargs, span);
    TensorRef x = b.tensor("input"), y = b.tensor("other");
    if (x->type != y->type)
      fail(span, "tl.dot operands must have one dtype, got " + x->type.str() + " and " + y->type.str());
    DType in = x->type.dtype;
    if (in != DType::FP16 && in != DType::BF16 && in != DType::FP32 && in != DType::Int8 && in != DType::FP64)
      fail(span, "tl.dot does not take " + x->type.str() + " operands (fp16, bf16, fp32, int8)");
    const size_t r = x->shape.size();
    if (r >= 2 && y->shape.size() == r) {
      int64_t min_k = in == DType::Int8 ? 32 : 16;
      if (x->shape[r - 1] < min_k)  // M and N may be 1 (Triton 3.6, measured)
        fail(span, "tl.dot needs an inner dimension K of at least " + std::to_string(min_k) + ", got " +
                       shape_str(x->shape) + " @ " + shape_str(y->shape));
    }
    TensorRef acc = b.has("acc") ? b.tensor("acc") : nullptr;
    DType out = acc ? acc->type.dtype : b.dtype("out_dtype", in == DType::Int8 ? DType::Int32 : DType::FP32);
    std::string precision = b.str("input_precision", "");
    if (precision.empty()) precision = (b.has("allow_tf32") && !b.flag("allow_tf32", true)) ? "ieee" : "tf32";
    if (precision != "tf32" && precision != "ieee" && precision != "tf32x3")
      fail(span, "tl.dot input_precision must be \"tf32\", \"tf32x3\" or \"ieee\"");
    const bool tf32 = in == DType::FP32 && precision == "tf32";
    try {
      return Value::of_tensor(dot(*x, *y, acc.get(), et(out), tf32, f64));
    } catch (const OpError &e) {
      fail(span, e.message);
    }
  }

  fail(span, name + "() is not supported by tgrad's interpreter yet");
}

// tl.rand, tl.randn, tl.randint, tl.randint4x and tl.philox, with 32-bit
// counters (the offsets of every test kernel): the same draws as Triton's.
Value Evaluator::random_numbers(const std::string &name, std::vector<Value> args, std::map<std::string, Value> kwargs,
                                const SourceSpan &span) {
  const bool philox = name == "tl.philox";
  Bound b(*this, name, philox ? std::vector<std::string>{"seed", "c0", "c1", "c2", "c3", "n_rounds"}
                              : std::vector<std::string>{"seed", "offset", "n_rounds"},
          std::move(args), std::move(kwargs), span);
  const long long rounds = b.integer("n_rounds", 10);
  TensorRef seed = b.tensor("seed");
  if (seed->size() != 1) fail(span, name + "(): the interpreter takes one seed for all offsets");
  const uint64_t key = static_cast<uint64_t>(seed->i.at(0));
  std::array<TensorRef, 4> counters;
  counters[0] = b.tensor(philox ? "c0" : "offset");
  const TensorRef &shape_of = counters[0];
  if (shape_of->is_float() || sema::bits(shape_of->type.dtype) > 32)
    fail(span, name + "(): the interpreter draws from integer offsets of 32 bits or fewer, got " + shape_of->type_str());
  for (int k = 1; k < 4; ++k) {
    counters[k] = philox ? b.tensor("c" + std::to_string(k)) : nullptr;
    if (counters[k] && counters[k]->size() != shape_of->size() && counters[k]->size() != 1)
      fail(span, name + "(): the interpreter needs counters of one shape");
  }
  const int64_t n = shape_of->size();
  std::array<std::shared_ptr<Tensor>, 4> draws;
  for (auto &d : draws) {
    d = std::make_shared<Tensor>();
    d->type = ElemType{DType::UInt32, false};
    d->shape = shape_of->shape;
  }
  auto rand = std::make_shared<Tensor>();
  rand->type = ElemType{DType::FP32, false};
  rand->shape = shape_of->shape;
  for (int64_t e = 0; e < n; ++e) {
    std::array<uint32_t, 4> c{};
    for (int k = 0; k < 4; ++k)
      if (counters[k]) c[k] = static_cast<uint32_t>(counters[k]->i[counters[k]->size() == 1 ? 0 : e]);
    const std::array<uint32_t, 4> r = philox4x32(c, key, rounds);
    for (int k = 0; k < 4; ++k) draws[k]->i.push_back(r[k]);
    if (name == "tl.rand") rand->f.push_back(uniform_of(r[0]));
    if (name == "tl.randn") {
      // Box-Muller on the first two draws (pair_uniform_to_normal), in float32.
      const float u1 = std::max(1.0e-7f, uniform_of(r[0])), th = 6.283185307179586f * uniform_of(r[1]);
      rand->f.push_back(static_cast<double>(std::sqrt(-2.0f * std::log(u1)) * std::cos(th)));
    }
  }
  if (name == "tl.rand" || name == "tl.randn") return Value::of_tensor(rand);
  if (name == "tl.randint") return Value::of_tensor(draws[0]);
  std::vector<Value> four;
  for (auto &d : draws) four.push_back(Value::of_tensor(d));
  return Value::of_tuple(std::move(four));
}


namespace {

// What tl.associative_scan and tl.reduce combine: the tensors (one, or a tuple's), of one shape with at least one
// axis, and the combine function, which takes two elements of them.
struct Combined {
  std::vector<TensorRef> inputs;
  bool tuple = false;
  const ast::Function *fn = nullptr;
};

Combined combined_operands(Evaluator &ev, const Bound &b, const std::string &name, const SourceSpan &span) {
  Combined c;
  const Value &input = b.get("input");
  c.tuple = input.kind == Value::Kind::Tuple;
  if (c.tuple) {
    for (const Value &v : *input.elems) c.inputs.push_back(ev.to_tensor(v, span));
  } else {
    c.inputs.push_back(b.tensor("input"));
  }
  if (c.inputs.empty()) ev.fail(span, name + " needs at least one tensor");
  for (const TensorRef &t : c.inputs)
    if (t->shape != c.inputs[0]->shape || t->shape.empty())
      ev.fail(span, name + " needs tensors of one shape with at least one axis");
  const Value &combine = b.get("combine_fn");
  if (combine.kind != Value::Kind::Function) ev.fail(span, name + " needs a @triton.jit combine function");
  c.fn = combine.fn;
  if (c.fn->params.size() != 2 * c.inputs.size())
    ev.fail(span, "the combine function '" + c.fn->name + "' takes the wrong number of arguments");
  return c;
}

// combine(left, right) for the elements `left` and `right` (one slice of each input), checked to give the inputs'
// types, broadcast to the slice's shape.
std::vector<TensorRef> combine_elements(Evaluator &ev, const Combined &c, const std::vector<TensorRef> &left,
                                        const std::vector<TensorRef> &right, const Shape &slice_shape,
                                        const SourceSpan &span) {
  const ast::Function &fn = *c.fn;
  const size_t n = c.inputs.size();
  std::map<std::string, Value> call_args;
  for (size_t k = 0; k < n; ++k) {
    call_args[fn.params[k].name] = Value::of_tensor(left[k]);
    call_args[fn.params[n + k].name] = Value::of_tensor(right[k]);
  }
  Value r = ev.call(fn, call_args, span);
  std::vector<Value> parts = r.kind == Value::Kind::Tuple ? *r.elems : std::vector<Value>{r};
  if (parts.size() != n)
    ev.fail(span, "the combine function '" + fn.name + "' returned " + std::to_string(parts.size()) + " values, not " +
                      std::to_string(n));
  std::vector<TensorRef> out;
  for (size_t k = 0; k < n; ++k) {
    TensorRef t = ev.to_tensor(parts[k], span);
    if (t->type != c.inputs[k]->type)
      ev.fail(span, "the combine function '" + fn.name + "' returned " + t->type.str() + " for " +
                        c.inputs[k]->type.str());
    out.push_back(broadcast_to(t, slice_shape));
  }
  return out;
}

// The axis of a scan or reduction by a combine function, counted from 0.
int combined_axis(Evaluator &ev, int axis, size_t rank, const std::string &name, const SourceSpan &span) {
  try {
    return normalize_axis(axis, rank);
  } catch (const OpError &e) {
    ev.fail(span, name + ": " + e.message);
  }
}

}  // namespace

// tl.associative_scan: the combine function folds each element into the
// running value along the axis (from the end when reverse=True, the running
// value then covering the higher indices; measured against Triton on the
// H100). The combine function is elementwise, so it is called once per
// position on the whole slice across the other axes.
Value Evaluator::associative_scan(std::vector<Value> args, std::map<std::string, Value> kwargs, const SourceSpan &span) {
  const std::string name = "tl.associative_scan";
  Bound b(*this, name, {"input", "axis", "combine_fn", "reverse"}, std::move(args), std::move(kwargs), span);
  const Combined operands = combined_operands(*this, b, name, span);
  const std::vector<TensorRef> &inputs = operands.inputs;
  const bool tuple = operands.tuple;
  const Shape shape = inputs[0]->shape;
  std::optional<int> axis_value = b.axis("axis");
  if (!axis_value) fail(span, name + " needs an axis");
  const int axis = combined_axis(*this, *axis_value, shape.size(), name, span);
  const bool reverse = b.flag("reverse", false);

  const int64_t len = shape[axis];
  Shape slice_shape = shape;
  slice_shape.erase(slice_shape.begin() + axis);
  std::vector<std::shared_ptr<Tensor>> results;
  for (const TensorRef &t : inputs) results.push_back(std::make_shared<Tensor>(*t));
  std::vector<TensorRef> running;
  for (int64_t step = 0; step < len; ++step) {
    const int64_t p = reverse ? len - 1 - step : step;
    std::vector<TensorRef> current;
    for (const TensorRef &t : inputs) current.push_back(slice_along(*t, axis, p));
    if (step > 0) current = combine_elements(*this, operands, running, current, slice_shape, span);
    running = current;
    for (size_t k = 0; k < inputs.size(); ++k) put_along(*results[k], axis, p, *running[k]);
  }
  if (!tuple) return Value::of_tensor(results[0]);
  std::vector<Value> out;
  for (const auto &r : results) out.push_back(Value::of_tensor(r));
  return Value::of_tuple(std::move(out));
}

// tl.reduce with a combine function: the function folds the elements along the axis into one, first to last (Triton
// combines in a tree; for an associative function, as Triton requires, the two agree up to rounding). No axis
// reduces the whole tensor; keep_dims keeps the reduced axes with length 1.
Value Evaluator::combine_reduce(std::vector<Value> args, std::map<std::string, Value> kwargs, const SourceSpan &span) {
  const std::string name = "tl.reduce";
  Bound b(*this, name, {"input", "axis", "combine_fn", "keep_dims"}, std::move(args), std::move(kwargs), span);
  const Combined operands = combined_operands(*this, b, name, span);
  std::vector<TensorRef> inputs = operands.inputs;
  const bool tuple = operands.tuple;
  const Shape shape = inputs[0]->shape;
  std::optional<int> axis_value = b.axis("axis");
  const bool keep = b.flag("keep_dims", false);
  int axis = 0;
  if (axis_value) {
    axis = combined_axis(*this, *axis_value, shape.size(), name, span);
  } else {  // the whole tensor: its elements in order, as one axis
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (TensorRef &t : inputs) t = reshape(*t, {n});
  }
  const Shape folded = inputs[0]->shape;
  Shape slice_shape = folded;
  slice_shape.erase(slice_shape.begin() + axis);
  std::vector<TensorRef> running;
  for (const TensorRef &t : inputs) running.push_back(slice_along(*t, axis, 0));
  for (int64_t p = 1; p < folded[axis]; ++p) {
    std::vector<TensorRef> next;
    for (const TensorRef &t : inputs) next.push_back(slice_along(*t, axis, p));
    running = combine_elements(*this, operands, running, next, slice_shape, span);
  }
  if (keep) {
    Shape kept = shape;
    if (axis_value) kept[axis] = 1;
    else kept.assign(shape.size(), 1);
    for (TensorRef &r : running) r = reshape(*r, kept);
  }
  if (!tuple) return Value::of_tensor(running[0]);
  std::vector<Value> out;
  for (const auto &r : running) out.push_back(Value::of_tensor(r));
  return Value::of_tuple(std::move(out));
}

// triton-ascend's tl.extract_slice(ful, offsets, sizes, strides): the tensor of shape `sizes` whose element j is
// ful's element offsets + j * strides; tl.insert_slice(ful, sub, offsets, sizes, strides): ful with those elements
// replaced by sub's. An element outside ful is an error (the hardware would read or write past the tile).
Value Evaluator::slice_op(const std::string &name, std::vector<Value> args, std::map<std::string, Value> kwargs,
                          const SourceSpan &span) {
  const bool insert = name == "tl.insert_slice";
  Bound b(*this, name,
          insert ? std::vector<std::string>{"ful", "sub", "offsets", "sizes", "strides"}
                 : std::vector<std::string>{"ful", "offsets", "sizes", "strides"},
          std::move(args), std::move(kwargs), span);
  TensorRef ful = b.tensor("ful");
  const size_t rank = ful->shape.size();
  auto ints = [&](const std::string &p) {
    const Value &v = b.get(p);
    std::vector<int64_t> out;
    if (v.kind == Value::Kind::Tuple) {
      for (const Value &e : *v.elems) out.push_back(to_int(e, span, name + "() " + p));
    } else {
      out.push_back(to_int(v, span, name + "() " + p));
    }
    if (out.size() != rank)
      fail(span, name + "() needs " + std::to_string(rank) + " " + p + " for a tensor of rank " + std::to_string(rank) +
                     ", got " + std::to_string(out.size()));
    return out;
  };
  const std::vector<int64_t> offsets = ints("offsets"), sizes = ints("sizes"), strides = ints("strides");
  Shape slice_shape(sizes.begin(), sizes.end());
  int64_t count = 1;
  for (int64_t n : sizes) count *= n;
  // The flat index in ful of the slice's element k (row-major in both).
  auto source_index = [&](int64_t k) {
    int64_t flat = 0, rest = k;
    std::vector<int64_t> j(rank);
    for (size_t d = rank; d-- > 0;) {
      j[d] = rest % sizes[d];
      rest /= sizes[d];
    }
    for (size_t d = 0; d < rank; ++d) {
      const int64_t at = offsets[d] + j[d] * strides[d];
      if (at < 0 || at >= ful->shape[d])
        fail(span, name + "(): element " + std::to_string(at) + " of axis " + std::to_string(d) + " is outside the tensor's " +
                       std::to_string(ful->shape[d]));
      flat = flat * ful->shape[d] + at;
    }
    return flat;
  };
  if (!insert) {
    auto out = std::make_shared<Tensor>();
    out->type = ful->type;
    out->shape = slice_shape;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t at = source_index(k);
      if (ful->is_float()) out->f.push_back(ful->f[at]);
      else out->i.push_back(ful->i[at]);
    }
    return Value::of_tensor(out);
  }
  TensorRef sub = b.tensor("sub");
  if (sub->shape != slice_shape) fail(span, name + "(): sub has shape " + sub->type_str() + ", the slice is " + shape_str(slice_shape));
  if (sub->type != ful->type) sub = convert(*sub, ful->type, float64());
  auto out = std::make_shared<Tensor>(*ful);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t at = source_index(k);
    if (out->is_float()) out->f[at] = sub->f[k];
    else out->i[at] = sub->i[k];
  }
  return Value::of_tensor(out);
}

}  // namespace tgrad::interp
