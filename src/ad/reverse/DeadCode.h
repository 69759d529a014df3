// Dead-code removal over the emitted backward, and the statement filters the
// taped-loop reversal needs.
#pragma once

#include <set>
#include <string>
#include <unordered_set>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad::reverse {

// Dead-code removal by liveness, over nested loops and ifs: an assignment
// stays only if a later statement (or the next iteration of a loop around
// it) reads the value it assigns. Expression statements (stores,
// tl.static_assert, ...) always stay. Returns the names live on entry (a hash
// set: liveness only asks whether a name is live, over every statement of a
// long backward).
std::unordered_set<std::string> live_in(ast::StmtList &body, std::unordered_set<std::string> live, bool erase);

void remove_dead_code(ast::StmtList &body);
// After a top-level loop, `X.dtype` (or `.shape`) of a value X the loop
// carries reads the type of the value X entered the loop with (`X = Y` just
// before it): Triton gives a loop-carried value one type. Then a replay of
// the forward's loop kept only for the type of its result (`bc.to(acc.dtype)`)
// is dead code.
void read_types_from_loop_inputs(ast::StmtList &body);
// `X.dtype` of a value assigned once as `E.to(tl.T)` (or `tl.zeros(...,
// dtype=tl.T)`, `tl.full(...)`) reads `tl.T`: the value
// is then not kept only for its type (an output a backward reads back only
// for the dtype it casts to, `bo.to(stored_out.dtype)`, is a load of a whole
// tile in every iteration of an owner's loop). Returns how many it replaced.
int read_types_from_casts(ast::StmtList &body);

// The names the pointer arguments of `tl.<access>(...)` calls in a block read.
std::set<std::string> names_accessed_by(const ast::StmtList &block, const std::string &access);

// Removes the `tl.store(tape + ..., ...)` statements into the tapes `tapes`.
void erase_tape_writes(ast::StmtList &block, const std::set<std::string> &tapes);

}  // namespace tgrad::ad::reverse
