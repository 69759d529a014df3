// The schedule of memory adjoints (DESIGN.md §3): where and how the gradient
// of one load is written. A pure decision: its input is what the access
// analysis proved about the load's addresses and what the kernel's plan knows
// about the buffer; its output is one way of writing and the reason, which
// --explain prints and the generated comment repeats. The engine emits the
// code (src/ad/reverse/MemoryAdjoints.cpp); this file decides, so that a new
// schedule is one new case here with its proof.
#pragma once

#include <map>
#include <string>

#include "src/ad/AccessAnalysis.h"

namespace tgrad::ad::reverse {

enum class GradientWrite {
  // Every program reads these addresses: summed in a register tile over this
  // program's share of the forward's programs, stored once to its row of a
  // partial-sum buffer, rows summed by a reduction kernel.
  RegisterPartialSum,
  // The same, added in place to this program's row (after a barrier) where a
  // register tile cannot hold it (in a loop or a runtime if, or a buffer
  // loaded more than once).
  PartialSumRow,
  // Programs may share addresses: tl.atomic_add into a buffer that starts at zero.
  Atomic,
  // One program and lane per address, and nothing else writes them: tl.store.
  PlainStore,
  // One program per address, but earlier gradients of the buffer (another
  // load, an earlier iteration, the gradient of what an in-place update
  // passes through) are there: load, add, store, after a barrier.
  AddToEarlier,
};

// What is known about one load when its gradient is written.
struct LoadFacts {
  AccessDecision access;            // what the access analysis proved about its addresses
  int loop_depth = 0;               // runtime loops around the load
  bool in_branch = false;           // under a runtime if
  bool register_tile_fits = false;  // its shape can be written as a tl.zeros tile (known or named dims)
};

// What the kernel's plan knows about the buffer the load reads through, and
// what has been written to its gradient so far (a load's decision depends on
// the loads before it).
struct BufferFacts {
  std::string base;  // the pointer parameter
  // The forward's programs differ only by tl.program_id(0): the backward can
  // loop over them, so partial sums are possible.
  bool programs_loopable = false;
  // Set where every load of the buffer adds atomically: one load that may
  // meet another program's addresses makes them all atomic (one buffer).
  std::string shared_reason;
  int loads = 0;              // loads through the base
  size_t mask_variants = 0;   // distinct masks of those loads
  bool in_place = false;      // the kernel also stores to it: one buffer holds both gradients
  bool read_back = false;     // this load reads back what the kernel stored there (the final contents)
  int written_before = 0;     // gradients of earlier loads written to it as stores or additions
  // Its loads read disjoint addresses, together one program and lane per address (AccessAnalysis::
  // classify_layout_union: a rotary kernel's two halves): each load's gradient is stored on its own.
  bool disjoint_loads = false;
};

struct WriteDecision {
  GradientWrite how = GradientWrite::Atomic;
  AccessDecision access;               // the access facts as decided (kind and reason updated)
  bool buffer_starts_at_zero = false;  // the gradient buffer must be zeroed before the backward
  std::string comment;                 // the generated comment: why the gradient adds where it adds
  std::string what;                    // how --explain names the write ("plain store", ...)
  // Counts as a write of the buffer's gradient for the loads after it.
  bool counts_as_written = false;
};

// Decides how the gradient of a load is written. With RegisterPartialSum the
// caller must be able to emit the register tile (facts.register_tile_fits).
WriteDecision decide_gradient_write(LoadFacts facts, const BufferFacts &buffer);

}  // namespace tgrad::ad::reverse
