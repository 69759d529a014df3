// Walks over jit-function code (A-normal form or not) that several passes
// share: the names a piece of code reads, and rewriting its expressions.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_set>

#include "tgrad/ast/Ast.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/sema/DType.h"

namespace tgrad::ad {

// Names read anywhere in an expression / one statement (not its nested blocks).
void reads(const ast::Expr &e, std::set<std::string> &out);
void stmt_reads(const ast::Stmt &s, std::set<std::string> &out);
// The same into a hash set, for passes that only ask whether a name is in it (liveness over a long backward).
void reads(const ast::Expr &e, std::unordered_set<std::string> &out);
void stmt_reads(const ast::Stmt &s, std::unordered_set<std::string> &out);
// Names one statement reads, including, for a loop or an if, its range or
// condition and its body at any depth; the statements of `skip`, a nested
// block, are left out (what the code around that block reads).
void deep_reads(const ast::Stmt &s, std::set<std::string> &out, const ast::StmtList *skip = nullptr);
// Names read anywhere in a block: its statements, loop ranges and if
// conditions, at any depth (less `skip`'s statements, as above).
void block_reads(const ast::StmtList &block, std::set<std::string> &out, const ast::StmtList *skip = nullptr);
// The same into a hash set (the names a whole backward reads, only looked up).
void block_reads(const ast::StmtList &block, std::unordered_set<std::string> &out);

// Liveness without rewriting: the names whose values, live before `s` (or a
// block), a later statement may read, given those live after it. An
// assignment kills its targets; a loop adds what its body reads before
// assigning, at the loop's end too (the next iteration); an if joins its
// branches.
std::set<std::string> live_before(const ast::Stmt &s, std::set<std::string> live_after);
std::set<std::string> live_before(const ast::StmtList &block, std::set<std::string> live_after);
// The names live at the end of a loop body (a for or a while): those live
// after the loop and those the next iteration reads first.
// `body_in`, if given, receives the names live at the body's start for that
// end (what live_before(body, end) gives), computed on the way.
std::set<std::string> live_at_loop_end(const ast::StmtList &body, const std::set<std::string> &live_after,
                                       const std::string &loop_var, std::set<std::string> *body_in = nullptr);

// Every expression node of `e`, children first (tgrad/ast/Walk.h).
using ast::visit_expr;
// The same over every expression a block's statements read, at any depth
// (the expressions rewrite_exprs visits).
void visit_exprs(const ast::StmtList &block, const std::function<void(const ast::Expr &)> &fn);

// Every expression node of `e`, children first, each replaceable (tgrad/ast/Walk.h).
using ast::rewrite_expr;
// The same over every expression a block's statements read, at any depth.
void rewrite_exprs(ast::StmtList &block, const std::function<void(ast::ExprPtr &)> &fn);

// Whether `e` is a dtype written `tl.<name>` (`tl.float32`; false for null).
inline bool is_tl_dtype(const ast::Expr *e) {
  auto *a = e ? ast::dyn_cast<ast::Attribute>(e) : nullptr;
  auto *base = a ? ast::dyn_cast<ast::Name>(a->value.get()) : nullptr;
  return base && base->id == "tl" && sema::is_dtype_name(a->attr);
}

// `e` as a name, or null (also for a null `e`); whether it is the name `id`.
inline const ast::Name *as_name(const ast::Expr *e) { return e ? ast::dyn_cast<ast::Name>(e) : nullptr; }
inline bool is_name(const ast::Expr *e, const std::string &id) {
  const ast::Name *n = as_name(e);
  return n && n->id == id;
}

// The one name an assignment `x = ...` assigns, or "" (another statement,
// or several targets).
std::string assigned_name(const ast::Stmt &s);

// Each plain single-name assignment `name = value` of a block, at any depth (loops, ifs), in order.
void each_assignment(const ast::StmtList &block, const std::function<void(const std::string &, const ast::Expr &)> &fn);

// The names of `fn`'s tl.constexpr parameters.
std::set<std::string> constexpr_params(const ast::Function &fn);
// Whether every name `cond` reads is one of `constexprs` (Triton decides such a condition when it compiles).
bool reads_only(const ast::Expr &cond, const std::set<std::string> &constexprs);

// The first statement of `block` (not nested) that is `name = ...`, or null.
const ast::Assign *top_level_assignment(const ast::StmtList &block, const std::string &name);

// A call's argument by position, else by keyword, or null.
const ast::Expr *call_argument(const ast::Call &c, size_t position, const std::string &keyword);

// How many statements of a block read each name, at any depth; a loop's
// range and an if's condition count as reads of the loop or the if.
void count_reads(const ast::StmtList &block, std::map<std::string, int> &out);

// How many times each name is assigned in a block / one statement (tgrad/ast/Walk.h).
using ast::count_assignments;
using ast::stmt_assignments;

}  // namespace tgrad::ad
