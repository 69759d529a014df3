// The blocked layout of a tile over the threads of a CTA (DESIGN.md §4).
//
// A tile of `numel` elements, flattened in row-major order, is dealt out in
// chunks of `spt` contiguous elements: thread t holds, for each repetition
// r, elements r*threads*spt + t*spt + [0, spt). So each thread's elements of
// one chunk are neighbours in memory when the tile addresses a row (loads
// and stores vectorize), and the threads of a warp hold neighbouring chunks
// (accesses coalesce). The layout depends on the element count only, never
// on the shape or dtype: reshapes and expand_dims that keep the row-major
// order move no data, and a cast keeps every element in its thread.
//
// A tile smaller than the CTA leaves threads without an element of their
// own; they hold a copy of element (e mod numel), so that every thread holds
// a value (a scalar is a tile of one element that every thread holds), and
// only the owner of an element stores it or counts it in a reduction.
#pragma once

#include <cstdint>

namespace tgrad::codegen {

struct Layout {
  int64_t numel = 1;
  int64_t threads = 128;
  int64_t spt = 1;   // contiguous elements per chunk
  int64_t reps = 1;  // chunks per thread

  // `max_spt`: the widest chunk wanted (16 bytes of the kernel's narrowest
  // memory dtype); a power of two.
  static Layout of(int64_t numel, int64_t threads, int64_t max_spt) {
    Layout l;
    l.numel = numel < 1 ? 1 : numel;
    l.threads = threads;
    while (l.spt * 2 <= max_spt && l.numel % (l.spt * 2) == 0 && l.spt * 2 * threads <= l.numel) l.spt *= 2;
    l.reps = (l.numel + threads * l.spt - 1) / (threads * l.spt);
    return l;
  }
  int64_t regs() const { return spt * reps; }
  // Whether every (thread, register) owns a distinct element.
  bool exact() const { return numel % (threads * spt) == 0; }
  // The element register `r` of thread `tid` holds, before the mod that
  // gives threads past the end a copy: rep*threads*spt + tid*spt + j.
  int64_t base_of(int64_t r) const { return (r / spt) * threads * spt + r % spt; }
};

}  // namespace tgrad::codegen
