// Reading a kernel file: the first stage of every use of tgrad's library.
//
//   tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read("kernels/gelu.py", {{"src/"}});
//   if (!file) { std::cerr << file.error().render(); return 1; }
//
// A kernel file is ordinary Python: tgrad keeps its @triton.jit functions,
// module constants and imports, and follows imports of the user's own modules
// through a search path (ReadOptions). The other stages (tgrad/api/Typing.h,
// Gradient.h, Run.h, Check.h) take the KernelFile and report to its log of
// diagnostics, so that a caller can print every warning of a session in order.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tgrad/api/Result.h"
#include "tgrad/ast/Ast.h"

namespace tgrad {

namespace api_internal {
struct Access;
struct FileState;
}  // namespace api_internal

struct ReadOptions {
  // Directories where the modules the file imports (`from mypkg.ops import
  // softplus`) are looked for, in order, like a C compiler's -I; then the
  // file's own directory and its package root. Relative imports (`from
  // .utils import f`) are read from the file's directory.
  std::vector<std::string> include_dirs;
};

// A parsed kernel file and the log of diagnostics reported about it. Copies
// share one file and one log.
class KernelFile {
 public:
  // Reads the file at `path` (diagnostics name it `path`). An Error of kind
  // Input where it cannot be opened or holds errors (all of them, located).
  static Result<KernelFile> read(const std::string &path, const ReadOptions &options = {});
  // The same for a text the caller read (standard input): diagnostics name it
  // `name`; its imports are looked for in options.include_dirs only.
  static Result<KernelFile> read_text(std::string text, const std::string &name, const ReadOptions &options = {});

  const std::string &name() const;  // as diagnostics name the file
  // The jit functions, the module constants and imports: the file's own and
  // those its imports brought in (ast::Function::imported_from).
  const ast::Module &module() const;
  // The names of module().functions, in order.
  std::vector<std::string> function_names() const;
  // The jit function called `name`, or null (superseded fallbacks are skipped).
  const ast::Function *find_function(const std::string &name) const;
  // The same, or an Error of kind Request that lists the functions there are.
  Result<const ast::Function *> function(const std::string &name) const;

  // Every diagnostic reported about the file so far, by every call that took
  // it (warnings of a successful call included), in order.
  std::vector<StoredDiagnostic> diagnostics() const;
  // Their renderings, concatenated: what the command line prints.
  std::string rendered_diagnostics() const;

 private:
  explicit KernelFile(std::shared_ptr<api_internal::FileState> state) : state_(std::move(state)) {}
  std::shared_ptr<api_internal::FileState> state_;
  friend struct api_internal::Access;
};

// The jit code as tgrad reads it, printed back as Python in tgrad's stable
// formatting (`tgrad FILE --emit source`): the file's own functions,
// constants and imports...
std::string print_source(const KernelFile &file);
// ...or one function.
std::string print_source(const ast::Function &function);

// The kernel a request that names none differentiates: the file's one jit
// function that none of its others calls (a kernel with its helpers); where
// there are several, the one not named as a backward (layer_norm_fwd beside a
// hand-written layer_norm_bwd), with a note that says so. An Error of kind
// Request where that leaves more than one, or none.
struct KernelChoice {
  std::string name;
  std::string note;  // "" where the choice needs no explanation
};
Result<KernelChoice> choose_kernel(const KernelFile &file);

}  // namespace tgrad
