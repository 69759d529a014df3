// Diagnostics: source locations, the source manager that owns file texts, and
// the engine that collects located errors and warnings.
//
// Convention (one for the whole project): lines and columns are 1-based;
// columns count Unicode code points, so a caret lines up under the character
// it names. A span is [begin, end): `end` is the position just after the last
// character. No stage throws across its boundary: each reports here and returns.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tgrad {

struct SourcePos {
  int line = 0;    // 1-based; 0 means "unknown"
  int column = 0;  // 1-based, in code points
  bool operator==(const SourcePos &o) const { return line == o.line && column == o.column; }
  bool operator!=(const SourcePos &o) const { return !(*this == o); }
};

struct SourceSpan {
  int file_id = -1;  // index into SourceManager; -1 for generated nodes
  SourcePos begin;
  SourcePos end;
  bool valid() const { return file_id >= 0 && begin.line > 0; }
};

// Owns the text of every file read in one run, so diagnostics can quote lines.
class SourceManager {
 public:
  int add_file(std::string name, std::string text);
  const std::string &name(int file_id) const;
  const std::string &text(int file_id) const;
  // The text of a 1-based line without its line break; empty if out of range.
  std::string line_text(int file_id, int line) const;
  // Byte offset where a 1-based line starts (the text's size past the end).
  size_t line_start(int file_id, int line) const;
  int line_count(int file_id) const;
  int file_count() const { return static_cast<int>(files_.size()); }

 private:
  struct File {
    std::string name;
    std::string text;
    std::vector<size_t> line_starts;  // byte offset of each line's start
  };
  std::vector<File> files_;
};

enum class Severity { Note, Warning, Error };

struct Diagnostic {
  Severity severity = Severity::Error;
  SourceSpan span;
  std::string message;
};

// Collects diagnostics in the order reported; renders them like a compiler:
//   file:line:col: error: message
//       x = (a +
//           ^
class DiagEngine {
 public:
  explicit DiagEngine(const SourceManager &sources) : sources_(sources) {}

  void error(const SourceSpan &span, std::string message);
  void warning(const SourceSpan &span, std::string message);
  void note(const SourceSpan &span, std::string message);
  void report(Diagnostic d);

  bool has_errors() const { return error_count_ > 0; }
  int error_count() const { return error_count_; }
  const SourceManager &sources() const { return sources_; }
  const std::vector<Diagnostic> &diagnostics() const { return diags_; }

  std::string render(const Diagnostic &d) const;
  void print_all(std::ostream &out) const;

 private:
  const SourceManager &sources_;
  std::vector<Diagnostic> diags_;
  int error_count_ = 0;
};

}  // namespace tgrad
