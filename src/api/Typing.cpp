// Typing (semantic analysis) through the API, and the AST dump annotated
// with its types.
#include "tgrad/api/Typing.h"

#include "src/api/Requests.h"
#include "src/api/State.h"
#include "src/lower/SourceRewrites.h"
#include "tgrad/emit/AstDump.h"
#include "tgrad/sema/Sema.h"

namespace tgrad {
namespace {

using api_internal::Access;
using api_internal::FileState;

emit::ExprAnnotator annotator(const Types *types) {
  if (!types) return nullptr;
  return [types](const ast::Expr &e) { return types->of(e); };
}

}  // namespace

std::string Types::of(const ast::Expr &e) const {
  auto it = types_.find(&e);
  return it == types_.end() ? std::string() : it->second;
}

Result<Types> type(KernelFile &file, const TypeRequest &request) {
  FileState &state = Access::state(file);
  const ast::Function *selected = nullptr;
  if (!request.function.empty()) {
    Result<const ast::Function *> found = file.function(request.function);
    if (!found) return found.error();
    selected = *found;
  } else if (!request.defines.empty() || !request.types.empty()) {
    return api_internal::request_error("-D and --arg type the parameters of one function: add --fn NAME");
  }
  sema::ParamTypes params;
  if (Status s = api_internal::add_param_types(request.defines, request.types, params); !s) return s.error();
  const size_t from = state.diags.diagnostics().size();
  Types types;
  // The module as the stages that differentiate and compile read it (src/lower/SourceRewrites.h). A function that
  // types only so (a helper raising for the dtypes it does not support, typed without a dtype) reads; its types are
  // not shown.
  std::unique_ptr<ast::Module> source_rewrites = lower::with_source_rewrites(*state.module);
  const ast::Module *rewritten = source_rewrites.get();
  for (const auto &f : state.module->functions) {
    if (selected && f.get() != selected) continue;
    if (rewritten) {
      DiagEngine quiet(state.sources);
      if (std::optional<sema::TypeInfo> written = sema::analyze(*state.module, *f, params, quiet)) {
        written->types.for_each([&](const ast::Expr *e, const sema::SType &t) {
          if (t.kind != sema::SType::Kind::Unknown) Access::types(types)[e] = t.str();
        });
        continue;
      }
      if (const ast::Function *g = rewritten->find_function(f->name)) {
        if (!sema::analyze(*rewritten, *g, params, state.diags)) return api_internal::input_error(state, from);
        continue;
      }
    }
    std::optional<sema::TypeInfo> info = sema::analyze(*state.module, *f, params, state.diags);
    if (!info) return api_internal::input_error(state, from);
    info->types.for_each([&](const ast::Expr *e, const sema::SType &t) {
      if (t.kind != sema::SType::Kind::Unknown) Access::types(types)[e] = t.str();
    });
  }
  return types;
}

std::string dump_ast(const KernelFile &file, const Types *types) {
  return emit::dump_ast(file.module(), Access::state(file).sources, annotator(types));
}

std::string dump_ast(const ast::Function &function, const Types *types) {
  return emit::dump_ast(function, annotator(types));
}

}  // namespace tgrad
