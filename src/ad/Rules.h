// The adjoint rule table: src/ad/adjoints/rules.py, embedded at build time
// and parsed by tgrad's own parser on first use. One rule per operation,
// keyed by the operation's name ("mul", "exp", "sum"); see the file's header
// for the conventions.
#pragma once

#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

// The rule for an operation, or null. The first call parses the rules; a
// rules file that does not parse is a build defect, reported as an internal
// error.
const ast::Function *find_rule(const std::string &op);

// Every operation with a rule, sorted (for error messages and tests).
std::vector<std::string> rule_names();

// The embedded source of the rules (for tests).
const char *rules_source();

// For mutation tests of the gradient checks only: while an override lives,
// the rules its source defines replace the table's rules of the same name
// (a deliberately wrong tanh, say, which the checks must catch). Not
// thread-safe; one override at a time.
class RuleOverride {
 public:
  explicit RuleOverride(const std::string &rules);
  ~RuleOverride();
  RuleOverride(const RuleOverride &) = delete;
  RuleOverride &operator=(const RuleOverride &) = delete;
  bool ok() const { return ok_; }  // the source parsed

 private:
  bool ok_ = false;
};

}  // namespace tgrad::ad
