// Walks over jit-function code (A-normal form or not) that several passes
// share: the names a piece of code reads, and rewriting its expressions.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// Names read anywhere in an expression / one statement (not its nested blocks).
void reads(const ast::Expr &e, std::set<std::string> &out);
void stmt_reads(const ast::Stmt &s, std::set<std::string> &out);
// Names one statement reads, including, for a loop or an if, its range or
// condition and its body at any depth.
void deep_reads(const ast::Stmt &s, std::set<std::string> &out);
// Names read anywhere in a block: its statements, loop ranges and if
// conditions, at any depth.
void block_reads(const ast::StmtList &block, std::set<std::string> &out);

// Calls `fn` on every expression node of `e`, children first (read only).
void visit_expr(const ast::Expr &e, const std::function<void(const ast::Expr &)> &fn);
// The same over every expression a block's statements read, at any depth
// (the expressions rewrite_exprs visits).
void visit_exprs(const ast::StmtList &block, const std::function<void(const ast::Expr &)> &fn);

// Calls `fn` on every expression node of `e`, children first; `fn` may
// replace the node it is given.
void rewrite_expr(ast::ExprPtr &e, const std::function<void(ast::ExprPtr &)> &fn);
// The same over every expression a block's statements read, at any depth.
void rewrite_exprs(ast::StmtList &block, const std::function<void(ast::ExprPtr &)> &fn);

// The one name an assignment `x = ...` assigns, or "" (another statement,
// or several targets).
std::string assigned_name(const ast::Stmt &s);

// The first statement of `block` (not nested) that is `name = ...`, or null.
const ast::Assign *top_level_assignment(const ast::StmtList &block, const std::string &name);

// A call's argument by position, else by keyword, or null.
const ast::Expr *call_argument(const ast::Call &c, size_t position, const std::string &keyword);

// How many statements of a block read each name, at any depth; a loop's
// range and an if's condition count as reads of the loop or the if.
void count_reads(const ast::StmtList &block, std::map<std::string, int> &out);

// How many times each name is assigned in a block, at any depth (assignment
// and augmented-assignment targets, loop variables).
void count_assignments(const ast::StmtList &block, std::map<std::string, int> &out);
// The same for one statement (a loop or an if: its variable and body).
void stmt_assignments(const ast::Stmt &s, std::map<std::string, int> &out);

}  // namespace tgrad::ad
