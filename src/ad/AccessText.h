// Texts of the access analysis's affine forms (src/ad/AccessAnalysis.h): integer literals, coefficient operands and
// products of coefficients, shared by the analysis and its layout boxes (src/ad/AccessLayout.cpp).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
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

// The text of a coefficient operand: a literal integer or a name.
inline std::optional<std::string> scalar_text(const Expr &e) {
  if (auto *i = dyn_cast<IntLit>(&e)) return std::to_string(i->value);
  if (auto *n = dyn_cast<Name>(&e)) return n->id;
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

}  // namespace tgrad::ad::access_text
