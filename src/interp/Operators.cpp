// Operator semantics: Python arithmetic on values known before the kernel
// runs (tl.constexpr), Triton's typed arithmetic on tensors.
#include <cmath>
#include <climits>
#include <limits>

#include "src/interp/Evaluator.h"

namespace tgrad::interp {

using namespace ast;
using sema::DType;
using sema::ElemType;

namespace {

bool is_python(const Value &v) { return v.is_python_number(); }

double py_float(const Value &v) {
  return v.kind == Value::Kind::Float ? v.x : v.kind == Value::Kind::Int ? static_cast<double>(v.n) : (v.b ? 1.0 : 0.0);
}
long long py_int(const Value &v) { return v.kind == Value::Kind::Int ? v.n : v.b; }

// Python's floor division and modulo on ints.
long long floor_div(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
long long floor_mod(long long a, long long b) {
  long long r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

bool overflows(long long a, long long b, BinaryOpKind op, long long &out) {
  switch (op) {
    case BinaryOpKind::Add: return __builtin_add_overflow(a, b, &out);
    case BinaryOpKind::Sub: return __builtin_sub_overflow(a, b, &out);
    case BinaryOpKind::Mul: return __builtin_mul_overflow(a, b, &out);
    default: return false;
  }
}

}  // namespace

// -------------------------------------------------- Python (constexpr) level

static Value python_binary(Evaluator &ev, BinaryOpKind op, const Value &a, const Value &b, const SourceSpan &span) {
  const bool floats = a.kind == Value::Kind::Float || b.kind == Value::Kind::Float;
  if (floats) {
    double x = py_float(a), y = py_float(b);
    switch (op) {
      case BinaryOpKind::Add: return Value::of_float(x + y);
      case BinaryOpKind::Sub: return Value::of_float(x - y);
      case BinaryOpKind::Mul: return Value::of_float(x * y);
      case BinaryOpKind::Div:
        if (y == 0) ev.fail(span, "float division by zero");
        return Value::of_float(x / y);
      case BinaryOpKind::FloorDiv:
        if (y == 0) ev.fail(span, "float floor division by zero");
        return Value::of_float(std::floor(x / y));
      case BinaryOpKind::Mod: {
        if (y == 0) ev.fail(span, "float modulo by zero");
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::of_float(r);
      }
      case BinaryOpKind::Pow: return Value::of_float(std::pow(x, y));
      default: ev.fail(span, std::string("unsupported operand types for '") + spelling(op) + "': float");
    }
  }
  long long x = py_int(a), y = py_int(b), out = 0;
  if (overflows(x, y, op, out)) ev.fail(span, "integer overflow in a tl.constexpr computation");
  switch (op) {
    case BinaryOpKind::Add:
    case BinaryOpKind::Sub:
    case BinaryOpKind::Mul: return Value::of_int(out);
    case BinaryOpKind::Div:
      if (y == 0) ev.fail(span, "division by zero");
      return Value::of_float(static_cast<double>(x) / static_cast<double>(y));
    case BinaryOpKind::FloorDiv:
      if (y == 0) ev.fail(span, "integer division by zero");
      return Value::of_int(floor_div(x, y));
    case BinaryOpKind::Mod:
      if (y == 0) ev.fail(span, "integer modulo by zero");
      return Value::of_int(floor_mod(x, y));
    case BinaryOpKind::Pow: {
      if (y < 0) return Value::of_float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      long long r = 1;
      for (long long k = 0; k < y; ++k)
        if (__builtin_mul_overflow(r, x, &r)) ev.fail(span, "integer overflow in a tl.constexpr computation");
      return Value::of_int(r);
    }
    case BinaryOpKind::LShift:
      if (y < 0 || y > 62) ev.fail(span, "shift count out of range");
      return Value::of_int(x << y);
    case BinaryOpKind::RShift:
      if (y < 0) ev.fail(span, "negative shift count");
      return Value::of_int(y > 62 ? (x < 0 ? -1 : 0) : x >> y);
    case BinaryOpKind::BitAnd:
      return (a.kind == Value::Kind::Bool && b.kind == Value::Kind::Bool) ? Value::of_bool(x & y) : Value::of_int(x & y);
    case BinaryOpKind::BitOr:
      return (a.kind == Value::Kind::Bool && b.kind == Value::Kind::Bool) ? Value::of_bool(x | y) : Value::of_int(x | y);
    case BinaryOpKind::BitXor:
      return (a.kind == Value::Kind::Bool && b.kind == Value::Kind::Bool) ? Value::of_bool(x ^ y) : Value::of_int(x ^ y);
    case BinaryOpKind::MatMul: ev.fail(span, "'@' needs tensors");
  }
  ev.fail(span, "unsupported operator");
}

// ------------------------------------------------------------- tensor level


std::pair<TensorRef, TensorRef> Evaluator::promote_pair(const Value &a, const Value &b, bool div_or_mod,
                                                        const SourceSpan &span) {
  TensorRef ta = to_tensor(a, span), tb = to_tensor(b, span);
  if (ta->type.is_pointer || tb->type.is_pointer)
    fail(span, "this operation is not defined on pointers (" + ta->type_str() + ", " + tb->type_str() + ")");
  std::string error;
  std::optional<DType> common =
      sema::computation_type(ta->type.dtype, is_python(a), tb->type.dtype, is_python(b), div_or_mod, error);
  if (!common) fail(span, error);
  // A negative Python number against an unsigned tensor: Triton refuses.
  for (const Value *v : {&a, &b})
    if (is_python(*v) && kind(*common) == sema::DKind::UInt && py_float(*v) < 0)
      fail(span, "cannot combine an unsigned tensor with a negative number");
  std::optional<Shape> shape = broadcast_shape(ta->shape, tb->shape);
  if (!shape)
    fail(span, "shapes " + shape_str(ta->shape) + " and " + shape_str(tb->shape) + " cannot be broadcast together");
  ElemType t{*common, false};
  TensorRef ca = is_python(a) ? make_scalar(t, py_float(a), py_int(a), float64()) : convert(*ta, t, float64());
  TensorRef cb = is_python(b) ? make_scalar(t, py_float(b), py_int(b), float64()) : convert(*tb, t, float64());
  return {broadcast(ca, *shape, span), broadcast(cb, *shape, span)};
}

Value Evaluator::binary(BinaryOpKind op, const Value &a, const Value &b, const SourceSpan &span) {
  if (is_python(a) && is_python(b)) return python_binary(*this, op, a, b, span);
  if ((!is_python(a) && !is_tensor(a)) || (!is_python(b) && !is_tensor(b)))
    fail(span, std::string("unsupported operands for '") + spelling(op) + "': " + a.describe() + " and " + b.describe());

  // Pointer arithmetic: pointer +/- integer moves by elements.
  TensorRef ta = to_tensor(a, span), tb = to_tensor(b, span);
  if (ta->type.is_pointer || tb->type.is_pointer) {
    bool ok = (op == BinaryOpKind::Add && (ta->type.is_pointer != tb->type.is_pointer)) ||
              (op == BinaryOpKind::Sub && ta->type.is_pointer && !tb->type.is_pointer);
    const Tensor &offset = ta->type.is_pointer ? *tb : *ta;
    if (!ok || offset.is_float())
      fail(span, std::string("'") + spelling(op) + "' between " + ta->type_str() + " and " + tb->type_str() +
                     ": a pointer only takes + and - of integers");
    std::optional<Shape> shape = broadcast_shape(ta->shape, tb->shape);
    if (!shape)
      fail(span, "shapes " + shape_str(ta->shape) + " and " + shape_str(tb->shape) + " cannot be broadcast together");
    TensorRef pa = broadcast(ta, *shape, span), pb = broadcast(tb, *shape, span);
    ElemType ptr_type = ta->type.is_pointer ? ta->type : tb->type;
    const bool sub = op == BinaryOpKind::Sub;
    return Value::of_tensor(zip_int(*pa, *pb, ptr_type, [sub](int64_t x, int64_t y) { return sub ? x - y : x + y; }));
  }

  switch (op) {
    case BinaryOpKind::Add:
    case BinaryOpKind::Sub:
    case BinaryOpKind::Mul: {
      auto [x, y] = promote_pair(a, b, false, span);
      if (x->is_float()) {
        std::function<double(double, double)> f = op == BinaryOpKind::Add   ? [](double p, double q) { return p + q; }
                                                  : op == BinaryOpKind::Sub ? [](double p, double q) { return p - q; }
                                                                            : [](double p, double q) { return p * q; };
        return Value::of_tensor(zip_float(*x, *y, x->type, float64(), f));
      }
      std::function<int64_t(int64_t, int64_t)> f =
          op == BinaryOpKind::Add   ? [](int64_t p, int64_t q) { return static_cast<int64_t>(static_cast<uint64_t>(p) + static_cast<uint64_t>(q)); }
          : op == BinaryOpKind::Sub ? [](int64_t p, int64_t q) { return static_cast<int64_t>(static_cast<uint64_t>(p) - static_cast<uint64_t>(q)); }
                                    : [](int64_t p, int64_t q) { return static_cast<int64_t>(static_cast<uint64_t>(p) * static_cast<uint64_t>(q)); };
      return Value::of_tensor(zip_int(*x, *y, x->type, f));
    }
    case BinaryOpKind::Div: {
      // True division: integers divide in fp32; fp16/bf16 in fp32.
      TensorRef x, y;
      if (!to_tensor(a, span)->is_float() && !to_tensor(b, span)->is_float()) {
        Value fa = is_python(a) ? Value::of_float(py_float(a)) : Value::of_tensor(convert(*to_tensor(a, span), {DType::FP32, false}, float64()));
        Value fb = is_python(b) ? Value::of_float(py_float(b)) : Value::of_tensor(convert(*to_tensor(b, span), {DType::FP32, false}, float64()));
        std::tie(x, y) = promote_pair(fa, fb, true, span);
      } else {
        std::tie(x, y) = promote_pair(a, b, true, span);
      }
      return Value::of_tensor(zip_float(*x, *y, x->type, float64(), [](double p, double q) { return p / q; }));
    }
    case BinaryOpKind::FloorDiv:
    case BinaryOpKind::Mod: {
      auto [x, y] = promote_pair(a, b, true, span);
      if (x->is_float()) {
        if (op == BinaryOpKind::FloorDiv)
          fail(span, "'//' on floating-point tensors is not supported; use tl.floor(a / b) (or tl.math.floor)");
        // Triton's % on floats is C's fmod: the sign of the dividend.
        return Value::of_tensor(zip_float(*x, *y, x->type, float64(), [](double p, double q) { return std::fmod(p, q); }));
      }
      for (int64_t k = 0; k < y->size(); ++k)
        if (y->i[k] == 0) fail(span, std::string("integer ") + (op == BinaryOpKind::Mod ? "modulo" : "division") + " by zero");
      // C semantics on tensors: truncation toward zero.
      bool unsigned_op = sema::kind(x->type.dtype) == sema::DKind::UInt;
      if (op == BinaryOpKind::FloorDiv)
        return Value::of_tensor(zip_int(*x, *y, x->type, [unsigned_op](int64_t p, int64_t q) {
          if (unsigned_op) return static_cast<int64_t>(static_cast<uint64_t>(p) / static_cast<uint64_t>(q));
          return (p == INT64_MIN && q == -1) ? p : p / q;
        }));
      return Value::of_tensor(zip_int(*x, *y, x->type, [unsigned_op](int64_t p, int64_t q) {
        if (unsigned_op) return static_cast<int64_t>(static_cast<uint64_t>(p) % static_cast<uint64_t>(q));
        return (q == -1) ? int64_t{0} : p % q;
      }));
    }
    case BinaryOpKind::BitAnd:
    case BinaryOpKind::BitOr:
    case BinaryOpKind::BitXor:
    case BinaryOpKind::LShift:
    case BinaryOpKind::RShift: {
      auto [x, y] = promote_pair(a, b, false, span);
      if (x->is_float()) fail(span, std::string("'") + spelling(op) + "' needs integer operands, not " + x->type.str());
      bool unsigned_op = sema::kind(x->type.dtype) == sema::DKind::UInt;
      int width = sema::bits(x->type.dtype);
      std::function<int64_t(int64_t, int64_t)> f;
      switch (op) {
        case BinaryOpKind::BitAnd: f = [](int64_t p, int64_t q) { return p & q; }; break;
        case BinaryOpKind::BitOr: f = [](int64_t p, int64_t q) { return p | q; }; break;
        case BinaryOpKind::BitXor: f = [](int64_t p, int64_t q) { return p ^ q; }; break;
        case BinaryOpKind::LShift:
          f = [width](int64_t p, int64_t q) { return (q < 0 || q >= width) ? int64_t{0} : static_cast<int64_t>(static_cast<uint64_t>(p) << q); };
          break;
        default:
          f = [width, unsigned_op](int64_t p, int64_t q) {
            if (q < 0 || q >= width) return (unsigned_op || p >= 0) ? int64_t{0} : int64_t{-1};
            if (unsigned_op) return static_cast<int64_t>((static_cast<uint64_t>(p) & (width == 64 ? ~0ull : ((1ull << width) - 1))) >> q);
            return p >> q;
          };
      }
      return Value::of_tensor(zip_int(*x, *y, x->type, f));
    }
    case BinaryOpKind::Pow:
      fail(span, "'**' on tensors is not supported by Triton; multiply (x * x) or use libdevice.pow");
    case BinaryOpKind::MatMul: {
      TensorRef x = to_tensor(a, span), y = to_tensor(b, span);
      try {
        return Value::of_tensor(dot(*x, *y, nullptr, ElemType{DType::FP32, false}, false, float64()));
      } catch (const OpError &e) {
        fail(span, e.message);
      }
    }
  }
  fail(span, "unsupported operator");
}

Value Evaluator::unary(UnaryOpKind op, const Value &a, const SourceSpan &span) {
  if (is_python(a)) {
    switch (op) {
      case UnaryOpKind::Not: return Value::of_bool(!truth(a, span));
      case UnaryOpKind::Pos: return a.kind == Value::Kind::Bool ? Value::of_int(a.b) : a;
      case UnaryOpKind::Neg:
        if (a.kind == Value::Kind::Float) return Value::of_float(-a.x);
        if (py_int(a) == LLONG_MIN) fail(span, "integer overflow in a tl.constexpr computation");
        return Value::of_int(-py_int(a));
      case UnaryOpKind::Invert: 
        if (a.kind == Value::Kind::Float) fail(span, "'~' needs an integer");
        return Value::of_int(~py_int(a));
    }
  }
  if (op == UnaryOpKind::Not) {
    if (is_tensor(a) && a.t->shape.empty()) return Value::of_bool(!truth(a, span));
    if (a.kind == Value::Kind::None || a.kind == Value::Kind::Str || a.kind == Value::Kind::Tuple)
      return Value::of_bool(!truth(a, span));
    // An int1 tile (sema typed it): lane by lane.
    if (is_tensor(a) && a.t->type.dtype == sema::DType::Int1 && !a.t->type.is_pointer)
      return Value::of_tensor(zip_int(*a.t, *a.t, a.t->type, [](int64_t x, int64_t) { return static_cast<int64_t>(x == 0); }));
    fail(span, "'not' needs a scalar or an int1 tile");
  }
  if (!is_tensor(a)) fail(span, std::string("unsupported operand for '") + spelling(op) + "': " + a.describe());
  const Tensor &t = *a.t;
  if (t.type.is_pointer) fail(span, std::string("'") + spelling(op) + "' is not defined on pointers");
  switch (op) {
    case UnaryOpKind::Pos: return a;
    case UnaryOpKind::Neg:
      if (t.is_float()) return Value::of_tensor(map_float(t, t.type, float64(), [](double x) { return -x; }));
      return Value::of_tensor(zip_int(t, t, t.type, [](int64_t x, int64_t) { return static_cast<int64_t>(0ull - static_cast<uint64_t>(x)); }));
    case UnaryOpKind::Invert:
      if (t.is_float()) fail(span, "'~' needs an integer tensor, not " + t.type.str());
      return Value::of_tensor(zip_int(t, t, t.type, [](int64_t x, int64_t) { return ~x; }));
    case UnaryOpKind::Not: break;
  }
  fail(span, "unsupported operator");
}

Value Evaluator::compare(CompareOpKind op, const Value &a, const Value &b, const SourceSpan &span) {
  if (op == CompareOpKind::Is || op == CompareOpKind::IsNot) {
    bool same;
    if (a.kind == Value::Kind::None || b.kind == Value::Kind::None) same = a.kind == b.kind;
    else if (a.kind == Value::Kind::DType && b.kind == Value::Kind::DType) same = a.dtype == b.dtype && a.b == b.b;
    else if (a.kind == Value::Kind::Bool && b.kind == Value::Kind::Bool) same = a.b == b.b;
    else fail(span, "'is' is only supported with None, True, False and dtypes");
    return Value::of_bool(op == CompareOpKind::Is ? same : !same);
  }
  if (op == CompareOpKind::In || op == CompareOpKind::NotIn) {
    if (b.kind != Value::Kind::Tuple) fail(span, "'in' needs a tuple or list of constants on its right");
    bool found = false;
    for (const Value &e : *b.elems) found |= truth(compare(CompareOpKind::Eq, a, e, span), span);
    return Value::of_bool(op == CompareOpKind::In ? found : !found);
  }
  // Tuples (shapes): Python's element-wise equality.
  if (a.kind == Value::Kind::Tuple && b.kind == Value::Kind::Tuple &&
      (op == CompareOpKind::Eq || op == CompareOpKind::NotEq)) {
    bool eq = a.elems->size() == b.elems->size();
    for (size_t k = 0; eq && k < a.elems->size(); ++k)
      eq = truth(compare(CompareOpKind::Eq, (*a.elems)[k], (*b.elems)[k], span), span);
    return Value::of_bool(op == CompareOpKind::Eq ? eq : !eq);
  }
  // Constants: Python comparison.
  auto python_level = [](const Value &v) {
    return v.is_python_number() || v.kind == Value::Kind::Str || v.kind == Value::Kind::None ||
           v.kind == Value::Kind::DType;
  };
  if (python_level(a) && python_level(b)) {
    if (a.kind == Value::Kind::Str || b.kind == Value::Kind::Str || a.kind == Value::Kind::None ||
        b.kind == Value::Kind::None || a.kind == Value::Kind::DType || b.kind == Value::Kind::DType) {
      bool eq = a.kind == b.kind && (a.kind != Value::Kind::Str || a.s == b.s) &&
                (a.kind != Value::Kind::DType || (a.dtype == b.dtype && a.b == b.b));
      if (op == CompareOpKind::Eq) return Value::of_bool(eq);
      if (op == CompareOpKind::NotEq) return Value::of_bool(!eq);
      fail(span, "only == and != compare strings, None and dtypes");
    }
    double x = py_float(a), y = py_float(b);
    bool exact_ints = a.kind != Value::Kind::Float && b.kind != Value::Kind::Float;
    long long p = exact_ints ? py_int(a) : 0, q = exact_ints ? py_int(b) : 0;
    bool r = false;
    switch (op) {
      case CompareOpKind::Lt: r = exact_ints ? p < q : x < y; break;
      case CompareOpKind::Gt: r = exact_ints ? p > q : x > y; break;
      case CompareOpKind::LtE: r = exact_ints ? p <= q : x <= y; break;
      case CompareOpKind::GtE: r = exact_ints ? p >= q : x >= y; break;
      case CompareOpKind::Eq: r = exact_ints ? p == q : x == y; break;
      case CompareOpKind::NotEq: r = exact_ints ? p != q : x != y; break;
      default: break;
    }
    return Value::of_bool(r);
  }
  TensorRef ta = to_tensor(a, span), tb = to_tensor(b, span);
  TensorRef x, y;
  if (ta->type.is_pointer || tb->type.is_pointer) {
    if (ta->type != tb->type) fail(span, "cannot compare " + ta->type_str() + " with " + tb->type_str());
    std::optional<Shape> shape = broadcast_shape(ta->shape, tb->shape);
    if (!shape) fail(span, "shapes " + shape_str(ta->shape) + " and " + shape_str(tb->shape) + " cannot be broadcast together");
    x = broadcast(ta, *shape, span);
    y = broadcast(tb, *shape, span);
  } else {
    std::tie(x, y) = promote_pair(a, b, false, span);
  }
  std::function<bool(double, double)> fc;
  std::function<bool(int64_t, int64_t)> ic;
  switch (op) {
    case CompareOpKind::Lt: fc = [](double p, double q) { return p < q; }; ic = [](int64_t p, int64_t q) { return p < q; }; break;
    case CompareOpKind::Gt: fc = [](double p, double q) { return p > q; }; ic = [](int64_t p, int64_t q) { return p > q; }; break;
    case CompareOpKind::LtE: fc = [](double p, double q) { return p <= q; }; ic = [](int64_t p, int64_t q) { return p <= q; }; break;
    case CompareOpKind::GtE: fc = [](double p, double q) { return p >= q; }; ic = [](int64_t p, int64_t q) { return p >= q; }; break;
    case CompareOpKind::Eq: fc = [](double p, double q) { return p == q; }; ic = [](int64_t p, int64_t q) { return p == q; }; break;
    default: fc = [](double p, double q) { return p != q; }; ic = [](int64_t p, int64_t q) { return p != q; }; break;
  }
  // Unsigned 32-bit and narrower values are stored non-negative, so signed
  // int64 comparison orders them correctly; uint64 is handled in compare().
  return Value::of_tensor(interp::compare(*x, *y, fc, ic));
}

}  // namespace tgrad::interp
