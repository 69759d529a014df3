// Reading a kernel file (parse, follow the user's imports, settle which of
// the module-level alternatives Triton takes), printing it back, and picking
// the kernel a request that names none differentiates.
#include "tgrad/api/KernelFile.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "src/ad/AnfWalk.h"
#include "src/api/FunctionNames.h"
#include "src/api/State.h"
#include "src/parse/FollowImports.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/parse/Parser.h"
#include "tgrad/sema/Names.h"

namespace tgrad {
namespace {

using api_internal::Access;
using api_internal::FileState;

// `import_path`: the file relative imports and the package root are found
// from ("" where the text has no file: the search directories only).
Result<KernelFile> read_module(std::string text, const std::string &name, const std::string &import_path,
                               const ReadOptions &options) {
  auto state = std::make_shared<FileState>();
  state->file_id = state->sources.add_file(name, std::move(text));
  state->module = parse::parse_module(state->sources, state->file_id, state->diags);
  if (!state->diags.has_errors())
    parse::follow_imports(*state->module, import_path, options.include_dirs, state->sources, state->diags);
  sema::supersede_fallback_functions(*state->module);
  if (state->diags.has_errors()) return api_internal::input_error(*state, 0);
  return Access::make_file(std::move(state));
}

// Whether a function's name says it is a backward kernel: "bwd" or
// "backward" as a word of it (layer_norm_bwd, _attn_bwd_dkdv,
// softmax_backward_kernel, BackwardKernel).
bool named_as_backward(const std::string &name) {
  std::vector<std::string> words(1);
  for (size_t k = 0; k < name.size(); ++k) {
    const char c = name[k];
    const bool upper = std::isupper(static_cast<unsigned char>(c));
    if (c == '_' || (upper && k > 0 && std::islower(static_cast<unsigned char>(name[k - 1])))) {
      if (!words.back().empty()) words.emplace_back();
      if (c == '_') continue;
    }
    words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const std::string &w : words)
    if (w == "bwd" || w == "backward") return true;
  return false;
}

// The file's own jit functions that no other jit function calls (reads by
// name): a kernel with its helpers has one.
std::vector<const ast::Function *> uncalled_functions(const ast::Module &m) {
  std::set<std::string> read;
  for (const auto &f : m.functions) {
    std::set<std::string> in_f;
    ad::block_reads(f->body, in_f);
    in_f.erase(f->name);  // (recursion is not a caller)
    read.insert(in_f.begin(), in_f.end());
  }
  std::vector<const ast::Function *> roots;
  for (const auto &f : m.functions)
    if (f->imported_from.empty() && !f->is_constexpr_function() && !read.count(f->name) &&
        (f->jit_alias.empty() || !read.count(f->jit_alias)))
      roots.push_back(f.get());
  return roots;
}

}  // namespace

Result<KernelFile> KernelFile::read(const std::string &path, const ReadOptions &options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Error e;
    e.message = "cannot open '" + path + "': " + std::strerror(errno);
    return e;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    Error e;
    e.message = "cannot read '" + path + "'";
    return e;
  }
  return read_module(buffer.str(), path, path, options);
}

Result<KernelFile> KernelFile::read_text(std::string text, const std::string &name, const ReadOptions &options) {
  return read_module(std::move(text), name, "", options);
}

const std::string &KernelFile::name() const { return state_->sources.name(state_->file_id); }

const ast::Module &KernelFile::module() const { return *state_->module; }

std::vector<std::string> KernelFile::function_names() const {
  std::vector<std::string> names;
  for (const auto &f : state_->module->functions) names.push_back(f->name);
  return names;
}

const ast::Function *KernelFile::find_function(const std::string &name) const {
  return state_->module->find_function(name);
}

Result<const ast::Function *> KernelFile::function(const std::string &name) const {
  if (const ast::Function *f = find_function(name)) return f;
  return api_internal::request_error("--fn " + name + ": no @triton.jit function of that name in '" + this->name() +
                                     "' (it has: " + api_internal::function_names(*state_->module) + ")");
}

std::vector<StoredDiagnostic> KernelFile::diagnostics() const { return api_internal::stored_diagnostics(*state_); }

std::string KernelFile::rendered_diagnostics() const {
  std::string out;
  for (const Diagnostic &d : state_->diags.diagnostics()) out += state_->diags.render(d);
  return out;
}

std::string print_source(const KernelFile &file) { return emit::print_module(file.module()); }

std::string print_source(const ast::Function &function) { return emit::print_function(function); }

Result<KernelChoice> choose_kernel(const KernelFile &file) {
  const ast::Module &m = file.module();
  KernelChoice choice;
  std::vector<const ast::Function *> roots = uncalled_functions(m);
  // Real kernel files hold a forward and its hand-written backward
  // (layer_norm_fwd / layer_norm_bwd): the one not named as a backward is
  // the kernel to differentiate, and the note says so.
  std::vector<const ast::Function *> forwards;
  for (const ast::Function *f : roots)
    if (!named_as_backward(f->name)) forwards.push_back(f);
  if (roots.size() > 1 && forwards.size() == 1) {
    std::vector<const ast::Function *> others;
    for (const ast::Function *f : roots)
      if (f != forwards[0]) others.push_back(f);
    choice.note = "differentiating '" + forwards[0]->name +
                  "', the file's one kernel not named as a backward (the others: " +
                  api_internal::function_names(m, others) + "); pick another with --kernel NAME";
    roots = forwards;
  }
  if (roots.size() != 1)
    return api_internal::request_error("--wrt: the file has several jit functions that none of the others calls (" +
                                       api_internal::function_names(m, roots) + "): pick one with --kernel NAME");
  choice.name = roots[0]->name;
  return choice;
}

}  // namespace tgrad
