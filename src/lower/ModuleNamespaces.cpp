#include "src/lower/ModuleNamespaces.h"

#include <map>
#include <set>
#include <string>

#include "src/lower/Walk.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::lower {

using namespace ast;

namespace {

// The copy an `alias.NAME` expression reads, or "" (not a namespace's, or NAME was not copied).
std::string copy_read(const Module &module, const Expr &e, const std::set<std::string> &locals) {
  auto *a = dyn_cast<Attribute>(&e);
  auto *base = a ? dyn_cast<Name>(a->value.get()) : nullptr;
  if (!base || locals.count(base->id)) return "";
  auto it = module.module_namespaces.find(base->id);
  if (it == module.module_namespaces.end()) return "";
  const std::string copy = it->second + a->attr;
  if (module.find_function(copy)) return copy;
  for (const Constant &c : module.constants)
    if (c.name == copy) return copy;
  return "";
}

// The names a function binds itself (parameters, assignments, loop variables): they shadow an alias.
std::set<std::string> locals_of(const Function &f) {
  std::set<std::string> out;
  for (const Param &p : f.params) out.insert(p.name);
  std::map<std::string, int> assigned;
  count_assignments(f.body, assigned);
  for (const auto &kv : assigned) out.insert(kv.first);
  return out;
}

}  // namespace

std::unique_ptr<Module> with_namespace_calls_resolved(const Module &module) {
  if (module.module_namespaces.empty()) return nullptr;
  bool any = false;
  for (const auto &f : module.functions) {
    const std::set<std::string> locals = locals_of(*f);
    visit_block(f->body, [&](const Expr &e) { any = any || !copy_read(module, e, locals).empty(); });
  }
  if (!any) return nullptr;
  std::unique_ptr<Module> out = clone(module);
  for (auto &f : out->functions) {
    const std::set<std::string> locals = locals_of(*f);
    rewrite_block(f->body, [&](ExprPtr &e) {
      const std::string copy = copy_read(*out, *e, locals);
      if (!copy.empty()) e = std::make_unique<Name>(copy, e->span);
    });
  }
  return out;
}

}  // namespace tgrad::lower
