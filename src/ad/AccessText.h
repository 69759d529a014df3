// Texts of the access analysis's affine forms (src/ad/AccessAnalysis.h): integer literals, coefficient operands and
// products of coefficients, shared by the analysis and its layout boxes (src/ad/AccessLayout.cpp).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad::access_text {

using namespace ast;

// The value of a text that is a whole integer literal ("256", "-1"), or none (a name, an expression).
inline std::optional<long long> integer_text(const std::string &text) {
  char *end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || !end || *end) return std::nullopt;
  return v;
}

// A quotient factor's two sides ("HEAD_DIM//2" -> HEAD_DIM, 2), each a name or a literal integer; none for any
// other text.
inline std::optional<std::pair<std::string, std::string>> quotient_sides(const std::string &factor) {
  const size_t at = factor.find("//");
  if (at == std::string::npos || at == 0 || factor.find("//", at + 2) != std::string::npos) return std::nullopt;
  std::string lhs = factor.substr(0, at), rhs = factor.substr(at + 2);
  auto simple = [](const std::string &t) {
    if (t.empty() || t.find('*') != std::string::npos || t.find('/') != std::string::npos) return false;
    for (char c : t)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return true;
  };
  if (!simple(lhs) || !simple(rhs)) return std::nullopt;
  return std::make_pair(lhs, rhs);
}

inline std::string multiply_coefficients(const std::string &a, const std::string &b);

// The text of a coefficient operand: a literal integer, a name, or a product of them (`2 * HALF`: "2*HALF", as
// multiply_coefficients writes products) or a quotient of two (`HEAD_DIM // 2`: one factor "HEAD_DIM//2"), as
// A-normal form keeps such expressions of tl.constexpr parameters inline.
inline std::optional<std::string> scalar_text(const Expr &e) {
  if (auto *i = dyn_cast<IntLit>(&e)) return std::to_string(i->value);
  if (auto *n = dyn_cast<Name>(&e)) return n->id;
  if (auto *b = dyn_cast<BinOp>(&e)) {
    std::optional<std::string> l = scalar_text(*b->lhs), r = scalar_text(*b->rhs);
    if (!l || !r) return std::nullopt;
    if (b->op == BinaryOpKind::Mul) return multiply_coefficients(*l, *r);
    if (b->op == BinaryOpKind::FloorDiv && quotient_sides(*l + "//" + *r)) return *l + "//" + *r;
  }
  return std::nullopt;
}

// The factors of a product text, split at '*' ("BLOCK_M*stride_qm" -> BLOCK_M, stride_qm; "" -> one empty factor).
inline std::vector<std::string> coefficient_factors(const std::string &text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('*', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// The product of two coefficients as one canonical text: the integer factors multiplied, the names sorted, joined
// by '*' ("BLOCK_M*stride_qm"), so that equal products compare equal as texts.
inline std::string multiply_coefficients(const std::string &a, const std::string &b) {
  long long number = 1;
  std::vector<std::string> names;
  for (const std::string &text : {a, b})
    for (const std::string &factor : coefficient_factors(text)) {
      if (std::optional<long long> v = integer_text(factor)) number *= *v;
      else names.push_back(factor);
    }
  std::sort(names.begin(), names.end());
  std::string out = number != 1 || names.empty() ? std::to_string(number) : "";
  for (const std::string &n : names) out += (out.empty() ? "" : "*") + n;
  return out;
}

// A symbolic dimension as sema writes it ("2 * HALF", "(D // 2)", "BLOCK") as a coefficient text: a product of
// names, integers and quotients of two of them, or none for anything else (a sum, a call).
inline std::optional<std::string> dimension_text(const std::string &symbol) {
  std::string t;
  for (char c : symbol)
    if (c != ' ' && c != '(' && c != ')') t += c;
  if (t.empty() || t.find_first_of("+-%,<>=!&|") != std::string::npos) return std::nullopt;
  // Parentheses only grouped a product or a single quotient: each factor a name, an integer or A//B.
  std::string out = "1";
  for (const std::string &factor : coefficient_factors(t)) {
    if (factor.empty()) return std::nullopt;
    if (factor.find('/') != std::string::npos && !quotient_sides(factor)) return std::nullopt;
    out = multiply_coefficients(out, factor);
  }
  // (A quotient next to a product, "a*b//c", reads as (a*b)//c in Python: not a product of those factors.)
  if (symbol.find("//") != std::string::npos && coefficient_factors(t).size() > 1) return std::nullopt;
  return out;
}

// The expression of a coefficient text: its factors multiplied, a quotient factor as a floor division.
inline ExprPtr text_expr(const std::string &text) {
  ExprPtr out;
  auto atom = [](const std::string &t) -> ExprPtr {
    if (std::optional<long long> v = integer_text(t); v && *v >= 0) return std::make_unique<IntLit>(static_cast<uint64_t>(*v), "");
    return std::make_unique<Name>(t);
  };
  for (const std::string &factor : coefficient_factors(text)) {
    ExprPtr f;
    if (auto q = quotient_sides(factor))
      f = std::make_unique<BinOp>(BinaryOpKind::FloorDiv, atom(q->first), atom(q->second));
    else
      f = atom(factor);
    out = out ? std::make_unique<BinOp>(BinaryOpKind::Mul, std::move(out), std::move(f)) : std::move(f);
  }
  return out;
}

}  // namespace tgrad::ad::access_text
