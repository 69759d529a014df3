// Accumulators kept in memory, kept in registers before differentiation.
//
// A loop that reads, updates and writes back the same addresses every
// iteration keeps a running value in memory (Liger's per-program dW rows,
// fla's attention-residual mixes):
//
//   for i in range(...):                     acc = tl.load(P, mask=M, other=0.0)
//       acc = tl.load(P, mask=M, other=0.0)  for i in range(...):
//       new = acc + f(i)              ==>        new = acc + f(i)
//       tl.store(P, new, mask=M)                 tl.store(P, new, mask=M)
//                                                acc = tl.where(M, new.to(acc.dtype), acc)
//
// Each load after the first reads what the previous iteration stored, so
// its value is not the buffer's contents from before the kernel and has no
// gradient of its own as a load; as a loop-carried value it does. The two
// forms compute the same values (the store's rounding to the buffer's type
// is the cast; lanes outside M keep the first load's `other`), and the store
// stays, so the buffer ends the same. Reverse mode then sees a loop-carried
// value, the load through P before the loop, and a store repeated at
// addresses that do not move (whose upstream gradient the last iteration's
// store consumes).
//
// Rewritten where the pattern is exact: the load and the store are
// statements of the loop body itself (not inside an if or an inner loop),
// the load first; P, M and `other` are the same expressions in both and use
// no name the loop assigns; the store's value has the load's shape; and no
// other memory access in the loop goes through a pointer with P's base
// parameter (another access could see or change the addresses in between).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct KeptAccumulator {
  std::string pointer;  // the address, as written
  std::string value;    // the name the loop now carries
  int line = 0;         // the load's line
};

// The kernel with its memory accumulators kept in registers, or null if it
// has none. `types` are the kernel's (sema over `fn`). `kept` lists each
// rewrite, for --explain.
std::unique_ptr<ast::Function> keep_memory_accumulators_in_registers(const ast::Function &fn,
                                                                      const sema::TypeInfo &types,
                                                                      std::vector<KeptAccumulator> &kept);

// Additive updates of memory the first rewrite leaves (their addresses move
// with an inner loop: Liger's tiled rms norm backward adds each column block
// of its rows to the program's own dW row), written as atomic additions:
//
//   old = tl.load(P, mask=M, other=0.0)
//   new = old + f                        ==>   tl.atomic_add(P, f, mask=M)
//   tl.store(P, new, mask=M)
//
// The buffer ends the same (up to where the rounding to its dtype happens),
// and reverse mode differentiates atomic additions: f's adjoint is the
// upstream gradient at P, the buffer's contents before the kernel get it
// unchanged. Rewritten where the pattern is exact: the three statements in
// one block in that order, `old` and `new` each assigned once and read once
// (there; f reads neither), P and M the same expressions in the load and the store with no
// name they read assigned in between, lanes outside M loading zero, and every
// access to the buffer in the kernel one of these updates (another load would
// read what they add; another store's order against them would matter). The
// store may cast `new` (`new.to(T)`). `rewritten` lists each (value empty).
std::unique_ptr<ast::Function> additive_updates_as_atomic_adds(const ast::Function &fn, const sema::TypeInfo &types,
                                                               std::vector<KeptAccumulator> &rewritten);

}  // namespace tgrad::ad
