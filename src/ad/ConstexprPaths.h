// Definitions guarded by a tl.constexpr flag without a value.
//
// Triton keeps one branch of `if FLAG:` per specialization, so `if HAS_BIAS:
// b = tl.load(...)` ... `if HAS_BIAS: y += b` is valid Triton, and tgrad
// reads it. Its backward, though, would initialise b's adjoint outside the
// guard (where b does not exist when the flag is false), so differentiating
// such a kernel needs the flag's value: the check below names the flag.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

// Reports, for each `if` whose condition is a tl.constexpr without a value,
// a name one of its branches assigns (and that was not assigned before it)
// which the code after the if reads. Returns whether it reported anything.
bool report_constexpr_guarded_definitions(const ast::Function &fn, const sema::TypeInfo &types, DiagEngine &diags);

// The conditions of those ifs, and of those after which a name read later
// has a different type on each path (sema's divergent_names), without
// reporting: differentiate() makes one backward per value of the flags they
// read (src/ad/Specialize.h).
std::vector<const ast::Expr *> constexpr_guarded_conditions(const ast::Function &fn, const sema::TypeInfo &types);

// The jit helpers that `fn` passes its tl.constexpr parameter `flag` to, at
// any depth, each with the parameter that receives it: `apply_act_func(x,
// drop_p, seed, offset, param, act_func, dropout)` gives (apply_act_func,
// 'act_func') for the kernel's act_func, and the helpers apply_act_func
// passes its act_func to. (A constexpr argument is a constexpr in the
// callee, annotated or not.)
std::vector<std::pair<const ast::Function *, std::string>> helpers_receiving_constexpr(const ast::Module &module,
                                                                                        const ast::Function &fn,
                                                                                        const std::string &flag);

}  // namespace tgrad::ad
