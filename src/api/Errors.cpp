// Errors as values: rendering, and the conversion of the diagnostics engine's
// reports (which need the file's SourceManager) into values that do not.
#include "src/api/State.h"

namespace tgrad {

std::string Error::render() const {
  std::string out;
  for (const StoredDiagnostic &d : diagnostics) out += d.rendered;
  if (!message.empty()) out += "tgrad: error: " + message + "\n";
  return out;
}

namespace api_internal {

std::vector<StoredDiagnostic> stored_diagnostics(const FileState &state, size_t from) {
  std::vector<StoredDiagnostic> out;
  const std::vector<Diagnostic> &all = state.diags.diagnostics();
  for (size_t k = from; k < all.size(); ++k) {
    const Diagnostic &d = all[k];
    StoredDiagnostic s;
    s.severity = d.severity;
    if (d.span.file_id >= 0 && d.span.file_id < state.sources.file_count()) {
      s.file = state.sources.name(d.span.file_id);
      s.line = d.span.begin.line;
      s.column = d.span.begin.column;
    }
    s.message = d.message;
    s.rendered = state.diags.render(d);
    out.push_back(std::move(s));
  }
  return out;
}

Error input_error(const FileState &state, size_t from) {
  Error e;
  e.kind = Error::Kind::Input;
  e.diagnostics = stored_diagnostics(state, from);
  return e;
}

Error request_error(std::string message) {
  Error e;
  e.kind = Error::Kind::Request;
  e.message = std::move(message);
  return e;
}

}  // namespace api_internal
}  // namespace tgrad
