#include "src/lower/SourceRewrites.h"

#include "src/lower/FailingBranches.h"
#include "src/lower/ModuleNamespaces.h"

namespace tgrad::lower {

std::unique_ptr<ast::Module> with_source_rewrites(const ast::Module &module) {
  std::unique_ptr<ast::Module> resolved = with_namespace_calls_resolved(module);
  std::unique_ptr<ast::Module> asserted = with_failing_branches_asserted(resolved ? *resolved : module);
  return asserted ? std::move(asserted) : std::move(resolved);
}

}  // namespace tgrad::lower
