// `tgrad FILE --wrt ... --emit torch`: a kernel as a PyTorch op with autograd.
//
// One Python module per kernel holds the forward kernel (and the jit helpers
// and constants it uses, printed from tgrad's AST), the backward kernels, and
// two `torch.library.triton_op`s: the forward, which launches the user's
// kernel on the grid the caller gives and returns the buffers it stores to as
// new tensors, and the backward, which allocates gradients, partial-sum
// scratch and tapes and launches every backward kernel in order. The forward
// op is registered with `register_autograd`; both work in eager mode and
// under torch.compile(fullgraph=True). Everything the backward needs is
// computed from the launch protocol (--emit json): each of its expressions
// is written out as Python, so the module depends on nothing but PyTorch and
// Triton.
//
// The module exports, under the kernel's name, a launcher called as the
// Triton kernel is: `kernel[grid](*args, num_warps=..., **constexprs)`, which
// returns the stored-to buffers as a named tuple. A kernel under
// @triton.autotune or @triton.heuristics keeps its decorators: the launcher
// resolves the config (autotune's choice, cached per key) and the heuristic
// values before the op runs, so the forward and the backward run with the
// same constexprs.
#pragma once

#include <optional>
#include <string>

#include "tgrad/ad/Differentiate.h"

namespace tgrad::driver {

// The module's source, or nullopt with `error` set (a tile function, or a
// launch value the protocol could not express).
std::optional<std::string> torch_module(const ast::Module &module, const ad::BackwardRequest &request,
                                        const ad::Backward &bwd, const std::string &op_namespace, std::string &error);

}  // namespace tgrad::driver
