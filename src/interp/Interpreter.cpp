// The interpreter's public entry points: binding launch arguments, running
// the grid program by program, and turning runtime errors into diagnostics.
#include "tgrad/interp/Interpreter.h"

#include "src/lower/BlockPointers.h"
#include "src/lower/InlineCalls.h"
#include "src/lower/ModuleNamespaces.h"

#include "src/interp/Evaluator.h"

namespace tgrad::interp {

using sema::DType;
using sema::ElemType;

// ------------------------------------------------------------------ Value

Value Value::of_bool(bool v) {
  Value r;
  r.kind = Kind::Bool;
  r.b = v;
  return r;
}
Value Value::of_int(long long v) {
  Value r;
  r.kind = Kind::Int;
  r.n = v;
  return r;
}
Value Value::of_float(double v) {
  Value r;
  r.kind = Kind::Float;
  r.x = v;
  return r;
}
Value Value::of_str(std::string v) {
  Value r;
  r.kind = Kind::Str;
  r.s = std::move(v);
  return r;
}
Value Value::of_dtype(sema::DType d) {
  Value r;
  r.kind = Kind::DType;
  r.dtype = d;
  return r;
}
Value Value::of_tensor(TensorRef t) {
  Value r;
  r.kind = Kind::Tensor;
  r.t = std::move(t);
  return r;
}
Value Value::of_tuple(std::vector<Value> v) {
  Value r;
  r.kind = Kind::Tuple;
  r.elems = std::make_shared<std::vector<Value>>(std::move(v));
  return r;
}
Value Value::of_function(const ast::Function *f) {
  Value r;
  r.kind = Kind::Function;
  r.fn = f;
  return r;
}
Value Value::of_namespace(std::string name) {
  Value r;
  r.kind = Kind::Namespace;
  r.s = std::move(name);
  return r;
}
Value Value::of_builtin(std::string name, std::shared_ptr<Value> self) {
  Value r;
  r.kind = Kind::Builtin;
  r.s = std::move(name);
  r.self = std::move(self);
  return r;
}

std::string Value::describe() const {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return b ? "True" : "False";
    case Kind::Int: return "the int " + std::to_string(n);
    case Kind::Float: return "the float " + std::to_string(x);
    case Kind::Str: return "the string '" + s + "'";
    case Kind::DType: return std::string("the dtype ") + (b ? "*" : "") + sema::short_name(dtype);
    case Kind::Tensor: return (t->shape.empty() ? "a scalar " : "a tensor ") + t->type_str();
    case Kind::Tuple: return "a tuple of " + std::to_string(elems->size());
    case Kind::Function: return "the jit function '" + fn->name + "'";
    case Kind::Namespace: return "the module '" + s + "'";
    case Kind::Builtin: return "the function '" + s + "'";
    case Kind::Slice: return "a slice";
  }
  return "a value";
}

// ----------------------------------------------------------------- Memory

int64_t Memory::add(Buffer b) {
  buffers_.push_back(std::move(b));
  return base_address(buffers_.size() - 1);
}

std::optional<std::pair<size_t, int64_t>> Memory::resolve(int64_t address) const {
  int64_t index = (address >> kShift) - 1;
  if (index < 0 || index >= static_cast<int64_t>(buffers_.size())) return std::nullopt;
  return std::make_pair(static_cast<size_t>(index), address & ((int64_t{1} << kShift) - 1));
}

Value make_tensor(DType dtype, const Shape &shape, const std::vector<double> &values, bool float64) {
  auto t = std::make_shared<Tensor>();
  t->type = ElemType{dtype, false};
  t->shape = shape;
  for (double v : values) {
    if (t->is_float()) t->f.push_back(round_float(dtype, v, float64));
    else t->i.push_back(wrap_int(dtype, static_cast<int64_t>(v)));
  }
  return Value::of_tensor(t);
}

// ------------------------------------------------------------ entry points

namespace {

void report(const RuntimeError &e, const Evaluator &ev, DiagEngine &diags) {
  diags.error(e.span, e.message);
  // The calls that led here, innermost first, after the outermost (the kernel itself).
  const std::vector<CallSite> &stack = ev.error_stack();
  for (size_t k = stack.size(); k-- > 1;)
    diags.note(stack[k].span, "in the call of '" + stack[k].callee + "' here");
}

const ast::Function *find(const ast::Module &m, const std::string &name, DiagEngine &diags) {
  if (const ast::Function *f = m.find_function(name)) return f;
  std::string names;
  for (const auto &f : m.functions) names += (names.empty() ? "" : ", ") + f->name;
  diags.error({}, "no @triton.jit function '" + name + "' (the file has: " + (names.empty() ? "none" : names) + ")");
  return nullptr;
}

}  // namespace

bool run_kernel(const ast::Module &written_module, const Launch &launch, Memory &memory, const RunOptions &options,
                DiagEngine &diags) {
  // Calls into user modules imported as namespaces call the copies read (src/lower/ModuleNamespaces.h).
  std::unique_ptr<ast::Module> resolved = lower::with_namespace_calls_resolved(written_module);
  const ast::Module &user_module = resolved ? *resolved : written_module;
  // Block pointers run as the pointer arithmetic they stand for (src/lower/BlockPointers.h), helpers that
  // make them inlined first with the launch's constexpr values, as reverse mode reads the kernel
  // (src/lower/InlineCalls.h: a helper may return a tensor descriptor).
  std::unique_ptr<ast::Module> inlined, lowered;
  if (lower::uses_block_pointers(user_module)) {
    sema::ParamTypes known;
    for (const auto &[name, arg] : launch.args) {
      if (arg.kind != KernelArg::Kind::Constexpr) continue;
      const Value &v = arg.constexpr_value;
      if (v.kind == Value::Kind::Bool) known[name] = sema::SType::of_bool(v.b);
      else if (v.kind == Value::Kind::Int) known[name] = sema::SType::of_int(v.n);
      else if (v.kind == Value::Kind::Str) known[name] = sema::SType::of_str(v.s);
      else if (v.kind == Value::Kind::None) known[name] = sema::SType::none();
    }
    inlined = lower::inline_memory_helpers(user_module, launch.kernel, diags, known);
    if (diags.has_errors()) return false;
  }
  const ast::Module *lowered_or_user =
      lower::with_block_pointers_lowered(inlined ? *inlined : user_module, launch.kernel, diags, lowered);
  if (!lowered_or_user) return false;
  const ast::Module &module = *lowered_or_user;
  const ast::Function *fn = find(module, launch.kernel, diags);
  if (!fn) return false;
  std::map<std::string, Value> args;
  for (size_t k = 0; k < fn->params.size(); ++k) {
    const ast::Param &p = fn->params[k];
    auto it = launch.args.find(p.name);
    if (it == launch.args.end()) {
      if (p.default_value) continue;  // the evaluator fills defaults
      diags.error(p.span, fn->is_constexpr_param(k)
                              ? "tl.constexpr parameter '" + p.name + "' needs a value: -D " + p.name + "=..."
                              : "parameter '" + p.name + "' needs a value: --arg " + p.name + "=...");
      continue;
    }
    const KernelArg &a = it->second;
    if (fn->is_constexpr_param(k) != (a.kind == KernelArg::Kind::Constexpr) && a.kind != KernelArg::Kind::None) {
      diags.error(p.span, fn->is_constexpr_param(k)
                              ? "'" + p.name + "' is tl.constexpr: give it with -D " + p.name + "=VALUE, not --arg"
                              : "'" + p.name + "' is a runtime parameter: give it with --arg " + p.name + "=..., not -D");
      continue;
    }
    switch (a.kind) {
      case KernelArg::Kind::Buffer: {
        const Buffer &b = memory.buffers().at(a.buffer);
        args[p.name] = Value::of_tensor(make_scalar(ElemType{b.dtype, true}, 0, Memory::base_address(a.buffer), options.float64));
        break;
      }
      case KernelArg::Kind::Int:
        // Triton specializes integer arguments as i32 when they fit, else i64.
        args[p.name] = Value::of_tensor(make_scalar(
            ElemType{a.n >= INT32_MIN && a.n <= INT32_MAX ? DType::Int32 : DType::Int64, false}, 0, a.n, options.float64));
        break;
      case KernelArg::Kind::Float:
        args[p.name] = Value::of_tensor(make_scalar(ElemType{DType::FP32, false}, a.x, 0, options.float64));
        break;
      case KernelArg::Kind::Constexpr: args[p.name] = a.constexpr_value; break;
      case KernelArg::Kind::None: args[p.name] = Value::none(); break;
    }
  }
  for (const auto &kv : launch.args) {
    bool known = false;
    for (const ast::Param &p : fn->params) known |= p.name == kv.first;
    if (!known) diags.error(fn->name_span, "'" + fn->name + "' has no parameter '" + kv.first + "'");
  }
  for (int d = 0; d < 3; ++d)
    if (launch.grid[d] < 1) diags.error({}, "every grid dimension must be at least 1");
  if (diags.has_errors()) return false;

  Evaluator ev(module, memory, options);
  try {
    for (int64_t z = 0; z < launch.grid[2]; ++z)
      for (int64_t y = 0; y < launch.grid[1]; ++y)
        for (int64_t x = 0; x < launch.grid[0]; ++x) {
          ev.set_program({x, y, z}, launch.grid);
          Value result = ev.call(*fn, args, fn->name_span);
          if (result.kind != Value::Kind::None) {
            diags.error(fn->name_span, "a kernel launched over a grid must not return a value");
            return false;
          }
        }
  } catch (const RuntimeError &e) {
    report(e, ev, diags);
    return false;
  }
  return true;
}

std::optional<std::vector<Value>> run_function(const ast::Module &written_module, const std::string &name,
                                               const std::map<std::string, Value> &args, Memory &memory,
                                               const RunOptions &options, DiagEngine &diags) {
  std::unique_ptr<ast::Module> resolved = lower::with_namespace_calls_resolved(written_module);
  const ast::Module &user_module = resolved ? *resolved : written_module;
  std::unique_ptr<ast::Module> lowered;
  const ast::Module *lowered_or_user = lower::with_block_pointers_lowered(user_module, name, diags, lowered);
  if (!lowered_or_user) return std::nullopt;
  const ast::Module &module = *lowered_or_user;
  const ast::Function *fn = find(module, name, diags);
  if (!fn) return std::nullopt;
  Evaluator ev(module, memory, options);
  try {
    Value r = ev.call(*fn, args, fn->name_span);
    if (r.kind == Value::Kind::Tuple) return *r.elems;
    return std::vector<Value>{r};
  } catch (const RuntimeError &e) {
    report(e, ev, diags);
    return std::nullopt;
  }
}

}  // namespace tgrad::interp
