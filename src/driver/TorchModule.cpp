#include "src/driver/TorchModule.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "src/ad/AnfWalk.h"
#include "src/ad/ConstexprPaths.h"
#include "src/ad/GenericTypes.h"
#include "src/driver/BackwardJson.h"
#include "src/lower/ModuleNamespaces.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::driver {

extern const char kTorchRuntime[];  // src/driver/TorchRuntime.py, embedded by the BUILD's genrule

using nlohmann::json;
using namespace ast;

namespace {

// Names the generated code gives its own values: a kernel parameter cannot be
// called this (they would shadow each other in the op's body).
const char *const kGrid = "tgrad_grid";
// The backward's tuned launch values, which the ops take after the grid (TorchRuntime.py's _tgrad_launch_values).
const char *const kLaunch = "tgrad_launch";
// The integer arguments' list where the op's schema would pass PyTorch's limit of 64 arguments.
const char *const kPacked = "tgrad_ints";
constexpr size_t kMaxOpArguments = 64;

bool is_float_type(const std::string &t) {
  return t == "fp32" || t == "fp16" || t == "bf16" || t == "fp64" || t == "float32" || t == "float16" || t == "bfloat16";
}

// ------------------------------------------------ Python text

std::string join(const std::vector<std::string> &xs, const std::string &sep = ", ") {
  std::string out;
  for (size_t k = 0; k < xs.size(); ++k) out += (k ? sep : "") + xs[k];
  return out;
}

// The text `f` gives each element of `items`, joined with ", ".
template <typename Items, typename F>
std::string join_each(const Items &items, F f) {
  std::vector<std::string> xs;
  for (const auto &item : items) xs.push_back(f(item));
  return join(xs);
}

// A Python tuple display: "(a,)" for one element, "(a, b)" for more.
std::string tuple_of(const std::vector<std::string> &xs) { return "(" + join(xs) + (xs.size() == 1 ? ",)" : ")"); }

// ------------------------------------------------ protocol expressions as Python

class PythonExpr {
 public:
  explicit PythonExpr(std::string device) : device_(std::move(device)) {}

  // The Python text of a launch expression (include/tgrad/launch_protocol.schema.json).
  std::string operator()(const json &e) const {
    if (e.is_boolean()) return e.get<bool>() ? "True" : "False";
    if (e.is_number_integer()) return std::to_string(e.get<long long>());
    if (e.is_string()) return emit::quote_string(e.get<std::string>());
    const std::string kind = e.begin().key();  // one key: the expression's kind
    const json &body = e.begin().value();
    if (kind == "arg") return body.get<std::string>();
    if (kind == "numel") return "_tgrad_numel(" + body.get<std::string>() + ")";
    if (kind == "grid") return std::string(kGrid) + "[" + std::to_string(body.get<int>()) + "]";
    if (kind == "program_id") return "_pid[" + std::to_string(body.get<int>()) + "]";
    if (kind == "value") return "_value_" + body.get<std::string>();
    if (kind == "param") return body.get<std::string>();
    if (kind == "device") return "_tgrad_multi_processor_count(" + device_ + ")";
    if (kind == "not") return "(not " + (*this)(body) + ")";
    if (kind == "if") return "(" + (*this)(body[1]) + " if " + (*this)(body[0]) + " else " + (*this)(body[2]) + ")";
    if (kind == "disjoint") {
      std::vector<std::string> extents, strides;
      for (const json &x : body[0]) extents.push_back((*this)(x));
      for (const json &x : body[1]) strides.push_back((*this)(x));
      return "_tgrad_disjoint(" + tuple_of(extents) + ", " + tuple_of(strides) + ")";
    }
    if (kind == "max_over_programs") {
      std::set<int> axes;
      program_axes(body, axes);
      std::vector<std::string> listed;
      for (int a : axes) listed.push_back(std::to_string(a));
      return "_tgrad_max_over_programs(lambda _pid: " + (*this)(body) + ", " + kGrid + ", " + tuple_of(listed) + ")";
    }
    std::vector<std::string> xs;
    for (const json &x : body) xs.push_back((*this)(x));
    // (Not triton.cdiv: a Triton function whose call costs ~5 us of host time, evaluated for every program a
    // max over programs walks: a quarter of a causal attention backward's host time through the module.)
    if (kind == "cdiv") return "_tgrad_cdiv(" + xs[0] + ", " + xs[1] + ")";
    if (kind == "min" || kind == "max") return kind + "(" + join(xs) + ")";
    static const std::map<std::string, std::string> infix = {
        {"add", " + "}, {"sub", " - "}, {"mul", " * "}, {"floordiv", " // "}, {"mod", " % "}, {"eq", " == "},
        {"ne", " != "}, {"lt", " < "},  {"le", " <= "}, {"gt", " > "},        {"ge", " >= "}, {"and", " and "},
        {"or", " or "}};
    return "(" + join(xs, infix.at(kind)) + ")";
  }

 private:
  static void program_axes(const json &e, std::set<int> &out) {
    if (e.is_object()) {
      if (e.contains("program_id")) out.insert(e["program_id"].get<int>());
      for (const auto &kv : e.items()) program_axes(kv.value(), out);
    } else if (e.is_array()) {
      for (const json &x : e) program_axes(x, out);
    }
  }

  std::string device_;  // the Python name of the device the kernels run on
};

// The launch arguments ({"arg": NAME}) an expression reads.
void launch_args_read(const json &e, std::set<std::string> &out) {
  if (e.is_object()) {
    if (e.contains("arg") && e["arg"].is_string()) out.insert(e["arg"].get<std::string>());
    if (e.contains("grid")) out.insert(kGrid);  // (the launch's grid, as the op holds it)
    for (const auto &kv : e.items()) launch_args_read(kv.value(), out);
  } else if (e.is_array()) {
    for (const json &x : e) launch_args_read(x, out);
  }
}

// ------------------------------------------------ the kernels' source

bool same_import(const Import &a, const Import &b) {
  return a.is_from == b.is_from && a.module == b.module && a.names == b.names;
}

// The module's jit functions `fn` uses, itself included, callees first.
void jit_closure(const Module &module, const Function &fn, std::vector<const Function *> &out) {
  if (std::find(out.begin(), out.end(), &fn) != out.end()) return;
  out.push_back(&fn);  // marks it visited; moved to its place below
  std::set<std::string> names;
  ad::visit_exprs(fn.body, [&](const Expr &e) {
    if (auto *n = dyn_cast<Name>(&e)) names.insert(n->id);
  });
  for (const std::string &n : names)
    if (const Function *g = module.find_function(n)) jit_closure(module, *g, out);
  out.erase(std::find(out.begin(), out.end(), &fn));
  out.push_back(&fn);
}

// The forward (with the helpers and constants it uses, also those read from
// the user's other modules) and the backward, as one module.
// Imports first: what the op's code needs, then the kernels'.
std::unique_ptr<Module> kernels_module(const Module &forward, const Function &kernel, const Module &backward) {
  auto out = std::make_unique<Module>();
  auto plain = [](const std::string &m) {
    Import i;  // `import m`: the parser leaves `module` empty
    i.names = {{m, ""}};
    return i;
  };
  for (const char *m : {"collections", "dataclasses", "itertools", "os", "typing", "torch", "triton"}) out->imports.push_back(plain(m));
  Import library;
  library.is_from = true;
  library.module = "torch.library";
  library.names = {{"triton_op", ""}, {"wrap_triton", ""}};
  out->imports.push_back(library);
  Import dispatch;  // whether PyTorch traces an op's body (TorchRuntime.py's _tgrad_launcher)
  dispatch.is_from = true;
  dispatch.module = "torch.utils._python_dispatch";
  dispatch.names = {{"_get_current_dispatch_mode", ""}};
  out->imports.push_back(dispatch);
  auto add_import = [&](const Import &i) {
    if (i.conditional || std::none_of(out->imports.begin(), out->imports.end(),
                                       [&](const Import &j) { return same_import(i, j); }))
      out->imports.push_back(i);
  };
  for (const Import &i : forward.imports)
    if (!i.followed) add_import(i);
  for (const Import &i : backward.imports)
    add_import(i);
  // Then those of the user's modules the copied helpers came from (`from triton.language.extra import libdevice`
  // in the module defining a helper the forward calls): drop_unread_imports keeps those the module reads. Not
  // their relative imports (what those bind that the module reads is copied here), nor their bindings and
  // alternatives (`exp_fn = libdevice.exp` in a try: the backward's imports carry those it reads).
  for (const Import &i : forward.imports)
    if (i.followed && !i.conditional && !i.assignment && !(i.is_from && !i.module.empty() && i.module[0] == '.')) {
      Import here = i;
      here.followed = false;  // (printed: this module needs it itself)
      add_import(here);
    }
  auto add_constant = [&](const Constant &c) {
    for (const Constant &d : out->constants)
      if (d.name == c.name) return;
    StmtPtr stmt = clone(*c.stmt);
    // `NAME: tl.constexpr = v` is a global Triton 3.6 refuses to read in a
    // kernel; `NAME = tl.constexpr(v)` is the same constant, and accepted.
    if (auto *a = dyn_cast<AnnAssign>(stmt.get()); a && a->value) {
      ExprPtr value = std::move(a->value);
      auto *call = dyn_cast<Call>(value.get());
      if (!call || emit::print_expr(*call->func) != emit::print_expr(*a->annotation)) {  // not already tl.constexpr(v)
        ExprList args;
        args.push_back(std::move(value));
        value = std::make_unique<Call>(std::move(a->annotation), std::move(args), std::vector<Keyword>{});
      }
      ExprList targets;
      targets.push_back(std::move(a->target));
      stmt = std::make_unique<Assign>(std::move(targets), std::move(value), c.span);
    }
    out->constants.push_back(Constant{c.name, c.span, std::move(stmt), false});
  };
  for (const Constant &c : forward.constants) add_constant(c);
  for (const Constant &c : backward.constants) add_constant(c);
  std::vector<const Function *> used;
  jit_closure(forward, kernel, used);
  std::set<std::string> defined;
  for (const Function *f : used) {
    out->functions.push_back(clone(*f));
    out->functions.back()->imported_from.clear();
    defined.insert(f->name);
  }
  for (const auto &f : backward.functions)
    if (!defined.count(f->name)) out->functions.push_back(clone(*f));
  // Only the constants the functions read, and those these read: another
  // may be computed by a host function of the user's module, which this
  // module does not have.
  std::set<std::string> read;
  for (const auto &f : out->functions) {
    ad::block_reads(f->body, read);
    for (const Param &p : f->params)
      if (p.default_value) ad::reads(*p.default_value, read);
  }
  for (size_t before = 0; before != read.size();) {
    before = read.size();
    for (const Constant &c : out->constants)
      if (read.count(c.name)) {
        if (auto *a = dyn_cast<Assign>(c.stmt.get())) ad::reads(*a->value, read);
      }
  }
  out->constants.erase(std::remove_if(out->constants.begin(), out->constants.end(),
                                      [&](const Constant &c) { return !read.count(c.name); }),
                       out->constants.end());
  // A name the user's file imports from a module tgrad read (`from .utils import gelu`, `from
  // flash_attn.ops.triton.k_activations import gelu` through -I) is defined in this module, copied: the
  // import would only make the module need the user's package (a relative import fails outright in a
  // module of its own), and the definition after it would shadow it anyway.
  std::set<std::string> defined_here;
  for (const auto &f : out->functions) defined_here.insert(f->name);
  for (const Constant &c : out->constants) defined_here.insert(c.name);
  for (Import &i : out->imports) {
    if (!i.is_from || i.assignment || i.conditional) continue;
    i.names.erase(std::remove_if(i.names.begin(), i.names.end(),
                                 [&](const std::pair<std::string, std::string> &n) {
                                   return defined_here.count(n.second.empty() ? n.first : n.second) > 0;
                                 }),
                  i.names.end());
  }
  out->imports.erase(std::remove_if(out->imports.begin(), out->imports.end(),
                                    [](const Import &i) { return i.is_from && i.names.empty(); }),
                     out->imports.end());
  return out;
}

// The identifiers Python source reads (not attributes after '.', not
// inside strings or comments): enough to find which host definitions a
// decorator's text or another definition uses.
std::set<std::string> python_identifiers(const std::string &text) {
  std::set<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '\'' || c == '"') {
      const bool triple = text.compare(i, 3, std::string(3, c)) == 0;
      const std::string close = triple ? std::string(3, c) : std::string(1, c);
      i += close.size();
      while (i < text.size() && text.compare(i, close.size(), close) != 0) i += text[i] == '\\' ? 2 : 1;
      i += close.size();
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = i;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
      size_t before = i;
      while (before > 0 && (text[before - 1] == ' ' || text[before - 1] == '\t')) --before;
      if (before == 0 || text[before - 1] != '.') out.insert(text.substr(i, end - i));
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    } else {
      ++i;
    }
  }
  return out;
}

// The names the module's code reads from the module's scope: its functions' (less their own names), their
// decorators', parameter defaults' and annotations', and its constants'. A function's reads from the module are
// the names live where it starts that are not its parameters: a name it assigns before reading is its own, also
// where the module has one of that name too (tutorial matmul's `b = tl.load(...)` in the kernel, `b = b.T` under
// an `if` at module level).
std::set<std::string> module_scope_reads(const Module &m) {
  std::set<std::string> out;
  for (const auto &f : m.functions) {
    std::set<std::string> live = ad::live_before(f->body, {});
    for (const Param &p : f->params) {
      live.erase(p.name);
      if (p.default_value) ad::reads(*p.default_value, out);
      if (p.annotation) ad::reads(*p.annotation, out);
    }
    out.insert(live.begin(), live.end());
    for (const Decorator &d : f->decorators) {
      std::set<std::string> ids = python_identifiers(d.text);
      out.insert(ids.begin(), ids.end());
    }
  }
  for (const Constant &c : m.constants) ad::stmt_reads(*c.stmt, out);
  return out;
}

// `a` of a dotted name `a.b.c`.
std::string root_of(const std::string &dotted) { return dotted.substr(0, dotted.find('.')); }

// The name one of an import's names binds: its alias, the name a `from` import takes, `a` of `import a.b`, NAME of
// a `NAME = a.b` binding.
std::string bound_name(const Import &i, const std::pair<std::string, std::string> &n) {
  if (!n.second.empty()) return n.second;
  return i.is_from ? n.first : root_of(n.first);
}

// Each `NAME = a.b` binding after the import or binding of `a` (its root) it reads: the user's file's own
// bindings come before those copied from the modules it imports (FlagGems' `rsqrt = tl_extra_shim.rsqrt`, whose
// `tl_extra_shim = triton.language.math` comes from flag_gems.utils), and Python runs them in order. Otherwise
// the order stays; a cycle (not valid Python either) keeps it.
void order_bindings(std::vector<Import> &imports) {
  auto binds = [](const Import &i, const std::string &name) {
    return std::any_of(i.names.begin(), i.names.end(), [&](const auto &n) { return bound_name(i, n) == name; });
  };
  std::vector<Import> ordered;
  std::vector<bool> placed(imports.size(), false);
  // Whether imports[k] reads a name that an import not yet placed binds, other than itself.
  auto waits = [&](size_t k) {
    if (!imports[k].assignment || imports[k].conditional) return false;  // (an if's or a try's alternatives stay together)
    for (const auto &n : imports[k].names) {
      const std::string root = root_of(n.first);
      bool bound_before = false;
      for (const Import &o : ordered) bound_before |= binds(o, root);
      if (bound_before) continue;
      for (size_t j = 0; j < imports.size(); ++j)
        if (j != k && !placed[j] && binds(imports[j], root)) return true;
    }
    return false;
  };
  for (size_t left = imports.size(); left > 0;) {
    size_t next = imports.size();
    for (size_t k = 0; k < imports.size() && next == imports.size(); ++k)
      if (!placed[k] && !waits(k)) next = k;
    if (next == imports.size()) return;  // a cycle: the order as it was
    ordered.push_back(imports[next]);
    placed[next] = true;
    --left;
  }
  imports = std::move(ordered);
}

// The module's imports less those of the user's file that nothing in it
// reads: Liger's kernel files import their launchers' host helpers
// (`from liger_kernel.ops.utils import ensure_contiguous`), which the
// generated module would otherwise need installed to import. The module's
// own imports (torch, triton, typing, ...) stay. A `NAME = a.b` binding, and
// an if's or a try's alternatives, stay where the module reads a name they
// bind (05-layer-norm's `layer_norm = LayerNorm.apply` would need the class,
// which the module does not have).
void drop_unread_imports(Module &kernels, const std::string &host_definitions) {
  std::vector<Import> imports = std::move(kernels.imports);
  kernels.imports.clear();
  std::set<std::string> read = python_identifiers(host_definitions + kTorchRuntime);
  for (const std::string &n : module_scope_reads(kernels)) read.insert(n);
  static const std::set<std::string> own = {"collections", "dataclasses", "itertools", "os", "typing", "torch", "triton",
                                           "torch.library", "torch.utils._python_dispatch"};
  // The bindings and alternatives kept: those whose names are read, and (a kept `NAME = libdevice.exp` reads
  // the import of libdevice, which may be an alternative of a try) those these read in turn. An if's or a try's
  // alternatives stay together.
  auto reads_a_binding_of = [&](size_t k) {
    for (size_t j = 0; j < imports.size(); ++j) {
      const Import &i = imports[j];
      const bool together = j == k || (imports[k].conditional && i.conditional && i.group == imports[k].group);
      if (together)
        for (const auto &n : i.names)
          if (read.count(bound_name(i, n))) return true;
    }
    return false;
  };
  std::vector<bool> kept(imports.size(), false);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t k = 0; k < imports.size(); ++k) {
      const Import &i = imports[k];
      if (kept[k] || !(i.assignment || i.conditional) || !reads_a_binding_of(k)) continue;
      kept[k] = grew = true;
      for (const auto &n : i.names) read.insert(root_of(n.first));
    }
  }
  // Names the module binds itself: its functions, its constants and the `NAME = a.b` bindings tgrad resolved an
  // import to. An import's name the module binds so is not imported: unsloth's geglu imports `triton_tanh` from
  // `.utils`, where it is `libdevice.tanh`; the module binds it so, and `from .utils import ...` would make it
  // fail to import on its own (a relative import outside a package).
  std::set<std::string> bound_here;
  for (const auto &f : kernels.functions) bound_here.insert(f->name);
  for (const Constant &c : kernels.constants) bound_here.insert(c.name);
  // A binding that rebinds the name it reads (FlagGems' `device = device.name` after `from flag_gems.runtime import
  // device`) needs that import before it: it does not bind the name in the import's place.
  for (size_t k = 0; k < imports.size(); ++k)
    if (kept[k] && imports[k].assignment && !imports[k].conditional)
      for (const auto &n : imports[k].names)
        if (bound_name(imports[k], n) != root_of(n.first)) bound_here.insert(bound_name(imports[k], n));
  for (size_t k = 0; k < imports.size(); ++k) {
    Import &i = imports[k];
    if ((i.assignment || i.conditional) && !kept[k]) continue;
    const bool whole = i.conditional || i.assignment || own.count(i.is_from ? i.module : i.names.front().first);
    if (!whole) {
      // Of a plain import, the names the module reads and does not bind itself.
      std::vector<std::pair<std::string, std::string>> needed;
      for (const auto &n : i.names)
        if (read.count(bound_name(i, n)) && !bound_here.count(bound_name(i, n))) needed.push_back(n);
      if (needed.empty()) continue;
      // (`import a.b` binds `a`: it stays whole where any of its names is read.)
      if (i.is_from) i.names = std::move(needed);
      // What is left may repeat another import (the file imported `erf` twice, once beside names now dropped).
      if (std::any_of(kernels.imports.begin(), kernels.imports.end(), [&](const Import &j) { return same_import(i, j); }))
        continue;
    }
    kernels.imports.push_back(std::move(i));
  }
  order_bindings(kernels.imports);
}

// The user's host definitions the kernels' decorators read (attorch's
// `configs=[linear_forward_config(32, 32, 32, ...)]`, a heuristic function
// of the same file), with those they read in turn, in the file's order.
std::string host_definitions_read(const Module &forward, const Module &kernels) {
  std::set<std::string> read;
  for (const auto &f : kernels.functions)
    for (const Decorator &d : f->decorators) {
      std::set<std::string> ids = python_identifiers(d.text);
      read.insert(ids.begin(), ids.end());
    }
  std::vector<bool> used(forward.host_definitions.size(), false);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t k = 0; k < forward.host_definitions.size(); ++k)
      if (!used[k] && read.count(forward.host_definitions[k].name)) {
        used[k] = grew = true;
        std::set<std::string> ids = python_identifiers(forward.host_definitions[k].text);
        read.insert(ids.begin(), ids.end());
      }
  }
  std::string out;
  std::set<std::string> written;  // (an if statement binding several names defines each of them)
  for (size_t k = 0; k < forward.host_definitions.size(); ++k)
    if (used[k] && written.insert(forward.host_definitions[k].text).second) out += "\n\n" + forward.host_definitions[k].text;
  return out;
}

// ------------------------------------------------ the op's signature

// A constexpr compared with a string literal takes strings (the tutorial
// matmul's ACTIVATION), also where a helper it is passed to compares it
// (attorch's apply_act_func(..., act_func, dropout)); any other takes a
// number or a bool.
bool compared_with_strings(const Function &fn, const std::string &param);

bool takes_strings(const Module &module, const Function &fn, const std::string &param) {
  if (compared_with_strings(fn, param)) return true;
  for (const auto &[helper, name] : ad::helpers_receiving_constexpr(module, fn, param))
    if (compared_with_strings(*helper, name)) return true;
  return false;
}

bool compared_with_strings(const Function &fn, const std::string &param) {
  bool found = false;
  ad::visit_exprs(fn.body, [&](const Expr &e) {
    auto *c = dyn_cast<Compare>(&e);
    if (!c) return;
    bool names_param = false, has_string = false;
    auto look = [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x)) names_param |= n->id == param;
      has_string |= isa<StrLit>(&x);
    };
    look(*c->left);
    for (const ExprPtr &r : c->comparators) look(*r);
    found |= names_param && has_string;
  });
  for (const Param &p : fn.params)
    if (p.name == param && p.default_value && isa<StrLit>(p.default_value.get())) found = true;
  return found;
}

const char *const kScalar = "typing.Union[int, float, bool]";

struct Parameter {
  std::string name;
  std::string annotation;  // its type in the op's schema
  bool constexpr_param = false;
  bool dtype = false;      // a tl.constexpr dtype (x.to(P)): the op takes its name
  bool pointer = false;
  // A pointer that a flag makes a number (flash-attention's rotary SEQLEN_OFFSETS: an int unless
  // IS_SEQLEN_OFFSETS_TENSOR): an op's schema takes a tensor or a number, not either, so the op takes the
  // number apart, as NAME__number.
  bool number_too = false;
  bool stored = false;     // an output of the op
  bool reread = false;     // the kernel also loads it or adds to it atomically: the output starts as a copy
  bool accumulated = false;  // adds to it atomically
  bool differentiable = false;  // has an upstream gradient
  bool saved_output = false;    // the backward reads what the forward stored there
  std::string gradient;         // its gradient buffer, for a differentiated input
  std::vector<std::string> float_dtypes;  // a float pointer: the torch dtypes its backward serves ("float32", ...)
};

// The torch dtype of a float pointer type of the protocol ("*bf16": "bfloat16"), or "".
std::string torch_float_dtype(const std::string &type) {
  static const std::map<std::string, std::string> names = {
      {"*fp32", "float32"}, {"*fp16", "float16"}, {"*bf16", "bfloat16"}, {"*fp64", "float64"},
      {"*fp8e4nv", "float8_e4m3fn"}, {"*fp8e5", "float8_e5m2"}, {"*fp8e4b8", "float8_e4m3fnuz"},
      {"*fp8e5b16", "float8_e5m2fnuz"}};
  auto it = names.find(type);
  return it == names.end() ? "" : it->second;
}

}  // namespace

std::optional<std::string> torch_module(const Module &module, const ad::BackwardRequest &request,
                                        const ad::Backward &bwd, const std::string &op_namespace, std::string &error) {
  const Function *fn = module.find_function(request.function);
  const json protocol = launch_protocol(module, request, bwd);
  if (!fn || protocol["kind"] != "kernel" || !bwd.module) {
    error = "--emit torch makes a kernel a PyTorch op; '" + request.function +
            "' is a tile function (no pointers): call its backward from your own kernel (--emit python)";
    return std::nullopt;
  }
  // The parameters, as the protocol describes them.
  std::vector<Parameter> params;
  std::map<std::string, const json *> by_name;
  std::set<std::string> in_place;  // inputs the kernel updates in place: one gradient buffer each
  for (const json &p : protocol["parameters"]) {
    by_name[p["name"].get<std::string>()] = &p;
    if (p.value("in_place", false)) in_place.insert(p["of"].get<std::string>());
  }
  const std::vector<ad::ParamRole> roles = ad::param_roles(module, *fn);
  // The launch options the op takes besides the kernel's arguments. A kernel
  // parameter of that name (the Triton tutorial's softmax has `num_stages:
  // tl.constexpr`) is both, as in Triton, where the launch's `num_stages=`
  // binds the parameter and sets the option: the op then takes it once, as
  // the parameter.
  std::vector<std::string> own_options;
  for (const char *option : {"num_warps", "num_stages"})
    if (std::none_of(fn->params.begin(), fn->params.end(), [&](const Param &p) { return p.name == option; }))
      own_options.push_back(option);
  auto is_own = [&](const char *option) {
    return std::find(own_options.begin(), own_options.end(), option) != own_options.end();
  };
  const std::string options_call = std::string("**_tgrad_options(") + (is_own("num_warps") ? "num_warps" : "None") +
                                   ", " + (is_own("num_stages") ? "num_stages" : "None") + ")";
  for (const Param &fp : fn->params) {
    if (fp.name == kGrid || fp.name == kLaunch) {
      error = "--emit torch: the kernel's parameter '" + fp.name + "' has the name of the op's own argument; rename it";
      return std::nullopt;
    }
    const json &p = *by_name.at(fp.name);
    Parameter q;
    q.name = fp.name;
    q.constexpr_param = p["role"] == "constexpr";
    std::vector<std::string> accesses = p.value("accesses", std::vector<std::string>{});
    std::vector<std::string> types = p.value("types", std::vector<std::string>{});
    auto has = [&](const char *a) { return std::find(accesses.begin(), accesses.end(), a) != accesses.end(); };
    q.pointer = !accesses.empty() || (!types.empty() && types[0].rfind('*', 0) == 0);
    q.stored = has("store") || has("atomic");
    q.reread = q.stored && (has("load") || has("atomic"));
    q.accumulated = has("atomic");
    q.differentiable = p["role"] == "output" || in_place.count(fp.name);
    q.saved_output = p.value("contents", "") == "as the forward left it";
    q.gradient = p["role"] == "differentiated input" ? p.value("gradient", "") : "";
    if (q.pointer) {
      // Optional: kernels take buffers that the caller passes as None where a flag leaves them unused
      // (flash-attention's layer norm: RESIDUAL, X1, W1, B1, Y1, ...).
      q.annotation = "typing.Optional[torch.Tensor]";
      q.number_too = std::any_of(types.begin(), types.end(), [](const std::string &t) { return t.rfind('*', 0) != 0; });
      for (const std::string &t : types)
        if (std::string d = torch_float_dtype(t); !d.empty()) q.float_dtypes.push_back(d);
    } else if (q.constexpr_param) {
      q.dtype = roles[params.size()] == ad::ParamRole::DTypeConstexpr;
      auto given = request.param_types.find(fp.name);
      const bool given_string = given != request.param_types.end() && given->second.kind == sema::SType::Kind::Str;
      q.annotation = q.dtype || given_string || takes_strings(module, *fn, fp.name) ? "str" : kScalar;
    } else {
      bool any_float = std::any_of(types.begin(), types.end(), is_float_type);
      bool all_float = !types.empty() && std::all_of(types.begin(), types.end(), is_float_type);
      q.annotation = all_float ? "float" : any_float || types.empty() ? kScalar : "int";
    }
    params.push_back(q);
  }
  std::vector<const Parameter *> outputs, inputs_with_gradient;
  for (const Parameter &p : params)
    if (p.stored) outputs.push_back(&p);
  for (const std::string &w : request.wrt)
    for (const Parameter &p : params)
      if (p.name == w && !p.gradient.empty()) inputs_with_gradient.push_back(&p);
  if (outputs.empty()) {
    error = "--emit torch: '" + fn->name + "' stores to none of its parameters: the op would return nothing";
    return std::nullopt;
  }
  for (const json &p : protocol["parameters"])
    if (p["role"] == "size" && p["value"].is_null()) {
      error = "--emit torch: the launch protocol cannot size '" + p["name"].get<std::string>() + "': " +
              p.value("why", std::string());
      return std::nullopt;
    }
  std::vector<const Parameter *> pointer_params;
  for (const Parameter &p : params)
    if (p.pointer) pointer_params.push_back(&p);
  // Inductor compiles the kernels of a triton_op with Python floats typed
  // fp64 where Triton types them fp32: a forward that takes a runtime float
  // (eps, a scale) would compute in double, or fail to compile where a loop
  // carries an fp32 value. Such kernels go in a custom_op, which
  // torch.compile calls as it is, so they run as Triton compiles them.
  bool float_scalars = false;
  for (const Parameter &p : params)
    float_scalars |= !p.pointer && !p.constexpr_param && p.annotation != "int" && p.annotation != "str";
  // A dtype crosses the op's schema as its name (tl.float16 as 'fp16'); the
  // op makes it a dtype again before launching, which a custom_op does
  // unseen by torch.compile.
  std::string dtypes_back;
  for (const Parameter &p : params)
    if (p.dtype) {
      float_scalars = true;
      dtypes_back += "    " + p.name + " = triton.language.dtype(" + p.name + ")  # passed by name through the op's schema\n";
    }
  // A pointer-or-number parameter is one value again in the op's body.
  std::string numbers_back;
  for (const Parameter &p : params)
    if (p.number_too)
      numbers_back += "    " + p.name + " = " + p.name + " if " + p.name + "__number is None else " + p.name +
                      "__number  # a number where a flag says so: passed apart through the op's schema\n";
  // What each op's body starts with: its arguments as the kernels take them again.
  // A backward with owner-computes kernels takes launch values of its own (TgradKernel tunes them; see
  // TorchRuntime.py): the ops take them after the grid, as ints, so that torch.compile sees constants.
  // --tiling: the launch values also set the declared block sizes, each backward kernel its own where they are
  // apart (the protocol's "tiling").
  const bool tiling = protocol.contains("tiling");
  const bool tiling_apart = tiling && protocol["tiling"]["kernels_apart"].get<bool>();
  const bool tuned_launch = (!bwd.owner_kernels.empty() || tiling) && own_options.size() == 2;
  // PyTorch's custom ops take at most 64 arguments (mamba's chunk scan kernel has 67 parameters, its backward op
  // more with the upstream gradients): past that, the integer parameters (sizes, strides) cross the schema as one
  // list, `tgrad_ints`, which each op function unpacks again.
  size_t schema_arguments = 1 + (tuned_launch ? 1 : 0) + own_options.size();
  for (const Parameter &p : params) schema_arguments += p.number_too ? 2 : 1;
  for (const json &p : protocol["parameters"])
    schema_arguments += p["role"] == "output gradient" || p.value("in_place", false) ? 1 : 0;
  std::vector<std::string> packed;
  if (schema_arguments > kMaxOpArguments)
    for (const Parameter &p : params)
      if (!p.pointer && !p.constexpr_param && p.annotation == "int") packed.push_back(p.name);
  // The op's kernel arguments in order: `each` for a parameter the schema takes as itself, `ints` once, in place
  // of the first integer it takes as part of the list.
  auto each_op_argument = [&](const std::function<void(const Parameter &)> &each, const std::function<void()> &ints) {
    for (const Parameter &p : params) {
      if (std::find(packed.begin(), packed.end(), p.name) == packed.end()) each(p);
      else if (p.name == packed.front()) ints();
    }
  };
  const std::string ints_back =
      packed.empty() ? std::string()
                     : "    " + join(packed) + (packed.size() == 1 ? "," : "") + " = " + kPacked +
                           "  # the integer arguments, one list through the op's schema (at most 64 arguments)\n";
  const std::string arguments_back = ints_back + dtypes_back + numbers_back;
  // wrap_triton where torch.compile traces the launch; outside it (TorchRuntime.py's _tgrad_launcher) the kernel
  // itself: wrap_triton's dispatch costs ~0.3 ms of host time per eager launch.
  // (A custom_op's body is opaque to torch.compile: its kernels launch directly, again unpipelined where their
  // stages' shared memory does not fit.)
  const std::string launch_prefix = float_scalars ? "_TgradUnpipelinedFallback(" : "_tgrad_launcher(";
  const std::string launch_suffix = ")";

  // The launcher takes the name callers use: the jit alias of `alias = triton.jit(fn)`, else the function's.
  const std::string name = fn->jit_alias.empty() ? fn->name : fn->jit_alias;
  const std::string forward_op = fn->name + "_forward", backward_op = fn->name + "_backward";
  std::ostringstream py;
  // The header: the backward's (command line, Generic line), and how to use the module.
  std::string header = bwd.source.substr(0, ad::header_length(bwd.source));
  const std::string first = "# Generated by tgrad ";
  if (header.rfind(first, 0) == 0) {
    size_t colon = header.find(": ", first.size());
    size_t nl = header.find('\n');
    if (colon != std::string::npos && colon < nl)
      header = header.substr(0, colon) + ": '" + name + "' as a PyTorch op, with the backward tgrad wrote.\n" +
               header.substr(nl + 1);
  }
  auto name_of = [](const Parameter *p) { return p->name; };
  // The kernel's arguments; as a caller passes them (constexprs by keyword,
  // and so every argument after the first keyword, as Python requires).
  // A kernel's arguments, positional up to a parameter named like a launch
  // option: that one and those after it by keyword, which is how Triton sets
  // the option as well as the parameter.
  auto launch_arguments = [&](const std::vector<std::string> &names) {
    std::vector<std::string> out;
    bool by_keyword = false;
    for (const std::string &n : names) {
      by_keyword |= (n == "num_warps" && !is_own("num_warps")) || (n == "num_stages" && !is_own("num_stages"));
      out.push_back(by_keyword ? n + "=" + n : n);
    }
    return out;
  };
  std::vector<std::string> param_name_list;
  for (const Parameter &p : params) param_name_list.push_back(p.name);
  const std::string arg_list = join(launch_arguments(param_name_list));
  bool by_keyword = false;
  const std::string call_list = join_each(params, [&by_keyword](const Parameter &p) {
    by_keyword |= p.constexpr_param;
    return by_keyword ? p.name + "=" + p.name : p.name;
  });
  const std::string output_list = join_each(outputs, name_of), wrt_list = join_each(inputs_with_gradient, name_of);
  py << header << "#\n"
     << "# Launch it as the Triton kernel, from this module:\n"
     // A named tuple even for one output: `Y, = ...` unpacks it (`Y = ...` would bind the tuple).
     << "#     " << output_list << (outputs.size() == 1 ? "," : "") << " = " << name << "[grid](" << call_list << ")\n"
     << "# It returns the buffers the kernel stores to (" << output_list
     << ") as a named tuple of new tensors, shaped and strided like those\n"
     << "# passed, which it leaves as they are (an element the kernel does not store is unset, as torch.empty\n"
     << "# leaves it); autograd differentiates them with respect to " << wrt_list << ".\n"
     << "# Eager and torch.compile(fullgraph=True). The ops are " << op_namespace << "::" << forward_op << " and "
     << op_namespace << "::" << backward_op << ".\n";
  // The forward calls the copies of what it reads from a user module imported as a namespace (`tle.program_id` as
  // `tle_program_id`, defined in this module): the import of the user's package would fail here.
  std::unique_ptr<Module> resolved = lower::with_namespace_calls_resolved(module);
  const Function *kernel = resolved ? resolved->find_function(fn->name) : fn;
  std::unique_ptr<Module> kernels = kernels_module(resolved ? *resolved : module, *kernel, *bwd.module);
  drop_unread_imports(*kernels, host_definitions_read(module, *kernels));
  std::string kernels_source = emit::print_module(*kernels);
  // The host code the decorators read goes after the imports, before the
  // kernels that the decorators wrap.
  if (std::string host = host_definitions_read(module, *kernels); !host.empty()) {
    Module imports_only;
    imports_only.imports = kernels->imports;
    const std::string imports = emit::print_module(imports_only);
    kernels_source = imports + host + kernels_source.substr(kernels_source.rfind(imports, 0) == 0 ? imports.size() : 0);
  }
  py << kernels_source << "\n" << kTorchRuntime;

  // ---- the forward op
  std::vector<std::string> launch_constexprs;  // the constexprs the tuned launch values may set (block sizes)
  for (const Parameter &p : params)
    if (p.constexpr_param && p.annotation == kScalar) launch_constexprs.push_back(p.name);
  int launched_kernels = 0;  // the backward's kernels that take launch options
  for (const json &k : protocol["kernels"]) launched_kernels += k.contains("call") ? 1 : 0;
  auto signature = [&](const std::vector<std::string> &extra_tensors) {
    std::string s = std::string(kGrid) + ": typing.List[int]";
    if (tuned_launch) s += std::string(", ") + kLaunch + ": typing.List[int]";
    each_op_argument(
        [&](const Parameter &p) {
          s += ", " + p.name + ": " + p.annotation;
          if (p.number_too) s += ", " + p.name + "__number: typing.Optional[" + std::string(kScalar) + "]";
        },
        [&] { s += std::string(", ") + kPacked + ": typing.List[int]"; });
    for (const std::string &t : extra_tensors) s += ", " + t + ": typing.Optional[torch.Tensor]";
    for (const std::string &option : own_options) s += ", " + option + ": typing.Optional[int] = None";
    return s;
  };
  auto returns = [](size_t n) {
    return n == 1 ? std::string("torch.Tensor") : "typing.Tuple[" + join(std::vector<std::string>(n, "torch.Tensor")) + "]";
  };
  // Each op is its Python function (`_tgrad_NAME`, which the eager path
  // below calls directly) made an op: `NAME = custom_op(...)(_tgrad_NAME)`.
  auto make_op = [&](const std::string &op) {
    return op + " = " +
           (float_scalars ? "torch.library.custom_op(\"" + op_namespace + "::" + op + "\", mutates_args=())"
                          : "triton_op(\"" + op_namespace + "::" + op + "\", mutates_args={})") +
           "(_tgrad_" + op + ")\n";
  };
  py << "\n\n# ---------------------------------------------------------------- the op\n";
  if (float_scalars)
    py << "# A custom_op, not a triton_op: torch.compile would compile the kernels of a triton_op with the\n"
       << "# kernel's float arguments in fp64 (Triton passes them as fp32), changing what it computes.\n";
  py << "\n\n"
     << "def _tgrad_" << forward_op << "(" << signature({}) << ") -> " << returns(outputs.size()) << ":\n"
     << arguments_back
     << "    _tgrad_refuse_overlapping("
     << join_each(outputs, [](const Parameter *p) { return p->name + "=" + p->name; }) << ")\n"
     << "    # What the kernel stores to, new: the op returns it.\n";
  for (const Parameter *p : outputs)
    py << "    " << p->name << " = " << (p->reread ? "_tgrad_clone(" + p->name + ")" : "_tgrad_new_like(" + p->name + ")")
       << (p->accumulated ? "  # the kernel adds to it: it starts as the caller's"
           : p->reread   ? "  # the kernel reads it too: it starts as the caller's"
                         : "")
       << "\n";
  py << "    " << launch_prefix << name << ".jit" << launch_suffix << "[tuple(" << kGrid << ")](" << arg_list
     << ", " << options_call << ")\n"
     << "    return " << join_each(outputs, [](const Parameter *p) { return "_tgrad_out(" + p->name + ")"; })
     << "\n\n\n"
     << make_op(forward_op);

  // ---- the backward op: the forward's arguments, then the upstream gradients
  std::vector<std::string> upstream;
  std::map<std::string, std::string> upstream_of;
  for (const json &p : protocol["parameters"])
    if (p["role"] == "output gradient" || p.value("in_place", false)) {
      upstream.push_back(p["name"].get<std::string>());
      upstream_of[p["of"].get<std::string>()] = p["name"].get<std::string>();
    }
  PythonExpr expr("_tgrad_device");
  py << "\n\ndef _tgrad_" << backward_op << "(" << signature(upstream) << ") -> " << returns(inputs_with_gradient.size())
     << ":\n"
     << arguments_back << "    " << kGrid << " = _tgrad_grid3(" << kGrid << ")\n";
  std::vector<std::string> rebound = {kGrid};
  rebound.insert(rebound.end(), launch_constexprs.begin(), launch_constexprs.end());
  rebound.push_back("_tgrad_kernel_options");
  if (tuned_launch && !tiling_apart) {
    py << "    # The backward's launch values, tuned by TgradKernel for these arguments' shapes, else the forward's: the\n"
       << "    # forward's grid and constexprs under another of its autotuner's configs"
       << (tiling ? " or under block sizes of its own (--tiling)" : "") << ", each kernel's warps and stages.\n"
       << "    " << join(rebound) << " = _tgrad_launch_values(" << kLaunch << ", " << kGrid << ", "
       << tuple_of(launch_constexprs) << ", num_warps, num_stages, " << launched_kernels << ")\n";
  } else if (tuned_launch) {
    py << "    # Each backward kernel below takes launch values of its own, tuned by TgradKernel for these arguments'\n"
       << "    # shapes (--tiling: block sizes declared to only tile the computation), else the forward's, as launched:\n"
       << "    _tgrad_forward_launch = (" << kGrid << ", " << tuple_of(launch_constexprs) << ")\n";
  }
  if (protocol.contains("assumptions")) {
    bool first = true;
    for (const json &a : protocol["assumptions"]) {
      if (a["check"].is_null()) continue;
      if (first)
        py << "    # What the backward assumes of this launch (its tl.device_assert checks only in Triton's debug mode): a\n"
           << "    # launch that breaks it would race, a wrong gradient; it is refused.\n";
      first = false;
      std::set<std::string> read;
      launch_args_read(a["check"], read);
      std::string message = a["message"].get<std::string>();
      if (message.rfind("tgrad: ", 0) == 0) message = message.substr(7);
      py << "    _tgrad_assume(" << expr(a["check"]) << ", " << emit::quote_string(a["assumes"].get<std::string>()) << ", "
         << emit::quote_string(message) << ", " << emit::quote_string(protocol["forward"].get<std::string>()) << ", "
         << join_each(read, [](const std::string &n) { return (n == kGrid ? std::string("grid") : n) + "=" + n; })
         << ")\n";
    }
  }
  py << "    _tgrad_device = _tgrad_device_of(" << join_each(pointer_params, [](const Parameter *p) { return p->name; })
     << ")\n";
  std::set<std::string> accumulated;  // inputs whose gradient buffer the backward adds to
  std::set<std::string> sizes_given;  // size parameters computed already (a layout flag its buffer's dtype reads)
  for (const json &p : protocol["parameters"])
    if (p["role"] == "input gradient" && !p.value("in_place", false)) {
      // Always zeros here, also where the protocol says "any": the backward
      // writes exactly the elements the forward loaded, and this op cannot tell
      // whether the caller's grid loads every element of the tensor (a grid over
      // the valid rows of a padded batch does not). An element the forward never
      // read has gradient zero; left empty it would be whatever the allocator
      // held, a wrong gradient nobody sees. A launcher that knows its grid
      // covers the tensor may allocate "any" buffers empty (the protocol's data).
      // Where the backward adds to the buffer (atomics, additions in place, several stores' sums), it adds in
      // float32, cast to the input's dtype at the end: added into a bf16 buffer, every addition rounds to
      // bf16 (Liger's group norm, 72000 additions per channel: dW off by 30 %).
      // Where one owner-computes kernel adds each element once, the input's dtype holds that addition as float32
      // would, without a float32 buffer to zero and a cast at the end.
      const bool once = p.value("additions", "") == "one per element";
      const bool zeros = p["contents"] == "zeros" && !once;
      if (zeros) accumulated.insert(p["of"].get<std::string>());
      // Stored once per element where a layout flag is 1 (the strides keep the cells apart), added atomically
      // where it is 0: the input's dtype serves the stores, float32 the additions.
      if (zeros && p.contains("zeros_unless")) {
        const json *flag = nullptr;  // its size parameter
        for (const json &q : protocol["parameters"])
          if (q["name"] == p["zeros_unless"] && q.contains("value") && !q["value"].is_null()) flag = &q;
        const json *flag_value = flag ? &(*flag)["value"] : nullptr;
        if (flag_value) {
          const std::string of = p["of"].get<std::string>(), flag_name = p["zeros_unless"].get<std::string>();
          // The flag once, here, where every kernel takes the same values (else before each kernel, as its sizes).
          if (!tiling_apart && sizes_given.insert(flag_name).second)
            py << "    # " << (*flag)["why"].get<std::string>() << "\n"
               << "    " << flag_name << " = " << expr(*flag_value) << "\n";
          py << "    " << p["name"].get<std::string>() << " = _tgrad_zeros_like(" << of << ") if "
             << (tiling_apart ? expr(*flag_value) : flag_name) << " else _tgrad_float32_zeros_like(" << of << ")  # "
             << p["why"].get<std::string>() << "; where it adds, in float32, cast to the input's dtype at the end\n";
          continue;
        }
      }
      py << "    " << p["name"].get<std::string>() << " = " << (zeros ? "_tgrad_float32_zeros_like(" : "_tgrad_zeros_like(")
         << p["of"].get<std::string>() << ")  # "
         << (zeros  ? p["why"].get<std::string>() + "; in float32, cast to the input's dtype at the end"
             : once ? p["why"].get<std::string>()
                    : std::string("elements the forward does not load (a grid that does not cover the tensor) have gradient zero"))
         << "\n";
    }
  for (const json &p : protocol["parameters"])
    if (p.value("consumed", false))
      py << "    # The backward overwrites this upstream gradient: "
         << (p.value("in_place", false) ? "the kernel updates " + p["of"].get<std::string>() +
                                              " in place, and it becomes the gradient of the contents before"
                                        : "the forward may write an address of " + p["of"].get<std::string>() +
                                              " more than once")
         << ".\n"
         << "    " << p["name"].get<std::string>() << " = _tgrad_consumed_upstream(" << p["name"].get<std::string>()
         << ", " << p["of"].get<std::string>() << ")\n";
  for (const auto &[value, spec] : protocol["launch_values"].items()) {
    py << "    # " << spec["why"].get<std::string>() << "\n"
       << "    _value_" << value << " = max(" << expr(spec["min"]) << ", min(" << expr(spec["max"]) << ", "
       << expr(spec["default"]) << "))\n";
  }
  std::ostringstream sizes;  // the sizes the kernels take (where each kernel has values of its own: before each)
  for (const json &p : protocol["parameters"]) {
    if (p["role"] == "scratch") {
      std::vector<std::string> dims;
      for (const json &d : p["shape"]) dims.push_back(expr(d));
      py << "    # " << p["why"].get<std::string>() << "\n";
      // (In the dtype of the tensor passed for `dtype_of` where the protocol names one.)
      const std::string dtype = p.contains("dtype_of") ? p["dtype_of"].get<std::string>() + ".dtype"
                                                       : "torch." + p.value("dtype", std::string("float32"));
      if (p.contains("like"))  // (addressed with that tensor's offsets: its strides)
        py << "    " << p["name"].get<std::string>() << " = torch.empty_strided(" << p["like"].get<std::string>()
           << ".shape, " << p["like"].get<std::string>() << ".stride(), dtype=" << dtype << ", device=_tgrad_device)\n";
      else
        py << "    " << p["name"].get<std::string>() << " = torch.empty(" << tuple_of(dims) << ", dtype=" << dtype
           << ", device=_tgrad_device)\n";
    } else if (p["role"] == "size" && !sizes_given.count(p["name"].get<std::string>())) {
      (tiling_apart ? sizes : py) << "    # " << p["why"].get<std::string>() << "\n"
                                  << "    " << p["name"].get<std::string>() << " = " << expr(p["value"]) << "\n";
    }
  }
  int launch_index = 0;
  for (const json &k : protocol["kernels"]) {
    std::vector<std::string> grid;
    for (const json &d : k["grid"]) grid.push_back(expr(d));
    if (k.contains("why")) py << "    # " << k["why"].get<std::string>() << "\n";
    // A kernel that writes an input's gradient buffer alone (a partial-sum reduction) has nothing to
    // do where the caller passed that input as None, and Triton cannot compile it for a None buffer.
    std::vector<std::string> given;
    if (k.contains("arguments"))
      for (const auto &[a, v] : k["arguments"].items())
        if (v.is_object() && v.contains("buffer"))
          for (const Parameter *q : inputs_with_gradient)
            if (q->gradient == v["buffer"].get<std::string>()) given.push_back(q->gradient + " is not None");
    if (tiling_apart && k.contains("call")) {
      py << "    " << join(rebound) << " = _tgrad_launch_values(" << kLaunch << ", *_tgrad_forward_launch, num_warps, "
         << "num_stages, " << launched_kernels << ", " << launch_index << ")\n"
         << sizes.str();
    }
    if (!given.empty()) py << "    if " << join(given, " and ") << ":\n";
    py << (given.empty() ? "    " : "        ") << launch_prefix << k["name"].get<std::string>() << launch_suffix << "[" << tuple_of(grid) << "](";
    std::vector<std::string> args;
    if (k.contains("call")) {
      args = launch_arguments(k["call"]["positional"].get<std::vector<std::string>>());
      for (const json &a : k["call"]["keyword"]) args.push_back(a.get<std::string>() + "=" + a.get<std::string>());
      args.push_back(tuned_launch ? "**_tgrad_kernel_options[" + std::to_string(launch_index++) + "]" : options_call);
    } else {
      for (const auto &[a, v] : k["arguments"].items())
        args.push_back(a + "=" + (v.is_object() && v.contains("buffer") ? v["buffer"].get<std::string>() : expr(v)));
    }
    py << join(args) << ")\n";
  }
  const std::string gradients = join_each(inputs_with_gradient, [](const Parameter *p) { return p->gradient; });
  // An in-place input's gradient was computed in its float32 buffer, as was an accumulated one.
  py << "    return "
     << join_each(inputs_with_gradient,
                  [&](const Parameter *p) {
                    // (An input passed as an expanded view gets its gradient once per memory cell.)
                    return "_tgrad_out(_tgrad_unaliased(" +
                           (in_place.count(p->name) || accumulated.count(p->name)
                                ? "_tgrad_cast_like(" + p->gradient + ", " + p->name + ")"
                                : p->gradient) +
                           ", " + p->name + "))";
                  })
     << "\n\n\n"
     << make_op(backward_op);

  if (float_scalars) {
    // What torch.compile traces in place of the ops: tensors of the outputs' shapes, strides and dtypes.
    std::vector<std::string> fake_outputs, fake_gradients;
    for (const Parameter *p : outputs) fake_outputs.push_back("_tgrad_out(_tgrad_new_like(" + p->name + "))");
    for (const Parameter *p : inputs_with_gradient)
      fake_gradients.push_back("_tgrad_out(_tgrad_gradient_like(" + p->name + "))");
    py << "\n\n@" << forward_op << ".register_fake\n"
       << "def _(" << signature({}) << "):\n"
       << "    return " << join(fake_outputs) << "\n"
       << "\n\n@" << backward_op << ".register_fake\n"
       << "def _(" << signature(upstream) << "):\n"
       << "    return " << join(fake_gradients) << "\n";
  }

  // ---- autograd
  // What the backward op receives for each pointer: the forward's output where
  // the backward reads what the forward stored (or only needs a buffer of the
  // output's type), else the caller's tensor.
  auto output_index = [&](const Parameter &p) {
    for (size_t k = 0; k < outputs.size(); ++k)
      if (outputs[k] == &p) return static_cast<int>(k);
    return -1;
  };
  // The op's result, as setup_context receives it.
  // (Its locals are `_tgrad_`-named: the kernel's parameters are unpacked beside them, and a kernel may well name one
  // `output`, as FlagGems' weight norm does.)
  auto output_ref = [&](size_t k) {
    return outputs.size() == 1 ? std::string("_tgrad_result") : "_tgrad_result[" + std::to_string(k) + "]";
  };
  std::vector<std::string> saved, scalars, layouts, stand_ins;
  for (const Parameter &p : params) {
    if (!p.pointer) {
      scalars.push_back(p.name);
      continue;
    }
    int k = output_index(p);
    bool from_output = k >= 0 && (p.saved_output || !p.reread);
    // An output passed as None: the backward gets None there too (not the op's empty stand-in).
    std::string given = from_output ? "_tgrad_if_given(" + output_ref(static_cast<size_t>(k)) + ", " + p.name + ")" : p.name;
    if (from_output && !p.saved_output) {
      // An output whose values the backward does not read (it needs a buffer of its type only): its layout is
      // kept, not the tensor, so that the caller may update the output in place before calling backward
      // (unsloth's cross entropy adds to the losses it returns), which autograd refuses for a saved tensor.
      saved.push_back("None");
      layouts.push_back("_tgrad_layout(" + given + ")");
      stand_ins.push_back(p.name);
      continue;
    }
    saved.push_back(given);
  }
  std::vector<std::string> pointer_names;
  for (const Parameter &p : params)
    if (p.pointer) pointer_names.push_back(p.name);
  std::vector<std::string> non_differentiable;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (!outputs[k]->differentiable)
      non_differentiable.push_back(output_ref(k));
  std::vector<std::string> input_names = {kGrid};
  if (tuned_launch) input_names.push_back(kLaunch);
  each_op_argument(
      [&](const Parameter &p) {
        input_names.push_back(p.name);
        if (p.number_too) input_names.push_back(p.name + "__number");
      },
      [&] { input_names.push_back(kPacked); });
  input_names.insert(input_names.end(), own_options.begin(), own_options.end());
  if (tuned_launch) scalars.insert(scalars.begin(), kLaunch);
  scalars.insert(scalars.begin(), kGrid);
  scalars.insert(scalars.end(), own_options.begin(), own_options.end());
  // (torch.library calls setup_context with keyword arguments ctx=, inputs=, output=: those names stay, and are
  // renamed before the kernel's parameters are unpacked.)
  py << "\n\ndef _tgrad_setup_context(ctx, inputs, output):\n"
     << "    _tgrad_ctx, _tgrad_inputs, _tgrad_result = ctx, inputs, output\n"
     << "    " << join(input_names) << " = _tgrad_inputs\n"
     << ints_back << numbers_back
     << "    _tgrad_save(_tgrad_ctx, " << join(saved) << ")\n"
     << "    _tgrad_ctx.tgrad_arguments = (" << join(scalars) << ")\n";
  if (!layouts.empty())
    py << "    _tgrad_ctx.tgrad_layouts = (" << join(layouts) << (layouts.size() == 1 ? ",)" : ")") << "\n";
  if (!non_differentiable.empty())
    py << "    _tgrad_ctx.mark_non_differentiable(" << join(non_differentiable) << ")\n";
  std::vector<std::string> grad_params;
  for (const Parameter *p : outputs) grad_params.push_back("_grad_" + p->name);
  py << "\n\ndef _tgrad_backward_with(_tgrad_backward_op, _tgrad_ctx, " << join(grad_params) << "):\n"
     << "    " << join(pointer_names) << (pointer_names.size() == 1 ? "," : "")
     << " = _tgrad_saved(_tgrad_ctx)\n"
     << "    " << join(scalars) << " = _tgrad_ctx.tgrad_arguments\n";
  if (!stand_ins.empty())
    py << "    " << join(stand_ins) << (stand_ins.size() == 1 ? "," : "")
       << " = (_tgrad_stand_in(l) for l in _tgrad_ctx.tgrad_layouts)\n";
  std::vector<std::string> call = {kGrid};
  if (tuned_launch) call.push_back(kLaunch);
  each_op_argument([&](const Parameter &p) { call.push_back(p.number_too ? "*_tgrad_split(" + p.name + ")" : p.name); },
                   [&] { call.push_back("[" + join(packed) + "]"); });
  for (const Parameter *p : outputs)
    if (upstream_of.count(p->name)) call.push_back("_tgrad_upstream(_grad_" + p->name + ", " + p->name + ")");
  call.insert(call.end(), own_options.begin(), own_options.end());
  py << "    " << gradients << " = _tgrad_backward_op(" << join(call) << ")\n";
  std::vector<std::string> result = {"None"};
  if (tuned_launch) result.push_back("None");
  each_op_argument(
      [&](const Parameter &p) {
        result.push_back(p.gradient.empty() ? "None" : "_tgrad_if_given(" + p.gradient + ", " + p.name + ")");
        if (p.number_too) result.push_back("None");
      },
      [&] { result.push_back("None"); });
  for (size_t k = 0; k < own_options.size(); ++k) result.push_back("None");
  py << "    return " << join(result) << "\n\n\n"
     << "def _tgrad_backward(ctx, " << join(grad_params) << "):\n"
     << "    return _tgrad_backward_with(" << backward_op << ", ctx, " << join(grad_params) << ")\n\n\n"
     << forward_op << ".register_autograd(_tgrad_backward, setup_context=_tgrad_setup_context)\n";
  // Eager launches skip the ops' dispatch (on the H100, a small softmax's
  // forward and backward took 387 us through the ops, 204 us so); under
  // torch.compile the launcher uses the ops, which it traces.
  // (Not `__NAME`: Python would mangle a name that starts with two underscores inside a class body, and
  // kernels' names often start with one.)
  const std::string eager = "_tgrad_eager_" + name;
  py << "\n\nclass " << eager << "(torch.autograd.Function):\n"
     << "    \"\"\"The ops' functions under autograd, for launches outside torch.compile.\"\"\"\n\n"
     << "    @staticmethod\n"
     << "    def forward(ctx, *inputs):\n"
     << "        output = _tgrad_" << forward_op << "(*inputs)\n"
     << "        _tgrad_setup_context(ctx, inputs, output)\n"
     << "        return output\n\n"
     << "    @staticmethod\n"
     << "    def backward(ctx, " << join(grad_params) << "):\n"
     << "        return _tgrad_backward_with(_tgrad_" << backward_op << ", ctx, " << join(grad_params) << ")\n";

  // ---- the launcher, under the kernel's name
  std::vector<std::string> defaults, param_names, output_names;
  for (const Param &p : fn->params)
    if (p.default_value) defaults.push_back(emit::quote_string(p.name) + ": " + emit::print_expr(*p.default_value));
  std::vector<std::string> served;  // the float dtypes each pointer's backward serves
  std::vector<std::string> split;   // pointer-or-number parameters, passed to the op in two slots
  for (const Parameter &p : params)
    if (p.number_too) split.push_back(emit::quote_string(p.name));
  for (const Parameter &p : params) {
    param_names.push_back(emit::quote_string(p.name));
    std::vector<std::string> quoted;
    for (const std::string &d : p.float_dtypes) quoted.push_back(emit::quote_string(d));
    if (!quoted.empty()) served.push_back(emit::quote_string(p.name) + ": " + tuple_of(quoted));
  }
  for (const Parameter *p : outputs) output_names.push_back(emit::quote_string(p->name));
  py << "\n# " << name << "[grid](...): the kernel as a PyTorch op (the jit function is " << name << ".jit).\n"
     << name << " = TgradKernel(" << name << ", " << forward_op << ", " << tuple_of(param_names) << ", {"
     << join(defaults) << "},\n"
     << "                  collections.namedtuple(\"" << name << "_outputs\", " << tuple_of(output_names)
     << ", rename=True), " << eager << ",\n"
     << "                  dtypes={" << join(served) << "}, output_params=" << tuple_of(output_names)
     << (split.empty() ? "" : ",\n                  split_params=" + tuple_of(split));
  if (!packed.empty()) {
    std::vector<std::string> quoted;
    for (const std::string &n : packed) quoted.push_back(emit::quote_string(n));
    py << ",\n                  packed_params=" << tuple_of(quoted);
  }
  if (tuned_launch) {
    std::vector<std::string> quoted;
    for (const std::string &c : launch_constexprs) quoted.push_back(emit::quote_string(c));
    py << ",\n                  tuning=(_tgrad_" << forward_op << ", _tgrad_" << backward_op
       << ", _tgrad_setup_context, _tgrad_backward_with, " << tuple_of(quoted) << ", " << launched_kernels;
    if (tiling) {
      std::vector<std::string> declared;
      for (const json &c : protocol["tiling"]["constexprs"]) declared.push_back(emit::quote_string(c.get<std::string>()));
      py << ", " << tuple_of(declared) << ", " << (tiling_apart ? "True" : "False");
    }
    py << ")";
  }
  py << ")\n";
  return py.str();
}

}  // namespace tgrad::driver
