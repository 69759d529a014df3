// The names tgrad knows without a definition in the file: the members of
// tl, tl.math, libdevice, triton, Python's math and the builtins Triton
// allows, and what the module's imports bind. One table for the static
// analysis and the interpreter, so the two resolve names alike.
#pragma once

#include <optional>
#include <string>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/DType.h"

namespace tgrad::sema {

struct KnownName {
  enum class Kind { Namespace, Function, DType, Float, Int };
  Kind kind = Kind::Namespace;
  // Namespace: "tl", "tl.math", "tl.extra", "tl.extra.cuda", "libdevice", "triton", "math".
  // Function: "tl.exp", "math.exp" (tl.math and libdevice), "triton.cdiv", "pymath.log2", "range", ...
  std::string name;
  DType dtype = DType::FP32;  // DType
  double value = 0;           // Float (math.pi, ...), Int (tl.core.CONSTEXPR_0)
};

// `ns.attr` for a known namespace (or "builtins" for Python's builtins).
std::optional<KnownName> namespace_member(const std::string &ns, const std::string &attr);

// The math function a one-instruction PTX approximation computes, as
// `tl.inline_asm_elementwise(asm, constraints, ...)` writes it with one fp32
// operand ("tanh.approx.f32 $0, $1;", constraints "=f,f": "tanh"), or "" for
// any other assembly. The PTX ISA defines these instructions as
// approximations of the function (sin, cos, tanh, ex2 -> exp2, lg2 -> log2,
// rsqrt, sqrt): tgrad types, runs and differentiates them as that function.
std::string approximated_math_function(const std::string &asm_text, const std::string &constraints);

// What the module's imports bind `name` to.
struct ImportedName {
  bool bound = false;               // some import binds the name
  std::optional<KnownName> target;  // what it is, when tgrad knows the module
  std::string module;               // the module it comes from (for messages)
  std::string member;               // `from M import member as name`: the name in M
  bool known_module = false;        // `from M import x` with M a module tgrad knows (x may still be unknown)
  const ast::Import *statement = nullptr;  // the import that binds it
  size_t entry = 0;                        // which of its names
};
// The binding that wins is the last one in the file, as in Python, except
// among alternatives in module-level if/try blocks (`try: from
// triton.language.extra.libdevice import tanh` / `except ImportError: from
// triton.language.extra.cuda.libdevice import tanh`), where tgrad cannot
// know which runs: there the first alternative that tgrad knows wins (the
// `try` path, the one the author expects), else the first.
ImportedName resolve_import(const ast::Module &module, const std::string &name);

// The tl function ("tl.make_tensor_descriptor") the module's imports bind a
// bare name to (`from triton.language import make_tensor_descriptor`,
// `gather = tl.gather`), where no jit function of the module defines the name.
std::optional<std::string> tl_function_bound_to(const ast::Module &module, const std::string &name);

// Marks superseded each jit function defined in a module-level if/try block
// where another alternative of the same statement binds its name to a
// function tgrad knows: fla's
//   if hasattr(triton.language, 'make_tensor_descriptor'):
//       make_tensor_descriptor = triton.language.make_tensor_descriptor
//   else:
//       @triton.jit
//       def make_tensor_descriptor(...): return None
// keeps the fallback for Tritons without the function; Triton 3.6 has it,
// so the binding wins. Call after the module's imports are followed.
void supersede_fallback_functions(ast::Module &module);

// The namespace ("tl", "tl.math", "libdevice", ...) a Python module path
// names, or "" for a module tgrad does not know.
std::string namespace_of_module(const std::string &module);

// Whether a tl / tl.math function name is one tgrad implements.
bool is_tl_function(const std::string &name);
bool is_math_function(const std::string &name);
// libdevice's classifications (isnan, isinf, signbit): int32 results, no gradient.
bool is_math_classification(const std::string &name);
// Triton's random draws from a seed and counters (Philox): "tl.rand",
// "tl.randn", "tl.randint", "tl.randint4x", "tl.philox".
bool is_random_draw(const std::string &qualified_name);
// tl.multiple_of, tl.max_contiguous, tl.max_constancy: hints to Triton's
// compiler about their first operand's values, which they return unchanged.
bool is_compiler_hint(const std::string &qualified_name);
// A Triton builtin tgrad reads but does not type yet ("make_block_ptr"): its
// calls have an unknown type.
bool is_untyped_tl_builtin(const std::string &name);

}  // namespace tgrad::sema
