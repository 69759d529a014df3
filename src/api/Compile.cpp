// Compiling a kernel through the API: the request checked, then the backend
// (src/codegen/Codegen.h).
#include "tgrad/api/Compile.h"

#include <map>

#include <nlohmann/json.hpp>

#include "src/api/Requests.h"
#include "src/api/State.h"
#include "src/codegen/Codegen.h"

namespace tgrad {

using api_internal::Access;
using api_internal::FileState;

Result<CompiledKernel> compile(KernelFile &file, const CompileRequest &request) {
  FileState &state = Access::state(file);
  Result<const ast::Function *> fn = file.function(request.kernel);
  if (!fn) return fn.error();
  const int w = request.num_warps;
  if (w < 1 || w > 32 || (w & (w - 1)) != 0)
    return api_internal::request_error("--num-warps " + std::to_string(w) + ": a power of two from 1 to 32");
  if (request.emit != "ptx" && request.emit != "llvm")
    return api_internal::request_error("--emit " + request.emit + ": 'ptx' or 'llvm'");
  codegen::CompileOptions options;
  options.kernel = (*fn)->name;
  options.num_warps = w;
  options.arch = request.arch;
  options.emit_ptx = request.emit == "ptx";
  if (Status s = api_internal::add_param_types(request.defines, request.types, options.params); !s) return s.error();
  const size_t from = state.diags.diagnostics().size();
  std::optional<codegen::CompiledKernel> compiled = codegen::compile_kernel(*state.module, options, state.diags);
  if (!compiled) return api_internal::input_error(state, from);
  CompiledKernel out;
  out.name = compiled->name;
  out.text = std::move(compiled->text);
  out.shared_bytes = compiled->shared_bytes;
  out.metadata_json = compiled->metadata_json();
  return out;
}

Result<std::vector<CompiledKernel>> compile_backward(const Gradient &gradient, const CompileRequest &request) {
  // What each parameter of the backward's kernels is: the forward's types,
  // the gradients', and the protocol's scratch buffers and sizes.
  std::map<std::string, std::string> types;
  for (const std::string &t : request.types) {
    const size_t eq = t.find('=');
    if (eq != std::string::npos) types[t.substr(0, eq)] = t.substr(eq + 1);
  }
  const nlohmann::json protocol = nlohmann::json::parse(gradient.launch_protocol());
  for (const auto &p : protocol.at("parameters")) {
    const std::string name = p.at("name"), role = p.value("role", "");
    if (p.contains("gradient") && types.count(name)) types[p.at("gradient").get<std::string>()] = types[name];
    if ((role == "scratch" || role == "size") && !p.at("types").empty())
      types[name] = p.at("types")[0].get<std::string>() == "int32" ? "i32" : p.at("types")[0].get<std::string>();
  }
  Result<KernelFile> file = KernelFile::read_text(gradient.source(), gradient.backward_name() + ".py");
  if (!file) return file.error();
  std::vector<CompiledKernel> out;
  for (const auto &k : protocol.at("kernels")) {
    CompileRequest r = request;
    r.kernel = k.at("name");
    r.types.clear();
    auto add_type = [&](const std::string &name) -> Status {
      auto it = types.find(name);
      if (it == types.end())
        return api_internal::request_error("--emit ptx: the backward kernel '" + r.kernel + "' takes '" + name +
                                           "', whose type is not known: give the forward's --arg for it");
      r.types.push_back(name + "=" + it->second);
      return Status();
    };
    if (k.contains("call")) {
      const ast::Function *fn = file->find_function(r.kernel);
      for (const auto &list : {k.at("call").at("positional"), k.at("call").at("keyword")})
        for (const auto &n : list) {
          const std::string name = n.get<std::string>();
          bool constexpr_param = false;
          for (size_t i = 0; fn && i < fn->params.size(); ++i)
            constexpr_param |= fn->params[i].name == name && fn->is_constexpr_param(i);
          if (constexpr_param) continue;
          if (Status s = add_type(name); !s) return s.error();
        }
    } else {
      // A helper kernel of the protocol's own (the sum of partial rows): its constexprs are numbers here.
      r.defines.clear();
      for (const auto &[name, value] : k.at("arguments").items()) {
        if (value.is_number_integer()) {
          r.defines.push_back(name + "=" + std::to_string(value.get<long long>()));
        } else if (value.contains("buffer")) {
          auto it = types.find(value.at("buffer").get<std::string>());
          if (it == types.end()) return api_internal::request_error("--emit ptx: no type for '" + name + "'");
          r.types.push_back(name + "=" + it->second);
        } else {
          r.types.push_back(name + "=i32");
        }
      }
    }
    Result<CompiledKernel> compiled = compile(*file, r);
    if (!compiled) return compiled.error();
    out.push_back(std::move(*compiled));
  }
  return out;
}

}  // namespace tgrad
