// An elementwise epilogue differentiated from the output the forward stored.
//
// A matmul with a fused activation ends
//
//     for k in ...:  acc = tl.dot(a, b, acc)
//     acc = tl.maximum(acc, 0.0)            # the epilogue: relu
//     c = acc.to(tl.float16)
//     tl.store(c_ptrs, c, mask=c_mask)
//
// Its backward needs relu'(acc) = (acc > 0), and acc is the K loop's result:
// computing it again replays the loop in every program, and an owner that
// gathers dA over the forward's programs (src/ad/reverse/OwnerComputes.h)
// would replay it once per program it sums over, so the owner-computes
// schedule declines and dA, dB stay with atomics. The forward stored
// relu(acc), rounded to C's dtype, and C > 0 exactly where acc > 0 unless acc
// rounds to 0 in C's dtype (0 < acc < 2**-25 for float16, a float32
// subnormal for bfloat16: there the gradient is 0 instead of 1). So the
// kernel this module writes for the engine to differentiate is
//
//     c_stored = <the stored output>        (read back: no gradient)
//     c_stored_positive = c_stored > 0.0
//     acc_2 = tl.where(c_stored_positive, acc, 0.0)
//     c = acc_2.to(tl.float16)
//     tl.store(c_ptrs, c, mask=c_mask)
//
// which has the forward's value (to rounding) and the derivative the forward
// has wherever acc != 0 (at acc == 0, tl.maximum's tie gives 1/2; this gives
// 0, torch.relu's convention). The backward reads acc only for its type, so
// the loop's replay goes: what remains of the loop are its additive
// gradients, which owner-computes gathers with plain stores, as a
// hand-written backward masks dC by C > 0 first. C must then hold, when the
// backward runs, what the forward left there: the launch protocol says so
// (Backward::saved_outputs, "as the forward left it"), and the torch module
// saves it.
//
// A sigmoid or tanh after a loop (`c = tl.sigmoid(acc * 0.1)`) needs less: its
// adjoint rule reads only its output (y (1 - y), 1 - y^2), so the backward's
// replay defines y by reading it back, and the loop's value is not needed.
// Only where the buffer holds y exactly: every type given (--arg), the
// buffer's dtype y's and any cast to it; a float16 C rounds y, which would
// round the derivative too (relative error ~1e-3, worse near saturation),
// so that keeps the replay.
//
// Conditions checked (elsewhere the kernel is left as it is, and --explain
// says why where an epilogue was found):
//   - the epilogue is `y = tl.maximum(x, 0)` (either order, 0 or 0.0), or a
//     call of a jit helper that returns `tl.where(p >= 0, p, k * p)` of its
//     parameter p (a leaky relu, `>` too, k a literal: the Triton tutorial
//     matmul's `leaky_relu`; read back as `stored >= 0`, exact where k * x does
//     not round to zero), at the
//     kernel's top level, or in one branch of a top-level if whose condition
//     reads tl.constexpr parameters only (`if ACTIVATION == "relu":`, which
//     ANF writes `m = tl.maximum(x, 0.0); y = m` / `else: y = x`: the
//     read-back goes in that branch, so another value of the flag reads
//     nothing), and x is a value carried out of a top-level loop
//     (through copies), whose initial value is `tl.zeros(shape, dtype)` or
//     `tl.full(shape, value, dtype)`: the placeholder is that call again, of
//     x's shape and dtype whatever the pointers' types;
//   - y is read only by a cast `c = y.to(T)` (or by the store itself), c only
//     by the store, a top-level `tl.store(P, c, mask=M)`;
//   - that store is the kernel's only memory access through P's buffer (no
//     other store, no load, no atomic: what the backward reads there is
//     what this store wrote), and programs do not certainly share its
//     addresses (the access analysis). Where they are not proven injective
//     (runtime strides), each address is taken to be written once, as the
//     store's own adjoint takes it already (it gives every program the
//     upstream gradient at its addresses): the read-back adds no assumption;
//   - nothing between y's definition (or its if) and the store assigns what
//     they and c read, or reads what the if assigns (they move down to the
//     store, whose address and mask the read-back needs).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/ad/Anf.h"
#include "src/ad/SoftmaxStatistics.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct EpilogueReadBacks {
  // The placeholders the rewritten kernel defines, each with the load the
  // backward's replay defines it by instead (the engine's read-back entries).
  std::vector<SoftmaxStatistics::ReadBack> read_back;
  // Values the backward reads only for their shape or dtype, each with a
  // placeholder of the same type (see SoftmaxStatistics::witnesses).
  std::map<std::string, std::string> witnesses;
  // For --explain: what was rewritten and why it is valid, or why an
  // epilogue found was not.
  std::vector<std::string> explanations;
};

struct EpilogueContext {
  // The builtin a call's callee resolves to ("tl.maximum", "tl.store"), or "".
  std::function<std::string(const ast::Call &)> builtin;
  // A name's type, or null.
  std::function<const sema::SType *(const std::string &)> type_of;
  // The pointer parameter a pointer value is based on, or "" if unknown.
  std::function<std::string(const std::string &)> base_of;
  // Why programs certainly write one address through `pointer` under `mask`
  // ("" for none), or "" where they do not; `proven` gets whether the
  // addresses are proven injective (else they are not analysed: runtime
  // strides).
  std::function<std::string(const std::string &pointer, const std::string &mask, bool &proven)> shared_addresses;
  // The jit function of the module a call calls (a helper, `leaky_relu(acc)`), or null.
  std::function<const ast::Function *(const ast::Call &)> helper;
  // Whether some parameters' types are representatives of several (no --arg): a derivative read back from a
  // buffer whose dtype is not known is not exact.
  bool generic_types = false;
};

// Rewrites each epilogue of `anf` as above; nothing where there is none.
// New names come from `names`.
EpilogueReadBacks read_epilogues_from_outputs(AnfFunction &anf, const EpilogueContext &context, NameAllocator &names);

}  // namespace tgrad::ad
