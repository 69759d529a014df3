#include "src/interp/Evaluator.h"

#include <algorithm>
#include <cmath>

namespace tgrad::interp {

using namespace ast;
using sema::DType;
using sema::ElemType;

Evaluator::Evaluator(const Module &module, Memory &memory, const RunOptions &options)
    : module_(module), memory_(memory), options_(options) {}

void Evaluator::fail(const SourceSpan &span, const std::string &message) {
  error_stack_ = stack_;
  throw RuntimeError{span, message};
}

// ----------------------------------------------------------------- calls

Value Evaluator::call(const Function &fn, const std::map<std::string, Value> &args, const SourceSpan &call_span) {
  if (stack_.size() >= 64) fail(call_span, "jit function calls nested more than 64 deep (recursion is not supported by Triton)");
  stack_.push_back({call_span, fn.name});
  Frame frame;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const Param &p = fn.params[k];
    auto it = args.find(p.name);
    if (it != args.end()) {
      frame.vars[p.name] = it->second;
    } else if (p.default_value) {
      Frame empty;
      frame.vars[p.name] = eval(*p.default_value, empty);
    } else {
      fail(call_span, "missing argument '" + p.name + "' of '" + fn.name + "'");
    }
    const Value &v = frame.vars[p.name];
    if (fn.is_constexpr_param(k) && v.kind == Value::Kind::Tensor)
      fail(call_span, "argument '" + p.name + "' of '" + fn.name + "' is tl.constexpr but its value (" + v.describe() +
                          ") is not known before the kernel runs");
  }
  for (const auto &kv : args) {
    bool known = false;
    for (const Param &p : fn.params) known |= p.name == kv.first;
    if (!known) fail(call_span, "'" + fn.name + "' has no parameter '" + kv.first + "'");
  }
  exec_block(fn.body, frame);
  stack_.pop_back();
  return frame.result;
}

// ------------------------------------------------------------- statements

Evaluator::Flow Evaluator::exec_block(const StmtList &body, Frame &frame) {
  for (const StmtPtr &s : body)
    if (exec(*s, frame) == Flow::Return) return Flow::Return;
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt &s, Frame &frame) {
  switch (s.kind) {
    case NodeKind::ExprStmt: eval(*cast<ExprStmt>(&s)->value, frame); return Flow::Normal;
    case NodeKind::Assign: {
      auto *n = cast<Assign>(&s);
      Value v = eval(*n->value, frame);
      for (const ExprPtr &t : n->targets) assign(*t, v, frame);
      return Flow::Normal;
    }
    case NodeKind::AugAssign: {
      auto *n = cast<AugAssign>(&s);
      if (!isa<Name>(n->target.get())) fail(n->target->span, "augmented assignment to this target is not supported");
      Value current = eval(*n->target, frame);
      Value v = binary(n->op, current, eval(*n->value, frame), s.span);
      assign(*n->target, v, frame);
      return Flow::Normal;
    }
    case NodeKind::AnnAssign: {
      auto *n = cast<AnnAssign>(&s);
      if (n->value) assign(*n->target, eval(*n->value, frame), frame);
      return Flow::Normal;
    }
    case NodeKind::If: {
      auto *n = cast<If>(&s);
      return truth(eval(*n->cond, frame), n->cond->span) ? exec_block(n->body, frame) : exec_block(n->orelse, frame);
    }
    case NodeKind::For: return exec_for(*cast<For>(&s), frame);
    case NodeKind::While: {
      auto *n = cast<While>(&s);
      // Its trips are counted as a for loop's: reverse mode differentiates a stepped while loop as a counted for
      // loop at the same place (src/ad/WhileLoops.h), whose tapes need the most trips any program runs.
      int64_t trips = 0;
      while (truth(eval(*n->cond, frame), n->cond->span)) {
        count_iteration(s.span);
        ++trips;
        if (exec_block(n->body, frame) == Flow::Return) {
          record_trips(s.span, trips);
          return Flow::Return;
        }
      }
      record_trips(s.span, trips);
      return Flow::Normal;
    }
    case NodeKind::Return: {
      auto *n = cast<Return>(&s);
      frame.result = n->value ? eval(*n->value, frame) : Value::none();
      return Flow::Return;
    }
    case NodeKind::Pass: return Flow::Normal;
    case NodeKind::Assert: {
      auto *n = cast<Assert>(&s);
      Value cond = eval(*n->test, frame);
      bool ok;
      if (is_tensor(cond)) {
        TensorRef t = cond.t;
        ok = true;
        for (int64_t k = 0; k < t->size(); ++k) ok &= t->as_double(k) != 0;
      } else {
        ok = truth(cond, n->test->span);
      }
      if (!ok) {
        std::string msg = "assertion failed";
        if (n->msg) {
          Value m = eval(*n->msg, frame);
          if (m.kind == Value::Kind::Str) msg += ": " + m.s;
        }
        fail(n->test->span, msg);
      }
      return Flow::Normal;
    }
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
      break;
  }
  return Flow::Normal;
}

void Evaluator::assign(const Expr &target, const Value &value, Frame &frame) {
  if (auto *n = dyn_cast<Name>(&target)) {
    frame.vars[n->id] = value;
    return;
  }
  const ExprList *elts = nullptr;
  if (auto *t = dyn_cast<Tuple>(&target)) elts = &t->elts;
  if (auto *l = dyn_cast<List>(&target)) elts = &l->elts;
  if (elts) {
    if (value.kind != Value::Kind::Tuple)
      fail(target.span, "cannot unpack " + value.describe() + " into " + std::to_string(elts->size()) + " names");
    if (value.elems->size() != elts->size())
      fail(target.span, "cannot unpack " + std::to_string(value.elems->size()) + " values into " +
                            std::to_string(elts->size()) + " names");
    for (size_t k = 0; k < elts->size(); ++k) assign(*(*elts)[k], (*value.elems)[k], frame);
    return;
  }
  fail(target.span, "assignment to subscripts or attributes is not supported in a @triton.jit function");
}

void Evaluator::count_iteration(const SourceSpan &span) {
  if (++loop_iterations_ > options_.max_loop_iterations)
    fail(span, "loop stopped after " + std::to_string(options_.max_loop_iterations) +
                   " iterations in one program (a kernel that never ends?); raise the limit with --max-iterations");
}

Evaluator::Flow Evaluator::exec_for(const For &s, Frame &frame) {
  auto *call = dyn_cast<Call>(s.iter.get());
  if (!call) fail(s.iter->span, "a for loop in a @triton.jit function must iterate over range, tl.range or tl.static_range");
  Value fn = eval(*call->func, frame);
  std::string name = fn.kind == Value::Kind::Builtin ? fn.s : "";
  bool is_static = name == "tl.static_range";
  if (name != "range" && name != "tl.range" && !is_static)
    fail(s.iter->span, "a for loop in a @triton.jit function must iterate over range, tl.range or tl.static_range");
  std::vector<Value> bounds;
  for (const ExprPtr &a : call->args) bounds.push_back(eval(*a, frame));
  for (const Keyword &k : call->keywords) {
    // Scheduling hints (num_stages, loop_unroll_factor, ...) do not change results.
    if (k.name == "start" || k.name == "end" || k.name == "stop" || k.name == "step")
      fail(k.name_span, "pass the bounds of " + name + " positionally");
    eval(*k.value, frame);
  }
  if (bounds.empty() || bounds.size() > 3) fail(call->span, name + " takes 1 to 3 bounds");
  std::vector<long long> b;
  for (size_t k = 0; k < bounds.size(); ++k) {
    if (is_static && !bounds[k].is_python_number())
      fail(call->args[k]->span, "tl.static_range needs bounds known before the kernel runs (tl.constexpr)");
    b.push_back(to_int(bounds[k], call->args[k]->span, "a loop bound"));
  }
  long long start = b.size() == 1 ? 0 : b[0], stop = b.size() == 1 ? b[0] : b[1], step = b.size() == 3 ? b[2] : 1;
  if (step == 0) fail(call->span, name + " step must not be zero");
  auto *var = dyn_cast<Name>(s.target.get());
  if (!var) fail(s.target->span, "the loop variable must be a single name");
  // The loop index of a runtime loop is an int32 tensor (int64 if a bound
  // is); of tl.static_range a Python int.
  DType index_type = DType::Int32;
  for (const Value &v : bounds)
    if (is_tensor(v) && v.t->type.dtype == DType::Int64) index_type = DType::Int64;
  int64_t trips = 0;
  for (long long i = start; step > 0 ? i < stop : i > stop; i += step) {
    count_iteration(s.span);
    ++trips;
    frame.vars[var->id] =
        is_static ? Value::of_int(i) : Value::of_tensor(make_scalar(ElemType{index_type, false}, 0, i, float64()));
    if (exec_block(s.body, frame) == Flow::Return) {
      if (!is_static) record_trips(s.span, trips);
      return Flow::Return;
    }
  }
  if (!is_static) record_trips(s.span, trips);
  return Flow::Normal;
}

void Evaluator::record_trips(const SourceSpan &loop, int64_t trips) {
  if (!options_.loop_trips) return;
  int64_t &most = (*options_.loop_trips)[{loop.begin.line, loop.begin.column}];
  most = std::max(most, trips);
}

// ------------------------------------------------------------ expressions

Value Evaluator::eval(const Expr &e, Frame &frame) {
  switch (e.kind) {
    case NodeKind::Name: return eval_name(*cast<Name>(&e), frame);
    case NodeKind::IntLit: {
      uint64_t v = cast<IntLit>(&e)->value;
      if (v > static_cast<uint64_t>(INT64_MAX)) fail(e.span, "integer literal does not fit in int64");
      return Value::of_int(static_cast<long long>(v));
    }
    case NodeKind::FloatLit: return Value::of_float(cast<FloatLit>(&e)->value);
    case NodeKind::BoolLit: return Value::of_bool(cast<BoolLit>(&e)->value);
    case NodeKind::NoneLit: return Value::none();
    case NodeKind::StrLit: return Value::of_str(cast<StrLit>(&e)->value);
    case NodeKind::EllipsisLit: fail(e.span, "'...' is not supported by the interpreter");
    case NodeKind::Attribute: return eval_attribute(*cast<Attribute>(&e), frame);
    case NodeKind::Subscript: return eval_subscript(*cast<Subscript>(&e), frame);
    case NodeKind::Slice: {
      auto *s = cast<Slice>(&e);
      if (s->lower || s->upper || s->step) fail(e.span, "only ':' (a whole axis) is supported as a slice");
      Value v;
      v.kind = Value::Kind::Slice;
      return v;
    }
    case NodeKind::Call: return eval_call(*cast<Call>(&e), frame);
    case NodeKind::UnaryOp: {
      auto *n = cast<UnaryOp>(&e);
      return unary(n->op, eval(*n->operand, frame), e.span);
    }
    case NodeKind::BinOp: {
      auto *n = cast<BinOp>(&e);
      Value a = eval(*n->lhs, frame);
      return binary(n->op, a, eval(*n->rhs, frame), e.span);
    }
    case NodeKind::BoolOp: {
      auto *n = cast<BoolOp>(&e);
      // Python's short-circuit on values known before the kernel runs and on
      // Triton scalars; on int1 tiles element-wise, as & and | (sema typed them).
      Value v, tiles;
      for (const ExprPtr &x : n->values) {
        v = eval(*x, frame);
        if (is_tensor(v) && !v.t->shape.empty()) {
          tiles = tiles.kind == Value::Kind::None ? v
                                                  : binary(n->op == BoolOpKind::And ? BinaryOpKind::BitAnd : BinaryOpKind::BitOr,
                                                           tiles, v, x->span);
          continue;
        }
        bool t = truth(v, x->span);
        if (n->op == BoolOpKind::And ? !t : t) return v;
      }
      return tiles.kind == Value::Kind::None ? v : tiles;
    }
    case NodeKind::Compare: {
      auto *n = cast<Compare>(&e);
      Value left = eval(*n->left, frame);
      if (n->ops.size() > 1) {
        // Python chains are fine on constants; Triton rejects them on tensors.
        Value result = Value::of_bool(true);
        for (size_t k = 0; k < n->ops.size(); ++k) {
          Value right = eval(*n->comparators[k], frame);
          if (is_tensor(left) || is_tensor(right))
            fail(e.span, "chained comparisons are not supported by Triton on tensors; combine two comparisons with '&'");
          result = compare(n->ops[k], left, right, e.span);
          if (!truth(result, e.span)) return result;
          left = right;
        }
        return result;
      }
      return compare(n->ops[0], left, eval(*n->comparators[0], frame), e.span);
    }
    case NodeKind::IfExp: {
      auto *n = cast<IfExp>(&e);
      return truth(eval(*n->cond, frame), n->cond->span) ? eval(*n->then_value, frame) : eval(*n->else_value, frame);
    }
    case NodeKind::Tuple:
    case NodeKind::List: {
      const ExprList &elts = isa<Tuple>(&e) ? cast<Tuple>(&e)->elts : cast<List>(&e)->elts;
      std::vector<Value> vs;
      for (const ExprPtr &x : elts) vs.push_back(eval(*x, frame));
      return Value::of_tuple(std::move(vs));
    }
#define TGRAD_STMT(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
      break;
  }
  fail(e.span, "unsupported expression");
}

Value Evaluator::eval_name(const Name &n, Frame &frame) {
  auto it = frame.vars.find(n.id);
  if (it != frame.vars.end()) return it->second;
  return global(n.id, n.span);
}

Value Evaluator::global(const std::string &name, const SourceSpan &span) {
  auto cached = globals_.find(name);
  if (cached != globals_.end()) return cached->second;
  for (const Constant &c : module_.constants)
    if (c.name == name) {
      Frame empty;
      const Stmt &s = *c.stmt;
      const Expr *value = isa<AnnAssign>(&s) ? cast<AnnAssign>(&s)->value.get() : cast<Assign>(&s)->value.get();
      Value v = eval(*value, empty);
      // NAME = tl.constexpr(v) evaluates to v itself.
      globals_[name] = v;
      return v;
    }
  if (const Function *f = module_.find_function(name)) return Value::of_function(f);
  sema::ImportedName imported = sema::resolve_import(module_, name);
  if (imported.bound) {
    if (imported.target) return known_value(*imported.target);
    if (imported.known_module)
      fail(span, "'" + imported.member + "' is imported from '" + imported.module + "', but tgrad does not know that function yet");
    fail(span, "'" + name + "' is imported from '" + imported.module +
                   "', which the interpreter cannot load (only triton, triton.language, its math and libdevice "
                   "modules, and math are known)");
  }
  if (std::optional<Value> v = namespace_member("builtins", name)) return *v;
  fail(span, "name '" + name + "' is not defined");
}

Value Evaluator::eval_attribute(const Attribute &a, Frame &frame) {
  Value base = eval(*a.value, frame);
  switch (base.kind) {
    case Value::Kind::Namespace: {
      if (std::optional<Value> v = namespace_member(base.s, a.attr)) return *v;
      fail(a.span, "'" + base.s + "." + a.attr + "' is not supported by tgrad's interpreter");
    }
    case Value::Kind::Tensor: {
      const Tensor &t = *base.t;
      if (a.attr == "shape") {
        std::vector<Value> dims;
        for (int64_t d : t.shape) dims.push_back(Value::of_int(d));
        return Value::of_tuple(std::move(dims));
      }
      if (a.attr == "dtype" || a.attr == "type") {
        Value d = Value::of_dtype(t.type.dtype);
        d.b = t.type.is_pointer;  // a pointer type: its element_ty is the dtype
        // `x.type` is the tensor's type: its element_ty is the element type
        // even when x holds no pointers.
        if (a.attr == "type") d.s = "type";
        return d;
      }
      if (a.attr == "T") {
        if (t.shape.size() != 2) fail(a.span, ".T needs a 2-D tensor");
        return Value::of_tensor(permute(t, {1, 0}));
      }
      if (a.attr == "numel") {
        long long count = 1;
        for (int64_t d : t.shape) count *= d;
        return Value::of_int(count);
      }
      return Value::of_builtin("tensor." + a.attr, std::make_shared<Value>(base));
    }
    case Value::Kind::DType: {
      if (a.attr == "element_ty" || (a.attr == "scalar" && base.s == "type")) {
        if (!base.b && base.s != "type")
          fail(a.span, std::string("'") + sema::short_name(base.dtype) + "' is not a pointer type");
        Value element = Value::of_dtype(base.dtype);
        if (a.attr == "scalar") element.b = base.b;
        return element;
      }
      if (a.attr == "primitive_bitwidth") return Value::of_int(base.b ? 64 : sema::bits(base.dtype));
      if (a.attr == "value") return base;  // (a constexpr's value: what it wraps)
      if (!base.b && base.s != "type") {
        if (a.attr == "int_bitwidth" && sema::kind(base.dtype) != sema::DKind::Float) return Value::of_int(sema::bits(base.dtype));
        if (a.attr == "fp_mantissa_width")
          if (const std::optional<int> width = sema::fp_mantissa_width(base.dtype)) return Value::of_int(*width);
      }
      return Value::of_builtin("dtype." + a.attr, std::make_shared<Value>(base));
    }
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::Bool:
      // `i.to(tl.int64)` on a constexpr number: a scalar tensor, then the cast (as Triton does).
      if (a.attr == "to") return Value::of_builtin("tensor.to", std::make_shared<Value>(Value::of_tensor(to_tensor(base, a.span))));
      [[fallthrough]];
    default: fail(a.span, base.describe() + " has no attribute '" + a.attr + "'");
  }
}

Value Evaluator::eval_subscript(const Subscript &s, Frame &frame) {
  Value base = eval(*s.value, frame);
  std::vector<Value> idx;
  for (const ExprPtr &i : s.indices) idx.push_back(eval(*i, frame));
  if (base.kind == Value::Kind::Tuple) {
    if (idx.size() != 1) fail(s.span, "a tuple takes one index");
    long long k = to_int(idx[0], s.indices[0]->span, "a tuple index");
    long long n = static_cast<long long>(base.elems->size());
    if (k < -n || k >= n) fail(s.indices[0]->span, "tuple index " + std::to_string(k) + " out of range");
    return (*base.elems)[k < 0 ? k + n : k];
  }
  if (!is_tensor(base)) fail(s.value->span, base.describe() + " cannot be indexed");
  // Triton 3.6's indexing (as sema types it): the k-th index, None, inserts an axis of size 1 at position k of
  // the shape so far (past its end: at the end); ':' keeps what is there.
  Shape shape = base.t->shape;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (idx[k].kind == Value::Kind::None)
      shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(std::min(k, shape.size())), 1);
    else if (idx[k].kind != Value::Kind::Slice)
      fail(s.indices[k]->span, "tensors can only be indexed with ':' and None in Triton");
  }
  return Value::of_tensor(reshape(*base.t, shape));
}

Value Evaluator::eval_call(const Call &c, Frame &frame) {
  Value callee = eval(*c.func, frame);
  std::vector<Value> args;
  for (const ExprPtr &a : c.args) args.push_back(eval(*a, frame));
  std::map<std::string, Value> kwargs;
  for (const Keyword &k : c.keywords) kwargs[k.name] = eval(*k.value, frame);
  if (callee.kind == Value::Kind::Function) {
    const Function &fn = *callee.fn;
    if (args.size() > fn.params.size())
      fail(c.span, "'" + fn.name + "' takes " + std::to_string(fn.params.size()) + " arguments, " +
                       std::to_string(args.size()) + " given");
    std::map<std::string, Value> bound;
    for (size_t k = 0; k < args.size(); ++k) bound[fn.params[k].name] = args[k];
    for (auto &kv : kwargs) {
      if (bound.count(kv.first)) fail(c.span, "'" + fn.name + "' got two values for '" + kv.first + "'");
      bound[kv.first] = kv.second;
    }
    return call(fn, bound, c.span);
  }
  if (callee.kind == Value::Kind::Builtin) return call_builtin(callee, std::move(args), std::move(kwargs), c.span);
  fail(c.func->span, callee.describe() + " is not callable");
}

// ------------------------------------------------------- Python conversions

bool Evaluator::truth(const Value &v, const SourceSpan &span) {
  switch (v.kind) {
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Int: return v.n != 0;
    case Value::Kind::Float: return v.x != 0;
    case Value::Kind::Str: return !v.s.empty();
    case Value::Kind::Tensor:
      if (!v.t->shape.empty())
        fail(span, "a condition must be a scalar, not a tensor of shape " + shape_str(v.t->shape) +
                       "; use tl.where for element-wise choice");
      return v.t->as_double(0) != 0;
    case Value::Kind::Tuple: return !v.elems->empty();
    default: return true;
  }
}

long long Evaluator::to_int(const Value &v, const SourceSpan &span, const std::string &what) {
  if (v.kind == Value::Kind::Int) return v.n;
  if (v.kind == Value::Kind::Bool) return v.b;
  if (is_tensor(v) && v.t->shape.empty() && !v.t->is_float() && !v.t->type.is_pointer) return v.t->i[0];
  fail(span, what + " must be an integer, not " + v.describe());
}

TensorRef Evaluator::to_tensor(const Value &v, const SourceSpan &span) {
  switch (v.kind) {
    case Value::Kind::Tensor: return v.t;
    case Value::Kind::Bool: return make_scalar(ElemType{DType::Int1, false}, 0, v.b, float64());
    case Value::Kind::Int: {
      DType t = sema::python_int_dtype(v.n);
      return make_scalar(ElemType{t, false}, 0, v.n, float64());
    }
    case Value::Kind::Float:
      return make_scalar(ElemType{sema::python_float_dtype(v.x), false}, v.x, 0, float64());
    default: fail(span, "expected a tensor or a number, got " + v.describe());
  }
}

std::vector<int64_t> Evaluator::to_shape(const Value &v, const SourceSpan &span) {
  std::vector<int64_t> shape;
  if (v.kind == Value::Kind::Tuple) {
    for (const Value &d : *v.elems) {
      if (!d.is_python_number() || d.kind == Value::Kind::Float)
        fail(span, "a shape needs integers known before the kernel runs (tl.constexpr), got " + d.describe());
      shape.push_back(to_int(d, span, "a shape dimension"));
    }
  } else if (v.kind == Value::Kind::Int) {
    shape.push_back(v.n);
  } else {
    fail(span, "expected a shape (a list of tl.constexpr integers), got " + v.describe());
  }
  for (int64_t d : shape)
    if (d <= 0 || (d & (d - 1)) != 0)
      fail(span, "shape " + shape_str(shape) + ": every dimension of a Triton tensor must be a power of 2");
  return shape;
}

TensorRef Evaluator::broadcast(const TensorRef &t, const Shape &shape, const SourceSpan &span) {
  try {
    return broadcast_to(t, shape);
  } catch (const OpError &e) {
    fail(span, e.message);
  }
}

}  // namespace tgrad::interp
