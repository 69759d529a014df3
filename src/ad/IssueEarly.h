// Issuing loads of read-only memory early.
//
// A backward reads the upstream gradient of each store where the store's
// adjoint is, at the end of a chain of reductions (layer norm's dRstd and
// dMean come after two row sums). A reduction synchronises the program's
// threads, and a load after it waits its full latency. Moved up to just after
// the statements that compute its address, the load overlaps with the
// row's work instead. Only loads of memory the backward never writes may
// move; the caller says which.
#pragma once

#include <set>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// Moves each statement of `movable`, in its own block, up to just after the
// last earlier statement that assigns a name it reads (or to the block's
// start). A "Grad of:" comment on a moved statement stays on it; the
// statement that then takes its old place gets a copy, so the remaining
// part of that adjoint keeps its heading. Nested blocks are handled too.
// Returns how many statements moved.
size_t issue_early(ast::StmtList &block, const std::set<const ast::Stmt *> &movable);

}  // namespace tgrad::ad
