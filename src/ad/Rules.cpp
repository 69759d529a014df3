#include "src/ad/Rules.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>

#include "tgrad/parse/Parser.h"

namespace tgrad::ad {

extern const char kAdjointRules[];  // generated from adjoints/rules.py (src/BUILD)

namespace {

// Rules parsed from tile-language source: the embedded table, or a test's override.
struct Table {
  SourceManager sources;
  std::unique_ptr<ast::Module> module;
  std::map<std::string, const ast::Function *> rules;
  bool ok = false;  // the source parsed

  Table(const std::string &name, const std::string &text, bool abort_on_error) {
    int id = sources.add_file(name, text);
    DiagEngine diags(sources);
    module = parse::parse_module(sources, id, diags);
    ok = !diags.has_errors() && module;
    if (!ok && abort_on_error) {
      std::cerr << "tgrad: internal error: the embedded adjoint rules do not parse:\n";
      diags.print_all(std::cerr);
      std::abort();
    }
    if (ok)
      for (const auto &f : module->functions) rules[f->name] = f.get();
  }
};

const Table &table() {
  static const Table t("src/ad/adjoints/rules.py", kAdjointRules, /*abort_on_error=*/true);
  return t;
}

// The live RuleOverride's rules, if any.
std::unique_ptr<Table> &current_override() {
  static std::unique_ptr<Table> o;
  return o;
}

}  // namespace

const ast::Function *find_rule(const std::string &op) {
  if (const auto &o = current_override()) {
    auto found = o->rules.find(op);
    if (found != o->rules.end()) return found->second;
  }
  auto it = table().rules.find(op);
  return it == table().rules.end() ? nullptr : it->second;
}

std::vector<std::string> rule_names() {
  std::vector<std::string> names;
  for (const auto &kv : table().rules) names.push_back(kv.first);
  return names;
}

const char *rules_source() { return kAdjointRules; }

RuleOverride::RuleOverride(const std::string &rules) {
  auto o = std::make_unique<Table>("rule_override.py", rules, /*abort_on_error=*/false);
  if (!o->ok) return;
  current_override() = std::move(o);
  ok_ = true;
}

RuleOverride::~RuleOverride() {
  if (ok_) current_override().reset();
}

}  // namespace tgrad::ad
