#include "src/ad/reverse/MemorySchedule.h"

#include <utility>

#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {

WriteDecision decide_gradient_write(LoadFacts facts, const BufferFacts &buffer) {
  WriteDecision out;
  AccessDecision &d = facts.access;
  // Partial sums need the backward to loop over the forward's programs.
  if (d.kind == AccessDecision::Kind::Broadcast && !buffer.programs_loopable) {
    d.kind = AccessDecision::Kind::Shared;
    d.reason += " (and the programs differ by more than tl.program_id(0), so the backward cannot loop over them)";
  }
  // Loads of one pointer parameter share one gradient buffer: if any of
  // them may meet another program's addresses, all of them add atomically.
  if (!buffer.shared_reason.empty() && d.kind != AccessDecision::Kind::Shared) {
    d.kind = AccessDecision::Kind::Shared;
    d.reason = buffer.shared_reason;
  }
  const std::string &base = buffer.base;
  if (d.kind == AccessDecision::Kind::Broadcast) {
    // One register tile per load, stored at the end: only for the one load
    // of its buffer (or the stores would overlap), outside loops and ifs.
    if (facts.loop_depth == 0 && !facts.in_branch && buffer.loads == 1 && facts.register_tile_fits) {
      out.how = GradientWrite::RegisterPartialSum;
      out.comment = "partial sum in registers: every program loads these addresses of '" + base + "'";
    } else {
      out.how = GradientWrite::PartialSumRow;
      out.comment = "partial sum: every program loads these addresses of '" + base + "'";
    }
  } else if (d.kind == AccessDecision::Kind::Shared) {
    out.how = GradientWrite::Atomic;
    out.buffer_starts_at_zero = true;
    out.what = "tl.atomic_add";
    out.comment = "atomic: " + d.reason;
  } else {
    // Several loads of one buffer (all at the same offsets, or they would
    // be shared): the first gradient written is a plain store, later ones
    // add to it in place, after a barrier so that every thread of the
    // program sees the earlier writes. The first may be a plain store only
    // if it writes every address the later ones add to (the same mask),
    // and writes each address once: outside loops, or in a loop whose
    // iterations read blocks of their own. Otherwise the buffer starts at
    // zero and every gradient adds to it. A plain store in a runtime `if`
    // writes nothing when the branch is not taken: that buffer starts at
    // zero too.
    const std::string assuming = d.kind == AccessDecision::Kind::InjectiveAssuming && d.assumption
                                     ? ", assuming " + emit::print_expr(*d.assumption)
                                     : "";
    // (Loads at disjoint addresses, disjoint_loads, each write their own: a plain store each, in place an addition
    // each, and the buffer starts at zero only where a store may not run.)
    const bool once = facts.loop_depth == 0 || (facts.loop_depth == 1 && d.walks_loop);
    const bool plain = !buffer.in_place && (buffer.written_before == 0 || buffer.disjoint_loads) && once &&
                       (buffer.loads == 1 || buffer.mask_variants == 1 || buffer.disjoint_loads);
    out.counts_as_written = true;
    if (plain) {
      out.how = GradientWrite::PlainStore;
      out.buffer_starts_at_zero = facts.in_branch;
      out.what = "plain store" + assuming;
    } else {
      out.how = GradientWrite::AddToEarlier;
      out.buffer_starts_at_zero = buffer.written_before == 0;  // no plain store before it
      out.what = "store adding to the earlier gradients of this buffer" + assuming;
      out.comment = buffer.read_back
                        ? "'" + base + "' is read back after the kernel stores it: this gradient adds to its upstream "
                          "gradient, which the store's adjoint takes"
                    : buffer.in_place
                        ? "'" + base + "' is updated in place: this gradient adds to that of what passes through"
                    : buffer.loads == 1
                        ? "every iteration of the loop loads these addresses: this gradient adds to the earlier ones"
                        : "'" + base + "' is loaded " + std::to_string(buffer.loads) +
                              " times: this gradient adds to the others";
    }
  }
  out.access = std::move(d);
  return out;
}

}  // namespace tgrad::ad::reverse
