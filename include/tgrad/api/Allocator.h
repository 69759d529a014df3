// A process-wide setting for programs whose main work is tgrad's.
#pragma once

namespace tgrad {

// tgrad builds and frees millions of small AST and type nodes (an 8000-line
// function: 56000 lines of backward). glibc's fast bins make each large free
// walk and merge them (malloc_consolidate was 10-15 % of such a run); without
// fast bins, and with the heap kept instead of trimmed and regrown, the same
// run takes about 8 % less, memory use unchanged in practice. This sets those
// glibc options (mallopt) for the whole process, so only a program that is
// mostly tgrad (the command line) should call it, once, first. Elsewhere than
// glibc it does nothing.
void tune_allocator();

}  // namespace tgrad
