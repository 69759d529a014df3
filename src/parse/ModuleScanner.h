// ModuleScanner: finds the parts of a Python file that are tile language.
//
// A kernel file is ordinary Python: launchers, torch code and classes sit
// beside the @triton.jit functions. The scanner lexes the whole file with the
// TileLang lexer (so strings, comments and brackets are understood), groups
// tokens into logical lines, and walks the top-level statements. It keeps:
//   - functions decorated @triton.jit (under any stack of @triton.autotune /
//     @triton.heuristics / other decorators), also inside module-level
//     `if`/`try` blocks, functions made jit by `alias = triton.jit(fn)`,
//     and jit functions bound to another name (`softplus = softplus_nv`,
//     kept as a copy under the new name);
//   - module constants `NAME: tl.constexpr = v` and `NAME = tl.constexpr(v)`;
//   - top-level `import` / `from ... import` lines;
//   - the names of the other (host) functions and of plain variables
//     (`_NUM_REG = 1`), from which constants may be computed.
// Everything else is skipped without a diagnostic. Each kept piece becomes a
// Chunk of whole source lines for the parser (src/parse/Parser.cpp).
#pragma once

#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"

namespace tgrad::parse {

struct Chunk {
  enum class Kind { Function, Import, Constant, HostName, Alias, HostBlock };
  Kind kind = Kind::Function;
  int first_line = 1;  // 1-based file line where `text` starts
  std::string text;    // whole lines, first_line onwards
  std::vector<ast::Decorator> decorators;  // Function only
  std::string jit_alias;                   // Function made jit by a call
  std::string rename_to;                   // Function: a copy under this name (`name = jit_fn`)
  std::string host_name;                   // HostName, Alias: the name bound (a HostName's text: its lines);
                                           // a decorated Function: the name after `def`
  std::string alias_of;                    // Alias: the dotted name it binds (`triton_tanh = libdevice.tanh`)
  std::vector<std::string> bound_names;    // HostBlock: the host names a module-level if/try statement binds
  SourceSpan span;                         // Alias: the statement
  bool conditional = false;                // Import, Alias, HostName or Function inside a module-level if/try block
  int group = 0;                           // which if/try statement (1, 2, ...) for a conditional chunk
};

std::vector<Chunk> scan_module(const SourceManager &sources, int file_id, DiagEngine &diags);

}  // namespace tgrad::parse
