#include "src/api/FunctionNames.h"

namespace tgrad::api_internal {

std::string function_names(const ast::Module &m) {
  std::string names;
  for (const auto &f : m.functions) names += (names.empty() ? "" : ", ") + f->name;
  return names.empty() ? "none" : names;
}

std::string function_names(const ast::Module &m, const std::vector<const ast::Function *> &only) {
  std::string names;
  for (const auto *f : only) names += (names.empty() ? "" : ", ") + f->name;
  return names.empty() ? function_names(m) : names;
}

}  // namespace tgrad::api_internal
