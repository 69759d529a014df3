// The `tgrad` command line (CLI11).
//
//   tgrad FILE --dump-ast            the AST of the file's jit code, with locations
//   tgrad FILE --emit source         the jit code printed back as Python
//   --fn NAME, -o PATH, FILE may be `-` for standard input
//
// Exit status: 0 on success, 1 for errors in the input, 2 for misuse of the
// command line (unknown flag, missing value, unknown --fn).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <CLI/CLI.hpp>

#include "tgrad/tgrad.h"

namespace {

constexpr int kExitInputError = 1;
constexpr int kExitUsageError = 2;

struct Options {
  std::string input;
  std::string output = "-";
  std::string function;
  std::string emit;
  bool dump_ast = false;
};

bool read_input(const std::string &path, std::string &text, std::string &error) {
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    error = "cannot read '" + path + "'";
    return false;
  }
  text = buffer.str();
  return true;
}

bool write_output(const std::string &path, const std::string &text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return static_cast<bool>(std::cout);
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "tgrad: error: cannot write '" << path << "': " << std::strerror(errno) << '\n';
    return false;
  }
  return true;
}

std::string function_names(const tgrad::ast::Module &m) {
  std::string names;
  for (const auto &f : m.functions) names += (names.empty() ? "" : ", ") + f->name;
  return names.empty() ? "none" : names;
}

int run(const Options &opts) {
  std::string text, error;
  if (!read_input(opts.input, text, error)) {
    std::cerr << "tgrad: error: " << error << '\n';
    return kExitInputError;
  }
  tgrad::SourceManager sources;
  int file_id = sources.add_file(opts.input == "-" ? "<stdin>" : opts.input, std::move(text));
  tgrad::DiagEngine diags(sources);
  std::unique_ptr<tgrad::ast::Module> module = tgrad::parse::parse_module(sources, file_id, diags);
  diags.print_all(std::cerr);
  if (diags.has_errors()) return kExitInputError;

  const tgrad::ast::Function *selected = nullptr;
  if (!opts.function.empty()) {
    selected = module->find_function(opts.function);
    if (!selected) {
      std::cerr << "tgrad: error: --fn " << opts.function << ": no @triton.jit function of that name in '"
                << sources.name(file_id) << "' (it has: " << function_names(*module) << ")\n";
      return kExitUsageError;
    }
  }

  std::string out;
  if (opts.dump_ast)
    out = selected ? tgrad::emit::dump_ast(*selected) : tgrad::emit::dump_ast(*module, sources);
  else
    out = selected ? tgrad::emit::print_function(*selected) : tgrad::emit::print_module(*module);
  return write_output(opts.output, out) ? 0 : kExitInputError;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"tgrad: reverse-mode differentiation of Triton kernels.\n"
               "Reads the @triton.jit functions of a Python file."};
  app.set_version_flag("--version", std::string("tgrad ") + tgrad::kVersion);
  Options opts;
  app.add_option("FILE", opts.input, "Python file with @triton.jit functions ('-' for standard input)")
      ->required();
  auto *dump = app.add_flag("--dump-ast", opts.dump_ast, "Print the AST with source locations");
  app.add_option("--emit", opts.emit, "What to print: 'source' (the jit code printed back as Python)")
      ->check(CLI::IsMember({"source"}))
      ->excludes(dump);
  app.add_option("--fn", opts.function, "Only this jit function");
  app.add_option("-o,--output", opts.output, "Write the output to this file ('-' for standard output)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success &e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::cerr << "tgrad: error: " << e.what() << "\n(run 'tgrad --help' for usage)\n";
    return kExitUsageError;
  }
  if (!opts.dump_ast && opts.emit.empty()) {
    std::cerr << "tgrad: error: nothing to do: give --dump-ast or --emit source\n(run 'tgrad --help' for usage)\n";
    return kExitUsageError;
  }
  return run(opts);
}
