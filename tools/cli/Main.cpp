// The `tgrad` command line (CLI11).
//
//   tgrad FILE --dump-ast            the AST of the file's jit code, with locations
//   tgrad FILE --emit source         the jit code printed back as Python
//   tgrad run FILE ...               run a kernel (or a tile function) in the interpreter
//   tgrad check FILE ... --wrt ...   the gradient check (arguments validated; the check
//                                    itself arrives with reverse mode)
//
// Exit status: 0 on success, 1 for errors in the input (including errors the
// kernel hits while it runs), 2 for misuse of the command line.
#include <sys/stat.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <unordered_map>
#include <set>
#include <algorithm>
#include <sstream>

#include <CLI/CLI.hpp>

#include "src/driver/BackwardJson.h"
#include "src/driver/GradCheck.h"
#include "src/driver/LaunchSpec.h"
#include "src/driver/TorchModule.h"
#include "src/interp/TensorOps.h"
#include "src/ad/AnfWalk.h"
#include "tgrad/ad/Differentiate.h"
#include "tgrad/interp/Interpreter.h"
#include "src/parse/FollowImports.h"
#include "tgrad/sema/Names.h"
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
  std::vector<std::string> include_dirs;  // -I: where imported modules of the user's are looked for
};

struct RunOptions {
  std::string input;
  std::string kernel;
  std::string function;
  std::string grid;
  std::vector<std::string> defines;
  std::vector<std::string> args;
  uint64_t seed = 0;
  std::string out_dir;
  bool float64 = false;
  int64_t max_iterations = 100'000'000;
  std::string wrt;  // check only
  std::vector<std::string> no_grad;  // check only
  std::vector<std::string> include_dirs;
  double rtol = 1e-6;
  bool generic = false;  // check only: differentiate as if no --arg had been given
  bool deterministic = false;  // check only: BackwardRequest::deterministic
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

std::string function_names(const tgrad::ast::Module &m, const std::vector<const tgrad::ast::Function *> &only) {
  std::string names;
  for (const auto *f : only) names += (names.empty() ? "" : ", ") + f->name;
  return names.empty() ? function_names(m) : names;
}

// The file's own jit functions that no other jit function calls (reads by
// name): a kernel with its helpers has one.
std::vector<const tgrad::ast::Function *> uncalled_functions(const tgrad::ast::Module &m) {
  std::set<std::string> read;
  for (const auto &f : m.functions) {
    std::set<std::string> in_f;
    tgrad::ad::block_reads(f->body, in_f);
    in_f.erase(f->name);  // (recursion is not a caller)
    read.insert(in_f.begin(), in_f.end());
  }
  std::vector<const tgrad::ast::Function *> roots;
  for (const auto &f : m.functions)
    if (f->imported_from.empty() && !read.count(f->name) && (f->jit_alias.empty() || !read.count(f->jit_alias)))
      roots.push_back(f.get());
  return roots;
}

int usage_error(const std::string &message) {
  std::cerr << "tgrad: error: " << message << "\n(run 'tgrad --help' for usage)\n";
  return kExitUsageError;
}

// --wrt 0,y: indices or names of `fn`'s parameters, as names. Returns false
// (after printing a usage error) on a bad list.
bool resolve_wrt(const std::string &wrt, const tgrad::ast::Function &fn, std::vector<std::string> &names, int &code) {
  std::stringstream list(wrt);
  std::string item;
  while (std::getline(list, item, ',')) {
    std::string name = item;
    if (!item.empty() && std::all_of(item.begin(), item.end(), ::isdigit)) {
      size_t index = std::stoul(item);
      if (index >= fn.params.size()) {
        code = usage_error("--wrt " + wrt + ": '" + fn.name + "' has " + std::to_string(fn.params.size()) +
                           " parameters; index " + item + " is out of range");
        return false;
      }
      name = fn.params[index].name;
    }
    size_t k = 0;
    while (k < fn.params.size() && fn.params[k].name != name) ++k;
    if (k == fn.params.size()) {
      code = usage_error("--wrt " + wrt + ": '" + fn.name + "' has no parameter '" + name + "'");
      return false;
    }
    if (fn.is_constexpr_param(k)) {
      code = usage_error("--wrt " + wrt + ": '" + name + "' is tl.constexpr and carries no gradient");
      return false;
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      code = usage_error("--wrt " + wrt + ": '" + name + "' is listed twice");
      return false;
    }
    names.push_back(name);
  }
  if (names.empty()) {
    code = usage_error("--wrt needs at least one parameter");
    return false;
  }
  return true;
}

// A parsed input file; diagnostics already printed. Null on input errors.
struct Loaded {
  tgrad::SourceManager sources;
  std::unique_ptr<tgrad::DiagEngine> diags;
  std::unique_ptr<tgrad::ast::Module> module;
  int file_id = -1;
};

std::unique_ptr<Loaded> load(const std::string &input, const std::vector<std::string> &include_dirs) {
  auto l = std::make_unique<Loaded>();
  std::string text, error;
  if (!read_input(input, text, error)) {
    std::cerr << "tgrad: error: " << error << '\n';
    return nullptr;
  }
  l->file_id = l->sources.add_file(input == "-" ? "<stdin>" : input, std::move(text));
  l->diags = std::make_unique<tgrad::DiagEngine>(l->sources);
  l->module = tgrad::parse::parse_module(l->sources, l->file_id, *l->diags);
  if (!l->diags->has_errors())
    tgrad::parse::follow_imports(*l->module, input == "-" ? "" : input, include_dirs, l->sources, *l->diags);
  tgrad::sema::supersede_fallback_functions(*l->module);
  l->diags->print_all(std::cerr);
  if (l->diags->has_errors()) return nullptr;
  return l;
}

// The namespace of the --emit torch ops: tgrad_<stem of the module written>
// (-o layer_norm_ops.py: torch.ops.tgrad_layer_norm_ops.*), else of the input
// file, so that two modules made from kernels of one name do not collide.
std::string op_namespace(const Options &opts) {
  const std::string &file = !opts.output.empty() && opts.output != "-" ? opts.output : opts.input;
  std::string stem = file == "-" ? "stdin" : std::filesystem::path(file).stem().string();
  for (char &c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return "tgrad_" + stem;
}

// Whether a function's name says it is a backward kernel: "bwd" or
// "backward" as a word of it (layer_norm_bwd, _attn_bwd_dkdv,
// softmax_backward_kernel, BackwardKernel).
bool named_as_backward(const std::string &name) {
  std::vector<std::string> words(1);
  for (size_t k = 0; k < name.size(); ++k) {
    const char c = name[k];
    const bool upper = std::isupper(static_cast<unsigned char>(c));
    if (c == '_' || (upper && k > 0 && std::islower(static_cast<unsigned char>(name[k - 1])))) {
      if (!words.back().empty()) words.emplace_back();
      if (c == '_') continue;
    }
    words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const std::string &w : words)
    if (w == "bwd" || w == "backward") return true;
  return false;
}

int run_front_end(const Options &opts) {
  std::unique_ptr<Loaded> l = load(opts.input, opts.include_dirs);
  if (!l) return kExitInputError;
  const tgrad::ast::Function *selected = nullptr;
  if (!opts.function.empty()) {
    selected = l->module->find_function(opts.function);
    if (!selected)
      return usage_error("--fn " + opts.function + ": no @triton.jit function of that name in '" +
                         l->sources.name(l->file_id) + "' (it has: " + function_names(*l->module) + ")");
  }
  if (!opts.wrt.empty() && opts.emit == "source")
    return usage_error("--emit source prints the forward's jit code; with --wrt use --emit python or --emit json");
  if (opts.wrt.empty() && !opts.no_grad.empty()) return usage_error("--no-grad names outputs of a backward: add --wrt");
  if (opts.wrt.empty() && (opts.emit == "python" || opts.emit == "json" || opts.emit == "torch"))
    return usage_error("--emit " + opts.emit + " describes a backward: add --wrt");
  if (!opts.wrt.empty() && !selected) {
    // The one jit function no other calls: a kernel and its helpers need no --fn.
    std::vector<const tgrad::ast::Function *> roots = uncalled_functions(*l->module);
    // Real kernel files hold a forward and its hand-written backward
    // (layer_norm_fwd / layer_norm_bwd): the one not named as a backward is
    // the kernel to differentiate, and a note says so.
    std::vector<const tgrad::ast::Function *> forwards;
    for (const tgrad::ast::Function *f : roots)
      if (!named_as_backward(f->name)) forwards.push_back(f);
    if (roots.size() > 1 && forwards.size() == 1) {
      std::vector<const tgrad::ast::Function *> others;
      for (const tgrad::ast::Function *f : roots)
        if (f != forwards[0]) others.push_back(f);
      std::cerr << "tgrad: note: differentiating '" << forwards[0]->name
                << "', the file's one kernel not named as a backward (the others: "
                << function_names(*l->module, others) << "); pick another with --kernel NAME\n";
      roots = forwards;
    }
    if (roots.size() != 1)
      return usage_error("--wrt: the file has several jit functions that none of the others calls (" +
                         function_names(*l->module, roots) + "): pick one with --kernel NAME");
    selected = roots[0];
  }
  if ((!opts.defines.empty() || !opts.arg_types.empty()) && !selected)
    return usage_error("-D and --arg type the parameters of one function: add --fn NAME");
  if (!opts.wrt.empty()) {
    tgrad::ad::BackwardRequest request;
    request.function = selected->name;
    request.command_line = opts.command_line;
    request.no_grad = opts.no_grad;
    request.deterministic = opts.deterministic;
    int code = 0;
    if (!resolve_wrt(opts.wrt, *selected, request.wrt, code)) return code;
    std::string error;
    for (const std::string &d : opts.defines) {
      auto parsed = tgrad::driver::parse_define(d, error);
      if (!parsed) return usage_error(error);
      request.param_types[parsed->first] = tgrad::driver::stype_of(parsed->second);
    }
    for (const std::string &a : opts.arg_types) {
      auto parsed = tgrad::driver::parse_param_type(a, error);
      if (!parsed) return usage_error(error);
      request.param_types[parsed->first] = parsed->second;
    }
    std::optional<tgrad::ad::Backward> bwd = tgrad::ad::differentiate(*l->module, l->sources, request, *l->diags);
    l->diags->print_all(std::cerr);
    if (!bwd) return kExitInputError;
    if (opts.emit == "json") return write_output(opts.output, tgrad::driver::backward_json(*l->module, request, *bwd)) ? 0 : kExitInputError;
    if (opts.emit == "torch") {
      std::string error;
      std::optional<std::string> module = tgrad::driver::torch_module(*l->module, request, *bwd, op_namespace(opts), error);
      if (!module) {
        std::cerr << "tgrad: error: " << error << '\n';
        return kExitInputError;
      }
      return write_output(opts.output, *module) ? 0 : kExitInputError;
    }
    if (opts.explain) {
      if (bwd->explanations.empty()) std::cerr << "tgrad: explain: no memory adjoints (a tile function)\n";
      for (const std::string &e : bwd->explanations) std::cerr << "tgrad: explain: " << e << '\n';
    }
    return write_output(opts.output, bwd->source) ? 0 : kExitInputError;
  }
  std::string out;
  if (opts.dump_ast) {
    // Semantic analysis: the types shown after each expression.
    tgrad::sema::ParamTypes params;
    std::string error;
    for (const std::string &d : opts.defines) {
      auto parsed = tgrad::driver::parse_define(d, error);
      if (!parsed) return usage_error(error);
      params[parsed->first] = tgrad::driver::stype_of(parsed->second);
    }
    for (const std::string &a : opts.arg_types) {
      auto parsed = tgrad::driver::parse_param_type(a, error);
      if (!parsed) return usage_error(error);
      params[parsed->first] = parsed->second;
    }
    std::unordered_map<const tgrad::ast::Expr *, std::string> types;
    for (const auto &f : l->module->functions) {
      if (selected && f.get() != selected) continue;
      std::optional<tgrad::sema::TypeInfo> info =
          tgrad::sema::analyze(*l->module, *f, selected ? params : tgrad::sema::ParamTypes{}, *l->diags);
      if (!info) {
        l->diags->print_all(std::cerr);
        return kExitInputError;
      }
      for (const auto &kv : info->types)
        if (kv.second.kind != tgrad::sema::SType::Kind::Unknown) types[kv.first] = kv.second.str();
    }
    tgrad::emit::ExprAnnotator annotate = [&types](const tgrad::ast::Expr &e) {
      auto it = types.find(&e);
      return it == types.end() ? std::string() : it->second;
    };
    out = selected ? tgrad::emit::dump_ast(*selected, annotate) : tgrad::emit::dump_ast(*l->module, l->sources, annotate);
  } else
    out = selected ? tgrad::emit::print_function(*selected) : tgrad::emit::print_module(*l->module);
  return write_output(opts.output, out) ? 0 : kExitInputError;
}

// ----------------------------------------------------------------- run

std::string summary(const std::string &name, tgrad::sema::DType dtype, const tgrad::interp::Shape &shape,
                    const std::vector<double> &values) {
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0, infs = 0, finite = 0;
  for (double v : values) {
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
  std::string type = std::string(tgrad::sema::short_name(dtype)) + tgrad::interp::shape_str(shape);
  if (finite == 0)
    std::snprintf(buf, sizeof buf, "%-12s %-16s no finite values", name.c_str(), type.c_str());
  else
    std::snprintf(buf, sizeof buf, "%-12s %-16s min=%-12.6g max=%-12.6g mean=%-12.6g sum=%.9g", name.c_str(),
                  type.c_str(), lo, hi, sum / static_cast<double>(finite), sum);
  std::string s = buf;
  if (nans || infs) s += "  nan=" + std::to_string(nans) + " inf=" + std::to_string(infs);
  return s + "\n";
}

bool ensure_dir(const std::string &dir, std::string &error) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    error = "--out " + dir + ": exists and is not a directory";
    return false;
  }
  if (mkdir(dir.c_str(), 0755) != 0) {
    error = "--out " + dir + ": cannot create: " + std::strerror(errno);
    return false;
  }
  return true;
}

// Validated launch pieces, shared by run and check.
struct Prepared {
  std::vector<std::pair<std::string, tgrad::interp::Value>> defines;
  std::vector<std::pair<std::string, tgrad::driver::ArgSpec>> args;
  std::array<int64_t, 3> grid{1, 1, 1};
};

// Returns an exit code, or -1 when everything is valid.
int prepare(const RunOptions &o, const tgrad::ast::Module &m, Prepared &p, const tgrad::ast::Function *&fn) {
  if (o.kernel.empty() == o.function.empty()) return usage_error("give either --kernel NAME (with --grid) or --fn NAME");
  if (!o.kernel.empty() && o.grid.empty()) return usage_error("--kernel " + o.kernel + " needs --grid X[,Y[,Z]]");
  if (!o.function.empty() && !o.grid.empty()) return usage_error("--grid applies to --kernel, not to --fn");
  const std::string &name = o.kernel.empty() ? o.function : o.kernel;
  fn = m.find_function(name);
  if (!fn)
    return usage_error((o.kernel.empty() ? "--fn " : "--kernel ") + name +
                       ": no @triton.jit function of that name (the file has: " + function_names(m) + ")");
  std::string error;
  if (!o.grid.empty()) {
    auto g = tgrad::driver::parse_grid(o.grid, error);
    if (!g) return usage_error(error);
    p.grid = *g;
  }
  auto has_param = [&](const std::string &n) {
    for (const auto &param : fn->params)
      if (param.name == n) return true;
    return false;
  };
  std::set<std::string> seen;
  for (const std::string &d : o.defines) {
    auto parsed = tgrad::driver::parse_define(d, error);
    if (!parsed) return usage_error(error);
    if (!has_param(parsed->first)) return usage_error("-D " + d + ": '" + fn->name + "' has no parameter '" + parsed->first + "'");
    if (!seen.insert(parsed->first).second) return usage_error("'" + parsed->first + "' is given more than once");
    p.defines.push_back(*parsed);
  }
  for (const std::string &a : o.args) {
    auto parsed = tgrad::driver::parse_arg(a, error);
    if (!parsed) return usage_error(error);
    if (!has_param(parsed->first)) return usage_error("--arg " + a + ": '" + fn->name + "' has no parameter '" + parsed->first + "'");
    if (!seen.insert(parsed->first).second) return usage_error("'" + parsed->first + "' is given more than once");
    p.args.push_back(*parsed);
  }
  for (size_t k = 0; k < fn->params.size(); ++k) {
    const auto &param = fn->params[k];
    if (seen.count(param.name) || param.default_value) continue;
    return usage_error(fn->is_constexpr_param(k) ? "tl.constexpr parameter '" + param.name + "' of '" + fn->name +
                                                       "' needs a value: -D " + param.name + "=..."
                                                 : "parameter '" + param.name + "' of '" + fn->name +
                                                       "' needs a value: --arg " + param.name + "=...");
  }
  return -1;
}

// A kernel launch from validated specs: buffers filled from the seed
// (rounded to their dtype unless float64), scalars, constexprs.
void build_launch(const RunOptions &o, const Prepared &p, tgrad::interp::Launch &launch, tgrad::interp::Memory &memory) {
  launch.kernel = o.kernel;
  launch.grid = p.grid;
  uint64_t stream = 0;
  for (auto &[name, value] : p.defines) {
    tgrad::interp::KernelArg a;
    a.kind = tgrad::interp::KernelArg::Kind::Constexpr;
    a.constexpr_value = value;
    launch.args[name] = a;
  }
  for (auto &[name, spec] : p.args) {
    tgrad::interp::KernelArg a;
    if (spec.kind == tgrad::driver::ArgSpec::Kind::Buffer) {
      tgrad::interp::Buffer b;
      b.name = name;
      b.dtype = spec.buffer.dtype;
      b.shape = spec.buffer.shape;
      std::vector<double> values = tgrad::driver::fill_values(spec.buffer, o.seed, stream++);
      for (double v : values) {
        if (tgrad::sema::is_float(b.dtype)) b.f.push_back(tgrad::interp::round_float(b.dtype, v, o.float64));
        else b.i.push_back(static_cast<int64_t>(v));
      }
      a.kind = tgrad::interp::KernelArg::Kind::Buffer;
      a.buffer = memory.buffers().size();
      memory.add(std::move(b));
    } else if (spec.kind == tgrad::driver::ArgSpec::Kind::Int) {
      a.kind = tgrad::interp::KernelArg::Kind::Int;
      a.n = spec.n;
    } else {
      a.kind = tgrad::interp::KernelArg::Kind::Float;
      a.x = spec.x;
    }
    launch.args[name] = a;
  }
}

int run_interpreter(const RunOptions &o) {
  std::unique_ptr<Loaded> l = load(o.input, o.include_dirs);
  if (!l) return kExitInputError;
  Prepared p;
  const tgrad::ast::Function *fn = nullptr;
  if (int code = prepare(o, *l->module, p, fn); code >= 0) return code;
  std::string error;
  if (!o.out_dir.empty() && !ensure_dir(o.out_dir, error)) return usage_error(error);

  tgrad::interp::RunOptions ro;
  ro.float64 = o.float64;
  ro.max_loop_iterations = o.max_iterations;
  tgrad::interp::Memory memory;
  std::ostringstream report;
  uint64_t stream = 0;

  if (!o.kernel.empty()) {
    tgrad::interp::Launch launch;
    build_launch(o, p, launch, memory);
    bool ok = tgrad::interp::run_kernel(*l->module, launch, memory, ro, *l->diags);
    l->diags->print_all(std::cerr);
    if (!ok) return kExitInputError;
    for (const tgrad::interp::Buffer &b : memory.buffers()) {
      std::vector<double> values;
      for (int64_t k = 0; k < b.size(); ++k) values.push_back(b.get(k));
      report << summary(b.name, b.dtype, b.shape, values);
      if (!o.out_dir.empty() && !tgrad::driver::write_npy(o.out_dir + "/" + b.name + ".npy", b.dtype, b.shape, values, error)) {
        std::cerr << "tgrad: error: " << error << '\n';
        return kExitInputError;
      }
    }
  } else {
    std::map<std::string, tgrad::interp::Value> args;
    for (auto &[name, value] : p.defines) args[name] = value;
    for (auto &[name, spec] : p.args) {
      if (spec.kind == tgrad::driver::ArgSpec::Kind::Buffer)
        args[name] = tgrad::interp::make_tensor(spec.buffer.dtype, spec.buffer.shape,
                                                tgrad::driver::fill_values(spec.buffer, o.seed, stream++), o.float64);
      else if (spec.kind == tgrad::driver::ArgSpec::Kind::Int)
        args[name] = tgrad::interp::Value::of_int(spec.n);
      else
        args[name] = tgrad::interp::Value::of_float(spec.x);
    }
    auto results = tgrad::interp::run_function(*l->module, o.function, args, memory, ro, *l->diags);
    l->diags->print_all(std::cerr);
    if (!results) return kExitInputError;
    for (size_t k = 0; k < results->size(); ++k) {
      const tgrad::interp::Value &v = (*results)[k];
      std::string label = results->size() == 1 ? "result" : "result" + std::to_string(k);
      if (v.kind != tgrad::interp::Value::Kind::Tensor) {
        report << label << "  " << v.describe() << '\n';
        continue;
      }
      std::vector<double> values;
      for (int64_t i = 0; i < v.t->size(); ++i) values.push_back(v.t->as_double(i));
      report << summary(label, v.t->type.dtype, v.t->shape, values);
      if (!o.out_dir.empty() &&
          !tgrad::driver::write_npy(o.out_dir + "/" + label + ".npy", v.t->type.dtype, v.t->shape, values, error)) {
        std::cerr << "tgrad: error: " << error << '\n';
        return kExitInputError;
      }
    }
  }
  std::cout << report.str();
  return 0;
}

// The per-argument table of a gradient check; the exit status it implies.
int print_check(const tgrad::driver::GradCheckResult &result, const std::string &what, double rtol) {
  std::printf("gradient check of %s, rtol %.0e)\n", what.c_str(), rtol);
  for (const auto &a : result.args)
    std::printf("  %-10s %-16s rel_err=%-10.3e max_abs_err=%-10.3e %s\n", a.name.c_str(), a.type.c_str(),
                a.relative_error, a.max_abs_error, a.pass ? "PASS" : "FAIL");
  std::printf("%s\n", result.pass ? "PASS" : "FAIL");
  return result.pass ? 0 : kExitInputError;
}

// `tgrad check --generic`: the backward is differentiated with the -D values
// only, as `tgrad FILE --wrt ...` without --arg does; the --arg specs still
// make the buffers it runs with.
void forget_argument_types(tgrad::ad::BackwardRequest &request, const Prepared &p) {
  for (const auto &arg : p.args) request.param_types.erase(arg.first);
}

int run_check(const RunOptions &o) {
  std::unique_ptr<Loaded> l = load(o.input, o.include_dirs);
  if (!l) return kExitInputError;
  Prepared p;
  const tgrad::ast::Function *fn = nullptr;
  if (int code = prepare(o, *l->module, p, fn); code >= 0) return code;
  tgrad::ad::BackwardRequest request;
  request.function = fn->name;
  request.no_grad = o.no_grad;
  request.deterministic = o.deterministic;
  int code = 0;
  if (!resolve_wrt(o.wrt, *fn, request.wrt, code)) return code;
  for (const std::string &w : request.wrt)
    for (const auto &a : p.args)
      if (a.first == w && (a.second.kind != tgrad::driver::ArgSpec::Kind::Buffer || !tgrad::sema::is_float(a.second.buffer.dtype)))
        return usage_error("--wrt " + o.wrt + ": '" + w + "' is not a floating-point tile and carries no gradient");
  if (!o.kernel.empty()) {
    for (const std::string &w : request.wrt) {
      bool buffer = false;
      for (const auto &a : p.args) buffer |= a.first == w && a.second.kind == tgrad::driver::ArgSpec::Kind::Buffer;
      if (!buffer) return usage_error("--wrt " + o.wrt + ": '" + w + "' must be a pointer given a buffer (--arg " + w + "=fp32[...])");
    }
    for (auto &[name, value] : p.defines) request.param_types[name] = tgrad::driver::stype_of(value);
    for (auto &[name, spec] : p.args) {
      if (spec.kind == tgrad::driver::ArgSpec::Kind::Buffer)
        request.param_types[name] = tgrad::sema::SType::tensor(tgrad::sema::ElemType{spec.buffer.dtype, true}, {});
      else if (spec.kind == tgrad::driver::ArgSpec::Kind::Int)
        request.param_types[name] = tgrad::sema::SType::tensor(
            tgrad::sema::ElemType{spec.n >= INT32_MIN && spec.n <= INT32_MAX ? tgrad::sema::DType::Int32 : tgrad::sema::DType::Int64, false}, {});
      else
        request.param_types[name] = tgrad::sema::SType::tensor(tgrad::sema::ElemType{tgrad::sema::DType::FP32, false}, {});
    }
    if (o.generic) forget_argument_types(request, p);
    RunOptions f64 = o;
    f64.float64 = true;
    tgrad::interp::Launch launch;
    tgrad::interp::Memory memory;
    build_launch(f64, p, launch, memory);
    tgrad::driver::GradCheckOptions options;
    options.seed = o.seed;
    options.rtol = o.rtol;
    auto result = tgrad::driver::grad_check_kernel(*l->module, l->sources, request, launch, memory, options, *l->diags);
    l->diags->print_all(std::cerr);
    if (!result) return kExitInputError;
    return print_check(*result, "kernel '" + fn->name + "' (float64, central differences on up to 256 elements per buffer",
                       options.rtol);
  }
  // Parameter types and values: tiles from the --arg specs, constexprs from -D.
  std::map<std::string, tgrad::interp::Value> inputs;
  uint64_t stream = 0;
  for (auto &[name, value] : p.defines) {
    request.param_types[name] = tgrad::driver::stype_of(value);
    inputs[name] = value;
  }
  for (auto &[name, spec] : p.args) {
    if (spec.kind == tgrad::driver::ArgSpec::Kind::Buffer) {
      tgrad::sema::SymShape shape;
      for (int64_t d : spec.buffer.shape) shape.push_back(tgrad::sema::Dim::known(d));
      request.param_types[name] = tgrad::sema::SType::tensor(tgrad::sema::ElemType{spec.buffer.dtype, false}, shape);
      inputs[name] = tgrad::interp::make_tensor(spec.buffer.dtype, spec.buffer.shape,
                                                tgrad::driver::fill_values(spec.buffer, o.seed, stream++), true);
    } else if (spec.kind == tgrad::driver::ArgSpec::Kind::Int) {
      request.param_types[name] = tgrad::sema::SType::of_int(spec.n);
      inputs[name] = tgrad::interp::Value::of_int(spec.n);
    } else {
      request.param_types[name] = tgrad::sema::SType::of_float(spec.x);
      inputs[name] = tgrad::interp::Value::of_float(spec.x);
    }
  }
  if (o.generic) forget_argument_types(request, p);
  tgrad::driver::GradCheckOptions options;
  options.seed = o.seed;
  options.rtol = o.rtol;
  auto result = tgrad::driver::grad_check(*l->module, l->sources, request, inputs, options, *l->diags);
  l->diags->print_all(std::cerr);
  if (!result) return kExitInputError;
  return print_check(*result, "'" + fn->name + "' (float64, central differences", options.rtol);
}

void add_launch_options(CLI::App *cmd, RunOptions &o) {
  cmd->add_option("FILE", o.input, "Python file with @triton.jit functions ('-' for standard input)")->required();
  cmd->add_option("--kernel", o.kernel, "The kernel to launch over --grid");
  cmd->add_option("--fn", o.function, "A tile function to call once with the --arg values");
  cmd->add_option("--grid", o.grid, "Launch grid X[,Y[,Z]]");
  cmd->add_option("-D", o.defines, "A tl.constexpr parameter: NAME=VALUE (128, 0.5, True, tl.float16, 'relu')");
  cmd->add_option("-I", o.include_dirs, "A directory where imported modules (from mypkg.ops import f) are looked for");
  cmd->add_option("--arg", o.args,
                  "An argument: NAME=SPEC, a scalar (1024, 0.5) or a buffer DTYPE[d0,d1,...] with an optional "
                  "fill :uniform(A,B) (default uniform(-1,1)), :zeros or :ones");
  cmd->add_option("--seed", o.seed, "Seed of the random buffer contents (default 0)");
  cmd->add_flag("--float64", o.float64, "Compute every floating value in double (for gradient checks)");
  cmd->add_option("--max-iterations", o.max_iterations, "Stop a program after this many loop iterations (default 1e8)");
}

}  // namespace

// tgrad builds and frees millions of small AST and type nodes (an 8000-line
// function: 56000 lines of backward). glibc's fast bins make each large
// free walk and merge them (malloc_consolidate was 10-15 % of the run);
// without fast bins, and with the heap kept instead of trimmed and regrown,
// the same run takes about 8 % less. Memory use is unchanged in practice.
static void tune_allocator() {
#if defined(__GLIBC__)
  mallopt(M_MXFAST, 0);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int main(int argc, char **argv) {
  tune_allocator();
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
                 "autograd)")
      ->check(CLI::IsMember({"source", "python", "json", "torch"}))
      ->excludes(dump);
  app.add_option("--fn,--kernel", opts.function, "Only this jit function (a tile function or a kernel)");
  app.add_flag("--explain", opts.explain, "With --wrt: say how each load's gradient is written (store or atomic) and why");
  app.add_flag("--deterministic", opts.deterministic,
               "With --wrt: prefer backwards whose gradients are bitwise identical run to run (a prologue kernel "
               "saves what owner-computes kernels would otherwise leave to atomics); may be slower");
  app.add_option("-o,--output", opts.output, "Write the output to this file ('-' for standard output)");
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

  {
    // The command recorded in generated files: without -o PATH, which says
    // where the output went, not what it is.
    std::string cmd = "tgrad";
    for (int k = 1; k < argc; ++k) {
      std::string a = argv[k];
      if (a == "-o" || a == "--output") {
        ++k;
        continue;
      }
      if (a.rfind("-o", 0) == 0 && a.size() > 2 && a[2] != '-') continue;
      if (a.rfind("--output=", 0) == 0) continue;
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
  if (run->parsed()) return run_interpreter(run_opts);
  if (check->parsed()) return run_check(check_opts);
  if (opts.input.empty()) return usage_error("no input file");
  if (!opts.dump_ast && opts.emit.empty() && opts.wrt.empty())
    return usage_error("nothing to do: give --wrt (the backward), --dump-ast or --emit source, or use 'tgrad run'");
  return run_front_end(opts);
}
