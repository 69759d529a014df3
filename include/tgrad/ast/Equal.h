// Structural equality of ASTs, ignoring source spans and literal spellings:
// `0x10` equals `16`, and a tree equals its reprint. This is the relation the
// round-trip property parse(print(ast)) == ast is stated in.
#pragma once

#include "tgrad/ast/Ast.h"

namespace tgrad::ast {

bool equal(const Expr &a, const Expr &b);
bool equal(const Stmt &a, const Stmt &b);
bool equal(const StmtList &a, const StmtList &b);
bool equal(const Function &a, const Function &b);
bool equal(const Module &a, const Module &b);

}  // namespace tgrad::ast
