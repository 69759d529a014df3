#include "tgrad/sema/Names.h"

#include <cmath>
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
    "max_constancy", "debug_barrier", "assume", "cast", "constexpr", "range", "static_range", "umulhi"};

const std::set<std::string> kMathFunctions = {"exp",  "exp2", "log",   "log2",  "sqrt",    "sqrt_rn",   "rsqrt",
                                              "sin",  "cos",  "abs",   "erf",   "floor",   "ceil",      "fma",
                                              "div_rn", "fdiv", "tanh", "pow", "log1p",   "expm1",     "sigmoid",
                                              "fast_expf", "fast_logf"};

KnownName ns(const std::string &name) { return {KnownName::Kind::Namespace, name, DType::FP32, 0}; }
KnownName fn(const std::string &name) { return {KnownName::Kind::Function, name, DType::FP32, 0}; }

}  // namespace

bool is_tl_function(const std::string &name) { return kTlFunctions.count(name) > 0; }
bool is_math_function(const std::string &name) { return kMathFunctions.count(name) > 0; }

std::optional<KnownName> namespace_member(const std::string &space, const std::string &attr) {
  if (space == "tl") {
    if (std::optional<DType> d = parse_dtype(attr); d && attr == tl_name(*d))
      return KnownName{KnownName::Kind::DType, attr, *d, 0};
    if (attr == "math") return ns("tl.math");
    if (attr == "extra") return ns("tl.extra");
    if (is_tl_function(attr)) return fn("tl." + attr);
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

ImportedName resolve_import(const ast::Module &module, const std::string &name) {
  ImportedName result;
  for (const ast::Import &imp : module.imports)
    for (const auto &entry : imp.names) {
      std::string full = imp.is_from ? imp.module + "." + entry.first : entry.first;
      std::string bound = !entry.second.empty() ? entry.second : entry.first;
      if (!imp.is_from && entry.second.empty()) {
        // `import triton.language` binds `triton`.
        bound = entry.first.substr(0, entry.first.find('.'));
        full = bound;
      }
      if (bound != name) continue;
      result.bound = true;
      result.module = imp.is_from ? imp.module : full;
      if (full == "triton") result.target = ns("triton");
      else if (full == "triton.language") result.target = ns("tl");
      else if (full == "triton.language.math") result.target = ns("tl.math");
      else if (full == "math") result.target = ns("math");
      else if (full.size() >= 9 && full.compare(full.size() - 9, 9, "libdevice") == 0) result.target = ns("libdevice");
      else if (size_t dot = full.rfind('.'); dot != std::string::npos) {
        // `from triton.language import exp`, `from triton import cdiv`, ...
        std::string mod = full.substr(0, dot), member = full.substr(dot + 1);
        std::string space = mod == "triton" ? "triton" : mod == "triton.language" ? "tl"
                            : mod == "triton.language.math" ? "tl.math" : "";
        if (!space.empty()) result.target = namespace_member(space, member);
      }
      return result;
    }
  return result;
}

}  // namespace tgrad::sema
