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

}  // namespace tgrad::ad
