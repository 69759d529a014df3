// Which way round an owner kernel holds the tiles of its loop.
//
// Reverse mode derives an owner's loop body from the forward's: attention's
// scores are [queries, keys] tiles there (qk = q k^T), while the owner of a
// key block accumulates [keys, head_dim] tiles (dK += dS^T q). Read as
// derived, every iteration transposes computed tiles in registers: P^T for
// dV, and (q^T dS)^T for dK, each a trip through shared memory that a
// hand-written FA2 backward avoids by computing s^T = k q^T directly.
//
// This pass holds every tile of one shape [A, B] that the loop computes
// as its transpose [B, A] instead, rewriting the expressions by the
// identities of the transpose:
//   (x op y)^T = x^T op y^T          (elementwise, casts, where, exp2, ...)
//   (a b)^T    = b^T a^T             (tl.dot, and its accumulator)
//   (x^T)^T    = x
//   r[:, None]^T = r[None, :]        (and a 1-D row r, broadcast as [1, n], becomes r[:, None])
// and every other reader of such a tile reads `tl.trans(tile)`, simplified by
// the same identities (tl.trans(tl.trans(p)) is p). Each rewrite is an
// identity, so the pass is valid whatever it flips; it is kept only where
// the loop then transposes fewer computed tiles in registers (transposes of
// tiles just loaded, or computed before the loop, are dot operands Triton
// lays out in shared memory anyway, and are not counted), and where the
// kernel still types.
#pragma once

#include <string>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad::reverse {

// Rewrites `loop` (a loop of `kernel`, typed by `types`) to hold its tiles of
// one shape transposed where that removes register transposes. Returns the
// flipped shape as text ("[BLOCK_M, BLOCK_N]"), or "" where it left the
// kernel as it was. The caller checks the result still types.
std::string orient_loop_tiles(ast::Function &kernel, ast::For &loop, const sema::TypeInfo &types);

}  // namespace tgrad::ad::reverse
