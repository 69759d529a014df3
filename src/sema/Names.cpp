#include "tgrad/sema/Names.h"

#include "tgrad/ast/Walk.h"

#include <cctype>
#include <cmath>
#include <functional>
#include <set>

namespace tgrad::sema {

namespace {

const std::set<std::string> kTlFunctions = {
    "program_id", "num_programs", "arange", "zeros", "zeros_like", "full", "cdiv", "load", "store", "atomic_add",
    "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas", "where",
    "maximum", "minimum", "clamp", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "abs",
    "erf", "floor", "ceil", "sigmoid", "softmax", "fma", "fdiv", "div_rn", "sum", "max", "min", "argmax", "argmin",
    "cumsum", "cumprod", "dot", "trans", "permute", "reshape", "view", "expand_dims", "broadcast_to", "broadcast",
    "ravel", "static_assert", "device_assert", "static_print", "device_print", "multiple_of", "max_contiguous",
    "max_constancy", "debug_barrier", "assume", "cast", "constexpr", "range", "static_range", "umulhi", "rand",
    "randn", "randint", "randint4x", "philox", "join", "split", "interleave", "associative_scan", "reduce", "extract_slice", "insert_slice", "gather",
    "swizzle2d", "flip"};

// tl.math and libdevice functions tgrad implements (typing, interpreter,
// adjoint rules or zero-gradient classes). tl.math in Triton 3.6 has fewer;
// tgrad accepts the libdevice names through tl.math too, as earlier Tritons did.
const std::set<std::string> kMathFunctions = {
    "exp",   "exp2",  "exp10", "log",   "log2",  "log10", "log1p", "expm1",  "sqrt",      "sqrt_rn",   "rsqrt",
    "cbrt",  "sin",   "cos",   "tan",   "asin",  "acos",  "atan",  "atan2",  "sinh",      "cosh",      "tanh",
    "asinh", "acosh", "atanh", "erf",   "erfc",  "abs",   "floor", "ceil",   "trunc",     "rint",      "nearbyint",
    "round", "fma",   "div_rn", "fdiv", "pow",   "sigmoid", "fast_expf", "fast_logf", "isnan", "isinf", "signbit",
    "finitef", "isfinited"};

// Triton 3.6 builtins tgrad reads but does not type, run or differentiate
// yet: a kernel using them reads (Triton accepts it); their results have an
// unknown type, so differentiating through them is a located error and the
// interpreter refuses them by name.
const std::set<std::string> kTlUntyped = {
    "make_block_ptr", "advance", "make_tensor_descriptor", "load_tensor_descriptor", "store_tensor_descriptor",
    "dot_scaled", "sort", "topk", "histogram", "map_elementwise", "reduce_or", "cat",
    "xor_sum", "inline_asm_elementwise", "float8e5", "float8e4nv", "float8e4b15", "float8e5b16", "float8e4b8",
    "pointer_type", "tensor", "dtype", "block_type"};

KnownName ns(const std::string &name) { return {KnownName::Kind::Namespace, name, DType::FP32, 0}; }
KnownName fn(const std::string &name) { return {KnownName::Kind::Function, name, DType::FP32, 0}; }

}  // namespace

bool is_tl_function(const std::string &name) { return kTlFunctions.count(name) > 0; }
bool is_random_draw(const std::string &qualified_name) {
  static const std::set<std::string> draws = {"tl.rand", "tl.randn", "tl.randint", "tl.randint4x", "tl.philox"};
  return draws.count(qualified_name) > 0;
}
bool is_compiler_hint(const std::string &qualified_name) {
  return qualified_name == "tl.multiple_of" || qualified_name == "tl.max_contiguous" ||
         qualified_name == "tl.max_constancy";
}
bool is_math_classification(const std::string &name) {
  // (libdevice's finitef takes fp32 and isfinited fp64: tgrad reads either for both.)
  return name == "isnan" || name == "isinf" || name == "signbit" || name == "finitef" || name == "isfinited";
}
bool is_untyped_tl_builtin(const std::string &name) { return kTlUntyped.count(name) > 0; }
bool is_math_function(const std::string &name) { return kMathFunctions.count(name) > 0; }

std::string approximated_math_function(const std::string &asm_text, const std::string &constraints) {
  // Whitespace-insensitive: "tanh.approx.f32 $0, $1;" and "tanh.approx.ftz.f32 $0,$1".
  std::string text, spec;
  for (char c : asm_text)
    if (!std::isspace(static_cast<unsigned char>(c))) text += c;
  for (char c : constraints)
    if (!std::isspace(static_cast<unsigned char>(c))) spec += c;
  if (spec != "=f,f") return "";
  if (!text.empty() && text.back() == ';') text.pop_back();
  static const std::pair<const char *, const char *> instructions[] = {
      {"tanh", "tanh"}, {"sin", "sin"}, {"cos", "cos"}, {"ex2", "exp2"}, {"lg2", "log2"}, {"rsqrt", "rsqrt"},
      {"sqrt", "sqrt"}};
  for (const auto &[ptx, function] : instructions)
    for (const char *suffix : {".approx.f32$0,$1", ".approx.ftz.f32$0,$1"})
      if (text == std::string(ptx) + suffix) return function;
  return "";
}

std::optional<KnownName> namespace_member(const std::string &space, const std::string &attr) {
  if (space == "tl") {
    if (std::optional<DType> d = parse_dtype(attr); d && attr == tl_name(*d))
      return KnownName{KnownName::Kind::DType, attr, *d, 0};
    if (attr == "math") return ns("tl.math");
    if (attr == "extra") return ns("tl.extra");
    // The modules tl's names are defined in: kernels reach a few helpers
    // through them that tl does not export (nsa's bitonic top-k).
    if (attr == "standard") return ns("tl.standard");
    if (attr == "core") return ns("tl.core");
    if (attr == "PropagateNan") return ns("tl.PropagateNan");
    if (is_tl_function(attr)) return fn("tl." + attr);
    if (is_untyped_tl_builtin(attr)) return fn("tl." + attr);
    return std::nullopt;
  }
  if (space == "tl.standard" || space == "tl.core") {
    if (space == "tl.standard" && attr == "_log2") return fn("tl.standard._log2");
    if (space == "tl.core" && attr == "get_int_dtype") return fn("tl.core.get_int_dtype");
    if (space == "tl.core" && (attr == "CONSTEXPR_0" || attr == "CONSTEXPR_1"))
      return KnownName{KnownName::Kind::Int, attr, DType::FP32, attr == "CONSTEXPR_0" ? 0.0 : 1.0};
    return namespace_member("tl", attr);  // what tl exports from them
  }
  // tl.maximum / tl.minimum / tl.clamp / tl.max / tl.min's propagate_nan: Triton's ir.PROPAGATE_NAN values.
  if (space == "tl.PropagateNan") {
    if (attr == "NONE") return KnownName{KnownName::Kind::Int, attr, DType::FP32, 0.0};
    if (attr == "ALL") return KnownName{KnownName::Kind::Int, attr, DType::FP32, 65535.0};
    return std::nullopt;
  }
  if (space == "tl.extra") {
    if (attr == "cuda") return ns("tl.extra.cuda");
    if (attr == "libdevice") return ns("libdevice");
    return std::nullopt;
  }
  if (space == "tl.extra.cuda") return attr == "libdevice" ? std::optional<KnownName>(ns("libdevice")) : std::nullopt;
  if (space == "tl.math" || space == "libdevice")
    return is_math_function(attr) ? std::optional<KnownName>(fn("math." + attr)) : std::nullopt;
  if (space == "triton") {
    if (attr == "language") return ns("tl");
    if (attr == "cdiv" || attr == "next_power_of_2") return fn("triton." + attr);
    return std::nullopt;
  }
  if (space == "math") {
    if (attr == "pi") return KnownName{KnownName::Kind::Float, attr, DType::FP32, M_PI};
    if (attr == "e") return KnownName{KnownName::Kind::Float, attr, DType::FP32, M_E};
    if (attr == "inf") return KnownName{KnownName::Kind::Float, attr, DType::FP32, INFINITY};
    if (attr == "log2" || attr == "log" || attr == "sqrt" || attr == "exp" || attr == "ceil" || attr == "floor")
      return fn("pymath." + attr);
    return std::nullopt;
  }
  if (space == "builtins") {
    static const std::set<std::string> names = {"range", "min", "max", "float", "int", "len", "abs", "bool", "print"};
    if (names.count(attr)) return fn(attr);
    return std::nullopt;
  }
  return std::nullopt;
}

// The tgrad namespace a Python module path names ("tl" for triton.language),
// or "" for a module tgrad does not know.
std::string namespace_of_module(const std::string &module) {
  if (module == "triton") return "triton";
  if (module == "triton.language" || module == "tl") return "tl";
  if (module == "triton.language.math") return "tl.math";
  if (module == "triton.language.standard") return "tl.standard";
  if (module == "triton.language.core") return "tl.core";
  if (module == "triton.language.extra") return "tl.extra";
  if (module == "triton.language.extra.cuda") return "tl.extra.cuda";
  if (module == "triton.language.extra.libdevice" || module == "triton.language.extra.cuda.libdevice" ||
      module == "triton.language.libdevice")
    return "libdevice";
  if (module == "math") return "math";
  return "";
}

namespace {

ImportedName resolve_import(const ast::Module &module, const std::string &name, int depth);

// What `NAME = a.b.c` binds NAME to: what a names (an import, or a module
// level alias), then each attribute of a known namespace in turn.
void resolve_assignment(const ast::Module &module, const std::string &dotted, ImportedName &result, int depth) {
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const size_t dot = dotted.find('.', from);
    parts.push_back(dotted.substr(from, dot - from));
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  // An alias of an alias: a chain that long (or a cycle) is not followed.
  if (depth > 8) return;
  ImportedName root = resolve_import(module, parts[0], depth + 1);
  if (!root.bound) return;
  result.module = root.module;
  if (!root.target) return;
  std::optional<KnownName> at = root.target;
  for (size_t k = 1; k < parts.size() && at; ++k) {
    if (at->kind != KnownName::Kind::Namespace) return;
    result.known_module = true;
    result.member = parts[k];
    at = namespace_member(at->name, parts[k]);
  }
  result.target = at;
}

// What one import statement binds `name` to (bound = false if it does not).
ImportedName resolve_in(const ast::Module &module, const ast::Import &imp, const std::string &name, int depth) {
  ImportedName result;
  for (size_t k = imp.names.size(); k-- > 0;) {
    const auto &entry = imp.names[k];
    const std::string bound = ast::bound_name(imp, k);
    if (bound != name) continue;
    result.bound = true;
    result.statement = &imp;
    result.entry = k;
    if (imp.assignment) {
      resolve_assignment(module, imp.module, result, depth);
    } else if (imp.is_from) {
      // `from M import x [as y]`: x is a member of M, or the submodule M.x.
      result.module = imp.module;
      result.member = entry.first;
      const std::string space = namespace_of_module(imp.module);
      if (std::string sub = namespace_of_module(imp.module + "." + entry.first); !sub.empty()) {
        result.target = ns(sub);
      } else if (!space.empty()) {
        result.known_module = true;
        result.target = namespace_member(space, entry.first);
      }
    } else {
      // `import a.b.c as y` binds the module a.b.c; `import a.b.c` binds a.
      const std::string full = entry.second.empty() ? bound : entry.first;
      result.module = full;
      if (std::string space = namespace_of_module(full); !space.empty()) result.target = ns(space);
    }
    return result;
  }
  return result;
}


ImportedName resolve_import(const ast::Module &module, const std::string &name, int depth) {
  // The last unconditional binding, and the alternatives after it.
  std::vector<ImportedName> alternatives;
  for (auto imp = module.imports.rbegin(); imp != module.imports.rend(); ++imp) {
    ImportedName found = resolve_in(module, *imp, name, depth);
    if (!found.bound) continue;
    if (!imp->conditional) {
      if (alternatives.empty()) return found;
      break;
    }
    alternatives.insert(alternatives.begin(), found);
  }
  for (const ImportedName &a : alternatives)
    if (a.target) return a;
  return alternatives.empty() ? ImportedName{} : alternatives.front();
}

}  // namespace

ImportedName resolve_import(const ast::Module &module, const std::string &name) {
  return resolve_import(module, name, 0);
}

std::optional<std::string> tl_function_bound_to(const ast::Module &module, const std::string &name) {
  if (module.find_function(name)) return std::nullopt;
  const ImportedName bound = resolve_import(module, name);
  if (bound.target && bound.target->kind == KnownName::Kind::Function && bound.target->name.rfind("tl.", 0) == 0)
    return bound.target->name;
  return std::nullopt;
}

namespace {

// Whether `f` calls `tl.math.NAME` for a NAME Triton 3's tl.math does not have (its members, measured on Triton
// 3.6 and 3.9: abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, rsqrt, sin, sqrt, sqrt_rn,
// umulhi). Triton 2's tl.math held libdevice's functions (`tl.math.log1p`), and a file that supports both
// defines its helper once per version (mamba's softplus under `if TRITON3: ... else: ...`).
bool calls_triton2_math(const ast::Function &f) {
  static const std::set<std::string> triton3_math = {"abs",  "ceil", "cos",  "div_rn", "erf",   "exp",
                                                     "exp2", "fdiv", "floor", "fma",   "log",   "log2",
                                                     "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi"};
  bool found = false;
  std::function<void(const ast::Expr &)> expr = [&](const ast::Expr &e) {
    if (auto *c = ast::dyn_cast<ast::Call>(&e))
      if (auto *a = ast::dyn_cast<ast::Attribute>(c->func.get())) {
        auto *m = ast::dyn_cast<ast::Attribute>(a->value.get());
        auto *tl = m ? ast::dyn_cast<ast::Name>(m->value.get()) : nullptr;
        if (tl && tl->id == "tl" && m->attr == "math" && !triton3_math.count(a->attr)) found = true;
      }
    ast::for_each_child(const_cast<ast::Expr &>(e), [&](ast::ExprPtr &child) { expr(*child); });
  };
  std::function<void(const ast::StmtList &)> block = [&](const ast::StmtList &b) {
    for (const ast::StmtPtr &s : b) {
      if (auto *a = ast::dyn_cast<ast::Assign>(s.get())) expr(*a->value);
      if (auto *a = ast::dyn_cast<ast::AugAssign>(s.get())) expr(*a->value);
      if (auto *a = ast::dyn_cast<ast::AnnAssign>(s.get()); a && a->value) expr(*a->value);
      if (auto *x = ast::dyn_cast<ast::ExprStmt>(s.get())) expr(*x->value);
      if (auto *r = ast::dyn_cast<ast::Return>(s.get()); r && r->value) expr(*r->value);
      if (auto *i = ast::dyn_cast<ast::If>(s.get())) expr(*i->cond), block(i->body), block(i->orelse);
      if (auto *l = ast::dyn_cast<ast::For>(s.get())) expr(*l->iter), block(l->body);
      if (auto *w = ast::dyn_cast<ast::While>(s.get())) expr(*w->cond), block(w->body);
    }
  };
  block(f.body);
  return found;
}

}  // namespace

void supersede_fallback_functions(ast::Module &module) {
  // Two definitions of a jit function in the branches of one module-level if (the parser keeps the later, the
  // earlier as its alternative): the one Triton 3 compiles, where the other calls what only Triton 2's tl.math had.
  for (auto &f : module.functions)
    if (f->alternative && calls_triton2_math(*f) && !calls_triton2_math(*f->alternative)) {
      std::unique_ptr<ast::Function> other = std::move(f->alternative);
      other->alternative = std::move(f);
      f = std::move(other);
    }
  for (auto &f : module.functions) {
    if (!f->conditional) continue;
    for (const ast::Import &imp : module.imports) {
      if (!imp.conditional || imp.group != f->group) continue;
      const ImportedName found = resolve_in(module, imp, f->name, 0);
      if (found.bound && found.target && found.target->kind == KnownName::Kind::Function) {
        f->superseded = true;
        break;
      }
    }
  }
}

}  // namespace tgrad::sema
