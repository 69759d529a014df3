// What the API's handles hold, and the helpers every stage uses to turn the
// pipeline's reports into the API's errors. Internal to src/api/.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tgrad/ad/Differentiate.h"
#include "tgrad/api/Gradient.h"
#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"
#include "tgrad/api/Typing.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"

namespace tgrad::api_internal {

// One kernel file: its text (and the texts of the modules it imports), the
// log every stage reports to, the module read. Never moved: `diags` refers
// to `sources`.
struct FileState {
  SourceManager sources;
  DiagEngine diags{sources};
  std::unique_ptr<ast::Module> module;
  int file_id = -1;
};

// One backward. Holds the file's state: the protocol and the torch module
// read the forward's AST.
struct GradientState {
  std::shared_ptr<FileState> file;
  ad::BackwardRequest request;
  ad::Backward backward;
};

// The handles' private parts, for the implementation of the API.
struct Access {
  static FileState &state(const KernelFile &file) { return *file.state_; }
  static const std::shared_ptr<FileState> &shared_state(const KernelFile &file) { return file.state_; }
  static KernelFile make_file(std::shared_ptr<FileState> state) { return KernelFile(std::move(state)); }
  static Gradient make_gradient(std::shared_ptr<const GradientState> state) { return Gradient(std::move(state)); }
  static const GradientState &state(const Gradient &gradient) { return *gradient.state_; }
  static std::unordered_map<const ast::Expr *, std::string> &types(Types &types) { return types.types_; }
  static const std::unordered_map<const ast::Expr *, std::string> &types(const Types &types) { return types.types_; }
};

// The file's diagnostics from the `from`-th on, as values.
std::vector<StoredDiagnostic> stored_diagnostics(const FileState &state, size_t from = 0);

// An Error of kind Input holding the diagnostics reported since `from` (the
// number the log held when the failing call began).
Error input_error(const FileState &state, size_t from);

Error request_error(std::string message);

}  // namespace tgrad::api_internal
