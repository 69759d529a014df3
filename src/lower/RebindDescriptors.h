// Names rebound from a pointer to a descriptor made from it.
//
// `X = tl.make_tensor_descriptor(X, ...)`: a name rebound from the pointer
// it holds to a descriptor (or block pointer) made from it (the Triton
// tutorial's `desc_q = _maybe_make_tensor_desc(desc_q, ...)`, once inlined).
// Such a name holds two kinds of value, which the lowering keeps apart by
// giving the descriptor a name of its own from there on. Also where both
// branches of an if rebind it so. Left as written (and refused later) where a
// later statement assigns the name again.
#pragma once

#include <map>
#include <set>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::lower {

// Renames in `body`; `taken` holds the function's names (fresh names join
// it) and `original` maps each fresh name to the user's, for messages.
void rename_rebound_descriptors(const ast::Module &module, ast::StmtList &body, std::set<std::string> &taken,
                                std::map<std::string, std::string> &original);

}  // namespace tgrad::lower
