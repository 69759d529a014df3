// libFuzzer target for the whole front end: scanner, token source, parser,
// AST builder, diagnostics rendering, dumper and printer. Besides crashes,
// hangs and sanitizer reports, it checks the round-trip property on every
// input that parses: parse(print(m)) must parse and equal m.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "tgrad/tgrad.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tgrad;
  SourceManager sources;
  int id = sources.add_file("fuzz.py", std::string(reinterpret_cast<const char *>(data), size));
  DiagEngine diags(sources);
  std::unique_ptr<ast::Module> module = parse::parse_module(sources, id, diags);
  for (const Diagnostic &d : diags.diagnostics()) (void)diags.render(d);
  if (diags.has_errors()) return 0;

  (void)emit::dump_ast(*module, sources);
  const std::string printed = emit::print_module(*module);
  int id2 = sources.add_file("printed.py", printed);
  DiagEngine diags2(sources);
  std::unique_ptr<ast::Module> again = parse::parse_module(sources, id2, diags2);
  if (diags2.has_errors() || !ast::equal(*module, *again)) {
    std::fprintf(stderr, "round trip failed\n--- printed:\n%s\n--- diagnostics:\n", printed.c_str());
    diags2.print_all(std::cerr);
    std::abort();
  }
  return 0;
}
