// The Python printer: AST -> Triton/Python source with stable formatting.
//
// Parentheses come from operator precedence, never from the tree's history
// (a node never remembers that it was parenthesised), so a generated tree
// prints correctly: BinOp(*, x, BinOp(+, a, b)) is `x * (a + b)`.
// Formatting: 4-space indents, spaces around binary operators, none around
// keyword `=`, literals as written when the spelling is known.
// Property (tests/parse/RoundTripTest.cpp): parse(print(m)) equals m.
#pragma once

#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::emit {

std::string print_expr(const ast::Expr &e);
// `e` for text that splices it into an arithmetic expression (`stop - ` +
// start): parenthesised unless it binds at least as tightly as unary minus
// (`16 + 2` prints as `(16 + 2)`, `-1` and `n` as they are).
std::string print_operand(const ast::Expr &e);
// Statements at the given indentation depth (4 spaces per level), one per line.
std::string print_stmts(const ast::StmtList &body, int depth = 0);
std::string print_function(const ast::Function &f);
// Imports, then constants, then functions, separated as PEP 8 asks.
std::string print_module(const ast::Module &m);

// Shortest decimal spelling of a double that reads back to the same value,
// always recognisable as a Python float ("1.0", "1e-05", "float('inf')").
std::string float_spelling(double v);
// A Python string literal (double quotes, escapes) for UTF-8 text.
std::string quote_string(const std::string &value);

}  // namespace tgrad::emit
