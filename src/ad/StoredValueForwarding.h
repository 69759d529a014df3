// Loads that read back what the same program stored, replaced by the value
// stored.
//
// A kernel that stores a value and later loads it back from the same
// addresses (fla's backward kernels write a partial gradient in one loop and
// add to it in another; a helper stores dg and a later helper loads dg back
// to subtract from it) reads an intermediate version of the buffer. Reverse
// mode replays the forward against the buffers as they were before the
// kernel, and there the load would read the old contents: the in-place check
// refuses such loads (src/ad/reverse/InPlace.cpp). Where the load reads
// exactly what one earlier store of the same program wrote, its value is that
// store's value rounded to the buffer's element type, and the kernel is
// rewritten to say so before differentiation:
//
//   tl.store(P, v, mask=M)                 tl.store(P, v, mask=M)
//   ...                             ==>    ...
//   x = tl.load(P, mask=M, other=O)        x_stored = v.to(P.dtype.element_ty)
//                                          x = tl.where(M, x_stored, O)
//
// The store stays (the buffer ends the same); a later store over the same
// addresses consumes the upstream gradient as any overwrite does, and the
// gradient of the value read back flows to v through registers.
//
// Two shapes are recognised:
//   - Same block: the store is a statement of a block, the load comes later
//     in the same block (inside ifs or loops of it too), with the same
//     addresses and mask: pointer and mask equal as values (their definitions
//     expanded through names assigned once, loads and calls of jit functions
//     taken as they are), nothing in between storing to the buffer or
//     reassigning a name those values read, and no loop around the load
//     doing either.
//   - Two loops: the store is a statement of one loop's body, the load is in
//     a later loop over the same range, at the address and mask the store had
//     in the iteration with the same loop index (the loop variables mapped to
//     each other). The store's iterations write addresses of their own (the
//     access analysis), the second loop's stores to the buffer come after the
//     load and touch addresses of their own iteration, and the stored value
//     depends only on the loop index and on values from before the first
//     loop, through loads of buffers the kernel never writes: that slice of
//     the first loop's body is computed again in the second loop, before the
//     load (the backward differentiates it there). Only where the kernel
//     writes the buffer again after the load: a load after the buffer's last
//     write reads its final contents, which the backward reads back as the
//     forward left them (src/ad/reverse/InPlace.cpp), cheaper than computing
//     the value again.
//   - One lane: the store writes a row `B + o` (o distinct offsets, `tl.arange(0, N)` plus a scalar), a later
//     statement of the block loads one scalar address `B + i` (the triton-lang/kernels cross entropy reads the
//     probability at the row's label back, `PROBS + row * N + idx`): its value is the stored lane where o == i
//     (and the store's mask kept it), `tl.sum(tl.where((o == i) & M, x_stored, 0.0), 0)`. Any other i reads
//     another program's store or past the buffer, a race or a fault of the forward itself.
// In all, the store's value must have the pointer's shape (a smaller value
// broadcast over the addresses reads back in the pointer's shape), and a
// masked load needs the store's mask (lanes the store skipped hold the old
// contents). Lanes or programs of the store that meet at an address would
// leave one of their values there: a race of the forward itself, which has
// no gradient to keep. Elsewhere the kernel is left as written, and the
// in-place check explains.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "src/ad/AccessAnalysis.h"
#include "src/ad/Anf.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct ForwardedLoad {
  std::string base;      // the buffer
  int load_line = 0;     // the load's line, as the user wrote it
  int store_line = 0;    // the store it reads back
  bool recomputed = false;  // the two-loop shape: the stored value is computed again
  bool one_lane = false;    // a scalar load of one lane of a stored row, at an index computed at run time
};

// Rewrites `anf` (a kernel in A-normal form, typed by `types`) in place and
// lists the loads it replaced. `names` gives the new statements' names.
// `name_types`: each name's type (the engine's), for the shapes of stored values and pointers.
std::vector<ForwardedLoad> forward_stored_values(AnfFunction &anf, const sema::TypeInfo &types,
                                                 const std::map<std::string, sema::SType> &name_types,
                                                 const AccessAnalysis &access, NameAllocator &names);

}  // namespace tgrad::ad
