// Buffers a kernel both loads and stores: which loads read the contents from
// before the kernel (an update in place, `x = tl.load(X + o)` ... `tl.store(X
// + o, f(x))`), which read back what the kernel stored there as it ends (the
// final contents), and the located errors for loads that read neither.
#include "src/ad/reverse/Engine.h"

namespace tgrad::ad::reverse {

// How many runtime loops, outermost first, a load and a store share.
size_t Engine::shared_loops(const MemoryOp &a, const MemoryOp &b) {
  size_t shared = 0;
  while (shared < a.loops.size() && shared < b.loops.size() && a.loops[shared] == b.loops[shared]) ++shared;
  return shared;
}

// A load and a store of one buffer with exactly one runtime loop around both: whether each iteration of that
// loop reads and writes addresses of its own, so that no iteration's store meets another iteration's load.
// Directly in the loop, the offsets must walk it block by block (or touch the iteration's own halves). Deeper,
// in loops of their own inside it, an inner loop's walk says nothing about the shared loop: that loop must be a
// grid-stride loop over rows that stands for the program id (`for row in tl.range(pid, n_rows, num_progs)`),
// with the same injective offset and mask for both, each iteration its own row.
//
// Several runtime loops around both (a grid-stride row loop, and in it a loop walking the row block by block):
// the iterations of each own their addresses where the load and the store have one injective offset and mask,
// and every shared loop is one the offset is injective in: the grid-stride loop standing for the program id, or
// the loop whose blocks the lanes walk. Then two different iterations of any of them touch disjoint addresses.
bool Engine::iterations_own_addresses(const MemoryOp &load, const MemoryOp &store, const AccessAnalysis &access) {
  const size_t shared = shared_loops(load, store);
  if (shared == 0) return false;
  AccessDecision l = access.classify(load.pointer, load.mask), w = access.classify(store.pointer, store.mask);
  if (shared > 1) {
    const bool injective = (l.kind == AccessDecision::Kind::Injective || l.kind == AccessDecision::Kind::InjectiveAssuming) &&
                           l.kind == w.kind && l.offset_key == w.offset_key && l.mask_key == w.mask_key &&
                           l.grid_stride_var == w.grid_stride_var && l.walked_loop_var == w.walked_loop_var;
    if (!injective) return false;
    for (size_t k = 0; k < shared; ++k) {
      auto *v = dyn_cast<Name>(load.loops[k]->target.get());
      if (!v || (v->id != l.grid_stride_var && v->id != l.walked_loop_var)) return false;
    }
    return true;
  }
  auto *var = dyn_cast<Name>(load.loops[0]->target.get());
  if (!var) return false;
  if (load.loops.size() == 1 && store.loops.size() == 1 &&
      ((l.walks_loop && w.walks_loop && l.offset_key == w.offset_key) ||
       access.iterations_touch_their_own(load.pointer, store.pointer, var->id, load.mask, store.mask) ||
       access.iterations_own_blocks(load.pointer, store.pointer, var->id, load.mask, store.mask)))
    return true;
  auto injective = [](const AccessDecision &d) {
    return d.kind == AccessDecision::Kind::Injective || d.kind == AccessDecision::Kind::InjectiveAssuming;
  };
  return injective(l) && injective(w) && l.grid_stride_var == var->id && w.grid_stride_var == var->id &&
         l.offset_key == w.offset_key && l.mask_key == w.mask_key;
}

void Engine::find_final_reads(const AccessAnalysis &access) {
  // memory_ is in program order. A load reads back a store that comes before it in program order. It reads the
  // buffer's final contents where no store of that buffer may run after it: none later in program order, none
  // in a loop around it (a later iteration's store), unless that loop gives each iteration addresses of its own.
  // Stores in the other branch of a runtime if around both do not count.
  for (const MemoryOp &load : memory_) {
    if (load.store) continue;
    bool after_store = false, store_may_follow = false;
    for (const MemoryOp &st : memory_) {
      if (!st.store || st.base != load.base || exclusive(st, load)) continue;
      if (!st.atomic.empty()) store_may_follow = true;  // refused where loaded (check_in_place)
      const bool before = std::less<const MemoryOp *>()(&st, &load);
      if (!before || (shared_loops(st, load) > 0 && !iterations_own_addresses(load, st, access))) store_may_follow = true;
      else after_store = true;
    }
    if (after_store && !store_may_follow) final_reads_.insert(&load);
  }
}

void Engine::check_in_place(const MemoryOp &load, const std::vector<const MemoryOp *> &stores,
                            const AccessAnalysis &access, bool differentiated) {
  auto refuse = [&](const MemoryOp &store, const std::string &why) {
    fail(load.call->span, "'" + load.base + "' is both loaded and stored by this kernel, and " + why + " (line " +
                              std::to_string(store.call->span.begin.line) +
                              "): the values loaded are not all the contents from before the kernel, so the gradient "
                              "is not defined by them; write the result to another buffer");
  };
  if (final_reads_.count(&load)) {
    // What it reads is what the buffer holds after the kernel: the backward reads it there (the forward's
    // output), and the gradient of what it reads adds to the upstream gradient of the buffer before the
    // stores' adjoints take it. Its gradient goes to this program's own addresses: another program's
    // additions would race with this program's taking them.
    AccessDecision d = access.classify(load.pointer, load.mask);
    if (d.programs_share || d.kind == AccessDecision::Kind::Broadcast || shared_bases_.count(load.base))
      fail(load.call->span, "'" + load.base + "' is read back after this kernel stores to it, at addresses other "
                            "programs may read too (" + d.reason + "); tgrad differentiates a buffer read back only "
                            "where each program reads its own addresses: write the values to be shared to another "
                            "buffer in another kernel");
    if (initial_read_bases_.count(load.base))
      fail(load.call->span, "'" + load.base + "' is read back here after this kernel stores to it, and loaded "
                            "elsewhere before a store overwrites what that load read: the backward would need the "
                            "buffer both as it was before the kernel and as the kernel left it; use two buffers");
    final_read_bases_.insert(load.base);
    consumed_[load.base] = "'" + load.base + "' is read back after the kernel stores to it";
    if (differentiated && in_place_.insert(load.base).second) partial_bases_.erase(load.base);
    return;
  }
  for (const MemoryOp *store : stores) {
    if (!store->atomic.empty())
      fail(load.call->span, "'" + load.base + "' is both loaded and updated atomically by this kernel; an atomic "
                            "update of a buffer with a gradient is differentiated only when the kernel does not load it");
    if (exclusive(*store, load)) continue;
    if (std::less<const MemoryOp *>()(store, &load))  // memory_ is in program order
      refuse(*store, "this load comes after a store through it");
    // Loops around both: a later iteration's load follows this iteration's store.
    if (shared_loops(load, *store) > 0 && !iterations_own_addresses(load, *store, access))
      refuse(*store, "a loop around both runs the store before a later iteration's load, at addresses not proven "
                     "to be the iteration's own");
  }
  if (final_read_bases_.count(load.base))
    fail(load.call->span, "'" + load.base + "' is loaded here before a store may overwrite what it read, and read "
                          "back elsewhere after this kernel stores to it: the backward would need the buffer both as "
                          "it was before the kernel and as the kernel left it; use two buffers");
  initial_read_bases_.insert(load.base);
  for (const auto &[value, base] : saved_base_)
    if (base == load.base)  // the backward would read it back as the forward left it, not as it was before
      fail(load.call->span, "'" + load.base + "' is both loaded and given the per-program value '" + value +
                                "' by this kernel; tgrad differentiates such an in-place update only where the value "
                                "goes to another buffer");
  if (!differentiated) return;
  if (!in_place_.insert(load.base).second) return;
  // One buffer holds both gradients: additions only, never a plain store
  // over the pass-through part, and never a partial sum written at the end.
  partial_bases_.erase(load.base);
  consumed_[load.base] = "'" + load.base + "' is updated in place";
}

}  // namespace tgrad::ad::reverse
