#include "src/api/Requests.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "src/api/State.h"
#include "src/driver/LaunchSpec.h"

namespace tgrad::api_internal {

Status resolve_wrt(const std::vector<std::string> &wrt, const ast::Function &fn, std::vector<std::string> &names) {
  // Messages quote the list as --wrt took it.
  std::string text;
  for (size_t k = 0; k < wrt.size(); ++k) text += (k ? "," : "") + wrt[k];
  for (const std::string &entry : wrt) {
    std::stringstream list(entry);
    std::string item;
    while (std::getline(list, item, ',')) {
      std::string name = item;
      if (!item.empty() && std::all_of(item.begin(), item.end(), ::isdigit)) {
        // (Digit by digit, never past the parameter count: no overflow.)
        size_t index = 0;
        for (char c : item) index = std::min(index * 10 + static_cast<size_t>(c - '0'), fn.params.size());
        if (index >= fn.params.size())
          return request_error("--wrt " + text + ": '" + fn.name + "' has " + std::to_string(fn.params.size()) +
                               " parameters; index " + item + " is out of range");
        name = fn.params[index].name;
      }
      size_t k = 0;
      while (k < fn.params.size() && fn.params[k].name != name) ++k;
      if (k == fn.params.size()) return request_error("--wrt " + text + ": '" + fn.name + "' has no parameter '" + name + "'");
      if (fn.is_constexpr_param(k))
        return request_error("--wrt " + text + ": '" + name + "' is tl.constexpr and carries no gradient");
      if (std::find(names.begin(), names.end(), name) != names.end())
        return request_error("--wrt " + text + ": '" + name + "' is listed twice");
      names.push_back(name);
    }
  }
  if (names.empty()) return request_error("--wrt needs at least one parameter");
  return Status();
}

Status add_param_types(const std::vector<std::string> &defines, const std::vector<std::string> &signature,
                       sema::ParamTypes &types) {
  std::string error;
  for (const std::string &d : defines) {
    auto parsed = driver::parse_define(d, error);
    if (!parsed) return request_error(error);
    types[parsed->first] = driver::stype_of(parsed->second);
  }
  for (const std::string &a : signature) {
    auto parsed = driver::parse_param_type(a, error);
    if (!parsed) return request_error(error);
    types[parsed->first] = parsed->second;
  }
  return Status();
}

}  // namespace tgrad::api_internal
