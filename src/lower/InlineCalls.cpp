#include "src/lower/InlineCalls.h"

#include <functional>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "src/lower/CompileTimeConditions.h"
#include "src/lower/Walk.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::lower {

using namespace ast;

namespace {

struct InlineError {
  SourceSpan span;
  std::string message;
};

[[noreturn]] void fail(const SourceSpan &span, const std::string &message) { throw InlineError{span, message}; }

bool is_memory_builtin(const std::string &callee) {
  static const std::set<std::string> names = {"load", "store", "atomic_add", "atomic_max", "atomic_min",
                                              "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas",
                                              "make_block_ptr", "advance", "make_tensor_descriptor"};
  for (const char *prefix : {"tl.", "triton.language."})
    if (callee.rfind(prefix, 0) == 0 && names.count(callee.substr(std::string(prefix).size()))) return true;
  // `desc_k.load([off, 0])`, `desc_o.store(...)`: a tensor descriptor's methods.
  for (const char *method : {".load", ".store"})
    if (callee.size() > std::strlen(method) && callee.compare(callee.size() - std::strlen(method), std::string::npos, method) == 0 &&
        callee.rfind("tl.", 0) != 0)
      return true;
  return false;
}

// The callee of every call of a block, as written.
// tl.program_id or tl.num_programs.
bool is_program_builtin(const std::string &callee) {
  for (const char *prefix : {"tl.", "triton.language."})
    if (callee == std::string(prefix) + "program_id" || callee == std::string(prefix) + "num_programs") return true;
  return false;
}

std::vector<std::string> callees(const StmtList &block) {
  std::vector<std::string> out;
  visit_block(block, [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e)) out.push_back(emit::print_expr(*c->func));
  });
  return out;
}

class Inliner {
 public:
  Inliner(const Module &module, Function &kernel, const sema::ParamTypes &known)
      : module_(module), kernel_(kernel), decided_(kernel, known) {
    collect_names(kernel.body, taken_);
    // A parameter of no known type may be a pointer: a helper that returns an
    // address made from it is inlined (inlining a pure helper changes no
    // gradient, only the output's shape).
    for (size_t k = 0; k < kernel.params.size(); ++k) {
      const Param &p = kernel.params[k];
      taken_.insert(p.name);
      auto t = known.find(p.name);
      if (t != known.end() ? t->second.elem.is_pointer : !kernel.is_constexpr_param(k)) pointers_.insert(p.name);
    }
  }

  // The kernel's conditional expressions between compile-time values that
  // the known values decide (`tl.arange(0, HEAD_DIM if FP8_OUTPUT else BLOCK_N)`).
  bool fold_kernel_conditionals() { return decided_.fold_static_conditionals(kernel_.body); }

  // The kernel's own decided ifs reduced (after inlining, when anything was).
  void fold_kernel() {
    decided_.note_dtype_locals(kernel_.body);
    decided_.fold_decided(kernel_.body);
  }

  // One round: inlines the calls in the kernel's body; whether any was.
  bool round() {
    inlined_ = false;
    kernel_.body = block(kernel_.body);
    return inlined_;
  }

 private:
  // Whether `f`, or a helper it calls at any depth, calls a builtin `is_builtin` accepts (`memo`: the answers so far).
  bool calls_builtin(const Function &f, bool (*is_builtin)(const std::string &), std::map<const Function *, bool> &memo) {
    if (auto it = memo.find(&f); it != memo.end()) return it->second;
    memo[&f] = false;  // recursion (Triton refuses it) stops here
    bool found = false;
    for (const std::string &c : callees(f.body)) {
      if (is_builtin(c)) found = true;
      else if (const Function *g = module_.find_function(c); g && g != &f && calls_builtin(*g, is_builtin, memo)) found = true;
    }
    return memo[&f] = found;
  }

  // Whether `f` (or a helper it calls) loads, stores or makes block pointers.
  bool accesses_memory(const Function &f) { return calls_builtin(f, is_memory_builtin, memo_); }

  // Whether `f` (or a helper it calls) reads a program id or the grid (FlagGems' `tle.program_id(axis)`, which
  // returns `tl.program_id(axis).to(tl.int64)`): inlined, the layout analysis sees the id its addresses use (else
  // every gradient store of such a kernel is an atomic addition).
  bool reads_program_id(const Function &f) { return calls_builtin(f, is_program_builtin, program_memo_); }

  const Function *memory_helper(const Expr &e) {
    auto *c = dyn_cast<Call>(&e);
    auto *n = c ? dyn_cast<Name>(c->func.get()) : nullptr;
    if (!n) return nullptr;
    const Function *f = module_.find_function(n->id);
    if (!f || f == &kernel_) return nullptr;
    return accesses_memory(*f) || returns_pointer_argument(*f, *c) || reads_program_id(*f) ? f : nullptr;
  }

  // The name an address expression starts from (`X` of `X + row * N`,
  // `tl.multiple_of(p, 16)`, `p.to(...)`), or "".
  static std::string address_root(const Expr &e) {
    if (auto *n = dyn_cast<Name>(&e)) return n->id;
    if (auto *b = dyn_cast<BinOp>(&e)) {
      if (b->op == BinaryOpKind::Sub) return address_root(*b->lhs);
      if (b->op != BinaryOpKind::Add) return "";
      std::string r = address_root(*b->lhs);
      return r.empty() ? address_root(*b->rhs) : r;
    }
    if (auto *s = dyn_cast<Subscript>(&e)) return address_root(*s->value);
    if (auto *c = dyn_cast<Call>(&e)) {
      if (auto *a = dyn_cast<Attribute>(c->func.get()); a && a->attr == "to") return address_root(*a->value);
      const std::string callee = emit::print_expr(*c->func);
      if ((sema::is_compiler_hint(callee) || callee == "tl.advance") && !c->args.empty())
        return address_root(*c->args[0]);
    }
    return "";
  }

  bool is_pointer(const Expr &e) const {
    auto *b = dyn_cast<BinOp>(&e);
    if (b && b->op == BinaryOpKind::Add) {
      // Either side may be the pointer (`offs + X`); address_root takes the left one first.
      for (const Expr *side : {b->lhs.get(), b->rhs.get()})
        if (is_pointer(*side)) return true;
      return false;
    }
    const std::string r = address_root(e);
    return !r.empty() && pointers_.count(r);
  }

  // Whether a return of `f` is an address made from an argument this call
  // gives a pointer (`return base + row * N`): inlined, so that the access
  // analysis and the gradient's addresses see the arithmetic.
  bool returns_pointer_argument(const Function &f, const Call &c) const {
    std::set<std::string> roots;
    std::function<void(const StmtList &)> walk = [&](const StmtList &b) {
      for (const StmtPtr &s : b) {
        if (auto *r = dyn_cast<Return>(s.get()); r && r->value) roots.insert(address_root(*r->value));
        if (auto *i = dyn_cast<If>(s.get())) {
          walk(i->body);
          walk(i->orelse);
        }
      }
    };
    walk(f.body);
    for (size_t k = 0; k < f.params.size(); ++k) {
      if (!roots.count(f.params[k].name)) continue;
      const Expr *arg = k < c.args.size() ? c.args[k].get() : nullptr;
      for (const Keyword &kw : c.keywords)
        if (kw.name == f.params[k].name) arg = kw.value.get();
      if (arg && is_pointer(*arg)) return true;
    }
    return false;
  }

  // Keeps pointers_ up to date with an assignment of the kernel.
  void note_assignment(const Stmt &s) {
    auto *a = dyn_cast<Assign>(&s);
    if (!a || a->targets.size() != 1) return;
    auto *n = dyn_cast<Name>(a->targets[0].get());
    if (!n) return;
    if (is_pointer(*a->value)) pointers_.insert(n->id);
    else pointers_.erase(n->id);
  }

  std::string fresh(const std::string &base) {
    std::string n = base;
    for (int k = 2; taken_.count(n); ++k) n = base + "_" + std::to_string(k);
    taken_.insert(n);
    return n;
  }

  StmtList block(const StmtList &in) {
    StmtList out;
    for (const StmtPtr &s : in) stmt(*s, out);
    return out;
  }

  void stmt(const Stmt &s, StmtList &out) {
    // y = helper(...) / a, b = helper(...) / helper(...): the body in place
    // (calls of helpers in its arguments first).
    auto *a = dyn_cast<Assign>(&s);
    auto *x = dyn_cast<ExprStmt>(&s);
    const Expr *value = a && a->targets.size() == 1 ? a->value.get() : x ? x->value.get() : nullptr;
    if (const Function *f = value ? memory_helper(*value) : nullptr) {
      ExprPtr call = clone(*value);
      const bool pointer = returns_pointer_argument(*f, *cast<Call>(call.get()));
      for (ExprPtr &arg : cast<Call>(call.get())->args) hoist(arg, out);
      for (Keyword &k : cast<Call>(call.get())->keywords) hoist(k.value, out);
      expand(*cast<Call>(call.get()), *f, a ? a->targets[0].get() : nullptr, out);
      if (auto *n = a ? dyn_cast<Name>(a->targets[0].get()) : nullptr) {
        if (pointer) pointers_.insert(n->id);
        else pointers_.erase(n->id);
      }
      return;
    }
    StmtPtr copy = clone(s);
    StmtList pending;
    switch (copy->kind) {
      case NodeKind::ExprStmt: hoist(cast<ExprStmt>(copy.get())->value, pending); break;
      case NodeKind::Assign: hoist(cast<Assign>(copy.get())->value, pending); break;
      case NodeKind::AugAssign: hoist(cast<AugAssign>(copy.get())->value, pending); break;
      case NodeKind::AnnAssign:
        if (cast<AnnAssign>(copy.get())->value) hoist(cast<AnnAssign>(copy.get())->value, pending);
        break;
      case NodeKind::Return:
        if (cast<Return>(copy.get())->value) hoist(cast<Return>(copy.get())->value, pending);
        break;
      case NodeKind::If: {
        auto *i = cast<If>(copy.get());
        refuse_in(*i->cond, "an if condition");
        i->body = block(cast<If>(&s)->body);
        i->orelse = block(cast<If>(&s)->orelse);
        break;
      }
      case NodeKind::For: {
        auto *f = cast<For>(copy.get());
        refuse_in(*f->iter, "a loop's range");
        f->body = block(cast<For>(&s)->body);
        break;
      }
      case NodeKind::While: {
        auto *w = cast<While>(copy.get());
        refuse_in(*w->cond, "a while condition");
        w->body = block(cast<While>(&s)->body);
        break;
      }
      default: break;
    }
    for (StmtPtr &p : pending) out.push_back(std::move(p));
    note_assignment(*copy);
    out.push_back(std::move(copy));
  }

  void refuse_in(const Expr &e, const char *where) {
    visit_expr(e, [&](const Expr &x) {
      if (const Function *f = memory_helper(x))
        fail(x.span, "'" + f->name + "' loads or stores memory, and tgrad inlines such a call to differentiate it; "
                      "it cannot inline one in " + where + ": assign its result to a name first");
    });
  }

  // A call of a memory helper inside an expression: its result under a
  // fresh name, computed by the inlined body before the statement.
  void hoist(ExprPtr &e, StmtList &pending) {
    rewrite_expr(e, [&](ExprPtr &x) {
      if (const Function *f = memory_helper(*x)) {
        auto result = std::make_unique<Name>(fresh(f->name + "_result"), x->span);
        expand(*cast<Call>(x.get()), *f, result.get(), pending);
        x = std::move(result);
      }
    });
  }

  static bool simple_argument(const Expr &e) {
    if (isa<Name>(&e) || isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e) || isa<NoneLit>(&e) ||
        isa<StrLit>(&e))
      return true;
    if (auto *a = dyn_cast<Attribute>(&e)) return simple_argument(*a->value);
    // `shape=[y_dim, HEAD_DIM]`: a list of simple values stays written in the
    // call (tl.make_tensor_descriptor needs its shape so).
    const ExprList *elements = isa<List>(&e) ? &cast<List>(&e)->elts : isa<Tuple>(&e) ? &cast<Tuple>(&e)->elts : nullptr;
    if (elements) {
      for (const ExprPtr &x : *elements)
        if (!simple_argument(*x)) return false;
      return true;
    }
    return false;
  }







  // The helper's body in place of `call`; its result assigned to `target` (null: dropped).
  void expand(const Call &call, const Function &f, const Expr *target, StmtList &out) {
    inlined_ = true;
    // The arguments of each parameter.
    std::map<std::string, const Expr *> arg_of;
    if (call.args.size() > f.params.size())
      fail(call.span, "'" + f.name + "' takes " + std::to_string(f.params.size()) + " arguments, given " +
                          std::to_string(call.args.size()));
    for (size_t k = 0; k < call.args.size(); ++k) arg_of[f.params[k].name] = call.args[k].get();
    for (const Keyword &k : call.keywords) {
      bool known = false;
      for (const Param &p : f.params) known |= p.name == k.name;
      if (!known) fail(k.name_span, "'" + f.name + "' has no parameter '" + k.name + "'");
      arg_of[k.name] = k.value.get();
    }
    std::map<std::string, int> assigned;
    count_assignments(f.body, assigned);
    std::map<std::string, ExprPtr> substitute;  // parameter -> the argument's expression
    std::map<std::string, std::string> rename;  // the helper's name -> the kernel's
    for (size_t k = 0; k < f.params.size(); ++k) {
      const Param &p = f.params[k];
      auto it = arg_of.find(p.name);
      const Expr *arg = it != arg_of.end() ? it->second : p.default_value.get();
      if (!arg) fail(call.span, "'" + f.name + "' needs an argument for '" + p.name + "'");
      if (!assigned.count(p.name) && (simple_argument(*arg) || f.is_constexpr_param(k))) {
        substitute[p.name] = clone(*arg);
        continue;
      }
      std::string bound = fresh(p.name);
      ExprList targets;
      targets.push_back(std::make_unique<Name>(bound, p.span));
      out.push_back(std::make_unique<Assign>(std::move(targets), clone(*arg), call.span));
      rename[p.name] = bound;
    }
    for (const auto &kv : assigned)
      if (!rename.count(kv.first) && !substitute.count(kv.first)) rename[kv.first] = fresh(kv.first);
    StmtList body = clone(f.body);
    rewrite_block(body, [&](ExprPtr &e) {
      auto *n = dyn_cast<Name>(e.get());
      if (!n) return;
      if (auto s = substitute.find(n->id); s != substitute.end()) {
        e = clone(*s->second);
      } else if (auto r = rename.find(n->id); r != rename.end()) {
        n->id = r->second;
      }
    });
    // Returns in tail position (the last statement, or the last of each
    // branch of a final if) become assignments to the call's target; then
    // the branches Triton decides are kept alone (not before: `if CONTIG:
    // return a` reduced first would leave two returns).
    const bool returns = tail_returns_to(body, target, f, call.span);
    check_no_return(body, f);
    decided_.fold_decided(body);  // (the helper's `if isinstance(x, tl.tensor_descriptor): ...`, a flag passed as a literal)
    if (target && !returns) fail(call.span, "'" + f.name + "' returns nothing, and its result is used");
    if (!body.empty() && body.front()->leading_comment.empty())
      body.front()->leading_comment =
          "Inlined: " + f.name + "(...) (" +
          (accesses_memory(f) ? "it loads or stores memory" : reads_program_id(f) ? "it reads a program id" : "it returns an address") +
          ").";
    for (StmtPtr &s : body) out.push_back(std::move(s));
  }

  // Replaces the returns in tail position of `body` by `target = value` (or
  // drops them when the result is unused); whether the body returns a value.
  static bool tail_returns_to(StmtList &body, const Expr *target, const Function &f, const SourceSpan &call) {
    if (body.empty()) return false;
    // `if c: ... return a` followed by more statements: the rest is the else branch.
    for (size_t k = 0; k + 1 < body.size(); ++k) {
      auto *i = dyn_cast<If>(body[k].get());
      if (!i || !i->orelse.empty() || i->body.empty() || !isa<Return>(i->body.back().get())) continue;
      for (size_t j = k + 1; j < body.size(); ++j) i->orelse.push_back(std::move(body[j]));
      body.resize(k + 1);
      break;
    }
    if (auto *r = dyn_cast<Return>(body.back().get())) {
      ExprPtr value = std::move(r->value);
      SourceSpan span = r->span;
      body.pop_back();
      if (!value) return false;
      if (target) {
        ExprList targets;
        targets.push_back(clone(*target));
        body.push_back(std::make_unique<Assign>(std::move(targets), std::move(value), span));
      }
      return true;
    }
    if (auto *i = dyn_cast<If>(body.back().get())) {
      const bool a = tail_returns_to(i->body, target, f, call), b = tail_returns_to(i->orelse, target, f, call);
      if (a != b && target)
        fail(call, "'" + f.name + "' returns a value on one branch of its last if and not on the other");
      if (i->body.empty()) i->body.push_back(std::make_unique<Pass>(i->span));
      return a || b;
    }
    return false;
  }

  static void check_no_return(const StmtList &body, const Function &f) {
    for (const StmtPtr &s : body) {
      if (isa<Return>(s.get()))
        fail(s->span, "tgrad inlines '" + f.name + "' (it loads or stores memory) and needs its only return at its "
                      "end; compute the result in a variable and return it once");
      if (auto *i = dyn_cast<If>(s.get())) {
        check_no_return(i->body, f);
        check_no_return(i->orelse, f);
      }
      if (auto *l = dyn_cast<For>(s.get())) check_no_return(l->body, f);
      if (auto *w = dyn_cast<While>(s.get())) check_no_return(w->body, f);
    }
  }

  const Module &module_;
  Function &kernel_;
  CompileTimeConditions decided_;  // what Triton decides when it compiles
  std::set<std::string> taken_;
  std::map<const Function *, bool> memo_;
  std::map<const Function *, bool> program_memo_;  // reads_program_id
  std::set<std::string> pointers_;  // the kernel's names that hold pointers, as far as the statements so far say
  bool inlined_ = false;
};

}  // namespace

std::unique_ptr<Module> fold_decided_conditionals(const Module &module, const std::string &kernel,
                                                  const sema::ParamTypes &known) {
  const Function *fn = module.find_function(kernel);
  if (!fn || known.empty()) return nullptr;
  std::unique_ptr<Function> copy = clone(*fn);
  Inliner folder(module, *copy, known);
  if (!folder.fold_kernel_conditionals()) return nullptr;
  std::unique_ptr<Module> out = clone(module);
  for (size_t k = 0; k < module.functions.size(); ++k)
    if (module.functions[k].get() == fn) out->functions[k] = std::move(copy);
  return out;
}

std::unique_ptr<Module> inline_memory_helpers(const Module &module, const std::string &kernel, DiagEngine &diags,
                                              const sema::ParamTypes &known) {
  const Function *fn = module.find_function(kernel);
  if (!fn) return nullptr;
  std::unique_ptr<Function> copy = clone(*fn);
  try {
    Inliner inliner(module, *copy, known);
    inliner.fold_kernel();
    bool any = false;
    for (int round = 0; round < 16 && inliner.round(); ++round) any = true;
    if (!any) return nullptr;
  } catch (const InlineError &e) {
    diags.error(e.span, e.message);
    return nullptr;
  }
  std::unique_ptr<Module> out = clone(module);
  for (size_t k = 0; k < module.functions.size(); ++k)
    if (module.functions[k].get() == fn) out->functions[k] = std::move(copy);
  return out;
}

}  // namespace tgrad::lower
