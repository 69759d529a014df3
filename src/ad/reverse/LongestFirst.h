// Owner-computes kernels whose programs do unequal work, launched longest first.
//
// The dK/dV owner of a causal attention loops, for its key block j, over the
// query blocks from the diagonal on: the first key blocks do the most work,
// the last the least. Its grid is (key blocks, heads) with the key block
// along axis 0, which the GPU starts fastest: every head's long programs are
// spread over the whole launch, and the last ones to start run on alone
// while the rest of the GPU idles. With the axes swapped (heads along axis
// 0, key blocks along axis 1) the programs start in order of the key block:
// every head's longest first, the shortest last, where they fill the gaps
// (longest-processing-time order). Measured on an H100 (4x16x2048x64 fp16,
// scratch/probe/attn_lpt.py): the dK/dV owner 0.226 -> 0.183 ms; at N 8192
// 1.52 -> 1.30 ms.
//
// Any order of the programs computes the same gradients (each owner writes
// its own tiles): the swap changes speed only. It is made where the owner's
// loop over the forward's programs starts at a bound computed from the
// owner's own block (its program id along the axis the loop's iterations
// replaced) and ends at one that is not, and the kernel reads the program id
// of the other axis (a grid of two axes to swap). The launch reads
// Backward::OwnerKernel::longest_first and swaps the grid's sizes too.
#pragma once

#include "tgrad/ad/Differentiate.h"
#include "tgrad/ast/Ast.h"

namespace tgrad::ad::reverse {

// Swaps axes 0 and 1 of `owner` (the kernel `k` describes) where its programs' work falls with its block (above);
// sets k.longest_first and returns whether it did.
bool launch_longest_first(ast::Function &owner, Backward::OwnerKernel &k);

}  // namespace tgrad::ad::reverse
