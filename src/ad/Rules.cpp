#include "src/ad/Rules.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>

#include "tgrad/parse/Parser.h"

namespace tgrad::ad {

extern const char kAdjointRules[];  // generated from adjoints/rules.py (src/BUILD)

namespace {

struct Table {
  SourceManager sources;
  std::unique_ptr<ast::Module> module;
  std::map<std::string, const ast::Function *> rules;

  Table() {
    int id = sources.add_file("src/ad/adjoints/rules.py", kAdjointRules);
    DiagEngine diags(sources);
    module = parse::parse_module(sources, id, diags);
    if (diags.has_errors()) {
      std::cerr << "tgrad: internal error: the embedded adjoint rules do not parse:\n";
      diags.print_all(std::cerr);
      std::abort();
    }
    for (const auto &f : module->functions) rules[f->name] = f.get();
  }
};

const Table &table() {
  static const Table t;
  return t;
}

// The live RuleOverride's rules, if any.
struct Override {
  SourceManager sources;
  std::unique_ptr<ast::Module> module;
  std::map<std::string, const ast::Function *> rules;
};
std::unique_ptr<Override> &current_override() {
  static std::unique_ptr<Override> o;
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
  auto o = std::make_unique<Override>();
  int id = o->sources.add_file("rule_override.py", rules);
  DiagEngine diags(o->sources);
  o->module = parse::parse_module(o->sources, id, diags);
  if (diags.has_errors() || !o->module) return;
  for (const auto &f : o->module->functions) o->rules[f->name] = f.get();
  current_override() = std::move(o);
  ok_ = true;
}

RuleOverride::~RuleOverride() {
  if (ok_) current_override().reset();
}

}  // namespace tgrad::ad
