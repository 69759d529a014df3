#include "src/parse/FollowImports.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "tgrad/ast/Walk.h"
#include "tgrad/parse/Parser.h"

namespace tgrad::parse {

using namespace ast;

namespace {

bool is_file(const std::string &p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dir_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// Modules tgrad knows by name, never read from disk.
bool is_library_module(const std::string &m) {
  for (const char *lib : {"triton", "math", "torch", "numpy", "typing", "functools", "os", "sys", "operator"})
    if (m == lib || m.rfind(std::string(lib) + ".", 0) == 0) return true;
  return false;
}

// The file of a dotted module path under `dir`: dir/a/b.py or dir/a/b/__init__.py.
std::string module_file(const std::string &dir, const std::string &dotted) {
  std::string rel = dotted;
  for (char &c : rel)
    if (c == '.') c = '/';
  for (const std::string &candidate : {dir + "/" + rel + ".py", dir + "/" + rel + "/__init__.py"})
    if (is_file(candidate)) return candidate;
  return "";
}

// The parent of the outermost directory above `dir` (itself included) that holds an __init__.py.
std::string package_root(std::string dir) {
  std::string root;
  while (is_file(dir + "/__init__.py")) {
    root = dir_of(dir);
    if (root == dir) break;
    dir = root;
  }
  return root;
}

struct Follower {
  SourceManager &sources;
  DiagEngine &diags;
  const std::vector<std::string> &search_dirs;
  std::map<std::string, std::unique_ptr<Module>> loaded;  // path -> module (null while being loaded)

  std::string locate(const std::string &importer, const std::string &module) {
    if (module.empty()) return "";
    if (module[0] == '.') {
      size_t dots = module.find_first_not_of('.');
      std::string dir = importer.empty() ? "." : dir_of(importer);
      for (size_t k = 1; k < (dots == std::string::npos ? module.size() : dots); ++k) dir = dir_of(dir);
      return dots == std::string::npos ? "" : module_file(dir, module.substr(dots));
    }
    if (is_library_module(module)) return "";
    std::vector<std::string> dirs = search_dirs;
    if (!importer.empty()) {
      dirs.push_back(dir_of(importer));
      if (std::string root = package_root(dir_of(importer)); !root.empty()) dirs.push_back(root);
    }
    for (const std::string &d : dirs)
      if (std::string f = module_file(d, module); !f.empty()) return f;
    return "";
  }

  Module *load(const std::string &path) {
    auto it = loaded.find(path);
    if (it != loaded.end()) return it->second.get();  // null: an import cycle, left alone
    loaded[path] = nullptr;
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    int id = sources.add_file(path, text.str());
    std::unique_ptr<Module> m = parse_module(sources, id, diags);
    follow(*m, path);
    Module *raw = m.get();
    loaded[path] = std::move(m);
    return raw;
  }

  // Adds to `into` what `from` defines under `name`, as `as`; returns whether it defines it.
  static bool take(Module &into, const Module &from, const std::string &module, const std::string &name,
                   const std::string &as) {
    const Function *existing = into.find_function(as);
    bool found = false, defined = existing != nullptr;
    for (const Constant &c : into.constants) defined |= c.name == as;
    for (const auto &f : from.functions)
      if (f->name == name || f->jit_alias == name) {
        found = true;
        if (defined) break;
        std::unique_ptr<Function> copy = clone(*f);
        copy->name = as;
        copy->jit_alias.clear();
        copy->imported_from = module;
        into.functions.push_back(std::move(copy));
      }
    for (const Constant &c : from.constants)
      if (c.name == name) {
        found = true;
        if (!defined) into.constants.push_back(Constant{as, c.span, clone(*c.stmt), true});
      }
    // `name = a.b.c` there (`triton_tanh = libdevice.tanh`, each alternative
    // of a module-level if): the same binding here, after the import that
    // asked for it, so that it is the binding sema resolves.
    std::vector<Import> aliases;
    for (const Import &imp : from.imports)
      if (imp.assignment && imp.names[0].second == name) {
        Import copy = imp;
        copy.names[0].second = as;
        copy.followed = true;
        aliases.push_back(std::move(copy));
      }
    found |= !aliases.empty();
    // A definition copied from this same module (by an earlier import's
    // support) is one alternative of the same module-level if: the bindings
    // still go after this import, so that sema weighs them against it.
    const bool same_module = existing && existing->imported_from == module;
    if (!aliases.empty() && (!defined || same_module))
      into.imports.insert(into.imports.end(), aliases.begin(), aliases.end());
    return found;
  }

  // What the taken names may need from `from`: its other jit functions and
  // constants (those not defined here yet), and its imports, placed before
  // the importer's own so that those win.
  static void take_support(Module &into, const Module &from, const std::string &module) {
    for (const auto &f : from.functions)
      if (!into.find_function(f->name)) {
        std::unique_ptr<Function> copy = clone(*f);
        copy->imported_from = module;
        into.functions.push_back(std::move(copy));
      }
    for (const Constant &c : from.constants) {
      bool defined = false;
      for (const Constant &k : into.constants) defined |= k.name == c.name;
      if (!defined) into.constants.push_back(Constant{c.name, c.span, clone(*c.stmt), true});
    }
    // Its host names: a constant taken above may be computed from them on the host
    // (`s_asm: tl.constexpr = tl.constexpr(_generate_asm(1))`), with a value tgrad does not know.
    for (const std::string &h : from.host_names)
      if (std::find(into.host_names.begin(), into.host_names.end(), h) == into.host_names.end())
        into.host_names.push_back(h);
    for (const Module::HostDefinition &d : from.host_definitions) {
      bool defined = false;
      for (const Module::HostDefinition &k : into.host_definitions) defined |= k.name == d.name;
      if (!defined) into.host_definitions.push_back(d);
    }
    std::vector<Import> theirs = from.imports;
    for (Import &imp : theirs) imp.followed = true;
    into.imports.insert(into.imports.begin(), theirs.begin(), theirs.end());
  }

  // A user module imported as a namespace, `alias`: what the importer reads from it (`alias.NAME`, in its
  // functions and constants) is copied here as `alias_NAME`, the rest of the module as support, and the alias
  // recorded (src/lower/ModuleNamespaces.h rewrites the reads).
  void take_namespace(Module &module, const std::string &path, const std::string &dotted, const std::string &alias) {
    const std::string file = locate(path, dotted);
    if (file.empty()) return;
    const Module *from = load(file);
    if (!from) return;
    std::set<std::string> read;
    auto note = [&](const Expr &e) {
      if (auto *a = dyn_cast<Attribute>(&e))
        if (auto *base = dyn_cast<Name>(a->value.get()); base && base->id == alias) read.insert(a->attr);
    };
    for (const auto &f : module.functions)
      for (const StmtPtr &st : f->body) visit_stmt_exprs(*st, note);
    for (const Constant &c : module.constants) visit_stmt_exprs(*c.stmt, note);
    const std::string prefix = alias + "_";
    bool any = false;
    for (const std::string &name : read) any |= take(module, *from, dotted, name, prefix + name);
    if (!any) return;
    take_support(module, *from, dotted);
    module.module_namespaces[alias] = prefix;
  }

  void follow(Module &module, const std::string &path) {
    const std::vector<Import> imports = module.imports;
    for (const Import &imp : imports) {
      if (imp.followed || imp.assignment) continue;
      if (!imp.is_from) {  // import pkg.kernels as K
        for (const auto &[name, alias] : imp.names)
          if (!alias.empty() && !is_library_module(name)) take_namespace(module, path, name, alias);
        continue;
      }
      const std::string file = locate(path, imp.module);
      const Module *from = file.empty() ? nullptr : load(file);
      bool any = false;
      for (const auto &[name, alias] : imp.names) {
        if (from && take(module, *from, imp.module, name, alias.empty() ? name : alias)) {
          any = true;
          continue;
        }
        // Not a name the package defines: a module of the package (`from flag_gems.utils import
        // triton_lang_extension as tle`, `from . import utils`).
        if (is_library_module(imp.module)) continue;
        const bool dots_only = imp.module.find_first_not_of('.') == std::string::npos;
        take_namespace(module, path, imp.module + (dots_only ? "" : ".") + name, alias.empty() ? name : alias);
      }
      if (any) take_support(module, *from, imp.module);
    }
  }
};

}  // namespace

void follow_imports(Module &module, const std::string &path, const std::vector<std::string> &search_dirs,
                    SourceManager &sources, DiagEngine &diags) {
  Follower f{sources, diags, search_dirs, {}};
  f.follow(module, path);
}

}  // namespace tgrad::parse
