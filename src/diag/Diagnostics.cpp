#include "tgrad/diag/Diagnostics.h"

#include <sstream>

namespace tgrad {

int SourceManager::add_file(std::string name, std::string text) {
  File f;
  f.name = std::move(name);
  f.text = std::move(text);
  f.line_starts.push_back(0);
  for (size_t i = 0; i < f.text.size(); ++i) {
    // Python's line breaks: \n, \r\n and a lone \r.
    if (f.text[i] == '\r' && i + 1 < f.text.size() && f.text[i + 1] == '\n') continue;
    if (f.text[i] == '\n' || f.text[i] == '\r') f.line_starts.push_back(i + 1);
  }
  files_.push_back(std::move(f));
  return static_cast<int>(files_.size()) - 1;
}

const std::string &SourceManager::name(int file_id) const { return files_.at(file_id).name; }
const std::string &SourceManager::text(int file_id) const { return files_.at(file_id).text; }

std::string SourceManager::line_text(int file_id, int line) const {
  if (file_id < 0 || file_id >= file_count()) return "";
  const File &f = files_[file_id];
  if (line < 1 || static_cast<size_t>(line) > f.line_starts.size()) return "";
  size_t begin = f.line_starts[line - 1];
  size_t end = begin;
  while (end < f.text.size() && f.text[end] != '\n' && f.text[end] != '\r') ++end;
  return f.text.substr(begin, end - begin);
}

size_t SourceManager::line_start(int file_id, int line) const {
  const File &f = files_.at(file_id);
  if (line < 1) return 0;
  if (static_cast<size_t>(line) > f.line_starts.size()) return f.text.size();
  return f.line_starts[line - 1];
}

int SourceManager::line_count(int file_id) const {
  return static_cast<int>(files_.at(file_id).line_starts.size());
}

void DiagEngine::error(const SourceSpan &span, std::string message) {
  report({Severity::Error, span, std::move(message)});
}
void DiagEngine::warning(const SourceSpan &span, std::string message) {
  report({Severity::Warning, span, std::move(message)});
}
void DiagEngine::note(const SourceSpan &span, std::string message) {
  report({Severity::Note, span, std::move(message)});
}

void DiagEngine::report(Diagnostic d) {
  // A note or warning said once is enough (a stage that runs once per specialization would repeat it).
  if (d.severity != Severity::Error)
    for (const Diagnostic &o : diags_)
      if (o.severity == d.severity && o.message == d.message && o.span.begin.line == d.span.begin.line &&
          o.span.begin.column == d.span.begin.column && o.span.file_id == d.span.file_id)
        return;
  if (d.severity == Severity::Error) ++error_count_;
  diags_.push_back(std::move(d));
}

namespace {

const char *severity_name(Severity s) {
  switch (s) {
    case Severity::Note: return "note";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "error";
}

// UTF-8 continuation bytes do not start a code point, so they take no column.
bool is_continuation_byte(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

std::string DiagEngine::render(const Diagnostic &d) const {
  std::ostringstream out;
  const SourceSpan &s = d.span;
  bool located = s.file_id >= 0 && s.file_id < sources_.file_count();
  if (located) {
    out << sources_.name(s.file_id);
    if (s.begin.line > 0) out << ':' << s.begin.line << ':' << s.begin.column;
    out << ": ";
  } else {
    out << "tgrad: ";
  }
  out << severity_name(d.severity) << ": " << d.message << '\n';
  if (!located || s.begin.line <= 0) return out.str();

  std::string line = sources_.line_text(s.file_id, s.begin.line);
  out << line << '\n';
  // The caret line copies tabs from the source line so the caret lines up in
  // any tab width; every other code point becomes one space.
  std::string marker;
  int column = 1;
  for (size_t i = 0; i < line.size() && column < s.begin.column; ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if (is_continuation_byte(c)) continue;
    marker += (c == '\t') ? '\t' : ' ';
    ++column;
  }
  marker += '^';
  // Underline the rest of a span that stays on one line.
  if (s.end.line == s.begin.line && s.end.column > s.begin.column + 1)
    marker += std::string(s.end.column - s.begin.column - 1, '~');
  out << marker << '\n';
  return out.str();
}

void DiagEngine::print_all(std::ostream &out) const {
  for (const Diagnostic &d : diags_) out << render(d);
}

}  // namespace tgrad
