// Helpers shared by the parser tests: parse text as a file, collect the
// diagnostics as rendered lines.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tgrad/tgrad.h"

namespace tgrad::testing {

struct Parsed {
  SourceManager sources;
  std::unique_ptr<DiagEngine> diags;
  std::unique_ptr<ast::Module> module;
  int file_id = -1;

  bool ok() const { return !diags->has_errors(); }
  // Every diagnostic's first line: "file:line:col: severity: message".
  std::vector<std::string> messages() const {
    std::vector<std::string> out;
    for (const Diagnostic &d : diags->diagnostics()) {
      std::string r = diags->render(d);
      out.push_back(r.substr(0, r.find('\n')));
    }
    return out;
  }
  std::string all_messages() const {
    std::string s;
    for (const std::string &m : messages()) s += m + "\n";
    return s;
  }
};

inline std::unique_ptr<Parsed> parse_text(const std::string &text, const std::string &name = "t.py") {
  auto p = std::make_unique<Parsed>();
  p->file_id = p->sources.add_file(name, text);
  p->diags = std::make_unique<DiagEngine>(p->sources);
  p->module = parse::parse_module(p->sources, p->file_id, *p->diags);
  return p;
}

// Wraps statements (each line indented by 4) into a jit function `f(x, y, z)`.
inline std::string jit_function(const std::string &body) {
  std::string out = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef f(x, y, z):\n";
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) out += (line.empty() ? "" : "    ") + line + "\n";
  return out;
}

inline std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The .py files of a directory (names only), sorted.
inline std::vector<std::string> python_files(const std::string &dir_path) {
  std::vector<std::string> files;
  if (DIR *dir = opendir(dir_path.c_str())) {
    while (dirent *e = readdir(dir)) {
      std::string name = e->d_name;
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0) files.push_back(name);
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tgrad::testing
