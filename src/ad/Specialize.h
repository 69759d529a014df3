// One backward per value of a tl.constexpr flag, chosen when Triton compiles.
//
// `if HAS_BIAS: b = tl.load(...)` ... `if HAS_BIAS: y += b` is valid Triton:
// each specialization keeps one branch. Its backward cannot keep both
// branches as a runtime if would (b's adjoint would be initialised where b
// does not exist), so without -D tgrad differentiates once per value of such
// a flag (True and False for a flag tested by truth; each string or number
// it is compared with, and one value equal to none of them) and writes a
// backward kernel that dispatches on the flag, as the forward does:
//
//   @triton.jit
//   def k_bwd(X, B, Y, N, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr, dX, dB, dY):
//       if HAS_BIAS:
//           k_bwd_HAS_BIAS_true(X, B, Y, N, HAS_BIAS, BLOCK, dX, dB, dY)
//       else:
//           k_bwd_HAS_BIAS_false(X, B, Y, N, HAS_BIAS, BLOCK, dX, dB, dY)
//
// Triton compiles only the branch the launch's flag selects. The functions
// every specialization shares unchanged (a reduction kernel, the unbroadcast
// helper) are emitted once. The specializations must take the same
// arguments and share the launch protocol's grids, scratch buffers and
// tapes; buffers that must start at zero, or hold what the forward stored,
// in one specialization are marked so for all. Otherwise, and past 32
// combinations of values, a located error asks for -D.
#pragma once

#include <optional>

#include "tgrad/ad/Differentiate.h"

namespace tgrad::ad {

// differentiate() with the types of GenericTypes.h, for a request whose
// constexpr flags all have values or need none.
std::optional<Backward> differentiate_generic(const ast::Module &module, const SourceManager &sources,
                                              const BackwardRequest &request, DiagEngine &diags);

}  // namespace tgrad::ad
