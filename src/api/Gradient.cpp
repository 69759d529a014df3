// Differentiation through the API: the request read into the
// differentiator's, the backward and what it is emitted as.
#include "tgrad/api/Gradient.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/api/Requests.h"
#include "src/api/State.h"
#include "src/driver/BackwardJson.h"
#include "src/driver/TorchModule.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad {

using api_internal::Access;
using api_internal::FileState;
using api_internal::GradientState;

const std::string &Gradient::function() const { return state_->request.function; }
const std::string &Gradient::backward_name() const { return state_->backward.backward_name; }
const std::string &Gradient::source() const { return state_->backward.source; }
const std::vector<std::string> &Gradient::explanations() const { return state_->backward.explanations; }
const ad::Backward &Gradient::backward() const { return state_->backward; }

std::vector<std::string> Gradient::block_size_constexprs() const {
  const ast::Function *fn = state_->file->module->find_function(state_->request.function);
  std::vector<std::string> out;
  if (!fn) return out;
  std::set<std::string> used;
  ad::visit_exprs(fn->body, [&](const ast::Expr &e) {
    auto *c = ast::dyn_cast<ast::Call>(&e);
    if (!c) return;
    const std::string callee = emit::print_expr(*c->func);
    if (callee == "tl.arange" && c->args.size() == 2) {
      if (auto *n = ast::dyn_cast<ast::Name>(c->args[1].get())) used.insert(n->id);
    } else if ((callee == "tl.zeros" || callee == "tl.full") && !c->args.empty()) {
      ast::visit_expr(*c->args[0], [&](const ast::Expr &x) {
        if (auto *n = ast::dyn_cast<ast::Name>(&x)) used.insert(n->id);
      });
    }
  });
  for (size_t k = 0; k < fn->params.size(); ++k)
    if (fn->is_constexpr_param(k) && used.count(fn->params[k].name) && !state_->request.param_types.count(fn->params[k].name))
      out.push_back(fn->params[k].name);
  return out;
}

std::string Gradient::launch_protocol() const {
  return driver::backward_json(*state_->file->module, state_->request, state_->backward);
}

Result<std::string> Gradient::torch_module(const std::string &op_namespace) const {
  std::string error;
  std::optional<std::string> module =
      driver::torch_module(*state_->file->module, state_->request, state_->backward, op_namespace, error);
  if (!module) {
    Error e;
    e.message = error;
    return e;
  }
  return *module;
}

// --tiling NAMES: each a tl.constexpr parameter of the kernel without a -D value (a value given is not the
// module's to choose), once.
static Status resolve_tiling(const std::vector<std::string> &entries, const ast::Function &fn,
                             const sema::ParamTypes &given, std::vector<std::string> &out) {
  for (const std::string &entry : entries) {
    size_t start = 0;
    while (start <= entry.size()) {
      const size_t comma = std::min(entry.find(',', start), entry.size());
      const std::string name = entry.substr(start, comma - start);
      start = comma + 1;
      if (name.empty()) return api_internal::request_error("--tiling " + entry + ": an empty name");
      size_t k = 0;
      while (k < fn.params.size() && fn.params[k].name != name) ++k;
      if (k == fn.params.size())
        return api_internal::request_error("--tiling " + entry + ": '" + fn.name + "' has no parameter '" + name + "'");
      if (!fn.is_constexpr_param(k))
        return api_internal::request_error("--tiling " + entry + ": '" + name +
                                           "' is not a tl.constexpr parameter (only block sizes that tile the "
                                           "computation can be launched with other values)");
      if (given.count(name))
        return api_internal::request_error("--tiling " + entry + ": '" + name +
                                           "' has a value from -D, so the backward is generated for that value only");
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  return {};
}

// A scalar parameter annotated with a dtype (`T: tl.int64`, fla's ascend kernels) has that type, as --arg would
// give it: the generic backward does not try the others (an fp32 T, which the kernel's author ruled out, gave
// another backward than an int32 one and stopped the differentiation).
static Status annotated_scalar_types(const ast::Function &fn, sema::ParamTypes &types) {
  static const std::map<std::string, std::string> spelled = {
      {"float16", "fp16"}, {"bfloat16", "bf16"}, {"float32", "fp32"}, {"float64", "fp64"}, {"int1", "int1"},
      {"int8", "int8"},    {"int16", "int16"},   {"int32", "int32"},  {"int64", "int64"},  {"uint8", "uint8"},
      {"uint16", "uint16"}, {"uint32", "uint32"}, {"uint64", "uint64"}};
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const ast::Param &p = fn.params[k];
    if (fn.is_constexpr_param(k) || types.count(p.name) || !p.annotation) continue;
    auto *attr = ast::dyn_cast<ast::Attribute>(p.annotation.get());
    auto *module = attr ? ast::dyn_cast<ast::Name>(attr->value.get()) : nullptr;
    auto it = attr ? spelled.find(attr->attr) : spelled.end();
    if (!module || module->id != "tl" || it == spelled.end()) continue;
    if (Status s = api_internal::add_param_types({}, {p.name + "=" + it->second}, types); !s) return s;
  }
  return {};
}

Result<Gradient> differentiate(KernelFile &file, const GradientRequest &request) {
  FileState &state = Access::state(file);
  std::string name = request.function;
  if (name.empty()) {
    Result<KernelChoice> choice = choose_kernel(file);
    if (!choice) return choice.error();
    name = choice->name;
  }
  Result<const ast::Function *> found = file.function(name);
  if (!found) return found.error();
  const ast::Function *fn = *found;
  auto result = std::make_shared<GradientState>();
  result->file = Access::shared_state(file);
  ad::BackwardRequest &r = result->request;
  r.function = fn->name;
  r.command_line = request.command_line;
  r.no_grad = request.no_grad;
  r.deterministic = request.deterministic;
  if (Status s = api_internal::resolve_wrt(request.wrt, *fn, r.wrt); !s) return s.error();
  if (Status s = api_internal::add_param_types(request.defines, request.types, r.param_types); !s) return s.error();
  if (Status s = resolve_tiling(request.tiling, *fn, r.param_types, r.tiling); !s) return s.error();
  if (Status s = annotated_scalar_types(*fn, r.param_types); !s) return s.error();
  const size_t from = state.diags.diagnostics().size();
  std::optional<ad::Backward> backward = ad::differentiate(*state.module, state.sources, r, state.diags);
  if (!backward) return api_internal::input_error(state, from);
  result->backward = std::move(*backward);
  return Access::make_gradient(std::move(result));
}

std::string op_namespace_for(const std::string &path) {
  std::string stem = path == "-" ? "stdin" : std::filesystem::path(path).stem().string();
  for (char &c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return "tgrad_" + stem;
}

}  // namespace tgrad
