// Owner-computes schedules (DESIGN.md §3): a gradient the backward's reverse
// loop scatters with atomics, gathered instead by the program that owns it.
//
// A kernel over a grid of programs with a reduction loop (matmul: programs
// over C's tiles, a loop over K) reads each tile of an input (a tile of A)
// from every program along one grid axis (the programs of one row of C
// tiles) in one iteration of the loop. Its backward, run on the forward's
// grid, adds that tile's gradient with atomics from each of those programs.
// Where the tile's addresses and mask depend only on the other grid axes and
// the loop, the sum can be computed the other way round: a kernel of its own
// whose grid is the forward's with that axis replaced by the loop's
// iterations; each program loops over the forward's programs along the axis,
// recomputes their contributions to its tile, sums them in registers and
// writes the tile once. That is the transposed matmul of a hand-written
// backward (dA = dC B^T over A's tiles), derived from the kernel.
//
// The rewrite works on the backward kernel as reverse mode emitted it (in
// A-normal form) and is valid where:
//   - the gradient is written by `tl.atomic_add` statements at the top level
//     of the body of a top-level loop (the reverse loop);
//   - its pointer and mask do not depend on exactly one of the program axes
//     the kernel reads (tl.program_id), and do depend on the loop;
//   - every value carried by the loop that they or the added value read is
//     advanced by a step the loop does not change (pointers `p += BLOCK *
//     stride`), so that its value at iteration t is its start plus t steps;
//   - what the added value needs from before the loop involves no loop, or
//     only through tiles a prologue kernel can save per forward program (a
//     replay of the forward's loop: the relu epilogue's adjoint needs the
//     accumulator). The prologue replays it once per program, as the
//     backward kernel did, and the owners load the saved tiles;
//   - program ids permuted by tl.swizzle2d over the whole grid count as the
//     program ids themselves (a permutation of the programs sums the same).
// Elsewhere the backward is left as it is, and the reason is an explanation.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "src/ad/Anf.h"
#include "tgrad/ad/Differentiate.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad::reverse {

struct OwnerComputesResult {
  std::vector<std::unique_ptr<ast::Function>> kernels;  // one per gradient moved, in launch order
  std::vector<Backward::OwnerKernel> launches;          // their launch descriptions
  std::vector<std::string> explanations;                // each gradient moved, or why one was not
  bool backward_kernel_writes = true;                   // false: the backward kernel has nothing left to do
  // The kernel that replays the forward's loop once per program and saves
  // what the owners need of it (Backward::saved_tiles), or null.
  std::unique_ptr<ast::Function> prologue;
  std::vector<Backward::SavedTile> saved;
};

// Moves each gradient of `backward` that can be gathered by its owners into a
// kernel of its own, removing its atomics from `backward`. `gradients`: the
// gradient buffers with the forward pointers they belong to (Backward::
// gradient_buffers). `context`: the module the kernels are typed in, and
// `types` the backward's parameter types. New names come from `names`
// (kernels: `function_names`). `allow_prologue`: owners that need a replay
// of the forward's loop read what a prologue saved (BackwardRequest::
// deterministic); else such gradients stay with their atomics.
//
// One call gathers the atomics of one loop (the last top-level loop that
// adds to a gradient). A kernel with several (the two stages of a causal
// forward) is gathered by calling again while a call gathers something;
// `prior` is what earlier calls' prologue saves: a later call reads those
// values from it and builds no prologue of its own.
OwnerComputesResult gather_gradients_by_owner(ast::Function &backward,
                                              const std::vector<std::pair<std::string, std::string>> &gradients,
                                              const ast::Module &context, const sema::ParamTypes &types,
                                              const SourceManager &sources, NameAllocator &names,
                                              NameAllocator &function_names, bool allow_prologue,
                                              const std::vector<Backward::SavedTile> &prior = {});

// The gradient buffers (of `gradient_params`) a pointer is computed from: its definitions in `defs` followed back.
std::set<std::string> gradient_bases(const std::string &pointer, const std::multimap<std::string, const ast::Expr *> &defs,
                                     const std::set<std::string> &gradient_params);
// Every single-target assignment of a block, at any depth, name -> value (several where a loop or if reassigns).
void collect_defs(const ast::StmtList &block, std::multimap<std::string, const ast::Expr *> &defs);

}  // namespace tgrad::ad::reverse
