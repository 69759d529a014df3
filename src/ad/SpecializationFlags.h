// Which tl.constexpr flags a backward depends on, and the values to
// differentiate it with (src/ad/Specialize.h differentiates once per
// combination and dispatches on them).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/ad/Differentiate.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

class RoleMemo;  // src/ad/GenericTypes.h

// Past kQuietSpecializations the output is long enough to deserve a warning
// naming the flags; past kMaxSpecializations (the time to differentiate
// grows with the count: 32 take 5 to 10 s for fla's gated layer norms, 64
// about 40 s of CPU time for fla's six-flag fused recurrent forward, where
// four real kernels of the corpus need 64) -D is required.
inline constexpr size_t kQuietSpecializations = 8;
inline constexpr size_t kMaxSpecializations = 64;

inline std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// A value a flag takes in one specialization: how -D gives it, how the
// dispatcher tests for it, and the suffix of that specialization's names.
struct FlagValue {
  sema::SType type;           // for BackwardRequest::param_types
  std::string text;     // for messages: True, 'relu'
  std::string suffix;   // true, relu
  ast::ExprPtr literal;      // compared with, or null for the truth test
  bool truth = false;   // tested as `if FLAG:` (true) / else (false)
  // An optional pointer's value "a tensor": the parameter stays without a
  // type, for the generic trials to type (src/ad/GenericTypes.h), and is
  // not None (tensor_pointer_marker).
  bool untyped = false;
};

struct Flag {
  std::string name;
  std::vector<FlagValue> values;
  // A mode: True or False, strings, or bits tested (`STAGE & 1`), so that its
  // values are every value a launch gives it; not a number the kernel also
  // computes with and compares with some literal (`BLOCK_M == 128`).
  bool is_mode = false;
  // An optional pointer (optional_pointers below): None, or a tensor.
  bool is_optional_pointer() const {
    return std::any_of(values.begin(), values.end(), [](const FlagValue &v) { return v.untyped; });
  }
};

// A literal, a negated integer, or a module constant bound to one
// (`_MODE_LLAMA: tl.constexpr = tl.constexpr(0)`): the literal; else null.
ast::ExprPtr literal_of(const ast::Expr &e, const ast::Module &module, int depth = 0);

// The values to differentiate `flag` with: each literal the function compares
// it with (==, !=) and one equal to none; else True and False. For an
// optional pointer (below): None, then a tensor.
Flag flag_values(const ast::Module &module, const ast::Function &fn, const std::string &flag);

// `types` with `flag` given `value` (an optional pointer's tensor: the marker below).
void give_flag_value(sema::ParamTypes &types, const Flag &flag, const FlagValue &value);

// The type an optional pointer's tensor specialization gives it: none yet (the generic trials type it, each of
// their pointer types marked not None, SType::not_none), but not None.
sema::SType tensor_pointer_marker();
bool is_tensor_pointer_marker(const sema::SType &t);

// Optional pointers: runtime parameters of `fn` that a condition tests
// against None (`if w_ptr is None: w = 1 else: w = tl.load(w_ptr + cols)`,
// FlagGems' norms). Triton specializes a None argument as a tl.constexpr
// None, so it compiles one branch per launch; where the backward needs it,
// tgrad differentiates once with None and once with a tensor (those without
// a type; one given a pointer type is a tensor), and the backward
// dispatches on `w_ptr is None` like a flag's value.
std::vector<std::string> optional_pointers(const ast::Function &fn);

// The forward typed with the first uniform representative it accepts
// (fp32, fp16, bf16 for the parameters given no type), else as given;
// nullopt where none types: Triton would not compile it.
// (`memo`: param_roles's.)
std::optional<sema::TypeInfo> analyze_some_representative(const ast::Module &module, const ast::Function &fn,
                                                          const sema::ParamTypes &given,
                                                          bool *by_representative = nullptr, RoleMemo *memo = nullptr);

// The constexpr parameters of `fn` without a value in `given` that a jit
// helper it calls tests in an if: a helper is differentiated as a tile
// function, where an if on a constexpr needs the value.
std::vector<std::string> flags_tested_in_helpers(const ast::Module &module, const ast::Function &fn,
                                                 const sema::ParamTypes &given);

// The constexpr flags of `fn` whose values the backward depends on and the
// request does not give. (`memo`: param_roles's, for `fn`: the search asks
// again with each combination of the values of the flags found.)
std::vector<std::string> flags_needing_values(const ast::Module &module, const ast::Function &fn,
                                              const BackwardRequest &request, RoleMemo *memo = nullptr);

}  // namespace tgrad::ad
