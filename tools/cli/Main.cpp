// The `tgrad` command line (CLI11): a client of the public API
// (include/tgrad/tgrad.h). It reads the flags, calls the API, and prints
// what comes back; every stage of the pipeline is behind the API.
//
//   tgrad FILE --dump-ast            the AST of the file's jit code, with locations
//   tgrad FILE --emit source         the jit code printed back as Python
//   tgrad FILE --wrt ...             the backward (--emit python|json|torch)
//   tgrad run FILE ...               run a kernel (or a tile function) in the interpreter
//   tgrad check FILE ... --wrt ...   the gradient check against finite differences
//   tgrad compile FILE --kernel ...  PTX (or LLVM IR) and its JSON sidecar
//
// Exit status: 0 on success, 1 for errors in the input (including errors the
// kernel hits while it runs), 2 for misuse of the command line.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

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
  std::vector<std::string> defines;    // typing for --dump-ast and --wrt
  std::vector<std::string> arg_types;
  std::string wrt;                     // differentiate: print the backward
  std::vector<std::string> no_grad;    // outputs without upstream gradients
  std::string command_line;
  bool explain = false;
  bool deterministic = false;
  std::vector<std::string> tiling;     // --tiling: constexprs that only tile the computation
  std::vector<std::string> include_dirs;  // -I: where imported modules of the user's are looked for
  int num_warps = 4;                      // --emit ptx|llvm
};

// `tgrad run` and `tgrad check`.
struct RunOptions {
  std::string input;
  tgrad::LaunchRequest launch;
  std::string out_dir;               // run only
  std::string wrt;                   // check only
  std::vector<std::string> no_grad;  // check only
  std::vector<std::string> include_dirs;
  double rtol = 1e-6;                // check only
  bool generic = false;              // check only: differentiate as if no --arg had been given
  bool deterministic = false;        // check only: GradientRequest::deterministic
};

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

// -w: warnings (and the notes that explain them) are not printed, as with a
// C compiler's -w; for build rules over kernels whose warnings are known.
bool show_warnings = true;

void print_diagnostics(const std::vector<tgrad::StoredDiagnostic> &diagnostics) {
  bool after_hidden_warning = false;
  for (const tgrad::StoredDiagnostic &d : diagnostics) {
    if (d.severity != tgrad::Severity::Note) after_hidden_warning = !show_warnings && d.severity == tgrad::Severity::Warning;
    if (!after_hidden_warning) std::cerr << d.rendered;
  }
}

// The input file's diagnostics not printed yet: each step prints what it added (a warning of the file's reading is
// printed once, not again after the step that differentiates it).
void print_new_diagnostics(const tgrad::KernelFile &file) {
  static size_t printed = 0;
  const std::vector<tgrad::StoredDiagnostic> &all = file.diagnostics();
  if (printed > all.size()) printed = 0;
  print_diagnostics(std::vector<tgrad::StoredDiagnostic>(all.begin() + static_cast<std::ptrdiff_t>(printed), all.end()));
  printed = all.size();
}

int usage_error(const std::string &message) {
  std::cerr << "tgrad: error: " << message << "\n(run 'tgrad --help' for usage)\n";
  return kExitUsageError;
}

// The exit status of a failed call, after printing why: this step's diagnostics (the earlier steps' were printed
// when they ran).
int failed(const tgrad::Error &error, const tgrad::KernelFile &file) {
  if (error.kind == tgrad::Error::Kind::Request) return usage_error(error.message);
  print_new_diagnostics(file);
  if (!error.message.empty()) std::cerr << "tgrad: error: " << error.message << '\n';
  return kExitInputError;
}

// The input file read and its warnings printed; nullopt (errors printed) if
// it cannot be read.
std::optional<tgrad::KernelFile> load(const std::string &input, const std::vector<std::string> &include_dirs) {
  tgrad::ReadOptions options{include_dirs};
  tgrad::Result<tgrad::KernelFile> file = [&] {
    if (input != "-") return tgrad::KernelFile::read(input, options);
    std::string text(std::istreambuf_iterator<char>(std::cin), {});
    return tgrad::KernelFile::read_text(std::move(text), "<stdin>", options);
  }();
  if (!file) {
    print_diagnostics(file.error().diagnostics);
    if (!file.error().message.empty()) std::cerr << "tgrad: error: " << file.error().message << '\n';
    return std::nullopt;
  }
  print_new_diagnostics(*file);
  return std::move(*file);
}

// The namespace of the --emit torch ops: from the module written (-o
// layer_norm_ops.py: torch.ops.tgrad_layer_norm_ops.*), else the input file.
std::string op_namespace(const Options &opts) {
  return tgrad::op_namespace_for(!opts.output.empty() && opts.output != "-" ? opts.output : opts.input);
}

bool ensure_dir(const std::string &dir, std::string &error);

int emit_backward(const Options &opts, tgrad::KernelFile &file, const std::string &function) {
  tgrad::GradientRequest request;
  request.function = function;
  request.wrt = {opts.wrt};
  request.types = opts.arg_types;
  request.defines = opts.defines;
  request.no_grad = opts.no_grad;
  request.deterministic = opts.deterministic;
  request.tiling = opts.tiling;
  request.command_line = opts.command_line;
  tgrad::Result<tgrad::Gradient> grad = tgrad::differentiate(file, request);
  if (!grad) return failed(grad.error(), file);
  print_new_diagnostics(file);
  if (opts.emit == "json") return write_output(opts.output, grad->launch_protocol()) ? 0 : kExitInputError;
  if (opts.emit == "ptx" || opts.emit == "llvm") {
    // Every backward kernel, compiled: DIR/KERNEL.ptx (or .ll) and DIR/KERNEL.json.
    if (opts.output == "-") return usage_error("--emit " + opts.emit + " with --wrt writes one file per kernel: give -o DIR");
    std::string error;
    if (!ensure_dir(opts.output, error)) return usage_error(error);
    tgrad::CompileRequest compile_request;
    compile_request.types = opts.arg_types;
    compile_request.defines = opts.defines;
    compile_request.num_warps = opts.num_warps;
    compile_request.emit = opts.emit;
    tgrad::Result<std::vector<tgrad::CompiledKernel>> kernels = tgrad::compile_backward(*grad, compile_request);
    if (!kernels) {
      if (kernels.error().kind == tgrad::Error::Kind::Request) return usage_error(kernels.error().message);
      std::cerr << kernels.error().render();
      return kExitInputError;
    }
    for (const tgrad::CompiledKernel &k : *kernels) {
      const std::string stem = opts.output + "/" + k.name;
      if (!write_output(stem + (opts.emit == "ptx" ? ".ptx" : ".ll"), k.text) ||
          !write_output(stem + ".json", k.metadata_json))
        return kExitInputError;
    }
    return 0;
  }
  if (opts.emit == "torch") {
    tgrad::Result<std::string> module = grad->torch_module(op_namespace(opts));
    if (!module) {
      std::cerr << module.error().render();
      return kExitInputError;
    }
    const std::vector<std::string> blocks = grad->block_size_constexprs();
    if (show_warnings && opts.tiling.empty() && !grad->backward().owner_kernels.empty() && !blocks.empty()) {
      std::string names;
      for (const std::string &b : blocks) names += (names.empty() ? "" : ",") + b;
      std::cerr << "tgrad: note: the module launches the owner-computes kernels of this backward with the forward's "
                   "block sizes (the forward's, or its autotune configs'), which may suit them badly (the relu "
                   "matmul's two owners at 2048^3, each timed alone on an H200: 0.24 ms at the best of its forward's "
                   "configs, 0.10 ms at tiles of their own). The kernel's block sizes are "
                << names
                << ": those that only tile the computation (the kernel computes the same for any power of two in "
                   "them; a head dimension does not), given with --tiling, the module tunes for the backward\n";
    }
    return write_output(opts.output, *module) ? 0 : kExitInputError;
  }
  if (opts.explain) {
    if (grad->explanations().empty()) std::cerr << "tgrad: explain: no memory adjoints (a tile function)\n";
    for (const std::string &e : grad->explanations()) std::cerr << "tgrad: explain: " << e << '\n';
  }
  return write_output(opts.output, grad->source()) ? 0 : kExitInputError;
}

int run_front_end(const Options &opts) {
  std::optional<tgrad::KernelFile> file = load(opts.input, opts.include_dirs);
  if (!file) return kExitInputError;
  const tgrad::ast::Function *selected = nullptr;
  if (!opts.function.empty()) {
    tgrad::Result<const tgrad::ast::Function *> found = file->function(opts.function);
    if (!found) return usage_error(found.error().message);
    selected = *found;
  }
  if (opts.wrt.empty() && (opts.emit == "ptx" || opts.emit == "llvm"))
    return usage_error("--emit " + opts.emit + " compiles a backward: add --wrt (a forward kernel: tgrad compile)");
  if (!opts.wrt.empty() && opts.emit == "source")
    return usage_error("--emit source prints the forward's jit code; with --wrt use --emit python or --emit json");
  if (opts.wrt.empty() && !opts.no_grad.empty()) return usage_error("--no-grad names outputs of a backward: add --wrt");
  if (opts.wrt.empty() && !opts.tiling.empty())
    return usage_error("--tiling names block sizes of a kernel whose backward is emitted: add --wrt");
  if (opts.wrt.empty() && (opts.emit == "python" || opts.emit == "json" || opts.emit == "torch"))
    return usage_error("--emit " + opts.emit + " describes a backward: add --wrt");
  if (!opts.wrt.empty() && !selected) {
    // A kernel and its helpers need no --fn.
    tgrad::Result<tgrad::KernelChoice> choice = tgrad::choose_kernel(*file);
    if (!choice) return usage_error(choice.error().message);
    if (!choice->note.empty()) std::cerr << "tgrad: note: " << choice->note << '\n';
    selected = file->find_function(choice->name);
  }
  if ((!opts.defines.empty() || !opts.arg_types.empty()) && !selected)
    return usage_error("-D and --arg type the parameters of one function: add --fn NAME");
  if (!opts.wrt.empty()) return emit_backward(opts, *file, selected->name);
  std::string out;
  if (opts.dump_ast) {
    // Semantic analysis: the types shown after each expression.
    tgrad::TypeRequest request{selected ? selected->name : "", opts.arg_types, opts.defines};
    tgrad::Result<tgrad::Types> types = tgrad::type(*file, request);
    if (!types) return failed(types.error(), *file);
    out = selected ? tgrad::dump_ast(*selected, &*types) : tgrad::dump_ast(*file, &*types);
  } else
    out = selected ? tgrad::print_source(*selected) : tgrad::print_source(*file);
  return write_output(opts.output, out) ? 0 : kExitInputError;
}

// ----------------------------------------------------------------- run

std::string summary(const tgrad::Tensor &t) {
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0, infs = 0, finite = 0;
  for (double v : t.values) {
    if (std::isnan(v)) ++nans;
    else if (std::isinf(v)) ++infs;
    else {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      ++finite;
    }
  }
  char buf[256];
  std::string type = t.type();
  if (finite == 0)
    std::snprintf(buf, sizeof buf, "%-12s %-16s no finite values", t.name.c_str(), type.c_str());
  else
    std::snprintf(buf, sizeof buf, "%-12s %-16s min=%-12.6g max=%-12.6g mean=%-12.6g sum=%.9g", t.name.c_str(),
                  type.c_str(), lo, hi, sum / static_cast<double>(finite), sum);
  std::string s = buf;
  if (nans || infs) s += "  nan=" + std::to_string(nans) + " inf=" + std::to_string(infs);
  return s + "\n";
}

// --out DIR: created where missing, with mode 0755 less the umask.
bool ensure_dir(const std::string &dir, std::string &error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return true;
    error = "--out " + dir + ": exists and is not a directory";
    return false;
  }
  fs::create_directory(dir, ec);
  if (ec) {
    error = "--out " + dir + ": cannot create: " + ec.message();
    return false;
  }
  fs::permissions(dir, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove, ec);
  return true;
}

int run_interpreter(const RunOptions &o) {
  std::optional<tgrad::KernelFile> file = load(o.input, o.include_dirs);
  if (!file) return kExitInputError;
  if (tgrad::Status valid = tgrad::validate_launch(*file, o.launch); !valid) return usage_error(valid.error().message);
  std::string error;
  if (!o.out_dir.empty() && !ensure_dir(o.out_dir, error)) return usage_error(error);
  tgrad::Result<tgrad::RunResult> ran = tgrad::run(*file, o.launch);
  if (!ran) return failed(ran.error(), *file);
  print_new_diagnostics(*file);
  std::ostringstream report;
  auto save = [&](const tgrad::Tensor &t) {
    if (o.out_dir.empty()) return true;
    tgrad::Status written = tgrad::write_npy(o.out_dir + "/" + t.name + ".npy", t);
    if (!written) std::cerr << written.error().render();
    return written.ok();
  };
  for (const tgrad::Tensor &b : ran->buffers) {
    report << summary(b);
    if (!save(b)) return kExitInputError;
  }
  for (const tgrad::RunResult::Value &v : ran->results) {
    if (!v.tensor) {
      report << v.name << "  " << v.description << '\n';
      continue;
    }
    report << summary(*v.tensor);
    if (!save(*v.tensor)) return kExitInputError;
  }
  std::cout << report.str();
  return 0;
}

// The per-argument table of a gradient check; the exit status it implies.
int print_check(const tgrad::GradientCheck &result, const std::string &what, double rtol) {
  std::printf("gradient check of %s, rtol %.0e)\n", what.c_str(), rtol);
  for (const auto &a : result.arguments)
    std::printf("  %-10s %-16s rel_err=%-10.3e max_abs_err=%-10.3e %s\n", a.name.c_str(), a.type.c_str(),
                a.relative_error, a.max_abs_error, a.pass ? "PASS" : "FAIL");
  std::printf("%s\n", result.pass ? "PASS" : "FAIL");
  return result.pass ? 0 : kExitInputError;
}

int run_check(const RunOptions &o) {
  std::optional<tgrad::KernelFile> file = load(o.input, o.include_dirs);
  if (!file) return kExitInputError;
  tgrad::CheckRequest request;
  request.launch = o.launch;
  request.wrt = {o.wrt};
  request.no_grad = o.no_grad;
  request.rtol = o.rtol;
  request.generic = o.generic;
  request.deterministic = o.deterministic;
  tgrad::Result<tgrad::GradientCheck> checked = tgrad::check_gradient(*file, request);
  if (!checked) return failed(checked.error(), *file);
  print_new_diagnostics(*file);
  const bool kernel = !o.launch.kernel.empty();
  const std::string name = file->find_function(kernel ? o.launch.kernel : o.launch.function)->name;
  return print_check(*checked,
                     kernel ? "kernel '" + name + "' (float64, central differences on up to 256 elements per buffer"
                            : "'" + name + "' (float64, central differences",
                     request.rtol);
}

// `tgrad compile`.
struct CompileOptions {
  std::string input;
  tgrad::CompileRequest request;
  std::string output = "-";
  std::string json;  // the sidecar; by default beside -o
  std::vector<std::string> include_dirs;
};

// OUT with its extension replaced by .json (out.ptx -> out.json).
std::string sidecar_path(const std::string &output) {
  namespace fs = std::filesystem;
  return fs::path(output).replace_extension(".json").string();
}

int run_compile(const CompileOptions &o) {
  std::optional<tgrad::KernelFile> file = load(o.input, o.include_dirs);
  if (!file) return kExitInputError;
  tgrad::Result<tgrad::CompiledKernel> compiled = tgrad::compile(*file, o.request);
  if (!compiled) return failed(compiled.error(), *file);
  print_new_diagnostics(*file);
  if (!write_output(o.output, compiled->text)) return kExitInputError;
  std::string json = o.json;
  if (json.empty() && o.output != "-") json = sidecar_path(o.output);
  if (!json.empty() && !write_output(json, compiled->metadata_json)) return kExitInputError;
  return 0;
}

void add_launch_options(CLI::App *cmd, RunOptions &o) {
  cmd->add_option("FILE", o.input, "Python file with @triton.jit functions ('-' for standard input)")->required();
  cmd->add_option("--kernel", o.launch.kernel, "The kernel to launch over --grid");
  cmd->add_option("--fn", o.launch.function, "A tile function to call once with the --arg values");
  cmd->add_option("--grid", o.launch.grid, "Launch grid X[,Y[,Z]]");
  cmd->add_option("-D", o.launch.defines, "A tl.constexpr parameter: NAME=VALUE (128, 0.5, True, tl.float16, 'relu')");
  cmd->add_option("-I", o.include_dirs, "A directory where imported modules (from mypkg.ops import f) are looked for");
  cmd->add_option("--arg", o.launch.args,
                  "An argument: NAME=SPEC, a scalar (1024, 0.5), None (a pointer the kernel tests against None) or a "
                  "buffer DTYPE[d0,d1,...] with an optional fill :uniform(A,B) (default uniform(-1,1)), :zeros, :ones "
                  "or :npy(PATH) (a .npy file's elements)");
  cmd->add_option("--seed", o.launch.seed, "Seed of the random buffer contents (default 0)");
  cmd->add_flag("--float64", o.launch.float64, "Compute every floating value in double (for gradient checks)");
  cmd->add_option("--max-iterations", o.launch.max_iterations, "Stop a program after this many loop iterations (default 1e8)");
}

}  // namespace

int main(int argc, char **argv) {
  tgrad::tune_allocator();
  CLI::App app{"tgrad: reverse-mode differentiation of Triton kernels.\n"
               "Reads the @triton.jit functions of a Python file."};
  app.set_version_flag("--version", std::string("tgrad ") + tgrad::kVersion);
  app.require_subcommand(0, 1);
  Options opts;
  app.add_option("FILE", opts.input, "Python file with @triton.jit functions ('-' for standard input)");
  auto *dump = app.add_flag("--dump-ast", opts.dump_ast, "Print the AST with source locations");
  app.add_option("--emit", opts.emit,
                 "What to print: 'source' (the jit code printed back as Python); with --wrt, 'python' (the backward, the "
                 "default), 'json' (its launch protocol) or 'torch' (a Python module: the kernel as a PyTorch op with "
                 "autograd), 'ptx' or 'llvm' (every backward kernel compiled: -o DIR gets KERNEL.ptx and KERNEL.json)")
      ->check(CLI::IsMember({"source", "python", "json", "torch", "ptx", "llvm"}))
      ->excludes(dump);
  app.add_option("--fn,--kernel", opts.function, "Only this jit function (a tile function or a kernel)");
  app.add_flag("--explain", opts.explain, "With --wrt: say how each load's gradient is written (store or atomic) and why");
  app.add_flag("--deterministic", opts.deterministic,
               "With --wrt: prefer backwards whose gradients are bitwise identical run to run (a prologue kernel "
               "saves what owner-computes kernels would otherwise leave to atomics); may be slower");
  app.add_option("--tiling", opts.tiling,
                 "With --wrt, kernels: tl.constexpr block sizes that only tile the computation (the forward computes "
                 "the same for any power of two in them, as its autotune configs must): the --emit torch module "
                 "tunes them for each backward kernel instead of using the forward's (NAME,NAME,...)");
  app.add_option("-o,--output", opts.output, "Write the output to this file ('-' for standard output)");
  app.add_option("--num-warps", opts.num_warps, "With --wrt --emit ptx: warps per program of the backward (default 4)");
  bool no_warnings = false;
  app.add_flag("-w,--no-warnings", no_warnings, "Print no warnings (errors still), as a C compiler's -w");
  app.add_option("--wrt", opts.wrt, "Print the backward of --fn with respect to these parameters (indices or names)");
  app.add_option("--no-grad", opts.no_grad,
                 "With --wrt, kernels: outputs that carry no upstream gradient (saved statistics): no d<ptr> for them")
      ->delimiter(',');
  app.add_option("-D", opts.defines, "With --wrt or --dump-ast --fn: a tl.constexpr value NAME=VALUE");
  app.add_option("-I", opts.include_dirs,
                 "A directory where the user's imported modules are looked for (also: the file's directory and its "
                 "package root; relative imports from the file)");
  app.add_option("--arg", opts.arg_types,
                 "With --wrt or --dump-ast --fn: a parameter's type NAME=TYPE (*fp32 a pointer, i32 a scalar, fp32[16, N] a tile)");

  RunOptions run_opts;
  CLI::App *run = app.add_subcommand("run", "Run a kernel over a grid (or a tile function) in the CPU interpreter");
  add_launch_options(run, run_opts);
  run->add_option("--out", run_opts.out_dir, "Write every buffer (or result) as NAME.npy into this directory");

  RunOptions check_opts;
  CLI::App *check = app.add_subcommand("check", "Gradient check of a tile function's backward against finite differences");
  add_launch_options(check, check_opts);
  check->add_option("--wrt", check_opts.wrt, "Parameters to differentiate: indices or names, comma-separated")->required();
  check->add_option("--rtol", check_opts.rtol, "Largest relative error that passes (default 1e-6)");
  check->add_flag("--generic", check_opts.generic,
                  "Check the backward `tgrad FILE --wrt ...` prints without --arg (types chosen by tgrad, the same for "
                  "every dtype and shape), run with these --arg buffers");
  check->add_flag("--deterministic", check_opts.deterministic,
                  "Check the backward `tgrad FILE --wrt ... --deterministic` prints");
  check->add_option("--no-grad", check_opts.no_grad, "Kernels: outputs that carry no upstream gradient")->delimiter(',');

  CompileOptions compile_opts;
  CLI::App *compile = app.add_subcommand("compile", "Compile a kernel to PTX (or LLVM IR) with tgrad's NVPTX backend");
  compile->add_option("FILE", compile_opts.input, "Python file with @triton.jit functions ('-' for standard input)")
      ->required();
  compile->add_option("--kernel", compile_opts.request.kernel, "The kernel to compile")->required();
  compile->add_option("-D", compile_opts.request.defines, "A tl.constexpr value NAME=VALUE (every one without a default)");
  compile->add_option("--arg", compile_opts.request.types,
                      "A parameter's type NAME=TYPE (*fp32 a pointer, i32, i64 or fp32 a scalar): every runtime parameter");
  compile->add_option("--num-warps", compile_opts.request.num_warps, "Warps per program (default 4)");
  compile->add_option("--emit", compile_opts.request.emit, "'ptx' (the default) or 'llvm' (the optimized LLVM IR)")
      ->check(CLI::IsMember({"ptx", "llvm"}));
  compile->add_option("-o,--output", compile_opts.output, "Write the PTX to this file ('-' for standard output)");
  compile->add_option("--json", compile_opts.json,
                      "Write the sidecar (kernel, parameters, num_warps, shared memory) here (default: -o's path with "
                      "the extension .json)");
  compile->add_option("-I", compile_opts.include_dirs, "A directory where imported modules are looked for");

  {
    // The command recorded in generated files: without -o PATH, which says
    // where the output went, not what it is, nor -w, which says what is
    // printed beside it.
    std::string cmd = "tgrad";
    for (int k = 1; k < argc; ++k) {
      std::string a = argv[k];
      if (a == "-o" || a == "--output") {
        ++k;
        continue;
      }
      if (a.rfind("-o", 0) == 0 && a.size() > 2 && a[2] != '-') continue;
      if (a.rfind("--output=", 0) == 0) continue;
      if (a == "-w" || a == "--no-warnings") continue;
      bool plain = a.find_first_of(" '\"[]()*$") == std::string::npos;
      cmd += " " + (plain ? a : "'" + a + "'");
    }
    opts.command_line = cmd;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success &e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    return usage_error(e.what());
  }
  show_warnings = !no_warnings;
  if (run->parsed()) return run_interpreter(run_opts);
  if (check->parsed()) return run_check(check_opts);
  if (compile->parsed()) return run_compile(compile_opts);
  if (opts.input.empty()) return usage_error("no input file");
  if (!opts.dump_ast && opts.emit.empty() && opts.wrt.empty())
    return usage_error("nothing to do: give --wrt (the backward), --dump-ast or --emit source, or use 'tgrad run'");
  return run_front_end(opts);
}
