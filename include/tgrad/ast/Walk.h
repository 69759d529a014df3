// Walks over expressions that every stage shares (the lowerings, A-normal
// form, the adjoint sweep): each visits an expression's children first,
// then the expression itself.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>

#include "tgrad/ast/Ast.h"

namespace tgrad::ast {

// Calls `fn` on each direct child expression of `e`, in evaluation order
// (for a walk that decides at each node whether to go deeper).
void for_each_child(Expr &e, const std::function<void(ExprPtr &)> &fn);

// Calls `fn` on every expression node of `e` (read only).
void visit_expr(const Expr &e, const std::function<void(const Expr &)> &fn);

// Calls `fn` on every expression node of `e`; `fn` may replace the node it
// is given (its replacement is not walked).
void rewrite_expr(ExprPtr &e, const std::function<void(ExprPtr &)> &fn);

// Calls `fn` on every expression node of a statement and of the statements inside it (read only).
void visit_stmt_exprs(const Stmt &s, const std::function<void(const Expr &)> &fn);

// How many times each name is assigned in a block, at any depth (assignment
// and augmented-assignment targets, loop variables).
void count_assignments(const StmtList &block, std::map<std::string, int> &out);
// The same for one statement (a loop or an if: its variable and body).
void stmt_assignments(const Stmt &s, std::map<std::string, int> &out);
// The same counts in a hash map, for a pass that only looks names up (a long
// function's names share long prefixes: `tl_exp_a2_times_y`).
void count_assignments(const StmtList &block, std::unordered_map<std::string, int> &out);
void stmt_assignments(const Stmt &s, std::unordered_map<std::string, int> &out);
// How many times one statement assigns `name`, as stmt_assignments counts it
// (for a pass that asks about one name at a time: no map).
int assignments_of(const Stmt &s, const std::string &name);

}  // namespace tgrad::ast
