// Reverse mode over A-normal form: activity analysis, the adjoint sweep
// with rule instantiation, unbroadcast, accumulation, dead-code removal and
// the final check of the backward by semantic analysis.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "src/ad/AccessAnalysis.h"
#include "src/ad/Anf.h"
#include "src/ad/AnfWalk.h"
#include "src/ad/ConstexprPaths.h"
#include "src/ad/EarlyReturn.h"
#include "src/ad/GenericTypes.h"
#include "src/ad/IssueEarly.h"
#include "src/ad/LoopInversion.h"
#include "src/ad/MemoryAccumulators.h"
#include "src/ad/Redundancy.h"
#include "src/ad/SinglePass.h"
#include "src/ad/Rules.h"
#include "src/ad/ScanCombine.h"
#include "tgrad/ad/Differentiate.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/parse/Parser.h"
#include "tgrad/sema/Names.h"
#include "tgrad/tgrad.h"

namespace tgrad::ad {

using namespace ast;
using sema::SType;

namespace {

struct AdError {
  SourceSpan span;
  std::string message;
};

[[noreturn]] void fail(const SourceSpan &span, const std::string &message) { throw AdError{span, message}; }

ExprPtr name(const std::string &id, const SourceSpan &s = {}) { return std::make_unique<Name>(id, s); }

// `tl.float32` as an attribute chain.
ExprPtr dotted_name(const std::string &dotted) {
  ExprPtr e;
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    e = e ? std::make_unique<Attribute>(std::move(e), part) : name(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return e;
}

ExprPtr call(const std::string &dotted, ExprList args, std::vector<Keyword> kws = {}) {
  return std::make_unique<Call>(dotted_name(dotted), std::move(args), std::move(kws));
}

ExprList list(ExprPtr a) {
  ExprList l;
  l.push_back(std::move(a));
  return l;
}
ExprList list(ExprPtr a, ExprPtr b) {
  ExprList l;
  l.push_back(std::move(a));
  l.push_back(std::move(b));
  return l;
}

StmtPtr assign(const std::string &target, ExprPtr value, const SourceSpan &s = {}) {
  ExprList t;
  t.push_back(name(target, s));
  return std::make_unique<Assign>(std::move(t), std::move(value), s);
}

ExprPtr int_lit(int64_t v) { return std::make_unique<IntLit>(static_cast<uint64_t>(v), ""); }

// `value.to(dtype)`
ExprPtr cast_to(ExprPtr value, ExprPtr dtype) {
  return std::make_unique<Call>(std::make_unique<Attribute>(std::move(value), "to"), list(std::move(dtype)),
                                std::vector<Keyword>{});
}

// `a == b`
ExprPtr equals(ExprPtr a, ExprPtr b) {
  return std::make_unique<Compare>(std::move(a), std::vector<CompareOpKind>{CompareOpKind::Eq}, list(std::move(b)));
}

bool is_float_tensor(const SType *t) { return t && t->is_tensor() && !t->elem.is_pointer && sema::is_float(t->elem.dtype); }

// A value that can carry a gradient: a float tensor, or a tuple holding one
// (the result of a jit function returning several values).
bool carries_gradient(const SType *t) {
  if (is_float_tensor(t)) return true;
  if (t && t->kind == SType::Kind::Tuple)
    for (const SType &e : t->elems)
      if (carries_gradient(&e)) return true;
  return false;
}

// Removes block[k], moving a comment that introduces a block to the next statement.
void erase_keeping_comment(StmtList &block, size_t k) {
  const Stmt &s = *block[k];
  if (!s.leading_comment.empty() && k + 1 < block.size() && block[k + 1]->leading_comment.empty())
    block[k + 1]->leading_comment = s.leading_comment;
  block.erase(block.begin() + static_cast<long>(k));
}

// Dead-code removal by liveness, over nested loops and ifs: an assignment
// stays only if a later statement (or the next iteration of a loop around
// it) reads the value it assigns. Expression statements (stores,
// tl.static_assert, ...) always stay. Returns the names live on entry.
std::set<std::string> live_in(StmtList &body, std::set<std::string> live, bool erase) {
  for (size_t k = body.size(); k-- > 0;) {
    Stmt &s = *body[k];
    auto drop = [&] { erase_keeping_comment(body, k); };
    if (auto *a = dyn_cast<Assign>(&s)) {
      std::set<std::string> targets;
      for (const ExprPtr &t : a->targets) reads(*t, targets);  // the names a target list binds
      bool needed = false;
      for (const std::string &t : targets) needed |= live.count(t) > 0;
      if (!needed) {
        if (erase) drop();
        continue;
      }
      for (const std::string &t : targets) live.erase(t);
      reads(*a->value, live);
      continue;
    }
    if (auto *a = dyn_cast<AugAssign>(&s)) {
      auto *t = dyn_cast<Name>(a->target.get());
      if (t && !live.count(t->id)) {
        if (erase) drop();
        continue;
      }
      stmt_reads(s, live);
      continue;
    }
    if (auto *f = dyn_cast<For>(&s)) {
      std::string var = isa<Name>(f->target.get()) ? cast<Name>(f->target.get())->id : "";
      // At the end of the body, live: what is live after the loop or at the
      // start of the next iteration. Iterate to the fixed point.
      std::set<std::string> end = live, in;
      while (true) {
        in = live_in(f->body, end, false);
        in.erase(var);
        std::set<std::string> next = live;
        next.insert(in.begin(), in.end());
        if (next == end) break;
        end = std::move(next);
      }
      if (erase) {
        live_in(f->body, end, true);
        if (f->body.empty()) {
          drop();
          continue;
        }
      }
      live.insert(in.begin(), in.end());
      reads(*f->iter, live);
      continue;
    }
    if (auto *i = dyn_cast<If>(&s)) {
      std::set<std::string> then_in = live_in(i->body, live, erase), else_in = live_in(i->orelse, live, erase);
      auto only_pass = [](const StmtList &b) {
        for (const StmtPtr &x : b)
          if (!isa<Pass>(x.get())) return false;
        return true;
      };
      if (erase && only_pass(i->body) && only_pass(i->orelse)) {
        drop();
        continue;
      }
      if (erase && i->body.empty()) i->body.push_back(std::make_unique<Pass>());
      live = std::move(then_in);
      live.insert(else_in.begin(), else_in.end());
      reads(*i->cond, live);
      continue;
    }
    if (auto *e = dyn_cast<ExprStmt>(&s)) {
      // A shape assertion about an adjoint nobody uses any more checks nothing useful.
      auto *c = dyn_cast<Call>(e->value.get());
      if (c && emit::print_expr(*c->func) == "tl.static_assert") {
        // tl.static_assert(holder.shape == x.shape): the holder is the adjoint.
        auto *cmp = c->args.empty() ? nullptr : dyn_cast<Compare>(c->args[0].get());
        auto *attr = cmp ? dyn_cast<Attribute>(cmp->left.get()) : nullptr;
        auto *holder = attr ? dyn_cast<Name>(attr->value.get()) : nullptr;
        if (holder && !live.count(holder->id)) {
          if (erase) drop();
          continue;
        }
      }
    }
    stmt_reads(s, live);
  }
  return live;
}

void remove_dead_code(StmtList &body) { live_in(body, {}, true); }

// The names the pointer arguments of `tl.<access>(...)` calls in a block read.
std::set<std::string> names_accessed_by(const StmtList &block, const std::string &access) {
  std::set<std::string> out;
  visit_exprs(block, [&](const Expr &e) {
    auto *c = dyn_cast<Call>(&e);
    if (c && !c->args.empty() && emit::print_expr(*c->func) == access) reads(*c->args[0], out);
  });
  return out;
}

// Removes the `tl.store(tape + ..., ...)` statements into the tapes `tapes`.
void erase_tape_writes(StmtList &block, const std::set<std::string> &tapes) {
  for (size_t k = block.size(); k-- > 0;) {
    Stmt &s = *block[k];
    auto *e = dyn_cast<ExprStmt>(&s);
    auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
    std::set<std::string> pointer;
    if (c && !c->args.empty() && emit::print_expr(*c->func) == "tl.store") reads(*c->args[0], pointer);
    const bool tape_write =
        std::any_of(pointer.begin(), pointer.end(), [&](const std::string &n) { return tapes.count(n) > 0; });
    if (tape_write) {
      erase_keeping_comment(block, k);
    } else if (auto *f = dyn_cast<For>(&s)) {
      erase_tape_writes(f->body, tapes);
    } else if (auto *i = dyn_cast<If>(&s)) {
      erase_tape_writes(i->body, tapes);
      erase_tape_writes(i->orelse, tapes);
    }
  }
}

// Operations that Triton broadcasts their operands for: their adjoint
// contributions have the output's shape and must be summed back.
bool broadcasts_operands(const std::string &op) {
  static const std::set<std::string> ops = {"add", "sub", "mul", "truediv", "where", "maximum", "minimum", "fma",
                                            "pow", "broadcast_to", "copy", "store", "join", "interleave"};
  return ops.count(op) > 0;
}

// Differentiable in principle but with a zero gradient almost everywhere.
bool zero_gradient(const std::string &op) {
  static const std::set<std::string> ops = {"floor", "ceil", "argmax", "argmin", "zeros_like", "full", "zeros",
                                            "arange", "program_id", "num_programs", "cdiv",
                                            "trunc", "rint", "nearbyint", "round"};
  return ops.count(op) > 0;
}

class Engine {
 public:
  // `forward`: differentiate this function in place of the module's function
  // of the request's name (its one-pass version).
  Engine(const Module &module, const SourceManager &sources, const BackwardRequest &request, DiagEngine &diags,
         const Function *forward = nullptr)
      : module_(module), sources_(sources), request_(request), diags_(diags), forward_(forward) {}

  bool differentiates_a_kernel() const { return kernel_; }
  // Some parameter types are representatives (src/ad/GenericTypes.h): the
  // backward must not depend on them.
  bool generic() const { return !request_.generic_params.empty(); }
  const sema::ParamTypes &backward_types() const { return bwd_types_; }

  std::optional<Backward> run() {
    const Function *fn = forward_ ? forward_ : module_.find_function(request_.function);
    if (!fn) {
      diags_.error({}, "no @triton.jit function '" + request_.function + "' in the file");
      return std::nullopt;
    }
    fn_ = fn;
    for (const auto &kv : request_.param_types)
      kernel_ |= kv.second.is_tensor() && kv.second.elem.is_pointer;
    if (kernel_) {
      // Early returns and `x = a if c else b` become ifs; then every runtime parameter read needs a type.
      if ((guarded_fn_ = guard_early_returns(*fn))) fn = fn_ = guarded_fn_.get();
      if ((split_fn_ = conditional_assignments_as_ifs(*fn))) fn = fn_ = split_fn_.get();
      if (!report_untyped_parameters(*fn)) return std::nullopt;
    }
    // 1. Types of the forward, then A-normal form, then types of the ANF.
    std::optional<sema::TypeInfo> types = sema::analyze(module_, *fn, request_.param_types, diags_);
    if (!types) return std::nullopt;
    if (kernel_) keep_accumulators_in_registers(fn, types);
    for (const std::string &w : request_.wrt) check_wrt(*fn, w);
    report_constexpr_guarded_definitions(*fn, *types, diags_);
    if (!kernel_ && !request_.no_grad.empty())
      diags_.error(fn->name_span, "--no-grad names outputs a kernel stores to; '" + fn->name +
                                      "' is a tile function, whose outputs are its return values");
    if (diags_.has_errors()) return std::nullopt;
    std::optional<AnfFunction> anf = to_anf(module_, *fn, *types, diags_, kernel_);
    if (!anf) return std::nullopt;
    anf_ = std::move(*anf);
    if (kernel_) {
      std::map<std::string, int> user_assigned;
      count_assignments(fn->body, user_assigned);
      std::set<std::string> user_names;
      for (const auto &kv : user_assigned) user_names.insert(kv.first);
      eliminate_common_subexpressions(anf_, pointer_params(), user_names);
    }
    std::optional<sema::TypeInfo> anf_types = sema::analyze(module_, *anf_.fn, request_.param_types, diags_);
    if (!anf_types) {
      diags_.error(fn->name_span, "internal error: the A-normal form of '" + fn->name + "' failed semantic analysis");
      return std::nullopt;
    }
    anf_types_ = std::move(*anf_types);
    record_name_types();
    if (kernel_ && find_saved_values()) {
      // Statements moved or rewritten: the types again.
      std::optional<sema::TypeInfo> again = sema::analyze(module_, *anf_.fn, request_.param_types, diags_);
      if (!again) {
        diags_.error(fn->name_span, "internal error: the A-normal form of '" + fn->name + "' failed semantic analysis");
        return std::nullopt;
      }
      anf_types_ = std::move(*again);
      record_name_types();
    }
    names_.reserve_all(module_, *anf_.fn);
    for (const auto &kv : name_types_) names_.reserve(kv.first);

    try {
      return kernel_ ? build_kernel() : build();
    } catch (const AdError &e) {
      diags_.error(e.span, e.message);
      return std::nullopt;
    }
  }

 private:
  // A loop that loads, updates and stores back the same addresses carries
  // the value in a register instead (src/ad/MemoryAccumulators.h). Where the
  // rewritten kernel does not type (a store that broadcasts its value, say),
  // the kernel stays as written and the in-place check explains.
  void keep_accumulators_in_registers(const Function *&fn, std::optional<sema::TypeInfo> &types) {
    std::vector<KeptAccumulator> kept;
    std::unique_ptr<Function> rewritten = keep_memory_accumulators_in_registers(*fn, *types, kept);
    if (!rewritten) return;
    DiagEngine scratch(sources_);
    std::optional<sema::TypeInfo> again = sema::analyze(module_, *rewritten, request_.param_types, scratch);
    if (!again || scratch.has_errors()) return;
    registers_fn_ = std::move(rewritten);
    fn = fn_ = registers_fn_.get();
    types = std::move(again);
    kept_accumulators_ = std::move(kept);
  }

  void check_wrt(const Function &fn, const std::string &w) {
    size_t k = 0;
    while (k < fn.params.size() && fn.params[k].name != w) ++k;
    if (k == fn.params.size()) {
      diags_.error(fn.name_span, "'" + fn.name + "' has no parameter '" + w + "' to differentiate with respect to");
      return;
    }
    if (fn.is_constexpr_param(k)) {
      diags_.error(fn.params[k].span, "'" + w + "' is tl.constexpr and carries no gradient; differentiate with respect to a floating-point tile");
      return;
    }
    auto it = request_.param_types.find(w);
    if (it == request_.param_types.end()) {
      diags_.error(fn.params[k].span, "the type of '" + w + "' is needed to differentiate: give --arg " + w + "=DTYPE[d0, ...] (for example fp32[N])");
      return;
    }
    const SType &t = it->second;
    bool float_pointer = t.is_tensor() && t.elem.is_pointer && sema::is_float(t.elem.dtype);
    if (kernel_ && !float_pointer)
      diags_.error(fn.params[k].span, "'" + w + "' is " + t.str() +
                                          ": differentiate a kernel with respect to pointers to floating-point data");
    else if (!kernel_ && !is_float_tensor(&t))
      diags_.error(fn.params[k].span, "'" + w + "' is " + t.str() + ", not a floating-point value, and carries no gradient");
  }

  // The type of every SSA name: parameters and assignment targets.
  void record_name_types() {
    for (const auto &kv : request_.param_types) name_types_[kv.first] = kv.second;
    record_name_types(anf_.fn->body);
  }
  // A name assigned on several paths (an if's branches, a loop's entry and
  // body) has one type, except where Triton makes a Python number a tensor
  // of the other side's type (`s = 0.0` on one branch, an fp32 sum on the
  // other): the tensor's type is the name's.
  void record_name_type(const std::string &n, const SType &t) {
    auto it = name_types_.find(n);
    if (it != name_types_.end() && it->second.is_tensor() && !t.is_tensor()) return;
    name_types_[n] = t;
  }
  void record_name_types(const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get()))
        if (auto *n = dyn_cast<Name>(a->targets[0].get()))
          if (const SType *t = anf_types_.type_of(a->value.get())) record_name_type(n->id, *t);
      if (auto *f = dyn_cast<For>(s.get())) {
        if (auto *n = dyn_cast<Name>(f->target.get()))
          if (const SType *t = anf_types_.type_of(f->target.get())) name_types_[n->id] = *t;
        record_name_types(f->body);
      }
      if (auto *i = dyn_cast<If>(s.get())) {
        record_name_types(i->body);
        record_name_types(i->orelse);
      }
    }
  }

  const SType *type_of_name(const std::string &n) const {
    auto it = name_types_.find(n);
    return it == name_types_.end() ? nullptr : &it->second;
  }

  static const Name *as_name(const Expr &e) { return dyn_cast<Name>(&e); }

  // ---------------------------------------------------------- operations

  struct Op {
    std::string key;                 // rule name
    std::vector<const Expr *> args;  // positional operands (receiver first for methods)
    std::vector<const Keyword *> kws;
    const Function *callee = nullptr;  // "jit call": the user's jit function
  };

  Op classify(const Expr &v) {
    Op op;
    switch (v.kind) {
      case NodeKind::Name:
        op.key = "copy";
        op.args = {&v};
        return op;
      case NodeKind::BinOp: {
        auto *b = cast<BinOp>(&v);
        switch (b->op) {
          case BinaryOpKind::Add: op.key = "add"; break;
          case BinaryOpKind::Sub: op.key = "sub"; break;
          case BinaryOpKind::Mul: op.key = "mul"; break;
          case BinaryOpKind::Div: op.key = "truediv"; break;
          default: op.key = std::string("operator ") + spelling(b->op);
        }
        op.args = {b->lhs.get(), b->rhs.get()};
        return op;
      }
      case NodeKind::UnaryOp: {
        auto *u = cast<UnaryOp>(&v);
        op.key = u->op == UnaryOpKind::Neg ? "neg" : u->op == UnaryOpKind::Pos ? "pos" : std::string("operator ") + spelling(u->op);
        op.args = {u->operand.get()};
        return op;
      }
      case NodeKind::Subscript: {
        auto *sub = cast<Subscript>(&v);
        const SType *base = anf_types_.type_of(sub->value.get());
        op.key = base && base->kind == SType::Kind::Tuple ? "tuple element" : "index";
        op.args = {sub->value.get()};
        if (op.key == "tuple element") op.args.push_back(sub->indices[0].get());
        return op;
      }
      case NodeKind::Call: {
        auto *c = cast<Call>(&v);
        const SType *f = anf_types_.type_of(c->func.get());
        if (f && f->kind == SType::Kind::Function) {
          op.key = "jit call";
          op.callee = f->fn;
          for (const ExprPtr &a : c->args) op.args.push_back(a.get());
          for (const Keyword &kw : c->keywords) op.kws.push_back(&kw);
          return op;
        }
        std::string full = f && f->kind == SType::Kind::Builtin ? f->s : "";
        if (full == "tl.inline_asm_elementwise" && classify_approximation(*c, op)) return op;
        if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && full.rfind("tensor.", 0) == 0)
          op.args.push_back(attr->value.get());  // the method's receiver
        std::string k = full.substr(full.find('.') + 1);
        if (full == "tensor.to" || full == "tl.cast") k = "cast";
        if (k == "view") k = "reshape";
        if (full == "min" || full == "max") k = full == "min" ? "minimum" : "maximum";  // Python's, on tensors
        op.key = k.empty() ? "call" : k;
        for (const ExprPtr &a : c->args) op.args.push_back(a.get());
        for (const Keyword &kw : c->keywords) op.kws.push_back(&kw);
        return op;
      }
      default: op.key = kind_name(v.kind); return op;
    }
  }

  // A one-instruction PTX approximation (`tanh.approx.f32 $0, $1;` on
  // args=[x]) differentiates as the function it approximates, on x. Sema
  // typed the call only when it is one (else its type is unknown and the
  // dependence check stops there).
  bool classify_approximation(const Call &c, Op &op) {
    const SType *t = anf_types_.type_of(&c);
    if (!t || !t->is_tensor()) return false;
    const Expr *text = call_argument(c, 0, "asm"), *spec = call_argument(c, 1, "constraints"),
               *operands = call_argument(c, 2, "args");
    auto *asm_text = text ? dyn_cast<StrLit>(text) : nullptr;
    auto *constraints = spec ? dyn_cast<StrLit>(spec) : nullptr;
    const ExprList *elts = !operands ? nullptr
                           : isa<List>(operands) ? &cast<List>(operands)->elts
                           : isa<Tuple>(operands) ? &cast<Tuple>(operands)->elts : nullptr;
    if (!asm_text || !constraints || !elts || elts->size() != 1) return false;
    const std::string function = sema::approximated_math_function(asm_text->value, constraints->value);
    if (function.empty()) return false;
    op.key = function;
    op.args = {(*elts)[0].get()};
    return true;
  }

  // ------------------------------------------------- dependence check

  // Activity must never stop silently. A value computed from one that
  // carries a gradient either carries one itself, or comes from an
  // operation whose gradient is zero by its nature: a comparison, a
  // conversion to an integer, argmax/argmin, a libdevice classification
  // (isnan, ...), an integer element of a helper's result. Anything else (a
  // call tgrad cannot resolve, a value whose type sema could not tell, a
  // bitcast to an integer) would drop the dependence and leave a zero
  // gradient without a word: it is a located error naming the construct.
  void check_dependence_kept(const std::string &target, const Expr &value, const std::string &operand) {
    const SType *t = type_of_name(target);
    Op op = classify(value);
    // A comparison's or a logical operator's result is a truth value whatever
    // sema could tell of its operands' types (`x = 1` merged with a float
    // load, then `if x != 0:`): its gradient is zero.
    if (op.key == "Compare" || op.key == "BoolOp" || op.key == "operator not") return;
    if (t && is_known(*t)) {
      static const std::set<std::string> no_gradient = {"argmax", "argmin", "tuple element", "jit call"};
      bool bitcast = false;
      for (const Keyword *k : op.kws)
        bitcast |= k->name == "bitcast" && !(isa<BoolLit>(k->value.get()) && !cast<BoolLit>(k->value.get())->value);
      // A value known when Triton compiles the kernel (x.dtype, x.shape, a
      // constexpr) holds no data: nothing to differentiate. But a copy of a
      // tensor or arithmetic on one typed as a Python number is a typing
      // mistake, not a compile-time value.
      static const std::set<std::string> carries_data = {"copy", "add", "sub", "mul", "truediv", "neg", "pos"};
      const bool compile_time = !holds_tensor(*t) && !carries_data.count(op.key);
      if (compile_time || no_gradient.count(op.key) || sema::is_math_classification(op.key) ||
          (op.key == "cast" && !bitcast))
        return;
      fail(value.span, "this " + op.key + " turns '" + operand + "', which carries a gradient, into " + t->str() +
                           "; tgrad cannot tell that its gradient is zero, and would drop it (" +
                           (bitcast ? "a bitcast reinterprets bits: convert with .to() instead" :
                                      "compute the value from floating-point operations tgrad differentiates") + ")");
    }
    std::string why = "tgrad cannot tell what this expression computes";
    std::string advice = "Define the function in this file as a @triton.jit function, or use the tl, tl.math and "
                         "libdevice functions tgrad knows";
    if (auto *c = dyn_cast<Call>(&value)) {
      // The callee as the user wrote it (A-normal form may have named its
      // attribute chain), and the module name it starts from.
      std::string callee = source_text(c->func->span);
      if (callee.empty()) callee = emit::print_expr(*c->func);
      const std::string root = callee.substr(0, callee.find_first_of(". ([\t"));
      sema::ImportedName imported = sema::resolve_import(module_, root);
      const SType *f = anf_types_.type_of(c->func.get());
      if (imported.bound && !imported.target)
        why = "'" + root + "' is imported from '" + imported.module + "', which tgrad does not read, so it cannot "
              "tell what '" + callee + "(...)' computes";
      else if (f && f->kind == SType::Kind::Builtin && f->s == "tl.inline_asm_elementwise") {
        why = "tgrad cannot differentiate this inline assembly: it knows only one-instruction approximations of math "
              "functions on one fp32 operand (tanh, sin, cos, ex2, lg2, rsqrt or sqrt .approx.f32 $0, $1; with "
              "constraints \"=f,f\")";
        advice = "Compute the value with tl, tl.math or libdevice functions where the gradient matters";
      } else if (f && f->kind == SType::Kind::Builtin && f->s.rfind("tl.", 0) == 0 && sema::is_untyped_tl_builtin(f->s.substr(3)))
      {
        why = "tgrad does not differentiate " + f->s + " yet";
        advice = "Write it with the operations tgrad differentiates (the README lists them)";
      }
    }
    fail(value.span, why + "; the gradient of '" + operand + "' through it would be lost. " + advice);
  }

  // The text a one-line span covers in the user's source, or "".
  std::string source_text(const SourceSpan &span) const {
    if (span.file_id < 0 || span.begin.line != span.end.line || span.end.column <= span.begin.column) return "";
    const std::string line = sources_.line_text(span.file_id, span.begin.line);
    const size_t from = static_cast<size_t>(span.begin.column - 1), to = static_cast<size_t>(span.end.column - 1);
    if (to > line.size()) return "";
    for (size_t k = 0; k < to; ++k)
      if (static_cast<unsigned char>(line[k]) >= 0x80) return "";  // columns count code points: ASCII only
    return line.substr(from, to - from);
  }

  // Whether a value of this type holds a tensor (tuples included).
  static bool holds_tensor(const SType &t) {
    if (t.is_tensor()) return true;
    for (const SType &e : t.elems)
      if (holds_tensor(e)) return true;
    return false;
  }

  // A kernel's runtime parameters that it reads need their types (what
  // Triton's launcher would pass): without one, every later error would be
  // about a pointer tgrad cannot trace. Says which, and how to give it.
  bool report_untyped_parameters(const Function &fn) {
    std::set<std::string> read;
    block_reads(fn.body, read);
    bool ok = true;
    for (size_t k = 0; k < fn.params.size(); ++k) {
      const Param &p = fn.params[k];
      if (fn.is_constexpr_param(k) || request_.param_types.count(p.name) || !read.count(p.name)) continue;
      diags_.error(p.span, "the type of '" + p.name + "' is needed to differentiate '" + fn.name + "': give --arg " +
                               p.name + "=TYPE (a pointer: *fp32, *fp16, *bf16, *i32; a scalar: i32, i64, fp32)");
      ok = false;
    }
    return ok;
  }

  // A type with nothing unknown in it (tuples included).
  static bool is_known(const SType &t) {
    if (t.kind == SType::Kind::Unknown) return false;
    for (const SType &e : t.elems)
      if (!is_known(e)) return false;
    return true;
  }

  // The first name `value` reads that is active, or "".
  static std::string first_active(const Expr &value, const std::set<std::string> &active) {
    std::set<std::string> in;
    reads(value, in);
    for (const std::string &n : in)
      if (active.count(n)) return n;
    return "";
  }

  // ------------------------------------------------------- stabilizers

  // A numerically stabilizing max: `m = tl.max(x, axis)` whose every use
  // cancels out of what the function stores or returns, as in
  // `e = tl.exp(x - m); y = e / tl.sum(e, axis)` or
  // `s = x - m; y = s - tl.log(tl.sum(tl.exp(s), axis))`. Moving m by any c
  // (constant along the reduced axis) leaves the results unchanged, so the
  // gradient with respect to m is exactly zero: the backward neither
  // computes it nor routes it through the max. The proof follows each value
  // that depends on m through the straight-line statements of m's block,
  // tracking how it changes when m moves by c: not at all, by a shift
  // v + k*c, or by a scale v * base^(k*c). Anything it cannot follow (a
  // use in a loop, a store of a value that changes, a reduction along
  // another axis, an operation outside the table below) keeps the gradient.
  struct Motion {
    enum Kind { None, Shift, Scale } kind = None;
    double k = 0;          // the coefficient of c
    double base = 0;       // Scale: e or 2
    bool reduced = false;  // lacks m's reduced axis
  };

  // The statements of every block, with the block they sit in.
  static void collect_blocks(const StmtList &block, std::vector<const StmtList *> &out) {
    out.push_back(&block);
    for (const StmtPtr &s : block) {
      if (auto *f = dyn_cast<For>(s.get())) collect_blocks(f->body, out);
      if (auto *i = dyn_cast<If>(s.get())) {
        collect_blocks(i->body, out);
        collect_blocks(i->orelse, out);
      }
    }
  }

  std::optional<int64_t> reduce_axis(const Op &op) {
    const Expr *axis = op.args.size() > 1 ? op.args[1] : nullptr;
    for (const Keyword *kw : op.kws) {
      if (kw->name == "axis") axis = kw->value.get();
      if (kw->name == "keep_dims") return std::nullopt;
    }
    if (!axis) return std::nullopt;
    const SType *t = anf_types_.type_of(axis);
    if (!t || t->kind != SType::Kind::Int || !t->known) return std::nullopt;
    return t->n;
  }

  size_t rank_of(const Expr *e) {
    const SType *t = anf_types_.type_of(e);
    return t && t->is_tensor() ? t->shape.size() : 0;
  }

  // How `value` (assigned to a value of rank `rank`) moves, given how its
  // operands move; nullopt where the proof cannot follow it.
  std::optional<Motion> motion_of(const Expr &value, size_t rank, size_t full_rank, int64_t axis,
                                  const std::map<std::string, Motion> &moving) {
    Op op = classify(value);
    std::string key = op.key.substr(op.key.rfind('.') + 1);
    auto of = [&](const Expr *e) {
      auto *n = e ? dyn_cast<Name>(e) : nullptr;
      auto it = n ? moving.find(n->id) : moving.end();
      return it == moving.end() ? Motion{} : it->second;
    };
    // Broadcasting a moving operand to the result's shape: a reduced value
    // may regain the reduced axis only where broadcasting adds it (axis 0,
    // or a scalar).
    auto broadcast = [&](Motion m, const Expr *e) -> std::optional<Motion> {
      if (m.kind == Motion::None) return m;
      size_t r = rank_of(e);
      if (r == rank) return m;
      if (m.reduced && rank == full_rank && (r == 0 || (axis == 0 && r + 1 == rank))) {
        m.reduced = false;
        return m;
      }
      return std::nullopt;
    };
    auto settle = [](Motion m) {
      if (m.kind != Motion::None && m.k == 0) m = Motion{};
      return m;
    };
    if (key == "copy" || key == "cast" || key == "broadcast_to") {
      if (key == "cast") {
        const SType *t = anf_types_.type_of(&value);
        if (!t || !t->is_tensor() || !sema::is_float(t->elem.dtype)) return std::nullopt;
      }
      Motion m = of(op.args[0]);
      return rank_of(op.args[0]) == rank ? std::optional<Motion>(m) : std::nullopt;
    }
    if ((key == "add" || key == "sub") && op.args.size() == 2) {
      auto a = broadcast(of(op.args[0]), op.args[0]), b = broadcast(of(op.args[1]), op.args[1]);
      if (!a || !b || a->kind == Motion::Scale || b->kind == Motion::Scale) return std::nullopt;
      Motion m = a->kind != Motion::None ? *a : *b;
      m.kind = Motion::Shift;
      m.k = a->k + (key == "add" ? b->k : -b->k);
      if (a->kind != Motion::None && b->kind != Motion::None && a->reduced != b->reduced) return std::nullopt;
      return settle(m);
    }
    if (key == "neg") {
      Motion m = of(op.args[0]);
      if (m.kind == Motion::Scale) return std::nullopt;
      m.k = -m.k;
      return m;
    }
    if ((key == "mul" || key == "truediv") && op.args.size() == 2) {
      auto a = broadcast(of(op.args[0]), op.args[0]), b = broadcast(of(op.args[1]), op.args[1]);
      if (!a || !b || a->kind == Motion::Shift || b->kind == Motion::Shift) return std::nullopt;
      if (a->kind != Motion::None && b->kind != Motion::None && (a->base != b->base || a->reduced != b->reduced))
        return std::nullopt;
      Motion m = a->kind != Motion::None ? *a : *b;
      m.kind = Motion::Scale;
      m.k = a->k + (key == "mul" ? b->k : -b->k);
      return settle(m);
    }
    if ((key == "exp" || key == "exp2") && op.args.size() == 1) {
      Motion m = of(op.args[0]);
      if (m.kind != Motion::Shift) return std::nullopt;
      m.kind = Motion::Scale;
      m.base = key == "exp" ? 2.718281828459045 : 2.0;
      return m;
    }
    if ((key == "log" || key == "log2") && op.args.size() == 1) {
      Motion m = of(op.args[0]);
      if (m.kind != Motion::Scale || m.base != (key == "log" ? 2.718281828459045 : 2.0)) return std::nullopt;
      m.kind = Motion::Shift;
      m.base = 0;
      return m;
    }
    if (key == "max" || key == "min" || key == "sum") {
      Motion m = of(op.args[0]);
      std::optional<int64_t> a = reduce_axis(op);
      if (m.reduced || !a || *a != axis || rank + 1 != full_rank) return std::nullopt;
      if ((key == "sum") != (m.kind == Motion::Scale)) return std::nullopt;
      m.reduced = true;
      return m;
    }
    if (key == "index") {
      // m[:, None]: the reduced axis comes back, as a None at its position.
      Motion m = of(op.args[0]);
      auto *sub = cast<Subscript>(&value);
      if (!m.reduced || rank != full_rank || sub->indices.size() != full_rank) return std::nullopt;
      for (size_t k = 0; k < sub->indices.size(); ++k) {
        const Expr *ix = sub->indices[k].get();
        bool none = isa<NoneLit>(ix);
        bool all = isa<Slice>(ix) && !cast<Slice>(ix)->lower && !cast<Slice>(ix)->upper && !cast<Slice>(ix)->step;
        if (static_cast<int64_t>(k) == axis ? !none : !all) return std::nullopt;
      }
      m.reduced = false;
      return m;
    }
    if (key == "expand_dims" && op.args.size() == 2) {
      Motion m = of(op.args[0]);
      const SType *t = anf_types_.type_of(op.args[1]);
      if (!m.reduced || !t || t->kind != SType::Kind::Int || !t->known || t->n != axis) return std::nullopt;
      m.reduced = false;
      return m;
    }
    if (key == "where" && op.args.size() == 3) {
      if (of(op.args[0]).kind != Motion::None) return std::nullopt;
      auto a = broadcast(of(op.args[1]), op.args[1]), b = broadcast(of(op.args[2]), op.args[2]);
      if (!a || !b) return std::nullopt;
      if (a->kind != Motion::None && b->kind != Motion::None)
        return a->kind == b->kind && a->k == b->k && a->base == b->base && a->reduced == b->reduced ? a : std::nullopt;
      // The other branch must move the same way: -inf under a shift, 0 under a scale.
      Motion m = a->kind != Motion::None ? *a : *b;
      const SType *t = anf_types_.type_of(a->kind != Motion::None ? op.args[2] : op.args[1]);
      if (!t || !t->known || (t->kind != SType::Kind::Float && t->kind != SType::Kind::Int)) return std::nullopt;
      double v = t->kind == SType::Kind::Float ? t->x : static_cast<double>(t->n);
      bool ok = m.kind == Motion::Shift ? std::isinf(v) : v == 0.0;
      return ok ? std::optional<Motion>(m) : std::nullopt;
    }
    return std::nullopt;
  }

  // The stabilizing maxes of a function body (see Motion).
  std::set<std::string> find_stabilizers(const StmtList &body, const std::set<std::string> &active) {
    std::set<std::string> found;
    std::map<std::string, int> assignments;  // a name assigned twice is a merge or a loop-carried value
    count_assignments(body, assignments);
    std::vector<const StmtList *> blocks;
    collect_blocks(body, blocks);
    for (const StmtList *block : blocks) {
      std::optional<std::set<std::string>> outside;  // what the code around a nested block reads, once per block
      for (size_t k = 0; k < block->size(); ++k) {
        auto *a = dyn_cast<Assign>((*block)[k].get());
        if (!a) continue;
        const std::string m = assigned_name(*a);
        if (m.empty() || !active.count(m)) continue;
        Op op = classify(*a->value);
        if (op.key.substr(op.key.rfind('.') + 1) != "max" || op.args.empty()) continue;
        std::optional<int64_t> axis = reduce_axis(op);
        const size_t full_rank = rank_of(op.args[0]);
        if (!axis || full_rank == 0) continue;
        std::map<std::string, Motion> moving;
        moving[m] = Motion{Motion::Shift, 1, 0, true};
        bool proved = true;
        for (size_t j = k + 1; j < block->size() && proved; ++j) {
          const Stmt &s = *(*block)[j];
          std::set<std::string> read;  // of a loop or an if: its range or condition and body
          deep_reads(s, read);
          bool touches = false;
          for (const std::string &n : read) touches |= moving.count(n) > 0;
          if (!touches) continue;
          auto *as = dyn_cast<Assign>(&s);
          const std::string t = as ? assigned_name(*as) : "";
          if (t.empty()) {
            proved = false;  // a store, a return, a loop or an if sees a value that moves
            break;
          }
          std::optional<Motion> mo = motion_of(*as->value, rank_of(as->value.get()), full_rank, *axis, moving);
          if (!mo) proved = false;
          else if (mo->kind != Motion::None) moving[t] = *mo;
        }
        // A max inside an if branch or a loop body: the proof above saw
        // only the rest of its block. A moving value that leaves the block
        // (merged after the if, carried to the next iteration, read after
        // the loop) reaches statements it did not see, so it proves nothing.
        if (proved && block != &body) {
          if (!outside) block_reads(body, outside.emplace(), block);
          for (const auto &[name, motion] : moving)
            if (outside->count(name) || assignments.at(name) > 1) proved = false;
        }
        if (proved) found.insert(m);
      }
    }
    return found;
  }

  // ---------------------------------------------------------------- build

  std::optional<Backward> build() {
    const StmtList &body = anf_.fn->body;
    const Return *ret = nullptr;
    for (const StmtPtr &s : body)
      if (auto *r = dyn_cast<Return>(s.get())) ret = r;
    std::vector<std::string> outputs;
    if (auto *t = dyn_cast<Tuple>(ret->value.get())) {
      for (const ExprPtr &e : t->elts) {
        if (!as_name(*e)) fail(e->span, "a returned value known before the kernel runs has no adjoint; return tensors");
        outputs.push_back(as_name(*e)->id);
      }
    } else {
      if (!as_name(*ret->value)) fail(ret->span, "a differentiated function must return a tensor");
      outputs.push_back(as_name(*ret->value)->id);
    }

    // 2. Activity: values that depend on a wrt input (forward) ...
    std::set<std::string> active(request_.wrt.begin(), request_.wrt.end());
    for (const StmtPtr &s : body) {
      auto *a = dyn_cast<Assign>(s.get());
      if (!a) continue;
      const std::string &t = as_name(*a->targets[0])->id;
      const std::string operand = first_active(*a->value, active);
      if (operand.empty()) continue;
      if (carries_gradient(type_of_name(t))) active.insert(t);
      else check_dependence_kept(t, *a->value, operand);
    }
    // ... and that an output depends on (backward).
    std::set<std::string> useful;
    for (const std::string &o : outputs)
      if (active.count(o)) useful.insert(o);
    for (size_t k = body.size(); k-- > 0;) {
      auto *a = dyn_cast<Assign>(body[k].get());
      if (!a || !useful.count(as_name(*a->targets[0])->id)) continue;
      std::set<std::string> in;
      reads(*a->value, in);
      for (const std::string &n : in)
        if (active.count(n)) useful.insert(n);
    }

    stabilizers_ = find_stabilizers(body, active);

    // 3. Adjoint parameters for the outputs.
    std::vector<std::string> out_adjoints;
    for (const std::string &o : outputs) {
      std::string b = names_.fresh("b" + o);
      out_adjoints.push_back(b);
      adjoint_[o] = b;
    }

    // 4. The sweep, in reverse.
    for (size_t k = body.size(); k-- > 0;) {
      auto *a = dyn_cast<Assign>(body[k].get());
      if (!a) continue;
      const std::string &t = as_name(*a->targets[0])->id;
      if (!useful.count(t) || !active.count(t)) continue;
      begin_block(anf_.origin_of(body[k].get()));
      differentiate_stmt(t, *a->value, active);
    }

    // 5. The backward function.
    std::unique_ptr<Function> bwd = backward_shell(out_adjoints);
    for (size_t k = 0; k < body.size(); ++k)
      if (!isa<Return>(body[k].get())) bwd->body.push_back(clone(*body[k]));
    for (StmtPtr &s : sweep_) bwd->body.push_back(std::move(s));

    ExprList results;
    for (const std::string &w : request_.wrt) {
      auto it = adjoint_.find(w);
      if (it == adjoint_.end()) {
        diags_.warning(param_span(w), "no output of '" + fn_->name + "' depends on '" + w + "': its adjoint is zero");
        std::string b = names_.fresh("b" + w);
        StmtPtr z = assign(b, call("tl.zeros_like", list(name(w))));
        z->leading_comment = "'" + w + "' does not reach an output: its adjoint is zero";
        bwd->body.push_back(std::move(z));
        adjoint_[w] = b;
      }
      results.push_back(name(adjoint_[w]));
    }
    ExprPtr ret_value = results.size() == 1 ? std::move(results[0]) : std::make_unique<Tuple>(std::move(results));
    bwd->body.push_back(std::make_unique<Return>(std::move(ret_value)));
    remove_dead_code(bwd->body);

    // 6. Check the backward, and cast adjoints to their inputs' dtypes.
    sema::ParamTypes bwd_types = request_.param_types;
    for (size_t k = 0; k < outputs.size(); ++k)
      if (const SType *t = type_of_name(outputs[k])) bwd_types[out_adjoints[k]] = *t;
    Backward result;
    result.output_adjoints = out_adjoints;
    finish(std::move(bwd), bwd_types, /*cast_returned_adjoints=*/true, result);
    return result;
  }

  // `@triton.jit def <fn>_bwd(<forward parameters>, <extra>...):` with an
  // empty body; the name avoids the module's functions.
  std::unique_ptr<Function> backward_shell(const std::vector<std::string> &extra_params) const {
    auto bwd = std::make_unique<Function>();
    NameAllocator fn_names;
    for (const auto &f : module_.functions) fn_names.reserve(f->name);
    bwd->name = fn_names.fresh(fn_->name + "_bwd");
    bwd->span = fn_->span;
    bwd->decorators.push_back({DecoratorKind::Jit, "triton.jit", "triton.jit", {}});
    // The forward's defaults stay only where nothing follows them: Python
    // allows no parameter without a default after one with a default, and
    // callers pass the backward every forward argument (the protocol's call).
    const bool keep_defaults = extra_params.empty();
    for (const Param &p : anf_.fn->params)
      bwd->params.push_back({p.name, {}, p.annotation ? clone(*p.annotation) : nullptr,
                             p.default_value && keep_defaults ? clone(*p.default_value) : nullptr});
    for (const std::string &b : extra_params) bwd->params.push_back({b, {}, nullptr, nullptr});
    return bwd;
  }

  // The common end of both paths: check the backward with sema (a failure is
  // tgrad's bug), drop no-op casts, cast returned adjoints back to their
  // inputs' dtypes, and assemble the module with the jit functions it calls
  // and the imports it needs.
  void finish(std::unique_ptr<Function> bwd, const sema::ParamTypes &bwd_types, bool cast_returned_adjoints,
              Backward &result) {
    DiagEngine check(sources_);
    std::unique_ptr<Module> context = checking_module();
    std::optional<sema::TypeInfo> bwd_info = sema::analyze(*context, *bwd, bwd_types, check);
    if (!bwd_info) {
      std::ostringstream msg;
      check.print_all(msg);
      fail(fn_->name_span, "internal error: the generated backward of '" + fn_->name +
                               "' failed semantic analysis (please report):\n" + msg.str() + emit::print_function(*bwd));
    }
    // A cast that is a no-op for the representative dtype is not one for
    // the others: a generic backward keeps them all.
    if (!generic()) remove_noop_casts(bwd->body, *bwd_info);
    if (cast_returned_adjoints) cast_results(*bwd, *bwd_info);

    auto out = std::make_unique<Module>();
    result.backward_name = bwd->name;
    add_called_functions(*bwd, *out);
    for (auto &f : extra_functions_) {
      bool dup = false;
      for (const auto &e : out->functions) dup |= e->name == f->name;
      if (!dup) out->functions.push_back(std::move(f));
    }
    out->functions.push_back(std::move(bwd));
    std::set<std::string> read;  // inside loops and ifs too: a name used only there still needs its import
    for (const auto &f : out->functions) block_reads(f->body, read);
    // The module constants any emitted function reads (the user's helpers and their backwards too).
    for (const Constant &c : module_.constants) {
      bool have = false;
      for (const Constant &d : out->constants) have |= d.name == c.name;
      if (!have && read.count(c.name)) out->constants.push_back({c.name, c.span, clone(*c.stmt)});
    }
    add_imports(*out, read);
    result.source = header() + emit::print_module(*out);
    result.module = std::move(out);
  }

  // ------------------------------------------------------------ kernels

  struct MemoryOp {
    const Stmt *stmt = nullptr;  // the ANF statement (at any depth)
    bool in_branch = false;      // inside a runtime if
    bool store = false;
    std::string pointer;         // the pointer operand (an SSA name)
    std::string base;            // its pointer parameter
    std::string value;           // store: the stored name ("" if a constant); load: the loaded name
    std::string mask;            // "" if unmasked
    std::string other;           // load: the `other` name, if a tensor
    const Call *call = nullptr;
    std::vector<std::pair<const If *, bool>> branches;  // the runtime ifs around it, and which branch (true: body)
    std::vector<const For *> loops;                     // the runtime loops around it, outermost first
    size_t loop_depth() const { return loops.size(); }
    // A store that is an atomic (its builtin, "tl.atomic_add"), or "". An
    // atomic add accumulates: the buffer ends as its initial contents plus
    // every program's additions, whatever their order, so each added value's
    // gradient is the upstream gradient at its addresses, as for a store.
    std::string atomic;
  };

  // Two stores of which at most one runs in any program: they sit in
  // different branches of one runtime if.
  static bool exclusive(const MemoryOp &a, const MemoryOp &b) {
    for (size_t k = 0; k < a.branches.size() && k < b.branches.size(); ++k) {
      if (a.branches[k].first != b.branches[k].first) return false;
      if (a.branches[k].second != b.branches[k].second) return true;
    }
    return false;
  }

  static std::string name_or_empty(const Expr *e) {
    auto *n = e ? dyn_cast<Name>(e) : nullptr;
    return n ? n->id : "";
  }

  // Walks the ANF kernel once: its loads and stores, every definition of
  // every name, and the statements that set a loop's carried values on entry.
  void collect(const StmtList &block, const AccessAnalysis &access, bool in_branch = false) {
    for (size_t k = 0; k < block.size(); ++k) {
      const Stmt &s = *block[k];
      if (auto *f = dyn_cast<For>(&s)) {
        for (const LoopCarried &c : anf_.carried.at(f))
          for (size_t j = k; j-- > 0;)
            if (assigned_name(*block[j]) == c.name) {
              init_copy_[f].push_back(block[j].get());
              break;
            }
        loop_path_.push_back(f);
        collect(f->body, access, in_branch);
        loop_path_.pop_back();
        continue;
      }
      if (auto *i = dyn_cast<If>(&s)) {
        branch_path_.push_back({i, true});
        collect(i->body, access, true);
        branch_path_.back().second = false;
        collect(i->orelse, access, true);
        branch_path_.pop_back();
        continue;
      }
      const Call *c = nullptr;
      std::string target = assigned_name(s);
      if (!target.empty()) defs_of_[target].push_back(cast<Assign>(&s));
      bool store = false;
      if (auto *a = dyn_cast<Assign>(&s)) {
        c = dyn_cast<Call>(a->value.get());
      } else if (auto *e = dyn_cast<ExprStmt>(&s)) {
        c = dyn_cast<Call>(e->value.get());
        store = true;
      }
      if (!c) continue;
      const SType *f = anf_types_.type_of(c->func.get());
      std::string fname = f && f->kind == SType::Kind::Builtin ? f->s : "";
      const bool atomic = fname.rfind("tl.atomic_", 0) == 0;
      if (atomic && !store) {
        // `old = tl.atomic_add(...)`: what it returns depends on the order of programs.
        if (!kernel_reads_) block_reads(anf_.fn->body, kernel_reads_.emplace());
        if (kernel_reads_->count(target))
          fail(c->span, "the value " + fname + " returns (the contents before this program's update) depends on the "
                        "order of programs, so it has no gradient; tgrad differentiates atomics whose result is unused");
        store = true;
      }
      if (!atomic && fname != "tl.load" && fname != "tl.store") continue;
      if (!atomic && store != (fname == "tl.store")) continue;
      MemoryOp op;
      op.atomic = atomic ? fname : "";
      op.stmt = &s;
      op.in_branch = in_branch;
      op.branches = branch_path_;
      op.loops = loop_path_;
      op.store = store;
      op.pointer = name_or_empty(call_argument(*c, 0, "pointer"));
      op.call = c;
      if (op.pointer.empty()) fail(c->span, "the pointer of a " + fname + " must be a pointer value");
      op.base = access.base_of(op.pointer);
      if (op.base.empty()) {
        const SType *pt = type_of_name(op.pointer);
        if (!pt || pt->kind == SType::Kind::Unknown)
          fail(c->span, "tgrad cannot differentiate this " + fname + ": its pointer comes from an operation tgrad does not "
                        "type yet (a builtin such as tl.cat, or a block pointer tgrad did not lower); write the address "
                        "as pointer arithmetic with a mask");
        fail(c->span, "tgrad cannot trace this pointer back to a pointer parameter");
      }
      op.value = store ? name_or_empty(call_argument(*c, 1, "value")) : target;
      op.mask = name_or_empty(call_argument(*c, store ? 2 : 1, "mask"));
      if (!store) op.other = name_or_empty(call_argument(*c, 2, "other"));
      if (call_argument(*c, 3, "boundary_check"))
        fail(c->span, "block pointers (boundary_check) are not supported by whole-kernel reverse mode yet");
      memory_.push_back(op);
    }
  }

  const MemoryOp *memory_op(const Stmt *s) const {
    for (const MemoryOp &m : memory_)
      if (m.stmt == s) return &m;
    return nullptr;
  }

  // Forward activity over the statement tree, to a fixed point (a loop's
  // carried values feed the next iteration).
  void propagate_activity(const StmtList &block, const std::set<std::string> &wrt, bool &changed) {
    for (const StmtPtr &sp : block) {
      if (auto *f = dyn_cast<For>(sp.get())) {
        propagate_activity(f->body, wrt, changed);
        continue;
      }
      if (auto *i = dyn_cast<If>(sp.get())) {
        propagate_activity(i->body, wrt, changed);
        propagate_activity(i->orelse, wrt, changed);
        continue;
      }
      auto *a = dyn_cast<Assign>(sp.get());
      if (!a) continue;
      const std::string t = assigned_name(*a);
      if (t.empty() || active_.count(t)) continue;
      std::string operand;
      if (const MemoryOp *load = memory_op(sp.get())) {
        if (wrt.count(load->base)) operand = load->base;
        else if (!load->other.empty() && active_.count(load->other)) operand = load->other;
      } else {
        operand = first_active(*a->value, active_);
      }
      if (operand.empty()) continue;
      if (!carries_gradient(type_of_name(t))) {
        check_dependence_kept(t, *a->value, operand);
        continue;
      }
      active_.insert(t);
      changed = true;
    }
  }

  // Backward usefulness: active values that a stored output depends on.
  void propagate_usefulness(const StmtList &block, bool &changed) {
    for (size_t k = block.size(); k-- > 0;) {
      const Stmt *s = block[k].get();
      if (auto *f = dyn_cast<For>(s)) {
        propagate_usefulness(f->body, changed);
        continue;
      }
      if (auto *i = dyn_cast<If>(s)) {
        propagate_usefulness(i->body, changed);
        propagate_usefulness(i->orelse, changed);
        continue;
      }
      auto *a = dyn_cast<Assign>(s);
      if (!a || !useful_.count(assigned_name(*a)) || memory_op(s)) continue;
      std::set<std::string> in;
      reads(*a->value, in);
      for (const std::string &n : in)
        if (active_.count(n) && useful_.insert(n).second) changed = true;
    }
  }

  // Every name whose value depends on what the kernel loads through `base`,
  // through any operation (integer ones, comparisons, masks included).
  std::set<std::string> reached_by_loads_of(const std::string &base) {
    std::set<std::string> reached;
    for (const MemoryOp &m : memory_)
      if (!m.store && m.base == base && !m.value.empty()) reached.insert(m.value);
    std::vector<const StmtList *> blocks;
    collect_blocks(anf_.fn->body, blocks);
    for (bool changed = true; changed;) {
      changed = false;
      for (const StmtList *block : blocks)
        for (const StmtPtr &sp : *block) {
          const std::string t = assigned_name(*sp);
          if (t.empty() || reached.count(t)) continue;
          std::set<std::string> in;
          reads(*cast<Assign>(sp.get())->value, in);
          for (const std::string &n : in)
            if (reached.count(n)) {
              reached.insert(t);
              changed = true;
              break;
            }
        }
    }
    return reached;
  }

  // A --wrt pointer that reaches no store may still be read through
  // something tgrad does not type (a tensor descriptor made from it, a
  // call it cannot follow): then its loads are invisible, and a zero
  // gradient would be a guess. The pointer and the addresses derived from
  // it are followed; reaching a value of unknown type is a located error.
  void refuse_untraced_pointer(const std::string &w) {
    std::set<std::string> derived{w};
    std::function<void(const StmtList &)> walk = [&](const StmtList &block) {
      for (const StmtPtr &s : block) {
        if (auto *i = dyn_cast<If>(s.get())) {
          walk(i->body);
          walk(i->orelse);
          continue;
        }
        if (auto *f = dyn_cast<For>(s.get())) {
          walk(f->body);
          continue;
        }
        const std::string target = assigned_name(*s);
        if (target.empty()) continue;
        std::set<std::string> in;
        stmt_reads(*s, in);
        bool from_w = false;
        for (const std::string &n : in) from_w |= derived.count(n) > 0;
        if (!from_w) continue;
        const SType *t = type_of_name(target);
        if (t && t->is_tensor() && t->elem.is_pointer) {
          derived.insert(target);
        } else if (!t || !is_known(*t)) {
          const Stmt *origin = anf_.origin_of(s.get());
          fail(origin ? origin->span : s->span,
               "'" + w + "' reaches this expression, which tgrad does not type, so it cannot see what is loaded "
               "through it; its gradient would be lost. Load through '" + w + "' with tl.load (or a block pointer)");
        }
      }
    };
    walk(anf_.fn->body);
  }

  // The zero-gradient audit: for each --wrt pointer, the stores its loaded
  // values reach. A gradient is zero only where they reach no store tgrad
  // differentiates: reaching none at all (or only --no-grad outputs) is a
  // warning and is marked in the launch protocol; reaching a store only
  // through operations without a gradient (a comparison, an index, a mask)
  // is an error, because a zero gradient there is almost always a mistake
  // in --wrt, and tgrad will not print a backward that silently ignores it.
  void audit_zero_gradients(Backward &result, const std::map<std::string, std::vector<const MemoryOp *>> &store_of,
                            const std::set<std::string> &no_grad) {
    for (const std::string &w : request_.wrt) {
      const std::set<std::string> reached = reached_by_loads_of(w);
      std::vector<std::string> differentiated, without_gradient, declared_no_grad;
      for (const Param &p : fn_->params) {
        auto it = store_of.find(p.name);
        if (it == store_of.end()) continue;
        bool reaches = false, differentiates = false;
        for (const MemoryOp *m : it->second) {
          std::set<std::string> in;
          stmt_reads(*m->stmt, in);
          for (const std::string &n : in) reaches |= reached.count(n) > 0;
          differentiates |= useful_.count(m->value) && reached.count(m->value);
        }
        if (!reaches) continue;
        if (no_grad.count(p.name)) declared_no_grad.push_back(p.name);
        else if (differentiates) differentiated.push_back(p.name);
        else without_gradient.push_back(p.name);
      }
      auto list = [](const std::vector<std::string> &v) {
        std::string out;
        for (const std::string &x : v) out += (out.empty() ? "'" : ", '") + x + "'";
        return out;
      };
      bool read = false;
      for (const MemoryOp &m : memory_) read |= !m.store && m.base == w && useful_.count(m.value);
      if (read) {
        result.explanations.push_back("'" + w + "': what it loads reaches the stores to " +
                                      (differentiated.empty() ? list(without_gradient) : list(differentiated)));
        continue;
      }
      if (!without_gradient.empty())
        fail(param_span(w), "what '" + fn_->name + "' loads through '" + w + "' reaches the stores to " +
                                list(without_gradient) + " only through operations without a gradient (comparisons, "
                                "integer conversions, argmax, masks or addresses), so its gradient is zero; remove '" +
                                w + "' from --wrt if that is what you expect");
      refuse_untraced_pointer(w);
      const std::string why = declared_no_grad.empty()
                                  ? "no store of '" + fn_->name + "' depends on what it loads through '" + w + "'"
                                  : "what it loads reaches only the outputs " + list(declared_no_grad) +
                                        ", which --no-grad says take no gradient";
      diags_.warning(param_span(w), why + ": its gradient is zero");
      result.zero_gradients.push_back({w, why});
      // The backward never writes this gradient: its buffer must hold zeros.
      needs_zeros_.insert(w);
      result.explanations.push_back("'" + w + "': its gradient is zero: " + why);
    }
  }

  std::optional<Backward> build_kernel() {
    const StmtList &body = anf_.fn->body;
    AccessAnalysis access(*anf_.fn, name_types_);
    const std::set<std::string> wrt(request_.wrt.begin(), request_.wrt.end());
    collect(body, access);

    std::map<std::string, std::set<AccessDecision::Kind>> kinds;
    for (const MemoryOp &m : memory_)
      if (!m.store) {
        ++loads_per_base_[m.base];
        AccessDecision d = access.classify(m.pointer, m.mask);
        offset_keys_[m.base].insert(d.offset_key);
        mask_keys_[m.base].insert(d.mask_key);
        kinds[m.base].insert(d.kind);
      }
    // Partial sums for inputs that every program loads alike (see Backward::PartialSum),
    // where the programs differ only by tl.program_id(0): the backward can then loop over them.
    const bool one_axis = programs_differ_only_by_axis_0(body);
    for (const std::string &w : request_.wrt) {
      auto k = kinds.find(w);
      if (one_axis && k != kinds.end() && k->second == std::set<AccessDecision::Kind>{AccessDecision::Kind::Broadcast})
        partial_bases_.insert(w);
      // Not loaded at all here, but loaded alike by every program under
      // another value of a flag: its rows stay zero (see partial_sums_for).
      const bool forced = std::find(request_.partial_sums_for.begin(), request_.partial_sums_for.end(), w) !=
                          request_.partial_sums_for.end();
      const bool accessed = std::any_of(memory_.begin(), memory_.end(), [&](const MemoryOp &m) { return m.base == w; });
      if (one_axis && forced && !accessed) partial_bases_.insert(w);
    }
    for (const auto &[base, ks] : kinds)
      if (ks.count(AccessDecision::Kind::Shared) || (ks.count(AccessDecision::Kind::Broadcast) && !partial_bases_.count(base)))
        shared_bases_[base] = "another load through '" + base + "' may share addresses with other programs";
    // Loads of one buffer at offsets not proven equal (`X + o` and `X + o + 1`):
    // one program's addresses may be another's, so their gradients meet.
    for (const auto &[base, keys] : offset_keys_)
      if (keys.size() > 1 && !partial_bases_.count(base) && !shared_bases_.count(base))
        shared_bases_[base] = "the loads through '" + base + "' have offsets not proven equal: one program's "
                              "addresses may be another's";
    // 2. Activity: loads through a --wrt pointer start it.
    for (bool changed = true; changed;) {
      changed = false;
      propagate_activity(body, wrt, changed);
    }
    // Outputs: stores of active values; they get a gradient buffer each.
    std::vector<std::string> outputs;
    // Several stores through one pointer are fine where at most one runs in
    // any program (the branches of a runtime if, an early return's two paths):
    // each takes the upstream gradient at its own addresses.
    std::map<std::string, std::vector<const MemoryOp *>> store_of;
    std::map<std::string, std::string> overwrites;  // outputs stored to by two stores that may both run -> why
    for (const MemoryOp &m : memory_) {
      if (!m.store) continue;
      // Atomics other than additions (max, min, exchange, compare-and-swap,
      // bitwise): the result depends on the order of programs or has no
      // derivative. Without a gradient through them (flags, counters) they
      // are side effects the backward does not replay.
      if (!m.atomic.empty() && m.atomic != "tl.atomic_add") {
        // Any operand: tl.atomic_cas(pointer, cmp, val) stores val.
        std::set<std::string> operands;
        for (size_t k = 1; k < m.call->args.size(); ++k) reads(*m.call->args[k], operands);
        for (const Keyword &kw : m.call->keywords) reads(*kw.value, operands);
        for (const std::string &o : operands)
          if (active_.count(o))
            fail(m.call->span, m.atomic + " of a value that depends on --wrt inputs cannot be differentiated: which "
                               "program's value wins depends on their order; only tl.atomic_add accumulates");
      }
      for (const MemoryOp *other : store_of[m.base]) {
        if (exclusive(*other, m)) continue;
        // A constant written first, outside loops (`tl.store(Y + o, 0.0)`,
        // then the result): whatever the later store overwrites or not,
        // the earlier value carries no gradient, and the later one's
        // gradient is the upstream gradient at its addresses, as the last
        // writer's always is.
        if (other->atomic.empty() && m.atomic.empty() && other->loop_depth() == 0 && !active_.count(other->value)) continue;
        if (m.atomic == "tl.atomic_add" && other->atomic == "tl.atomic_add") continue;  // additions commute
        if (!m.atomic.empty() || !other->atomic.empty())
          fail(m.call->span, "'" + m.base + "' is both stored to and updated atomically in this kernel; which value "
                             "it ends with depends on the order of programs");
        // Two plain stores that may both run: the later one overwrites the
        // earlier where their addresses meet, so the backward consumes the
        // upstream gradient (consumed_, below).
        overwrites[m.base] = "'" + m.base + "' is stored to more than once (lines " +
                              std::to_string(other->call->span.begin.line) + " and " +
                              std::to_string(m.call->span.begin.line) + ")";
      }
      store_of[m.base].push_back(&m);
    }
    // A load through a buffer the kernel also stores a value with a gradient
    // to may read that value back (a running sum kept in memory): activity
    // does not follow values through memory, so such a load must be shown to
    // read only the contents from before the kernel, like an update in place,
    // or the gradient through it would be lost without a word.
    auto stores_active = [&](const std::vector<const MemoryOp *> &stores) {
      for (const MemoryOp *st : stores)
        if (active_.count(st->value)) return true;
      return false;
    };
    for (const MemoryOp &m : memory_)
      if (!m.store && store_of.count(m.base) &&
          (wrt.count(m.base) || active_.count(m.value) || stores_active(store_of.at(m.base))))
        check_in_place(m, store_of.at(m.base), access, wrt.count(m.base) > 0);
    const std::set<std::string> no_grad(request_.no_grad.begin(), request_.no_grad.end());
    for (const std::string &n : request_.no_grad)
      if (!store_of.count(n))
        fail(param_span(n), "--no-grad " + n + ": '" + fn_->name + "' does not store through '" + n +
                                "'; --no-grad names outputs (pointers the kernel stores to)");
    for (const Param &p : fn_->params) {
      auto it = store_of.find(p.name);
      if (it == store_of.end() || no_grad.count(p.name)) continue;
      bool active = false;
      for (const MemoryOp *m : it->second) active |= active_.count(m->value) > 0;
      if (active) outputs.push_back(p.name);
    }
    for (const std::string &o : outputs)
      for (const MemoryOp *m : store_of[o])
        if (active_.count(m->value)) useful_.insert(m->value);
    for (bool changed = true; changed;) {
      changed = false;
      propagate_usefulness(body, changed);
    }
    stabilizers_ = find_stabilizers(body, active_);

    // Outputs whose addresses the forward may write more than once: several
    // stores, a store repeated by a loop at addresses that do not move with
    // it, or addresses every program writes. Only the last value written
    // reaches the output, so only its store may take the upstream gradient:
    // each store's adjoint, in reverse order, takes the upstream gradient at
    // its addresses and leaves zeros there for the earlier ones (consumes
    // it). The backward then writes that buffer: it takes a float32 copy.
    for (const std::string &o : outputs) {
      if (consumed_.count(o)) continue;  // updated in place
      std::string why = overwrites.count(o) ? overwrites.at(o) : "";
      for (const MemoryOp *m : store_of[o]) {
        if (!m->atomic.empty()) {  // additions commute (mixed with stores: refused above)
          why.clear();
          break;
        }
        AccessDecision d = access.classify(m->pointer, m->mask);
        if (d.programs_share) {
          consume_atomically_.insert(m);
          if (why.empty()) why = "line " + std::to_string(m->call->span.begin.line) + ": " + d.reason;
        } else if (why.empty() && (m->loop_depth() > 1 || (m->loop_depth() == 1 && !d.walks_loop))) {
          why = "line " + std::to_string(m->call->span.begin.line) + ": the store is repeated by a loop at addresses "
                "that do not move with it";
        }
      }
      if (!why.empty()) consumed_[o] = why;
    }

    // 3. Gradient buffers: inputs in --wrt order, then outputs in parameter order.
    Backward result;
    for (const std::string &w : request_.wrt) {
      gradient_buffer_[w] = names_.fresh("d" + w);
      result.gradient_buffers.push_back({w, gradient_buffer_[w]});
    }
    result.input_gradients = request_.wrt.size();
    for (const std::string &o : outputs) {
      if (in_place_.count(o)) continue;  // its one buffer is among the inputs'
      if (gradient_buffer_.count(o)) {
        // In --wrt, stored to, and not an update in place: the kernel never
        // reads it (fla's `dq2`, beside a `dq` it does read); its gradient as
        // an input would be zero and its upstream gradient needs a buffer.
        const MemoryOp *store = nullptr;
        bool loaded = false;
        for (const MemoryOp &m : memory_) {
          if (m.store && m.base == o && !store) store = &m;
          loaded |= !m.store && m.base == o;
        }
        fail(store ? store->call->span : fn_->name_span,
             loaded ? "'" + o + "' is in --wrt and this kernel stores to it, but what it loads through it carries "
                      "no gradient, so it is not an update in place: leave it out of --wrt; the backward takes the "
                      "gradient of what is stored there as an upstream gradient"
                    : "'" + o + "' is in --wrt but this kernel only writes through it (it loads nothing through it): "
                      "it has no gradient as an input. Leave it out of --wrt; the backward takes the gradient of what "
                      "is stored there as an upstream gradient");
      }
      gradient_buffer_[o] = names_.fresh("d" + o);
      result.gradient_buffers.push_back({o, gradient_buffer_[o]});
    }
    result.in_place.assign(in_place_.begin(), in_place_.end());
    audit_zero_gradients(result, store_of, no_grad);
    for (const KeptAccumulator &k : kept_accumulators_)
      result.explanations.push_back("line " + std::to_string(k.line) + ": the loop loads '" + k.pointer +
                                    "' after storing it in an earlier iteration, an accumulator kept in memory; the "
                                    "backward differentiates it as the loop-carried value '" + k.value +
                                    "', loaded once before the loop (the stores stay)");
    for (const auto &[o, why] : consumed_) {
      result.consumed_upstream.push_back({o, why});
      result.explanations.push_back("'" + o + "': the forward may write an address more than once (" + why +
                                    "): each store's gradient takes the upstream gradient at its addresses in reverse "
                                    "order and leaves zeros for the values it overwrote; d" + o +
                                    " is a float32 copy of the upstream gradient, which the backward overwrites");
    }

    // Partial sums: a scratch buffer, its row length and this program's row.
    std::map<std::string, std::string> row_of;
    for (const std::string &w : request_.wrt) {
      if (!partial_bases_.count(w)) continue;
      Backward::PartialSum p{w, gradient_buffer_[w], names_.fresh(gradient_buffer_[w] + "_partial"), names_.fresh(w + "_numel")};
      row_of[w] = names_.fresh(gradient_buffer_[w] + "_row");
      partial_row_[w] = row_of[w];
      result.partial_sums.push_back(p);
    }

    // 4. The sweep, in reverse; then the primal replay (stores removed,
    // gradient pointers alongside the pointers they mirror) goes first.
    for (const std::string &m : stabilizers_) {
      const Stmt *origin = defs_of_.count(m) ? anf_.origin_of(defs_of_.at(m).front()) : nullptr;
      result.explanations.push_back((origin ? "line " + std::to_string(origin->span.begin.line) + ": " : std::string()) +
                                    "'" + m + "' = tl.max(...) only stabilizes: what the kernel stores does not change "
                                    "when it moves, so its gradient is zero and is not computed");
    }
    out_ = &sweep_;
    sweep_block(body, access, result.explanations);
    if (!result.partial_sums.empty()) result.num_programs_param = names_.fresh("num_programs");
    result.tapes = tapes_;
    std::unique_ptr<Function> bwd = backward_shell(result.parameters_after_forward());
    replay_block(body, bwd->body);
    for (StmtPtr &st : sweep_) bwd->body.push_back(std::move(st));
    read_dtypes_from_pointers(bwd->body);
    if (!result.partial_sums.empty()) loop_over_forward_programs(*bwd, result, row_of);
    for (const std::string &w : request_.wrt)
      if (needs_zeros_.count(w) && !in_place_.count(w))  // (an in-place buffer holds the upstream gradient)
        result.zero_initialized.push_back(w);
    remove_dead_code(bwd->body);
    drop_unread_tapes(*bwd, result);
    issue_early(bwd->body, upstream_loads_);
    {
      std::set<std::string> read;  // the saved values the backward still reads
      block_reads(bwd->body, read);
      for (const auto &[value, base] : saved_base_)
        if (read.count(value) && std::find(result.saved_outputs.begin(), result.saved_outputs.end(), base) == result.saved_outputs.end())
          result.saved_outputs.push_back(base);
    }

    sema::ParamTypes bwd_types = request_.param_types;
    for (const auto &g : result.gradient_buffers)
      bwd_types[g.second] = consumed_.count(g.first) ? SType::tensor({sema::DType::FP32, true}, {})
                                                      : request_.param_types.at(g.first);
    if (!result.partial_sums.empty()) {
      const SType i32 = SType::tensor({sema::DType::Int32, false}, {});
      for (const auto &p : result.partial_sums) {
        bwd_types[p.scratch] = SType::tensor({sema::DType::FP32, true}, {});
        bwd_types[p.numel] = i32;
      }
      bwd_types[result.num_programs_param] = i32;
      result.reduce_kernel = add_reduce_kernel(bwd->name + "_reduce");
    }
    for (const Backward::Tape &t : result.tapes) {
      bwd_types[t.scratch] = SType::tensor({t.dtype, true}, {});
      bwd_types[t.trips_param] = SType::tensor({sema::DType::Int32, false}, {});
    }
    bwd_types_ = bwd_types;
    finish(std::move(bwd), bwd_types, /*cast_returned_adjoints=*/false, result);
    return result;
  }

  // Values the forward stores, one scalar per program and unconverted
  // (`tl.store(Mean + row, mean)` with `row = tl.program_id(0)`, Mean a
  // pointer to mean's dtype, both at the kernel's top level): the backward
  // loads them (`mean = tl.load(Mean + row)`) instead of computing them
  // again, as a hand-written backward reads its saved statistics. The
  // protocol says so: such a buffer must hold what the forward stored. The
  // pointer's definition moves up to the value's. Where the saved value is
  // `1 / tl.sqrt(u)` it becomes `tl.math.rsqrt(u)`, whose adjoint reads only
  // the value itself, so that nothing before it is computed again. Returns
  // true if the ANF changed.
  bool find_saved_values() {
    StmtList &body = anf_.fn->body;
    if (!programs_differ_only_by_axis_0(body)) return false;
    std::map<std::string, int> assigned;
    count_assignments(body, assigned);
    std::map<std::string, int> read_count;
    count_reads(body, read_count);
    auto position = [&](const std::string &n) -> size_t {
      if (assigned[n] != 1) return body.size();
      for (size_t k = 0; k < body.size(); ++k)
        if (assigned_name(*body[k]) == n) return k;
      return body.size();
    };
    auto value_of = [&](size_t k) -> Expr & { return *cast<Assign>(body[k].get())->value; };
    bool changed = false;
    for (size_t k = 0; k < body.size(); ++k) {
      auto *es = dyn_cast<ExprStmt>(body[k].get());
      auto *c = es ? dyn_cast<Call>(es->value.get()) : nullptr;
      if (!c || emit::print_expr(*c->func) != "tl.store" || c->args.size() != 2 || !c->keywords.empty()) continue;
      auto *p = dyn_cast<Name>(c->args[0].get());
      auto *v = dyn_cast<Name>(c->args[1].get());
      if (!p || !v) continue;
      const size_t pk = position(p->id), vk = position(v->id);
      if (pk == body.size() || vk == body.size()) continue;
      // p = P + off, P a pointer parameter, off the program id along axis 0.
      auto *add = dyn_cast<BinOp>(&value_of(pk));
      if (!add || add->op != BinaryOpKind::Add) continue;
      auto *base = dyn_cast<Name>(add->lhs.get());
      auto *off = dyn_cast<Name>(add->rhs.get());
      auto pt = base ? request_.param_types.find(base->id) : request_.param_types.end();
      if (!off || pt == request_.param_types.end() || !pt->second.is_tensor() || !pt->second.elem.is_pointer) continue;
      std::string at = off->id;
      size_t ok = position(at);
      bool is_pid = false;
      while (ok < body.size()) {
        if (auto *n = dyn_cast<Name>(&value_of(ok))) {
          ok = position(at = n->id);
          continue;
        }
        auto *call = dyn_cast<Call>(&value_of(ok));
        auto *axis = call && call->args.size() == 1 ? dyn_cast<IntLit>(call->args[0].get()) : nullptr;
        is_pid = call && emit::print_expr(*call->func) == "tl.program_id" && axis && axis->value == 0;
        break;
      }
      if (!is_pid || position(off->id) > vk) continue;
      const SType *vt = type_of_name(v->id);
      // Generic: the pointer's dtype is a representative, so the backward
      // asserts the one it relies on when Triton compiles it.
      const bool generic_pointer = request_.generic_params.count(base->id) > 0;
      if (!vt || !vt->is_tensor() || !vt->shape.empty() || vt->elem.is_pointer || !sema::is_float(vt->elem.dtype) ||
          (vt->elem.dtype != pt->second.elem.dtype && !generic_pointer))
        continue;
      if (generic_pointer) saved_dtype_[v->id] = sema::tl_name(vt->elem.dtype);
      saved_[v->id] = p->id;
      saved_base_[v->id] = base->id;
      if (pk > vk) {  // the pointer first: the value's load reads it
        StmtPtr moved = std::move(body[pk]);
        body.erase(body.begin() + static_cast<std::ptrdiff_t>(pk));
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(vk), std::move(moved));
        changed = true;
      }
      // 1 / tl.sqrt(u), the square root read nowhere else: tl.math.rsqrt(u).
      const size_t vk2 = position(v->id);
      auto *div = dyn_cast<BinOp>(&value_of(vk2));
      auto *one_i = div ? dyn_cast<IntLit>(div->lhs.get()) : nullptr;
      auto *one_f = div ? dyn_cast<FloatLit>(div->lhs.get()) : nullptr;
      auto *t = div && div->op == BinaryOpKind::Div ? dyn_cast<Name>(div->rhs.get()) : nullptr;
      if (!t || !((one_i && one_i->value == 1) || (one_f && one_f->value == 1.0)) || read_count[t->id] != 1) continue;
      const size_t tk = position(t->id);
      auto *sq = tk < body.size() ? dyn_cast<Call>(&value_of(tk)) : nullptr;
      if (!sq || emit::print_expr(*sq->func) != "tl.sqrt" || sq->args.size() != 1 || !isa<Name>(sq->args[0].get())) continue;
      cast<Assign>(body[vk2].get())->value = call("tl.math.rsqrt", list(clone(*sq->args[0])));
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(tk));
      --k;  // the square root stood before this store: the next statement is now at k
      changed = true;
    }
    return changed;
  }

  // The pointer parameters of the forward kernel and of the backward
  // (gradient buffers, scratch): the request's pointer types and `more`.
  std::set<std::string> pointer_params(const std::vector<std::string> &more = {}) const {
    std::set<std::string> out(more.begin(), more.end());
    for (const auto &[param, type] : request_.param_types)
      if (type.is_tensor() && type.elem.is_pointer) out.insert(param);
    return out;
  }

 public:
  // Joins the looped backward `result` and the backward `one` of the
  // kernel's one-pass version (SinglePass.h) under one kernel that takes the
  // same arguments and calls one or the other: the one-pass one when every
  // loop over the version's range runs once. Both are kept as jit functions
  // of their own. Where `one` is missing or needs other scratch buffers,
  // `result` stays as it is and --explain says why.
  void dispatch_by_row_length(Backward &result, std::optional<Backward> one, const sema::ParamTypes &one_types,
                              const SinglePassVersion &version, const std::string &why_not) {
    const std::string where = "line " + std::to_string(fn_->span.begin.line) + ": ";
    const std::string loops = "the " + std::to_string(version.loops) + " loops over " + version.range;
    if (!one) {
      result.explanations.push_back(where + loops + " have no one-pass version: " + why_not);
      return;
    }
    auto same_sums = [](const Backward &a, const Backward &b) {
      if (a.partial_sums.size() != b.partial_sums.size() || a.num_programs_param != b.num_programs_param) return false;
      for (size_t k = 0; k < a.partial_sums.size(); ++k) {
        const auto &x = a.partial_sums[k], &y = b.partial_sums[k];
        if (x.input != y.input || x.gradient != y.gradient || x.scratch != y.scratch || x.numel != y.numel) return false;
      }
      return true;
    };
    if (one->gradient_buffers != result.gradient_buffers || !same_sums(result, *one)) {
      result.explanations.push_back(where + loops + " have a one-pass version, but its backward needs other gradient "
                                    "or partial-sum buffers; the looped backward serves every row length");
      return;
    }
    auto take = [](Backward &b) {
      Function *f = nullptr;
      for (auto &g : b.module->functions)
        if (g->name == b.backward_name) f = g.get();
      return f;
    };
    Function *looped = take(result), *single = take(*one);
    NameAllocator fn_names;
    for (const auto &f : module_.functions) fn_names.reserve(f->name);
    for (const auto &f : result.module->functions) fn_names.reserve(f->name);
    for (const auto &f : one->module->functions) fn_names.reserve(f->name);
    looped->name = fn_names.fresh(result.backward_name + "_loops");
    single->name = fn_names.fresh(result.backward_name + "_one_pass");

    // The dispatcher: the looped backward's parameters, then any the one-pass one adds.
    auto dispatcher = std::make_unique<Function>();
    dispatcher->name = result.backward_name;
    dispatcher->span = fn_->span;
    dispatcher->decorators.push_back({DecoratorKind::Jit, "triton.jit", "triton.jit", {}});
    sema::ParamTypes types = bwd_types_;
    for (const Param &p : looped->params)
      dispatcher->params.push_back({p.name, {}, p.annotation ? clone(*p.annotation) : nullptr, nullptr});
    for (const Param &p : single->params) {
      bool have = false;
      for (const Param &q : dispatcher->params) have |= q.name == p.name;
      if (have) continue;
      dispatcher->params.push_back({p.name, {}, p.annotation ? clone(*p.annotation) : nullptr, nullptr});
      if (one_types.count(p.name)) types[p.name] = one_types.at(p.name);
    }
    auto call_of = [&](const Function &f) {
      ExprList args;
      for (const Param &p : f.params) args.push_back(name(p.name));
      return std::make_unique<ExprStmt>(std::make_unique<Call>(name(f.name), std::move(args), std::vector<Keyword>{}));
    };
    StmtList then_branch, else_branch;
    then_branch.push_back(call_of(*single));
    else_branch.push_back(call_of(*looped));
    auto branch = std::make_unique<If>(clone(*version.condition), std::move(then_branch), std::move(else_branch));
    branch->leading_comment = "Each of " + loops + " runs once when " + emit::print_expr(*version.condition) +
                              ": then the one-pass backward, which keeps the row in registers; else the looped one.";
    dispatcher->body.push_back(std::move(branch));

    auto out = std::make_unique<Module>();
    for (Backward *b : {&result, &*one}) {
      for (const Import &imp : b->module->imports) {
        bool have = false;
        for (const Import &i : out->imports)
          have |= i.is_from == imp.is_from && i.module == imp.module && i.names == imp.names;
        if (!have) out->imports.push_back(imp);
      }
      for (const Constant &c : b->module->constants) {
        bool have = false;
        for (const Constant &d : out->constants) have |= d.name == c.name;
        if (!have) out->constants.push_back({c.name, c.span, clone(*c.stmt)});
      }
      for (auto &f : b->module->functions) {
        bool have = false;
        for (const auto &g : out->functions) have |= g->name == f->name;
        if (!have) out->functions.push_back(std::move(f));
      }
    }
    // The dispatcher is checked like every backward (a failure is tgrad's bug).
    DiagEngine check(sources_);
    std::unique_ptr<Module> context = checking_module();
    for (const auto &f : out->functions) context->functions.push_back(clone(*f));
    if (!sema::analyze(*context, *dispatcher, types, check)) {
      std::ostringstream msg;
      check.print_all(msg);
      fail(fn_->name_span, "internal error: the dispatching backward of '" + fn_->name +
                               "' failed semantic analysis (please report):\n" + msg.str() + emit::print_function(*dispatcher));
    }
    out->functions.push_back(std::move(dispatcher));

    result.add_buffer_needs(*one);
    for (const Backward::Tape &t : one->tapes) result.tapes.push_back(t);
    result.explanations.push_back(where + "each of " + loops + " runs once when " + emit::print_expr(*version.condition) +
                                  ": the backward then calls " + single->name + ", whose decisions follow (else " +
                                  looped->name + ", as above)");
    for (const std::string &e : one->explanations) result.explanations.push_back("one pass: " + e);
    result.source = header() + emit::print_module(*out);
    result.module = std::move(out);
  }

 private:
  // `v.dtype` of a loaded value v (a cast back to the load's dtype) reads
  // `p.dtype.element_ty` of its pointer instead, so that a load kept only for
  // its dtype is not replayed.
  void read_dtypes_from_pointers(StmtList &body) {
    rewrite_exprs(body, [&](ExprPtr &e) {
      auto *attr = dyn_cast<Attribute>(e.get());
      auto *v = attr && attr->attr == "dtype" ? dyn_cast<Name>(attr->value.get()) : nullptr;
      if (!v) return;
      const MemoryOp *load = nullptr;
      for (const MemoryOp &m : memory_)
        if (!m.store && m.value == v->id) load = &m;
      const SType *t = load ? type_of_name(v->id) : nullptr;
      if (!t || !t->is_tensor() || t->elem.is_pointer) return;
      e = std::make_unique<Attribute>(std::make_unique<Attribute>(name(load->pointer), "dtype"), "element_ty");
    });
  }

  // True if the kernel reads no program id but axis 0's, and not the grid's
  // size: running it for program p inside a loop over p is then the same.
  bool programs_differ_only_by_axis_0(const StmtList &block) const {
    bool ok = true;
    std::function<void(const Expr &)> visit = [&](const Expr &e) {
      if (auto *c = dyn_cast<Call>(&e)) {
        const SType *f = anf_types_.type_of(c->func.get());
        std::string fname = f && f->kind == SType::Kind::Builtin ? f->s : "";
        if (fname == "tl.num_programs") ok = false;
        if (fname == "tl.program_id") {
          const Expr *axis = call_argument(*c, 0, "axis");
          auto *lit = axis ? dyn_cast<IntLit>(axis) : nullptr;
          if (!lit || lit->value != 0) ok = false;
        }
        for (const ExprPtr &a : c->args) visit(*a);
        for (const Keyword &k : c->keywords) visit(*k.value);
        visit(*c->func);
      } else if (auto *b = dyn_cast<BinOp>(&e)) {
        visit(*b->lhs);
        visit(*b->rhs);
      } else if (auto *a = dyn_cast<Attribute>(&e)) {
        visit(*a->value);
      }
    };
    std::function<void(const StmtList &)> walk = [&](const StmtList &b) {
      for (const StmtPtr &st : b) {
        if (auto *a = dyn_cast<Assign>(st.get())) visit(*a->value);
        if (auto *x = dyn_cast<ExprStmt>(st.get())) visit(*x->value);
        if (auto *f = dyn_cast<For>(st.get())) walk(f->body);
        if (auto *i = dyn_cast<If>(st.get())) {
          walk(i->body);
          walk(i->orelse);
        }
      }
    };
    walk(block);
    return ok;
  }

  // The body becomes `for pid in range(tl.program_id(0), num_programs, tl.num_programs(0))`
  // with pid in place of tl.program_id(0) and the forward's program count in
  // place of tl.num_programs(0) (a forward whose programs differ by more
  // than tl.program_id(0) has no partial sums, so only the tapes' rows read
  // it: a row per forward program); each partial-sum row is set up before it.
  void loop_over_forward_programs(Function &bwd, const Backward &result, const std::map<std::string, std::string> &row_of) {
    std::string pid = names_.fresh("forward_pid");
    auto axis_zero = [](const Call &c) {
      const Expr *axis = c.args.empty() ? nullptr : c.args[0].get();
      for (const Keyword &k : c.keywords)
        if (k.name == "axis") axis = k.value.get();
      return axis && isa<IntLit>(axis) && cast<IntLit>(axis)->value == 0;
    };
    rewrite_exprs(bwd.body, [&](ExprPtr &e) {
      auto *c = dyn_cast<Call>(e.get());
      if (!c || !axis_zero(*c)) return;
      const std::string callee = emit::print_expr(*c->func);
      if (callee == "tl.program_id") e = name(pid);
      else if (callee == "tl.num_programs") e = name(result.num_programs_param);
    });
    StmtList prelude;
    for (const auto &p : result.partial_sums) {
      StmtPtr row = assign(row_of.at(p.input), std::make_unique<BinOp>(BinaryOpKind::Add, name(p.scratch),
                                                                      std::make_unique<BinOp>(BinaryOpKind::Mul, call("tl.program_id", list(int_lit(0))),
                                                                                              name(p.numel))));
      if (prelude.empty())
        row->leading_comment = "This program's rows of the partial sums: every program loads the same addresses of " +
                               p.input + "; the reduction kernel sums the rows";
      prelude.push_back(std::move(row));
      // The row starts at zero: the caller need not clear the scratch buffer.
      std::string start = names_.fresh("zero_start"), offs = names_.fresh("zero_offsets");
      StmtList zero_body;
      zero_body.push_back(assign(offs, std::make_unique<BinOp>(BinaryOpKind::Add, name(start),
                                                               call("tl.arange", list(int_lit(0), int_lit(1024))))));
      std::vector<Keyword> zkw;
      zkw.push_back({"dtype", {}, dotted_name("tl.float32")});
      std::vector<Keyword> skw;
      ExprList bound;
      bound.push_back(name(p.numel));
      skw.push_back({"mask", {}, std::make_unique<Compare>(name(offs), std::vector<CompareOpKind>{CompareOpKind::Lt}, std::move(bound))});
      zero_body.push_back(std::make_unique<ExprStmt>(call(
          "tl.store", list(std::make_unique<BinOp>(BinaryOpKind::Add, name(row_of.at(p.input)), name(offs)),
                           call("tl.zeros", list(std::make_unique<List>(list(int_lit(1024)))), std::move(zkw))),
          std::move(skw))));
      ExprList zb;
      zb.push_back(int_lit(0));
      zb.push_back(name(p.numel));
      zb.push_back(int_lit(1024));
      prelude.push_back(std::make_unique<For>(name(start), call("range", std::move(zb)), std::move(zero_body)));
    }
    prelude.push_back(std::make_unique<ExprStmt>(call("tl.debug_barrier", {})));
    ExprList bounds;
    bounds.push_back(call("tl.program_id", list(int_lit(0))));
    bounds.push_back(name(result.num_programs_param));
    bounds.push_back(call("tl.num_programs", list(int_lit(0))));
    for (RegisterPartial &r : register_partials_) prelude.push_back(assign(r.acc, std::move(r.init)));
    if (!register_partials_.empty()) {
      // The last of this program's iterations stores the sums.
      ExprList rhs;
      rhs.push_back(name(result.num_programs_param));
      auto last = std::make_unique<Compare>(
          std::make_unique<BinOp>(BinaryOpKind::Add, name(pid), call("tl.num_programs", list(int_lit(0)))),
          std::vector<CompareOpKind>{CompareOpKind::GtE}, std::move(rhs));
      auto store_sums = std::make_unique<If>(std::move(last), StmtList{}, StmtList{});
      for (const RegisterPartial &r : register_partials_) {
        std::vector<Keyword> kws;
        if (!r.mask.empty()) kws.push_back({"mask", {}, name(r.mask)});
        store_sums->body.push_back(std::make_unique<ExprStmt>(call("tl.store", list(name(r.pointer), name(r.acc)), std::move(kws))));
      }
      store_sums->leading_comment = "This program's last iteration: its partial sums go to its rows.";
      bwd.body.push_back(std::move(store_sums));
    }
    // What does not depend on the forward's program (the weights' loads) runs once, before the loop.
    std::vector<std::string> buffers;
    for (const auto &g : result.gradient_buffers) buffers.push_back(g.second);
    for (const auto &p : result.partial_sums) buffers.push_back(p.scratch);
    for (const Backward::Tape &t : result.tapes) buffers.push_back(t.scratch);
    const size_t before_hoisted = prelude.size();
    const Purity purity(std::vector<const StmtList *>{&prelude, &bwd.body}, pointer_params(buffers));
    if (hoist_loop_invariants(bwd.body, prelude, purity, pid) > 0)
    {
      std::string &c = prelude[before_hoisted]->leading_comment;
      c = "The same for every forward program: computed once." + (c.empty() ? "" : "\n" + c);
    }
    auto loop = std::make_unique<For>(name(pid), call("range", std::move(bounds)), std::move(bwd.body));
    loop->leading_comment = "Each program of the backward's grid takes every G-th program of the forward's.";
    bwd.body = std::move(prelude);
    bwd.body.push_back(std::move(loop));
  }

  // The kernel that sums partial-sum rows into a gradient buffer.
  // The name of the emitted unbroadcast helper, added to the backward's
  // module on first use.
  std::string unbroadcast_helper() {
    if (has_unbroadcast_helper_) return sema::kUnbroadcastHelper;
    if (module_.find_function(sema::kUnbroadcastHelper))
      fail(fn_->name_span, std::string("the file defines '") + sema::kUnbroadcastHelper +
                               "', the name of a helper generic backwards use: rename it or give the types with --arg");
    add_support_function(std::string(sema::kUnbroadcastHelper) +
                             "(g, x):\n"
                             "    for _ in tl.static_range(len(g.shape) - len(x.shape)):\n"
                             "        g = tl.sum(g, 0)\n"
                             "    for axis in tl.static_range(len(x.shape)):\n"
                             "        if x.shape[axis] == 1:\n"
                             "            if g.shape[axis] != 1:\n"
                             "                g = tl.sum(g, axis, keep_dims=True)\n"
                             "    return g\n",
                         "Sums g back to x's shape: over the leading axes x lacks and the axes where x has size 1, the "
                         "axes along which Triton broadcast x (resolved when Triton compiles each call).");
    has_unbroadcast_helper_ = true;
    return sema::kUnbroadcastHelper;
  }

  // Parses a jit function tgrad writes (`def` and the rest of its text) and
  // adds it to the backward's module, its first statement under `comment`.
  void add_support_function(const std::string &definition, const std::string &comment) {
    const std::string text = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef " + definition;
    SourceManager sources;
    int id = sources.add_file("<support function>", text);
    DiagEngine diags(sources);
    std::unique_ptr<Module> m = parse::parse_module(sources, id, diags);
    if (!m || diags.has_errors() || m->functions.empty())
      fail(fn_->name_span, "internal error: a function tgrad writes does not parse:\n" + text);
    m->functions[0]->body[0]->leading_comment = comment;
    extra_functions_.push_back(std::move(m->functions[0]));
  }

  std::string add_reduce_kernel(const std::string &wanted) {
    NameAllocator fn_names;
    for (const auto &f : module_.functions) fn_names.reserve(f->name);
    fn_names.reserve(fn_->name + "_bwd");
    std::string kernel = fn_names.fresh(wanted);
    add_support_function(kernel +
                             "(partial, gradient, numel, rows, BLOCK: tl.constexpr, ROWS: tl.constexpr):\n"
                             "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                             "    mask = offsets < numel\n"
                             "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
                             "    for first in range(0, rows, ROWS):\n"
                             "        r = first + tl.arange(0, ROWS)\n"
                             "        tile_mask = (r[:, None] < rows) & mask[None, :]\n"
                             "        tile = tl.load(partial + r[:, None] * numel + offsets[None, :], mask=tile_mask, other=0.0)\n"
                             "        total += tl.sum(tile, axis=0)\n"
                             "    tl.store(gradient + offsets, total.to(gradient.dtype.element_ty), mask=mask)\n",
                         "Writes the sum of the rows of a [rows, numel] float32 partial-sum buffer to a gradient buffer.");
    return kernel;
  }

  void sweep_block(const StmtList &block, const AccessAnalysis &access, std::vector<std::string> &explanations) {
    for (size_t k = block.size(); k-- > 0;) {
      const Stmt *s = block[k].get();
      if (auto *f = dyn_cast<For>(s)) {
        sweep_loop(*f, access, explanations);
        continue;
      }
      if (auto *i = dyn_cast<If>(s)) {
        sweep_if(*i, access, explanations);
        continue;
      }
      const MemoryOp *op = memory_op(s);
      if (op && op->store && consumed_.count(op->base) && gradient_buffer_.count(op->base)) {
        consume_upstream(*op);
        continue;
      }
      if (op && op->store) {
        if (!useful_.count(op->value) || !gradient_buffer_.count(op->base)) continue;  // (--no-grad outputs: none)
        begin_block(anf_.origin_of(s));
        // The adjoint of a store: the upstream gradient, loaded under the store's mask.
        std::vector<Keyword> kws;
        if (!op->mask.empty()) {  // Triton takes `other` only with a mask
          kws.push_back({"mask", {}, name(op->mask)});
          kws.push_back({"other", {}, std::make_unique<FloatLit>(0.0, "0.0")});
        }
        ExprPtr upstream = call("tl.load", list(dual(op->pointer)), std::move(kws));
        // Generic: the buffer's dtype is a representative, and may not be
        // the value's; upstream gradients are taken in float32, the type
        // half-precision adjoints accumulate in (a no-op for float32 data).
        if (generic() && is_float_tensor(type_of_name(op->value)))
          upstream = cast_to(std::move(upstream), dotted_name("tl.float32"));
        // Nothing in the backward writes d<base> when the forward never
        // loads <base>: then the load may be issued early (issue_early), as
        // a statement of its own.
        auto loads = loads_per_base_.find(op->base);
        const bool read_only = loads == loads_per_base_.end() || loads->second == 0;
        if (read_only && adjoint_.count(op->value) && !drops_contributions(op->value)) {
          std::string g = names_.fresh("b" + op->value);  // a later contribution: `bx += g`
          StmtPtr load = assign(g, std::move(upstream));
          upstream_loads_.insert(load.get());
          emit_stmt(std::move(load));
          upstream = name(g);
        }
        const size_t emitted = out_->size();
        contribute(op->value, std::move(upstream), "store", op->pointer, op->call->span);
        if (read_only && out_->size() == emitted + 1)  // the first contribution: `bx = tl.load(...)`
          if (auto *a = dyn_cast<Assign>(out_->back().get()); a && isa<Call>(a->value.get()))
            upstream_loads_.insert(a);
        continue;
      }
      auto *a = dyn_cast<Assign>(s);
      if (!a) continue;
      const std::string t = assigned_name(*a);
      if (t.empty() || !useful_.count(t) || !active_.count(t)) continue;
      if (carried_update_copy_.count(s)) continue;  // additive accumulator: its adjoint is loop-invariant
      if (auto c = taped_update_copy_.find(s); c != taped_update_copy_.end()) {
        // `acc_2 = acc_3` at the end of a reversed loop's body: the carried
        // adjoint is the adjoint of this iteration's result, acc_3; it starts
        // again from zero for the reads of the incoming value.
        const std::string bc = adjoint_.at(c->second);
        begin_block(anf_.origin_of(s));
        if (auto *u = dyn_cast<Name>(a->value.get()); u && active_.count(u->id)) {
          std::string bu = names_.fresh("b" + u->id);
          emit_stmt(assign(bu, name(bc)));
          adjoint_[u->id] = bu;
        }
        emit_stmt(assign(bc, call("tl.zeros_like", list(name(bc)))));
        continue;
      }
      auto additive = additive_update_.find(t);
      if (additive != additive_update_.end()) {
        // acc_3 = acc_2 + t: the iteration's result has the loop-invariant adjoint of acc_2.
        auto b = adjoint_.find(additive->second);
        if (b == adjoint_.end()) continue;
        adjoint_[t] = b->second;
        aliased_.insert(t);
      }
      if (!adjoint_.count(t)) continue;  // no gradient reaches it
      begin_block(anf_.origin_of(s));
      if (op) {
        load_adjoint(*op, access, explanations);
        continue;
      }
      differentiate_stmt(t, *a->value, active_);
    }
  }

  // A zero adjoint for `x`, to accumulate into inside a loop or an if. A
  // loop-carried variable keeps one type, and contributions to the adjoint
  // of a half-precision value come in float32 (a tl.dot's result): such an
  // adjoint accumulates in float32.
  ExprPtr zero_adjoint(const std::string &x) {
    const SType *t = type_of_name(x);
    // Generic: the value may be half precision for another caller.
    const bool narrow = t && t->is_tensor() && !t->elem.is_pointer &&
                        (t->elem.dtype == sema::DType::FP16 || t->elem.dtype == sema::DType::BF16 ||
                         (generic() && t->elem.dtype == sema::DType::FP32));
    if (narrow) {
      std::vector<Keyword> kws;
      kws.push_back({"dtype", {}, dotted_name("tl.float32")});
      return call("tl.zeros", list(std::make_unique<Attribute>(name(x), "shape")), std::move(kws));
    }
    return call("tl.zeros_like", list(name(x)));
  }

  // Gives x an adjoint variable of its own, which a loop or an if can add
  // to in place: zeros where it has no adjoint yet, a copy where its adjoint
  // is another value's.
  void own_adjoint_variable(const std::string &x) {
    auto it = adjoint_.find(x);
    if (it == adjoint_.end()) {
      std::string b = names_.fresh("b" + x);
      emit_stmt(assign(b, zero_adjoint(x)));
      adjoint_[x] = b;
    } else if (aliased_.count(x)) {
      std::string b = names_.fresh("b" + x);
      emit_stmt(assign(b, name(it->second)));
      adjoint_[x] = b;
      aliased_.erase(x);
    }
  }

  // Values defined outside `block` whose adjoints the block adds to: their
  // adjoints must exist before it (a loop adds once per iteration, an if in
  // one branch only), as variables of their own.
  void prepare_outer_adjoints(const StmtList &block) {
    std::map<std::string, int> defined;
    count_assignments(block, defined);
    std::set<std::string> read;
    block_reads(block, read);
    for (const std::string &x : read) {
      if (defined.count(x) || !active_.count(x) || !useful_.count(x) || frozen_.count(x)) continue;
      const SType *t = type_of_name(x);
      if (!is_float_tensor(t)) {
        if (carries_gradient(t))
          fail({}, "the tuple '" + x + "' is used inside a loop or a runtime if; tgrad cannot accumulate its adjoint "
                   "there (unpack it before the loop)");
        continue;
      }
      own_adjoint_variable(x);
    }
  }

  // A runtime loop. Its carried float values must be additive accumulators
  // (acc = acc + t, acc = acc - t, acc = tl.dot(a, b, acc)), read nowhere
  // else in the body: their adjoint is then the same in every iteration, and
  // the backward loop runs forward, replaying each iteration's primal values
  // (induction variables and advancing pointers included) before its adjoints.
  void sweep_loop(const For &f, const AccessAnalysis &access, std::vector<std::string> &explanations) {
    std::map<std::string, int> read_count;
    count_reads(f.body, read_count);
    std::vector<std::string> additive_here;
    bool general = false;  // a carried value that is neither additive nor inactive: the loop runs in reverse
    for (const LoopCarried &c : anf_.carried.at(&f)) {
      if (!active_.count(c.name) || !useful_.count(c.name)) continue;
      const Assign *copy = top_level_assignment(f.body, c.name);
      auto *u = copy ? dyn_cast<Name>(copy->value.get()) : nullptr;
      const Assign *update = u ? top_level_assignment(f.body, u->id) : nullptr;
      bool additive = false;
      if (update && read_count[c.name] == 1 && read_count[u->id] == 1) {
        auto is_carried = [&](const Expr *e) { return e && isa<Name>(e) && cast<Name>(e)->id == c.name; };
        if (auto *b = dyn_cast<BinOp>(update->value.get())) {
          additive = (b->op == BinaryOpKind::Add && (is_carried(b->lhs.get()) != is_carried(b->rhs.get()))) ||
                     (b->op == BinaryOpKind::Sub && is_carried(b->lhs.get()) && !is_carried(b->rhs.get()));
        } else if (auto *cl = dyn_cast<Call>(update->value.get())) {
          const SType *ft = anf_types_.type_of(cl->func.get());
          additive = ft && ft->kind == SType::Kind::Builtin && ft->s == "tl.dot" && is_carried(call_argument(*cl, 2, "acc")) &&
                     !is_carried(call_argument(*cl, 0, "input")) && !is_carried(call_argument(*cl, 1, "other"));
        }
      }
      if (!additive) {
        general = true;
        continue;
      }
      additive_update_[u->id] = c.name;
      carried_update_copy_.insert(copy);
      frozen_.insert(c.name);
      additive_here.push_back(c.name);
    }
    if (general) {
      sweep_taped_loop(f, access, explanations, std::set<std::string>(additive_here.begin(), additive_here.end()));
      for (const std::string &c : additive_here) frozen_.erase(c);
      return;
    }
    begin_block(anf_.origin_of(&f));
    prepare_outer_adjoints(f.body);

    StmtList adjoint = sweep_nested(f.body, access, explanations);
    for (const std::string &c : additive_here) frozen_.erase(c);

    // Carried values start each replay from their incoming values.
    auto it = init_copy_.find(&f);
    if (it != init_copy_.end())
      for (const Stmt *s : it->second) replay_stmt(*s, *out_);
    // The iteration's primal values, its adjoints, then the carried values
    // move on to the next iteration (pointers advance after their use).
    std::set<std::string> carried_names;
    for (const LoopCarried &c : anf_.carried.at(&f)) carried_names.insert(c.name);
    auto loop = std::make_unique<For>(clone(*f.target), clone(*f.iter), StmtList{}, f.span);
    std::vector<const Stmt *> moves;
    for (const StmtPtr &s : f.body)
      if (carried_names.count(assigned_name(*s))) moves.push_back(s.get());
      else replay_stmt(*s, loop->body);
    for (StmtPtr &s : adjoint) loop->body.push_back(std::move(s));
    for (const Stmt *s : moves) replay_stmt(*s, loop->body);
    emit_stmt(std::move(loop));
  }

  // Statements written as Python text (the tape's addressing): parsed like
  // the body of a jit function.
  StmtList parse_statements(const std::string &code) {
    std::string text = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _statements():\n";
    std::istringstream lines(code);
    for (std::string line; std::getline(lines, line);) text += "    " + line + "\n";
    SourceManager sources;
    int id = sources.add_file("<generated statements>", text);
    DiagEngine diags(sources);
    std::unique_ptr<Module> m = parse::parse_module(sources, id, diags);
    if (!m || diags.has_errors() || m->functions.empty())
      fail(fn_->name_span, "internal error: generated statements do not parse:\n" + code);
    return std::move(m->functions[0]->body);
  }

  // A carried value's name as the user wrote it: `acc_2` -> `acc`.
  std::string user_name(const std::string &anf_name) const {
    size_t u = anf_name.rfind('_');
    if (u == std::string::npos || u + 1 == anf_name.size()) return anf_name;
    for (size_t k = u + 1; k < anf_name.size(); ++k)
      if (!std::isdigit(static_cast<unsigned char>(anf_name[k]))) return anf_name;
    return anf_name.substr(0, u);
  }

  // A loop whose carried values are taped: what the forward replay writes
  // and the reversed loop reads.
  struct TapedValue {
    std::string carried;  // the ANF name
    std::string scratch;  // the tape parameter
    std::string numel;    // the value's element count, as an expression
    std::string offsets;  // its elements' offsets in one tape entry, as an expression
    std::string cast;     // ".to(tl.float16)" where the value is not of the tape's type
    bool integer = false; // an integer tape: past the trip count it reads 0, not NaN
  };
  struct TapedLoop {
    std::vector<TapedValue> values;
    std::string start, stop, step;  // the loop's bounds, as expressions
    std::string row;                // this program's row of the tapes
    std::string trips;              // this program's trip count
    std::string trips_param;        // the bound on any program's trip count
    std::string forward_index, reverse_index, rev;
    bool assert_step = false;       // a constexpr step: assert that it is positive
    std::vector<std::string> positive_factors;  // tl.num_programs times these constexprs: assert each positive
    bool negative_step = false;     // a literal negative step: the loop counts down
  };

  // Tapes the backward writes but never reads, once dead code is gone: a
  // carried value whose adjoints do not need it (a running mean's update is
  // linear in it; an argmax index beside an online softmax feeds no
  // gradient). Their stores, parameters and, where a loop keeps no tape, its
  // trip-count bound go.
  void drop_unread_tapes(Function &bwd, Backward &result) {
    std::set<std::string> scratches;
    for (const Backward::Tape &t : result.tapes) scratches.insert(t.scratch);
    if (scratches.empty()) return;
    const std::set<std::string> read = names_accessed_by(bwd.body, "tl.load");
    std::set<std::string> unread;
    for (const std::string &t : scratches)
      if (!read.count(t)) unread.insert(t);
    if (unread.empty()) return;
    erase_tape_writes(bwd.body, unread);
    for (std::string &e : result.explanations)
      for (const std::string &t : unread) {
        const size_t at = e.find("' is taped to '" + t + "'");
        if (at != std::string::npos) e = e.substr(0, at) + "' needs no tape: no adjoint of the reversed loop reads it";
      }
    std::vector<Backward::Tape> kept;
    for (const Backward::Tape &t : result.tapes)
      if (!unread.count(t.scratch)) kept.push_back(t);
    std::set<std::string> untaped_trips;  // bounds of loops left with no tape
    for (const Backward::Tape &t : result.tapes)
      if (std::none_of(kept.begin(), kept.end(), [&](const Backward::Tape &k) { return k.trips_param == t.trips_param; }))
        untaped_trips.insert(t.trips_param);
    result.tapes = std::move(kept);
    bwd.params.erase(std::remove_if(bwd.params.begin(), bwd.params.end(),
                                    [&](const Param &p) { return unread.count(p.name) || untaped_trips.count(p.name); }),
                     bwd.params.end());
    remove_dead_code(bwd.body);
    retitle_untaped_loops(bwd.body, untaped_trips);
  }
  // A loop that lost all its tapes: its comments no longer speak of them,
  // and the barrier between the tapes' writes and reads goes.
  void retitle_untaped_loops(StmtList &block, const std::set<std::string> &untaped_trips) {
    auto is_barrier = [&](size_t k) {
      auto *e = k < block.size() ? dyn_cast<ExprStmt>(block[k].get()) : nullptr;
      return e && emit::print_expr(*e->value) == "tl.debug_barrier()";
    };
    for (size_t k = block.size(); k-- > 0;) {
      Stmt &s = *block[k];
      if (s.leading_comment == kTapeRowComment) s.leading_comment = kTripCountComment;
      auto *f = dyn_cast<For>(&s);
      if (f && !f->body.empty()) {
        for (const std::string &trips : untaped_trips) {
          std::string &c = f->body[0]->leading_comment;
          if (c != taped_reversal_comment(trips)) continue;
          c = kReversalComment;
          // The barriers around the reversed loop ordered the tapes' writes and reads.
          if (is_barrier(k + 1)) block.erase(block.begin() + static_cast<long>(k + 1));
          if (k > 0 && is_barrier(k - 1)) {
            block.erase(block.begin() + static_cast<long>(k - 1));
            --k;
            f = dyn_cast<For>(block[k].get());
          }
          break;
        }
      }
      if (f) retitle_untaped_loops(f->body, untaped_trips);
      if (auto *i = dyn_cast<If>(block[k].get())) {
        retitle_untaped_loops(i->body, untaped_trips);
        retitle_untaped_loops(i->orelse, untaped_trips);
      }
    }
  }

  // The comments a taped loop's replay and reversal carry, and those of a loop
  // without tapes (retitle_untaped_loops turns the first into the second).
  static constexpr const char *kTapeRowComment = "This program's row of the tapes of the loop below, and its trip count.";
  static constexpr const char *kTripCountComment = "The trip count of the loop below, for the reversed loop.";
  static constexpr const char *kReversalComment = "Iterations in reverse.";
  static std::string taped_reversal_comment(const std::string &trips_param) {
    return "Iterations in reverse; each starts from its incoming values on the tape (NaN past " + trips_param + ").";
  }

  // The address of a taped value's entry in iteration `index`.
  static std::string tape_address(const TapedLoop &L, const TapedValue &v, const std::string &index) {
    return v.scratch + " + (" + L.row + " * " + L.trips_param + " + " + index + ") * (" + v.numel + ") + " + v.offsets;
  }

  // A loop with carried values that are neither recomputed (inactive) nor
  // additive accumulators, such as the running max, sum and output of an
  // online softmax. Reversing it needs each iteration's incoming values:
  // the forward replay of the loop (earlier in the backward) writes them to
  // a tape, one scratch buffer per value (float32; integers of their own type), and the backward loop runs
  // the iterations in reverse, reading them back, then replaying the
  // iteration's primal values and its adjoints. The adjoint of a carried
  // value is carried by the reversed loop: at the end of an iteration's
  // body (its first adjoint statement), the carried adjoint becomes the
  // adjoint of the iteration's result, and starts again from zero for the
  // reads of the incoming value.
  // The step of a carried integer or pointer that each iteration moves by
  // the same amount (`offset = offset + BLOCK_N`, `ptrs += BLOCK_K * stride`,
  // a block pointer's tl.advance): the body assigns it once, from itself
  // plus or minus a value the loop does not assign. Its value in iteration k
  // is then its entry value + k * step, which the reversed loop computes.
  std::optional<std::string> induction_step(const For &f, const LoopCarried &c) {
    std::map<std::string, int> assigned;
    stmt_assignments(f, assigned);  // the loop variable too: `p += i * B` steps by a changing amount
    const Assign *copy = top_level_assignment(f.body, c.name);
    auto *next = copy ? dyn_cast<Name>(copy->value.get()) : nullptr;
    if (!next || assigned[c.name] != 1 || assigned[next->id] != 1) return std::nullopt;
    const Assign *update = top_level_assignment(f.body, next->id);
    auto *sum = update ? dyn_cast<BinOp>(update->value.get()) : nullptr;
    if (!sum || (sum->op != BinaryOpKind::Add && sum->op != BinaryOpKind::Sub)) return std::nullopt;
    auto *self = dyn_cast<Name>(sum->lhs.get());
    if (!self || self->id != c.name) return std::nullopt;
    const SType *t = type_of_name(c.name);
    const bool integer_or_pointer = t && (t->kind == SType::Kind::Int ||
                                          (t->is_tensor() && (t->elem.is_pointer || !sema::is_float(t->elem.dtype))));
    if (!integer_or_pointer) return std::nullopt;
    std::optional<ExprPtr> delta = loop_invariant(*sum->rhs, f.body, assigned, 0);
    if (!delta) return std::nullopt;
    const bool compound = isa<BinOp>(delta->get()) || isa<UnaryOp>(delta->get());
    const std::string text = emit::print_expr(**delta);
    if (sum->op == BinaryOpKind::Sub) return "-" + (compound ? "(" + text + ")" : text);
    return compound ? "(" + text + ")" : text;
  }

  // `e` written with names the loop does not assign: a literal, a name from
  // outside the loop, or arithmetic on those that A-normal form named inside
  // the body (`p += H * K` reads a temporary the body assigns once from H
  // and K); nullopt where it may change between iterations.
  std::optional<ExprPtr> loop_invariant(const Expr &e, const StmtList &body, std::map<std::string, int> &assigned,
                                        int depth) {
    if (depth > 16) return std::nullopt;
    if (isa<IntLit>(&e)) return clone(e);
    if (auto *n = dyn_cast<Name>(&e)) {
      if (!assigned.count(n->id)) return clone(e);
      const Assign *def = assigned[n->id] == 1 ? top_level_assignment(body, n->id) : nullptr;
      if (!def) return std::nullopt;
      return loop_invariant(*def->value, body, assigned, depth + 1);
    }
    if (auto *b = dyn_cast<BinOp>(&e)) {
      if (b->op != BinaryOpKind::Add && b->op != BinaryOpKind::Sub && b->op != BinaryOpKind::Mul) return std::nullopt;
      std::optional<ExprPtr> l = loop_invariant(*b->lhs, body, assigned, depth + 1);
      if (!l) return std::nullopt;
      std::optional<ExprPtr> r = loop_invariant(*b->rhs, body, assigned, depth + 1);
      if (!r) return std::nullopt;
      return ExprPtr(std::make_unique<BinOp>(b->op, std::move(*l), std::move(*r)));
    }
    if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg) {
      std::optional<ExprPtr> x = loop_invariant(*u->operand, body, assigned, depth + 1);
      if (!x) return std::nullopt;
      return ExprPtr(std::make_unique<UnaryOp>(UnaryOpKind::Neg, std::move(*x)));
    }
    // `(-1 if REVERSE else 1)` on a tl.constexpr (fla's recurrent kernels): known when Triton compiles.
    if (auto *i = dyn_cast<IfExp>(&e)) {
      const SType *c = anf_types_.type_of(i->cond.get());
      if (!c || c->is_tensor()) return std::nullopt;
      std::optional<ExprPtr> cond = loop_invariant(*i->cond, body, assigned, depth + 1);
      std::optional<ExprPtr> a = cond ? loop_invariant(*i->then_value, body, assigned, depth + 1) : std::nullopt;
      std::optional<ExprPtr> b = a ? loop_invariant(*i->else_value, body, assigned, depth + 1) : std::nullopt;
      if (!b) return std::nullopt;
      return ExprPtr(std::make_unique<IfExp>(std::move(*cond), std::move(*a), std::move(*b)));
    }
    if (isa<BoolLit>(&e)) return clone(e);
    return std::nullopt;
  }

  // Whether `e` is tl.num_programs(axis), possibly named, cast or
  // multiplied by positive integer literals or by tl.constexpr integers
  // (`NUM_SMS * BLOCK_ROW`, Liger's block rms norm; those go to `factors`,
  // for the backward to assert positive): a positive number of programs.
  bool counts_programs(const Expr &e, int depth, std::vector<std::string> &factors) const {
    if (depth > 8) return false;
    if (auto *n = dyn_cast<Name>(&e)) {
      auto it = defs_of_.find(n->id);
      return it != defs_of_.end() && it->second.size() == 1 &&
             counts_programs(*it->second[0]->value, depth + 1, factors);
    }
    if (auto *c = dyn_cast<Call>(&e)) {
      if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && attr->attr == "to")
        return counts_programs(*attr->value, depth + 1, factors);
      return emit::print_expr(*c->func) == "tl.num_programs";
    }
    if (auto *b = dyn_cast<BinOp>(&e); b && b->op == BinaryOpKind::Mul) {
      auto positive = [&](const Expr &x) {
        if (isa<IntLit>(&x)) return cast<IntLit>(&x)->value > 0;
        const SType *t = anf_types_.type_of(&x);
        if (!t || t->kind != SType::Kind::Int) return false;  // a number known when Triton compiles
        if (t->known) return t->n > 0;
        factors.push_back(emit::print_expr(x));
        return true;
      };
      return (counts_programs(*b->lhs, depth + 1, factors) &&
              (positive(*b->rhs) || counts_programs(*b->rhs, depth + 1, factors))) ||
             (positive(*b->lhs) && counts_programs(*b->rhs, depth + 1, factors));
    }
    return false;
  }

  void sweep_taped_loop(const For &f, const AccessAnalysis &access, std::vector<std::string> &explanations,
                        const std::set<std::string> &additive) {
    const Stmt *origin = anf_.origin_of(&f);
    const SourceSpan where = origin ? origin->span : f.span;
    auto *range = dyn_cast<Call>(f.iter.get());
    if (!range || range->args.empty() || range->args.size() > 3)
      fail(where, "tgrad reverses this loop by taping its carried values and needs range(start, stop, step) bounds");
    TapedLoop L;
    std::vector<std::string> b;
    // Bounds go into the trip count and the iteration's index as text
    // (`stop - start`): a compound one needs its parentheses there
    // (`range(16 + 2, n)` counts n - (16 + 2) iterations).
    for (const ExprPtr &a : range->args) b.push_back(emit::print_operand(*a));
    L.start = b.size() == 1 ? "0" : b[0];
    L.stop = b.size() == 1 ? b[0] : b[1];
    L.step = b.size() == 3 ? b[2] : "1";
    if (b.size() == 3) {
      const SType *t = anf_types_.type_of(range->args[2].get());
      const bool known = t && t->kind == SType::Kind::Int && t->known;
      if (known && t->n == 0) fail(where, "range() step must not be zero");
      L.negative_step = known && t->n < 0;  // a loop that counts down (a backward recurrence over chunks)
      // A grid-stride loop (`range(pid, n, tl.num_programs(0))`) steps by a
      // count of programs: known at launch, and positive.
      const bool programs = counts_programs(*range->args[2], 0, L.positive_factors);
      if (!programs) L.positive_factors.clear();
      if (!known && !programs && !(t && t->kind == SType::Kind::Int))
        fail(where, "tgrad reverses this loop by taping its carried values and needs its step known before the "
                    "kernel runs (a literal, a tl.constexpr or tl.num_programs), to count its iterations");
      L.assert_step = !known && !programs;
    }
    std::map<std::string, int> read_count;
    count_reads(f.body, read_count);
    InversionContext context;
    context.definition = [this](const std::string &n) -> const Assign * {
      auto it = defs_of_.find(n);
      return it != defs_of_.end() && it->second.size() == 1 ? it->second[0] : nullptr;
    };
    context.builtin = [this](const Call &c) -> std::string {
      const SType *t = anf_types_.type_of(c.func.get());
      return t && t->kind == SType::Kind::Builtin ? t->s : "";
    };
    context.type_of = [this](const std::string &n) { return type_of_name(n); };
    context.active = [this](const std::string &n) { return active_.count(n) > 0; };
    std::map<std::string, InvertibleUpdate> inverted = find_invertible_updates(f, anf_.carried.at(&f), context);
    const std::string carried_prefix = "line " + std::to_string(where.begin.line) + ": the loop's carried '";
    // Carried values stepped by a loop-invariant amount, and the step.
    std::vector<std::pair<LoopCarried, std::string>> inductions;
    std::vector<std::string> copies_of;  // carried values whose end-of-body copies carry an adjoint
    for (const LoopCarried &c : anf_.carried.at(&f)) {
      if (additive.count(c.name)) continue;
      if (active_.count(c.name) && useful_.count(c.name)) copies_of.push_back(c.name);
      if (read_count[c.name] == 0) {
        inverted.erase(c.name);
        continue;  // each iteration overwrites it: nothing to restore
      }
      if (auto inv = inverted.find(c.name); inv != inverted.end() && inv->second.unneeded) {
        explanations.push_back(carried_prefix + user_name(c.name) +
                               "' needs neither a tape nor an inversion: its update is linear in it with a coefficient (" +
                               user_name(inv->second.scale) + ") that carries no gradient, so the backward never reads it");
        continue;
      }
      if (auto inv = inverted.find(c.name); inv != inverted.end()) {
        explanations.push_back(carried_prefix + user_name(c.name) +
                               "' is recovered in the reversed loop by inverting its update (" + user_name(c.name) + " = (" + user_name(c.name) + "' - ...) / " +
                               user_name(inv->second.scale) + ", " + user_name(inv->second.exponential) +
                               " an exponential), not taped");
        continue;
      }
      if (std::optional<std::string> step = induction_step(f, c)) {
        explanations.push_back(carried_prefix + user_name(c.name) + "' steps by " + *step +
                               " each iteration: the reversed loop computes it from the iteration number, not a tape");
        inductions.push_back({c, *step});
        continue;
      }
      const SType *t = type_of_name(c.name);
      // None stays None in every iteration (`b_dg = ... if USE_GATE else
      // None`, updated only under `if USE_GATE:`): nothing to restore.
      if (t && t->kind == SType::Kind::None) continue;
      // Integers carried beside the floats (an argmax index, a column offset
      // reassigned in the body) go to a tape of their own type; pointers do not.
      const bool integer = t && t->is_tensor() && !t->elem.is_pointer && !sema::is_float(t->elem.dtype);
      if (!is_float_tensor(t) && !integer)
        fail(where, "this loop carries '" + user_name(c.name) + "' (" + (t ? t->str() : std::string("?")) +
                        ") besides values tgrad must tape to reverse the loop; tgrad tapes numbers only, not "
                        "pointers: compute '" + user_name(c.name) + "' from the loop variable instead");
      TapedValue v;
      v.carried = c.name;
      v.scratch = names_.fresh(user_name(c.name) + "_tape");
      Backward::Tape tape;
      tape.scratch = v.scratch;
      tape.value = user_name(c.name);
      // Each dimension a number, a tl.constexpr parameter or a product of
      // those (`BK * BK`, fla's based attention); the protocol sizes the
      // tape by the factors.
      std::vector<std::string> dims, factors;
      for (const sema::Dim &d : t->shape) {
        const std::string text = d.str();
        std::vector<std::string> parts;
        bool ok = !text.empty();
        for (size_t at = 0; ok && at <= text.size();) {
          size_t star = text.find('*', at);
          if (star == std::string::npos) star = text.size();
          std::string part = text.substr(at, star - at);
          part.erase(0, part.find_first_not_of(' '));
          part.erase(part.find_last_not_of(' ') + 1);
          bool identifier = !part.empty() && (std::isalpha(static_cast<unsigned char>(part[0])) || part[0] == '_');
          for (char ch : part) identifier &= std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
          const bool number = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
          ok = identifier || number;
          parts.push_back(part);
          at = star + 1;
        }
        if (!d.value && !ok)
          fail(where, "tgrad cannot size the tape of '" + tape.value + "': its shape " + sema::shape_str(t->shape) +
                          " has a dimension that is neither a number nor a product of tl.constexpr parameters");
        dims.push_back(text);
        if (d.value) factors.push_back(text);
        else factors.insert(factors.end(), parts.begin(), parts.end());
      }
      if (dims.size() > 2)
        fail(where, "tgrad tapes values of up to two dimensions; '" + tape.value + "' has " + std::to_string(dims.size()));
      tape.tile_shape = factors;
      v.numel = dims.empty() ? "1" : dims.size() == 1 ? dims[0] : dims[0] + " * " + dims[1];
      const std::string row_length = dims.size() == 2 && dims[1].find('*') != std::string::npos ? "(" + dims[1] + ")"
                                     : dims.size() == 2                                          ? dims[1]
                                                                                                 : "";
      v.offsets = dims.empty()      ? "0"
                  : dims.size() == 1 ? "tl.arange(0, " + dims[0] + ")"
                                     : "tl.arange(0, " + dims[0] + ")[:, None] * " + row_length + " + tl.arange(0, " +
                                           dims[1] + ")[None, :]";
      if (integer) {
        using sema::DType;
        const DType e = t->elem.dtype;
        const DType stored = e == DType::Int1                            ? DType::Int8
                             : e == DType::Int64 || e == DType::UInt64 ? DType::Int64
                                                                        : DType::Int32;
        tape.dtype = stored;
        v.integer = true;
        if (e != stored) v.cast = std::string(".to(") + sema::tl_name(e) + ")";
      } else if (t->elem.dtype != sema::DType::FP32) {
        v.cast = std::string(".to(") + sema::tl_name(t->elem.dtype) + ")";
      }
      tape.loop_line = where.begin.line;
      tape.loop_column = where.begin.column;
      auto *user_for = origin ? dyn_cast<For>(origin) : nullptr;
      tape.loop_range = emit::print_expr(user_for ? *user_for->iter : *f.iter);
      explanations.push_back(carried_prefix + tape.value + "' is taped to '" + v.scratch +
                             "' (tgrad inverts only updates c * s + t whose s is an exponential; others lose the "
                             "incoming value)");
      L.values.push_back(v);
      tapes_.push_back(tape);
    }
    L.trips_param = names_.fresh("tape_trips");
    for (size_t k = tapes_.size() - L.values.size(); k < tapes_.size(); ++k) tapes_[k].trips_param = L.trips_param;
    L.row = names_.fresh("tape_row");
    L.trips = names_.fresh("trips");
    L.forward_index = names_.fresh("iteration");
    L.reverse_index = names_.fresh("iteration");
    L.rev = names_.fresh("reversed");

    begin_block(origin);
    prepare_outer_adjoints(f.body);
    for (const std::string &c : copies_of) {
      own_adjoint_variable(c);
      if (const Assign *copy = top_level_assignment(f.body, c)) taped_update_copy_[copy] = c;
    }

    StmtList adjoint = sweep_nested(f.body, access, explanations);

    // The reversed loop: the iteration's incoming values from the tape, its
    // primal values, its adjoints.
    const std::string var = emit::print_expr(*f.target);
    if (!L.values.empty()) {
      StmtList barrier = parse_statements("tl.debug_barrier()");
      barrier[0]->leading_comment = "The forward replay above wrote this program's tapes; the reversed loop reads them.";
      emit_stmt(std::move(barrier[0]));
    }
    std::string head = L.reverse_index + " = " + L.trips + " - 1 - " + L.rev + "\n" + var + " = " + L.start + " + " +
                       L.reverse_index + " * " + L.step + "\n";
    for (const TapedValue &v : L.values)
      head += v.carried + " = tl.load(" + tape_address(L, v, L.reverse_index) + ", mask=" + L.reverse_index + " < " +
              L.trips_param + ", other=" + (v.integer ? "0" : "float('nan')") + ")" + v.cast + "\n";
    // An induction variable from the iteration number; a pointer's gradient mirror steps with it.
    for (const auto &[c, step] : inductions) {
      head += c.name + " = " + c.init + " + " + L.reverse_index + " * (" + step + ")\n";
      auto dual = dual_name_.find(c.name), dual_init = dual_name_.find(c.init);
      if (dual != dual_name_.end() && dual_init == dual_name_.end())
        fail(where, "internal error: the gradient pointer of the loop's carried '" + user_name(c.name) +
                        "' has no value at the loop's entry (please report)");
      if (dual != dual_name_.end())
        head += dual->second + " = " + dual_init->second + " + " + L.reverse_index + " * (" + step + ")\n";
    }
    // An inverted value holds the iteration's outgoing value when it starts
    // (the forward replay's final value in the last iteration).
    for (const auto &[c, u] : inverted)
      if (!u.unneeded) head += u.updated + " = " + c + "\n";
    StmtList body = parse_statements(head);
    body[0]->leading_comment =
        L.values.empty() ? std::string(kReversalComment) : taped_reversal_comment(L.trips_param);
    std::set<std::string> skipped;  // the carried copies, and the inverted updates (their results are known)
    for (const LoopCarried &c : anf_.carried.at(&f)) skipped.insert(c.name);
    for (const auto &[c, u] : inverted) skipped.insert({u.scaled, u.updated});
    for (const StmtPtr &s : f.body)
      if (!skipped.count(assigned_name(*s))) replay_stmt(*s, body);
    if (std::any_of(inverted.begin(), inverted.end(), [](const auto &i) { return !i.second.unneeded; })) {
      std::string code;
      for (const auto &[c, u] : inverted) {
        if (u.unneeded) continue;
        const SType *t = type_of_name(c);
        std::string cast = t && t->elem.dtype != sema::DType::FP32
                               ? std::string(".to(") + sema::tl_name(t->elem.dtype) + ")"
                               : std::string();
        code += inversion_code(u, names_.fresh(user_name(c) + "_quotient"), cast);
      }
      StmtList recover = parse_statements(code);
      recover[0]->leading_comment =
          "The incoming values, recovered by inverting the forward's updates; 0 where the exponential scale is 0 or "
          "subnormal (or the quotient overflows): there the incoming value does not reach the result.";
      for (StmtPtr &s : recover) body.push_back(std::move(s));
    }
    for (StmtPtr &s : adjoint) body.push_back(std::move(s));
    ExprList bounds;
    bounds.push_back(int_lit(0));
    bounds.push_back(name(L.trips));
    emit_stmt(std::make_unique<For>(name(L.rev), call("range", std::move(bounds)), std::move(body), f.span));
    // A later replay of this loop (in an outer loop) must not overwrite the tapes while they are read.
    if (!L.values.empty()) emit_stmt(std::move(parse_statements("tl.debug_barrier()")[0]));
    taped_loops_[&f] = std::move(L);
  }

  // The forward replay of a taped loop: before each iteration, its incoming
  // values go to the tapes.
  void replay_taped_loop(const For &f, const TapedLoop &L, StmtList &dst) {
    // Without tapes (every carried value inverted) only the trip count is needed.
    const bool taped = !L.values.empty();
    std::string head = taped ? L.row + " = tl.program_id(0).to(tl.int64) + tl.num_programs(0) * (tl.program_id(1) + "
                                       "tl.num_programs(1) * tl.program_id(2))\n"
                             : std::string();
    if (L.negative_step)
      head += L.trips + " = (" + L.start + " - " + L.stop + " - (" + L.step + ") - 1) // (-(" + L.step + "))\n";
    else
      head += L.trips + " = (" + L.stop + " - " + L.start + " + " + L.step + " - 1) // " + L.step + "\n";
    if (L.assert_step) head += "tl.static_assert(" + L.step + " > 0)\n";
    for (const std::string &f : L.positive_factors) head += "tl.static_assert(" + f + " > 0)\n";
    StmtList pre = parse_statements(head);
    pre[0]->leading_comment = taped ? kTapeRowComment : kTripCountComment;
    for (StmtPtr &s : pre) dst.push_back(std::move(s));
    StmtList body;
    if (taped) {
      std::string var = emit::print_expr(*f.target);
      std::string text = L.forward_index + " = (" + var + " - " + L.start + ") // " + L.step + "\n";
      for (const TapedValue &v : L.values)
        text += "tl.store(" + tape_address(L, v, L.forward_index) + ", " + v.carried + ", mask=" + L.forward_index +
                " < " + L.trips_param + ")\n";
      body = parse_statements(text);
      body[0]->leading_comment = "The iteration's incoming values, for the reversed loop.";
    }
    replay_block(f.body, body);
    dst.push_back(std::make_unique<For>(clone(*f.target), clone(*f.iter), std::move(body), f.span));
  }

  // The adjoint statements of a loop body or an if branch, swept into a
  // list of their own (with their own "Grad of" blocks) for the caller to
  // place.
  StmtList sweep_nested(const StmtList &block, const AccessAnalysis &access, std::vector<std::string> &explanations) {
    StmtList adjoint;
    StmtList *outer = out_;
    const Stmt *saved_block = current_block_;
    out_ = &adjoint;
    current_block_ = nullptr;
    sweep_block(block, access, explanations);
    out_ = outer;
    current_block_ = saved_block;
    return adjoint;
  }

  // A runtime if: the condition is recomputed by the replay; each branch of
  // the backward replays its branch's primal values, then its adjoints.
  void sweep_if(const If &i, const AccessAnalysis &access, std::vector<std::string> &explanations) {
    begin_block(anf_.origin_of(&i));
    prepare_outer_adjoints(i.body);
    prepare_outer_adjoints(i.orelse);
    auto node = std::make_unique<If>(clone(*i.cond), StmtList{}, StmtList{}, i.span);
    node->guards_early_return = i.guards_early_return;
    for (auto [from, to] : {std::pair<const StmtList *, StmtList *>{&i.body, &node->body}, {&i.orelse, &node->orelse}}) {
      StmtList adjoint = sweep_nested(*from, access, explanations);
      replay_block(*from, *to);
      for (StmtPtr &s : adjoint) to->push_back(std::move(s));
    }
    if (node->body.empty() && node->orelse.empty()) return;
    if (node->body.empty()) node->body.push_back(std::make_unique<Pass>());
    emit_stmt(std::move(node));
  }

  // The primal statements of a block, stores removed, each pointer's mirror
  // right after the pointer.
  void replay_block(const StmtList &src, StmtList &dst) {
    for (const StmtPtr &s : src) replay_stmt(*s, dst);
  }
  void replay_stmt(const Stmt &s, StmtList &dst) {
    if (isa<Return>(&s)) return;
    if (const MemoryOp *m = memory_op(&s); m && m->store) return;
    if (auto *f = dyn_cast<For>(&s)) {
      if (auto t = taped_loops_.find(f); t != taped_loops_.end()) {
        replay_taped_loop(*f, t->second, dst);
        return;
      }
      auto loop = std::make_unique<For>(clone(*f->target), clone(*f->iter), StmtList{}, f->span);
      replay_block(f->body, loop->body);
      dst.push_back(std::move(loop));
      return;
    }
    if (auto *i = dyn_cast<If>(&s)) {
      auto node = std::make_unique<If>(clone(*i->cond), StmtList{}, StmtList{}, i->span);
      node->guards_early_return = i->guards_early_return;
      replay_block(i->body, node->body);
      replay_block(i->orelse, node->orelse);
      if (node->body.empty()) node->body.push_back(std::make_unique<Pass>());
      dst.push_back(std::move(node));
      return;
    }
    if (auto it = saved_.find(assigned_name(s)); it != saved_.end()) {
      // Saved by the forward (find_saved_values): loaded, not computed again.
      StmtPtr load = assign(it->first, call("tl.load", list(name(it->second))), s.span);
      load->leading_comment = "Saved by the forward: read, not computed again.";
      if (auto d = saved_dtype_.find(it->first); d != saved_dtype_.end()) {
        // (The cast is a no-op where the assertion holds; it keeps the
        // value's type whatever representative the pointer had.)
        auto *a = cast<Assign>(load.get());
        a->value = cast_to(std::move(a->value), dotted_name(std::string("tl.") + d->second));
        // The value is read back exactly only from a buffer of its own dtype.
        const std::string base = saved_base_.at(it->first);
        ExprPtr same = equals(std::make_unique<Attribute>(std::make_unique<Attribute>(name(base), "dtype"), "element_ty"),
                              dotted_name(std::string("tl.") + d->second));
        std::string why = "tgrad: the backward reads '" + it->first + "' back from " + base + ", which must be a " +
                          d->second + " buffer (or give --arg " + base + "=*DTYPE)";
        StmtPtr check = std::make_unique<ExprStmt>(
            call("tl.static_assert", list(std::move(same), std::make_unique<StrLit>(why, ""))));
        check->leading_comment = load->leading_comment;
        load->leading_comment.clear();
        dst.push_back(std::move(check));
      }
      dst.push_back(std::move(load));
      return;
    }
    dst.push_back(clone(s));
    auto d = dual_defs_.find(&s);
    if (d != dual_defs_.end()) dst.push_back(clone(*d->second));
  }

  // A broadcast load outside loops and ifs: its gradient is summed in a
  // register tile carried by the loop over the forward's programs, and
  // stored once, in the last iteration. False if the tile's shape cannot be
  // written (a symbolic dimension that is not a name).
  bool register_partial(const MemoryOp &op, const std::string &bx) {
    const SType *t = type_of_name(op.value);
    if (!t || !t->is_tensor()) return false;
    ExprList dims;
    for (const sema::Dim &dim : t->shape) {
      if (dim.value) dims.push_back(int_lit(*dim.value));
      else if (!dim.symbol.empty() && dim.symbol.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos)
        dims.push_back(name(dim.symbol));
      else
        return false;
    }
    // Sum in float32: take the gradient before its cast to the load's dtype.
    ExprPtr grad = name(bx);
    for (size_t k = out_->size(); k-- > 0;) {
      auto *a = dyn_cast<Assign>((*out_)[k].get());
      if (!a || assigned_name(*a) != bx) continue;
      auto *c = dyn_cast<Call>(a->value.get());
      auto *attr = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
      if (attr && attr->attr == "to" && isa<Name>(attr->value.get())) {
        const SType *from = nullptr;  // the receiver is an adjoint: its primal's type
        for (const auto &[primal, adjoint] : adjoint_)
          if (adjoint == cast<Name>(attr->value.get())->id) from = type_of_name(primal);
        if (from && from->is_tensor() && from->elem.dtype == sema::DType::FP32) grad = clone(*attr->value);
      }
      break;
    }
    if (cast<Name>(grad.get())->id == bx) grad = call("tl.cast", list(std::move(grad), dotted_name("tl.float32")));
    std::string acc = names_.fresh(gradient_buffer_.at(op.base) + "_sum");
    StmtPtr add = std::make_unique<AugAssign>(name(acc), BinaryOpKind::Add, std::move(grad));
    add->leading_comment = "partial sum in registers: every program loads these addresses of '" + op.base + "'";
    emit_stmt(std::move(add));
    std::vector<Keyword> init_kws;
    init_kws.push_back({"dtype", {}, dotted_name("tl.float32")});
    register_partials_.push_back({acc, call("tl.zeros", list(std::make_unique<List>(std::move(dims))), std::move(init_kws)),
                                  emit::print_expr(*dual(op.pointer)), op.mask});
    return true;
  }

  // The gradient pointer that mirrors `pointer`: the same offsets from
  // d<base>. Every definition of the pointer (a loop-carried pointer has two)
  // gets a mirror definition, emitted after it by the replay.
  ExprPtr dual(const std::string &pointer) {
    auto it = dual_name_.find(pointer);
    if (it != dual_name_.end()) return name(it->second);
    auto row = partial_row_.find(pointer);
    if (row != partial_row_.end()) return name(row->second);
    for (const Param &p : anf_.fn->params)
      if (p.name == pointer) return name(gradient_buffer_.at(pointer));
    auto defs = defs_of_.find(pointer);
    if (defs == defs_of_.end()) fail({}, "internal error: no definition of the pointer '" + pointer + "'");
    std::string d = names_.fresh("d" + pointer);
    dual_name_[pointer] = d;
    for (const Assign *a : defs->second) {
      ExprPtr value = clone(*a->value);
      mirror_pointers(value);
      dual_defs_[a] = assign(d, std::move(value));
    }
    return name(d);
  }
  // Replaces every pointer-typed name in `e` by its mirror.
  void mirror_pointers(ExprPtr &e) {
    if (auto *n = dyn_cast<Name>(e.get())) {
      const SType *t = type_of_name(n->id);
      if (t && t->is_tensor() && t->elem.is_pointer) e = dual(n->id);
      return;
    }
    if (auto *b = dyn_cast<BinOp>(e.get())) {
      mirror_pointers(b->lhs);
      mirror_pointers(b->rhs);
    } else if (auto *c = dyn_cast<Call>(e.get())) {
      if (auto *attr = dyn_cast<Attribute>(c->func.get())) mirror_pointers(attr->value);
      for (ExprPtr &a : c->args) mirror_pointers(a);
      for (Keyword &k : c->keywords) mirror_pointers(k.value);
    } else if (auto *s = dyn_cast<Subscript>(e.get())) {
      mirror_pointers(s->value);
    } else if (auto *u = dyn_cast<UnaryOp>(e.get())) {
      mirror_pointers(u->operand);
    } else if (auto *w = dyn_cast<Tuple>(e.get())) {
      for (ExprPtr &x : w->elts) mirror_pointers(x);
    }
  }

  // A load through a pointer the kernel also stores to (an in-place update,
  // `x = tl.load(X + o)` ... `tl.store(X + o, f(x))`). The forward is then a
  // function from X's contents before to X's contents after, where the
  // elements no store writes pass through. It is differentiable by the
  // values alone when every load reads contents from before any store:
  // each load comes before each store in the program, and no loop runs a
  // store before a later iteration's load, unless every iteration touches
  // blocks of its own (the same offsets, moving with the loop). The
  // backward then keeps one gradient buffer for X: it holds the upstream
  // gradient of X after, each store's adjoint consumes its addresses (the
  // pass-through elements keep theirs), and each load's adjoint adds to it.
  // (Other programs' stores are not ordered with this program's loads: the
  // forward itself is only well defined when programs update elements of
  // their own.)
  // (A pointer outside --wrt whose loaded value is active only through
  // `other` needs the same order, but no gradient of its own: it stays an
  // output.)
  void check_in_place(const MemoryOp &load, const std::vector<const MemoryOp *> &stores, const AccessAnalysis &access,
                      bool differentiated) {
    auto refuse = [&](const MemoryOp &store, const std::string &why) {
      fail(load.call->span, "'" + load.base + "' is both loaded and stored by this kernel, and " + why + " (line " +
                                std::to_string(store.call->span.begin.line) +
                                "): the values loaded are not all the contents from before the kernel, so the gradient "
                                "is not defined by them; write the result to another buffer");
    };
    for (const MemoryOp *store : stores) {
      if (!store->atomic.empty())
        fail(load.call->span, "'" + load.base + "' is both loaded and updated atomically by this kernel; an atomic "
                              "update of a buffer with a gradient is differentiated only when the kernel does not load it");
      if (exclusive(*store, load)) continue;
      if (std::less<const MemoryOp *>()(store, &load))  // memory_ is in program order
        refuse(*store, "this load comes after a store through it");
      // Loops around both: a later iteration's load follows this iteration's store.
      size_t shared = 0;
      while (shared < load.loops.size() && shared < store->loops.size() && load.loops[shared] == store->loops[shared])
        ++shared;
      if (shared == 0) continue;
      AccessDecision l = access.classify(load.pointer, load.mask), st = access.classify(store->pointer, store->mask);
      const bool same_blocks = l.walks_loop && st.walks_loop && l.offset_key == st.offset_key;
      auto *var = dyn_cast<Name>(load.loops[0]->target.get());
      if (shared > 1 || !(same_blocks || (var && access.iterations_touch_their_own(load.pointer, store->pointer, var->id))))
        refuse(*store, "a loop around both runs the store before a later iteration's load, at addresses not proven "
                       "to be the iteration's own");
    }
    for (const auto &[value, base] : saved_base_)
      if (base == load.base)  // the backward would read it back as the forward left it, not as it was before
        fail(load.call->span, "'" + load.base + "' is both loaded and given the per-program value '" + value +
                                  "' by this kernel; tgrad differentiates such an in-place update only where the value "
                                  "goes to another buffer");
    if (!differentiated) return;
    if (!in_place_.insert(load.base).second) return;
    // One buffer holds both gradients: additions only, never a plain store
    // over the pass-through part, and never a partial sum written at the end.
    partial_bases_.erase(load.base);
    consumed_[load.base] = "'" + load.base + "' is updated in place";
  }

  // The adjoint of a store to an output the forward may write more than once
  // at an address (consumed_): the upstream gradient at its addresses
  // belongs to this store if no later one overwrote them, and the later
  // ones' adjoints ran first and left zeros where they did. This one takes
  // what is there and leaves zeros for the earlier stores. Where programs
  // may share the addresses, one atomic exchange per element lets exactly
  // one of them take it. A store of a value without gradient takes nothing
  // but still leaves zeros.
  void consume_upstream(const MemoryOp &op) {
    begin_block(anf_.origin_of(op.stmt));
    const bool takes = useful_.count(op.value) > 0;
    auto kws = [&] {
      std::vector<Keyword> k;
      if (!op.mask.empty()) k.push_back({"mask", {}, name(op.mask)});
      return k;
    };
    auto zero = [] { return std::make_unique<FloatLit>(0.0, "0.0"); };
    ExprPtr taken;
    std::string comment;
    const bool atomically = consume_atomically_.count(&op) > 0;
    if (atomically) {
      comment = "Taken by one program (an atomic exchange leaves 0.0): the forward's programs all store here";
      taken = call("tl.atomic_xchg", list(dual(op.pointer), zero()), kws());
    } else {
      comment = "Taken, and 0.0 left for the values this store overwrote";
      std::vector<Keyword> load_kws = kws();
      if (!op.mask.empty()) load_kws.push_back({"other", {}, zero()});
      taken = call("tl.load", list(dual(op.pointer)), std::move(load_kws));
    }
    // The buffer is a float32 copy of the upstream gradient; the adjoint
    // takes the stored value's type where the backward is typed.
    const SType *vt = takes ? type_of_name(op.value) : nullptr;
    if (takes && !generic() && vt && is_float_tensor(vt) && vt->elem.dtype != sema::DType::FP32)
      taken = cast_to(std::move(taken), dotted_name(sema::tl_name(vt->elem.dtype)));
    std::string g;
    if (takes) {
      g = names_.fresh("b" + op.value);
      StmtPtr st = assign(g, std::move(taken));
      st->leading_comment = comment;
      emit_stmt(std::move(st));
    } else if (atomically) {  // (a plain load of nothing is not emitted: only the zeros below)
      StmtPtr st = std::make_unique<ExprStmt>(std::move(taken));
      st->leading_comment = comment;
      emit_stmt(std::move(st));
    }
    if (!atomically) {
      StmtPtr clear = std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), zero()), kws()));
      if (!takes) clear->leading_comment = "0.0 left for the values this store overwrote";
      emit_stmt(std::move(clear));
      // Another thread of this program may read these addresses next.
      emit_stmt(std::make_unique<ExprStmt>(call("tl.debug_barrier", {})));
    }
    if (takes) contribute(op.value, name(g), "store", op.pointer, op.call->span);
  }

  void load_adjoint(const MemoryOp &op, const AccessAnalysis &access, std::vector<std::string> &explanations) {
    const std::string &bx = adjoint_.at(op.value);
    int line = op.call->span.begin.line;
    if (!op.other.empty() && is_active(op.other)) {
      // Masked-off lanes took `other`: they carry its gradient. Selects, never multiplies.
      contribute(op.other, call("tl.where", [&] {
                   ExprList l;
                   l.push_back(name(op.mask));
                   l.push_back(std::make_unique<FloatLit>(0.0, "0.0"));
                   l.push_back(name(bx));
                   return l;
                 }()),
                 "where", op.value, op.call->span);
    }
    if (!gradient_buffer_.count(op.base)) return;  // `other` only
    AccessDecision d = access.classify(op.pointer, op.mask);
    // Loads of one pointer parameter share one gradient buffer: if any of
    // them may meet another program's addresses, all of them add atomically.
    if (d.kind == AccessDecision::Kind::Broadcast && !partial_bases_.count(op.base)) {
      d.kind = AccessDecision::Kind::Shared;
      d.reason += " (and the programs differ by more than tl.program_id(0), so the backward cannot loop over them)";
    }
    if (shared_bases_.count(op.base) && d.kind != AccessDecision::Kind::Shared) {
      d.kind = AccessDecision::Kind::Shared;
      d.reason = shared_bases_.at(op.base);
    }
    auto kws = [&] {
      std::vector<Keyword> k;
      if (!op.mask.empty()) k.push_back({"mask", {}, name(op.mask)});
      return k;
    };
    auto add_in_place = [&](const std::string &comment) {
      StmtPtr barrier = std::make_unique<ExprStmt>(call("tl.debug_barrier", {}));
      barrier->leading_comment = comment + " (after a barrier: every thread sees the earlier writes)";
      emit_stmt(std::move(barrier));
      std::vector<Keyword> load_kws = kws();
      if (!op.mask.empty()) load_kws.push_back({"other", {}, std::make_unique<FloatLit>(0.0, "0.0")});
      ExprPtr sum = std::make_unique<BinOp>(BinaryOpKind::Add, call("tl.load", list(dual(op.pointer)), std::move(load_kws)),
                                            name(bx));
      emit_stmt(std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), std::move(sum)), kws())));
    };
    std::string what;
    // (One register tile per load, stored at the end: only for the one load of its buffer, or the stores would overlap.)
    if (d.kind == AccessDecision::Kind::Broadcast && op.loop_depth() == 0 && !op.in_branch && loads_per_base_[op.base] == 1 &&
        register_partial(op, bx)) {
      explanations.push_back("line " + std::to_string(line) + ": the gradient of the load through '" + op.base +
                             "' is summed in registers over this program's share of the forward's programs, stored to "
                             "its row of a partial-sum buffer, and a reduction kernel sums the rows (deterministic, "
                             "no atomics): " + d.reason);
      return;
    }
    if (d.kind == AccessDecision::Kind::Broadcast) {
      add_in_place("partial sum: every program loads these addresses of '" + op.base + "'");
      explanations.push_back("line " + std::to_string(line) + ": the gradient of the load through '" + op.base +
                             "' is added to this program's row of a partial-sum buffer, which a reduction kernel sums "
                             "(deterministic, no atomics): " + d.reason);
      return;
    }
    if (d.kind == AccessDecision::Kind::Shared) {
      needs_zeros_.insert(op.base);
      what = "tl.atomic_add";
      // Relaxed: the additions commute and nothing in this kernel reads the
      // sums, so they need no ordering (the default, acq_rel, fences every
      // addition: 2 to 2.5x slower for flash attention's dK and dV on an H100).
      std::vector<Keyword> atomic_kws = kws();
      atomic_kws.push_back({"sem", {}, std::make_unique<StrLit>("relaxed", "")});
      StmtPtr st = std::make_unique<ExprStmt>(call("tl.atomic_add", list(dual(op.pointer), name(bx)), std::move(atomic_kws)));
      st->leading_comment = "atomic: " + d.reason;
      emit_stmt(std::move(st));
    } else {
      std::string assuming;
      if (d.kind == AccessDecision::Kind::InjectiveAssuming) {
        assuming = ", assuming " + emit::print_expr(*d.assumption);
        emit_stmt(std::make_unique<ExprStmt>(call("tl.device_assert",
                                                  list(std::move(d.assumption), std::make_unique<StrLit>(d.assumption_message, "")))));
      }
      // Several loads of one buffer (all at the same offsets, or they would
      // be shared): the first gradient written is a plain store, later ones
      // add to it in place, after a barrier so that every thread of the
      // program sees the earlier writes. The first may be a plain store only
      // if it writes every address the later ones add to (the same mask),
      // and writes each address once: outside loops, or in a loop whose
      // iterations read blocks of their own. Otherwise the buffer starts at
      // zero and every gradient adds to it. A plain store in a runtime `if`
      // writes nothing when the branch is not taken: that buffer starts at
      // zero too.
      int &written = contributions_[op.base];
      const bool once = op.loop_depth() == 0 || (op.loop_depth() == 1 && d.walks_loop);
      // Updated in place: the buffer holds the gradient of what passes through, to add to.
      const bool in_place = in_place_.count(op.base) > 0;
      bool plain = !in_place && written == 0 && once && (loads_per_base_[op.base] == 1 || mask_keys_[op.base].size() == 1);
      ++written;
      if (plain && op.in_branch) needs_zeros_.insert(op.base);
      if (plain) {
        what = "plain store" + assuming;
        emit_stmt(std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), name(bx)), kws())));
      } else {
        what = "store adding to the earlier gradients of this buffer" + assuming;
        if (written == 1) needs_zeros_.insert(op.base);  // no plain store before it
        add_in_place(in_place ? "'" + op.base + "' is updated in place: this gradient adds to that of what passes through"
                     : loads_per_base_[op.base] == 1
                         ? "every iteration of the loop loads these addresses: this gradient adds to the earlier ones"
                         : "'" + op.base + "' is loaded " + std::to_string(loads_per_base_[op.base]) +
                               " times: this gradient adds to the others");
      }
    }
    explanations.push_back("line " + std::to_string(line) + ": the gradient of the load through '" + op.base + "' is a " +
                           what + ": " + d.reason);
  }

  // The user's module plus the libdevice import: where the backward's names
  // resolve during its check.
  std::unique_ptr<Module> checking_module() const {
    auto m = std::make_unique<Module>();
    m->imports = module_.imports;
    add_libdevice_import(*m);
    for (const Constant &c : module_.constants) m->constants.push_back({c.name, c.span, clone(*c.stmt)});
    for (const auto &f : module_.functions) m->functions.push_back(clone(*f));
    for (const auto &f : extra_functions_)
      if (f) m->functions.push_back(clone(*f));  // (finish() moves them into the backward's module)
    return m;
  }


  static void add_libdevice_import(Module &m) {
    Import lib;
    lib.is_from = true;
    lib.module = "triton.language.extra";
    lib.names = {{"libdevice", ""}};
    m.imports.push_back(lib);
  }

  // triton and tl, then each user import that binds a name the emitted
  // functions read (libdevice, math, ...), then libdevice if a rule needs it.
  void add_imports(Module &m, const std::set<std::string> &read) {
    Import triton;
    triton.names = {{"triton", ""}};
    Import tl;
    tl.names = {{"triton.language", "tl"}};
    m.imports.push_back(triton);
    m.imports.push_back(tl);
    std::set<std::string> bound = {"triton", "tl"};
    // The binding of each name read that sema used (resolve_import), as the
    // user wrote it; an alternative from an if/try block stands alone. A
    // `NAME = a.b.c` needs the binding of `a` before it.
    std::function<void(const std::string &)> bind = [&](const std::string &name) {
      if (bound.count(name) || module_.find_function(name)) return;  // a helper: emitted in the file
      sema::ImportedName used = sema::resolve_import(module_, name);
      if (!used.statement) return;
      bound.insert(name);
      Import one = *used.statement;
      if (one.assignment) bind(one.module.substr(0, one.module.find('.')));
      one.names = {used.statement->names[used.entry]};
      one.conditional = false;
      one.followed = false;  // the backward file stands alone: it prints every import it needs
      m.imports.push_back(one);
    };
    for (const Import &imp : module_.imports)
      for (size_t k = 0; k < imp.names.size(); ++k)
        if (read.count(ast::bound_name(imp, k))) bind(ast::bound_name(imp, k));
    if (uses_libdevice_ && !bound.count("libdevice")) add_libdevice_import(m);
  }

  // The user's jit functions the backward calls (the primal replay may).
  void add_called_functions(const Function &bwd, Module &out) {
    std::set<std::string> names;
    block_reads(bwd.body, names);  // inside loops and ifs too
    std::set<const Function *> seen;
    std::function<void(const Function &)> visit = [&](const Function &f) {
      std::set<std::string> inner;
      block_reads(f.body, inner);
      for (const std::string &n : inner)
        if (const Function *g = module_.find_function(n); g && !seen.count(g)) {
          seen.insert(g);
          visit(*g);
        }
    };
    for (const std::string &n : names)
      if (const Function *g = module_.find_function(n); g && !seen.count(g)) {
        seen.insert(g);
        visit(*g);
      }
    for (const auto &f : module_.functions)
      if (seen.count(f.get())) out.functions.push_back(clone(*f));
  }

  void cast_results(Function &bwd, const sema::TypeInfo &info) {
    auto *ret = cast<Return>(bwd.body.back().get());
    ExprList *elts = nullptr;
    ExprList single;
    if (auto *t = dyn_cast<Tuple>(ret->value.get())) elts = &t->elts;
    auto fix = [&](ExprPtr &e, const std::string &param) {
      const SType *have = info.type_of(e.get());
      const SType *want = type_of_name(param);
      if (have && want && have->is_tensor() && want->is_tensor() &&
          (have->elem.dtype != want->elem.dtype || request_.generic_params.count(param))) {
        ExprPtr recv = std::move(e);
        e = cast_to(std::move(recv), std::make_unique<Attribute>(name(param), "dtype"));
      }
    };
    if (elts) {
      for (size_t k = 0; k < elts->size(); ++k) fix((*elts)[k], request_.wrt[k]);
    } else {
      fix(ret->value, request_.wrt[0]);
    }
  }

  std::string header() const {
    std::string h = "# Generated by tgrad " + std::string(kVersion) + ": the backward of '" + fn_->name + "'.\n";
    if (!request_.command_line.empty()) h += "#   " + request_.command_line + "\n";
    h += "# Regenerate it with that command rather than editing it.\n";
    return h;
  }

  SourceSpan param_span(const std::string &p) const {
    for (const Param &q : fn_->params)
      if (q.name == p) return q.span;
    return fn_->name_span;
  }

  // ------------------------------------------------------------- the sweep

  void begin_block(const Stmt *origin) {
    if (origin == current_block_) return;
    current_block_ = origin;
    pending_comment_ = origin ? "Grad of: " + first_line(*origin) : "";
  }

  static std::string first_line(const Stmt &s) {
    std::string text = emit::print_stmts([&] {
      StmtList l;
      l.push_back(clone(s));
      return l;
    }());
    size_t nl = text.find('\n');
    return nl == std::string::npos ? text : text.substr(0, nl);
  }

  void emit_stmt(StmtPtr s) {
    if (!pending_comment_.empty()) {
      s->leading_comment = s->leading_comment.empty() ? pending_comment_ : pending_comment_ + "\n" + s->leading_comment;
      pending_comment_.clear();
    }
    out_->push_back(std::move(s));
  }

  void differentiate_stmt(const std::string &target, const Expr &value, const std::set<std::string> &active) {
    Op op = classify(value);
    bool any_active_operand = false;
    for (const Expr *a : op.args) {
      if (auto *n = as_name(*a)) any_active_operand |= active.count(n->id) > 0;
      if (auto *t = dyn_cast<Tuple>(a))  // a scan's inputs
        for (const ExprPtr &e : t->elts)
          if (auto *n = as_name(*e)) any_active_operand |= active.count(n->id) > 0;
    }
    for (const Keyword *k : op.kws)
      if (auto *n = as_name(*k->value)) any_active_operand |= active.count(n->id) > 0;
    if (!any_active_operand || zero_gradient(op.key)) return;
    // No gradient reached the target (its only uses have a zero gradient,
    // like floor's): nothing flows back.
    auto reached = adjoint_.find(target);
    if (reached == adjoint_.end()) return;
    const std::string &bt = reached->second;

    if (op.key == "copy") {
      contribute(as_name(*op.args[0])->id, name(bt), op.key, target, value.span);
      return;
    }
    if (op.key == "tuple element") {
      // y = t[k]: y's adjoint is element k of t's (a tuple of adjoints).
      tuple_adjoint_[as_name(*op.args[0])->id][static_int(*op.args[1])] = bt;
      adjoint_.emplace(as_name(*op.args[0])->id, "");  // t is reached
      return;
    }
    if (op.key == "jit call") return differentiate_call(op, target, value, active);
    if (op.key == "associative_scan") return differentiate_scan(op, target, value);
    if ((op.key == "trans" || op.key == "permute") && op.args.size() > 1) {
      // Explicit dims: the adjoint applies the inverse permutation.
      std::vector<int64_t> order;
      for (size_t k = 1; k < op.args.size(); ++k) {
        const Expr *d = op.args[k];
        if (auto *t = dyn_cast<Tuple>(d)) {
          for (const ExprPtr &x : t->elts) order.push_back(static_int(*x));
        } else if (auto *l = dyn_cast<List>(d)) {
          for (const ExprPtr &x : l->elts) order.push_back(static_int(*x));
        } else {
          order.push_back(static_int(*d));
        }
      }
      std::vector<int64_t> inverse(order.size());
      for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
      ExprList dims;
      for (int64_t d : inverse) dims.push_back(int_lit(d));
      contribute(as_name(*op.args[0])->id, call("tl.permute", list(name(bt), std::make_unique<Tuple>(std::move(dims)))),
                 op.key, target, value.span);
      return;
    }
    if (op.key == "cast")
      for (const Keyword *k : op.kws)
        if (k->name == "bitcast" && !(isa<BoolLit>(k->value.get()) && !cast<BoolLit>(k->value.get())->value))
          fail(value.span, "a bitcast is not differentiable: it reinterprets bits, it does not convert values");

    const Function *rule = find_rule(op.key);
    if (!rule) {
      std::string supported;
      for (const std::string &r : rule_names()) supported += (supported.empty() ? "" : ", ") + r;
      fail(value.span, "tgrad has no adjoint rule for '" + op.key + "'; supported operations: " + supported +
                           " (and the non-differentiable ones: comparisons, integer operations, floor, ceil, argmax, "
                           "argmin, arange, program_id)");
    }
    instantiate(*rule, op, target, value);
  }

  // Adds a helper's backward (and the helpers it calls) to the emitted
  // functions; returns the name it is called by.
  std::string add_callee_backward(Backward &b) {
    // A generic helper's backward does not depend on the types of the call
    // (its casts are kept): one already emitted for another signature that
    // is the same function serves this call too.
    if (const Function *made = b.module->find_function(b.backward_name); made && generic()) {
      std::unique_ptr<Function> renamed = clone(*made);  // compared under each emitted function's name
      for (const auto &e : extra_functions_) {
        renamed->name = e->name;
        if (equal(*renamed, *e)) return e->name;
      }
    }
    // Another specialisation of g already took the name: rename this one.
    NameAllocator taken;
    for (const auto &f : extra_functions_) taken.reserve(f->name);
    for (const auto &f : module_.functions) taken.reserve(f->name);
    const std::string unique = taken.fresh(b.backward_name);
    for (auto &f : b.module->functions) {
      if (f->name == b.backward_name) f->name = unique;
      bool dup = false;
      for (const auto &e : extra_functions_) dup |= e->name == f->name;
      if (!dup && f->name != fn_->name) extra_functions_.push_back(std::move(f));
    }
    return unique;
  }

  // y = g(a, b): differentiate g once per signature (g_bwd, emitted with the
  // backward) and take its adjoints: ba, bb = g_bwd(a, b, by).
  void differentiate_call(const Op &op, const std::string &target, const Expr &value, const std::set<std::string> &active) {
    const Function &g = *op.callee;
    std::map<std::string, const Expr *> arg_of;
    for (size_t k = 0; k < op.args.size() && k < g.params.size(); ++k) arg_of[g.params[k].name] = op.args[k];
    for (const Keyword *kw : op.kws) arg_of[kw->name] = kw->value.get();
    BackwardRequest sub;
    sub.function = g.name;
    std::string key = g.name + "(";
    std::vector<std::string> active_args;  // the caller's names, in g's wrt order
    for (const Param &p : g.params) {
      auto it = arg_of.find(p.name);
      if (it == arg_of.end()) continue;
      const Expr &arg = *it->second;
      // A name's recorded type, else the expression's (a tl.constexpr without a value: its symbol).
      const SType *t = isa<Name>(&arg) ? type_of_name(cast<Name>(&arg)->id) : nullptr;
      if (!t) t = anf_types_.type_of(&arg);
      if (t) sub.param_types[p.name] = *t;
      // A generic backward's helpers are generic too: their casts are kept.
      if (t && t->is_tensor() && generic()) sub.generic_params.insert(p.name);
      if (auto *n = dyn_cast<Name>(&arg); n && active.count(n->id) && is_float_tensor(t)) {
        sub.wrt.push_back(p.name);
        active_args.push_back(n->id);
      }
      key += p.name + ":" + (t ? t->str() : "?") + (n_active(arg, active) ? "*" : "") + ",";
    }
    key += ")";
    std::string bwd_name;
    std::vector<std::string> out_adjoint_params;
    auto cached = callee_backwards_.find(key);
    if (cached != callee_backwards_.end()) {
      bwd_name = cached->second;
    } else {
      Engine inner(module_, sources_, sub, diags_);
      inner.depth_ = depth_ + 1;
      if (depth_ > 16) fail(value.span, "jit function calls nested too deeply to differentiate");
      std::optional<Backward> b = inner.run();
      if (!b) fail(value.span, "cannot differentiate the call of '" + g.name + "' (see the errors above)");
      uses_libdevice_ |= inner.uses_libdevice_;
      bwd_name = add_callee_backward(*b);
      callee_backwards_[key] = bwd_name;
    }
    // g_bwd takes g's parameters and then the adjoints of g's outputs, all
    // positionally: a parameter the call left to its default gets it here (the
    // backward's parameters keep no defaults), else an adjoint would fill its slot.
    ExprList args;
    for (const Param &p : g.params) {
      auto it = arg_of.find(p.name);
      if (it != arg_of.end()) {
        args.push_back(clone(*it->second));
      } else if (p.default_value) {
        args.push_back(clone(*p.default_value));
      } else {
        fail(value.span, "the call of '" + g.name + "' gives no value for its parameter '" + p.name + "'");
      }
    }
    // The adjoints of g's outputs: this value's adjoint, or per element of a tuple.
    ExprPtr by = adjoint_of_result(target);
    if (auto *t = dyn_cast<Tuple>(by.get())) {
      for (ExprPtr &element : t->elts) args.push_back(std::move(element));
    } else {
      args.push_back(std::move(by));
    }
    ExprPtr the_call = std::make_unique<Call>(name(bwd_name), std::move(args), std::vector<Keyword>{}, value.span);
    if (active_args.empty()) return;
    if (active_args.size() == 1) {
      contribute(active_args[0], std::move(the_call), "jit call", target, value.span);
      return;
    }
    ExprList targets;
    std::vector<std::string> parts;
    for (const std::string &a : active_args) {
      parts.push_back(names_.fresh("_b" + a));
      targets.push_back(name(parts.back()));
    }
    ExprList lhs;
    lhs.push_back(std::make_unique<Tuple>(std::move(targets)));
    emit_stmt(std::make_unique<Assign>(std::move(lhs), std::move(the_call)));
    for (size_t k = 0; k < active_args.size(); ++k) contribute(active_args[k], name(parts[k]), "jit call", target, value.span);
  }

  // The adjoint of an operation's result as an expression: its adjoint's
  // name, or for a tuple-valued operation (tl.split) a tuple with each
  // element's adjoint, zeros where none reached the element.
  ExprPtr adjoint_of_result(const std::string &target) {
    const SType *result = type_of_name(target);
    if (!result || result->kind != SType::Kind::Tuple) return name(adjoint_.at(target));
    ExprList parts;
    for (size_t k = 0; k < result->elems.size(); ++k) {
      if (std::optional<std::string> element = element_adjoint(target, k)) {
        parts.push_back(name(*element));
      } else {
        ExprList idx;
        idx.push_back(int_lit(static_cast<int64_t>(k)));
        parts.push_back(call("tl.zeros_like", list(std::make_unique<Subscript>(name(target), std::move(idx)))));
      }
    }
    return std::make_unique<Tuple>(std::move(parts));
  }

  // The adjoint of element k of the tuple `target`, if one reached it.
  std::optional<std::string> element_adjoint(const std::string &target, size_t k) const {
    auto t = tuple_adjoint_.find(target);
    if (t == tuple_adjoint_.end()) return std::nullopt;
    auto it = t->second.find(static_cast<int64_t>(k));
    if (it == t->second.end()) return std::nullopt;
    return it->second;
  }

  // The combine function of the adjoint scans of a first-order recurrence
  // (ScanCombine.h): elements (a, b, c, d) are the maps v -> a*v + b and
  // v -> c*v + d of a carried value; combining composes them.
  std::string affine_scan_helper() {
    static const char *kName = "_tgrad_affine_scan";
    if (has_affine_scan_helper_) return kName;
    if (module_.find_function(kName))
      fail(fn_->name_span, std::string("the file defines '") + kName + "', the name of a helper tgrad's scan backwards use: "
                           "rename it");
    add_support_function(std::string(kName) +
                             "(a1, b1, c1, d1, a2, b2, c2, d2):\n"
                             "    return a1 * a2, b1 * a2 + b2, a1 * c2, b1 * c2 + d2\n",
                         "Composes two steps of a first-order recurrence v -> a*v + b (and the value c*v + d read "
                         "from it): the combine function of the scans in the backward of tl.associative_scan.");
    has_affine_scan_helper_ = true;
    return kName;
  }

  // y = tl.associative_scan(x, axis, combine, reverse): the adjoint of a
  // running sum is a running sum from the other end; that of a first-order
  // recurrence h[t] = a[t] * h[t-1] + x[t] (outputs: the coefficients'
  // running product and h) is g[t] = bh[t] + a[t+1] * g[t+1], run the other
  // way, with bx = g and ba = g * h[t-1] (plus, where the product's adjoint
  // bp reached, G * p[t-1] with G the same recurrence of bp). Both are
  // scans of _tgrad_affine_scan, so no element is shifted by hand.
  void differentiate_scan(const Op &op, const std::string &target, const Expr &value) {
    const Expr *input = op.args.size() > 0 ? op.args[0] : nullptr;
    const Expr *axis = op.args.size() > 1 ? op.args[1] : nullptr;
    const Expr *combine = op.args.size() > 2 ? op.args[2] : nullptr;
    const Expr *reverse = op.args.size() > 3 ? op.args[3] : nullptr;
    for (const Keyword *k : op.kws) {
      if (k->name == "input") input = k->value.get();
      else if (k->name == "axis") axis = k->value.get();
      else if (k->name == "combine_fn") combine = k->value.get();
      else if (k->name == "reverse") reverse = k->value.get();
    }
    const SType *fn_type = combine ? anf_types_.type_of(combine) : nullptr;
    if (!input || !axis || !fn_type || fn_type->kind != SType::Kind::Function)
      fail(value.span, "tgrad cannot tell which combine function this tl.associative_scan uses");
    std::vector<const Expr *> inputs;
    if (auto *t = dyn_cast<Tuple>(input)) {
      for (const ExprPtr &e : t->elts) inputs.push_back(e.get());
    } else {
      inputs.push_back(input);
    }
    const ScanCombine kind = classify_scan_combine(module_, *fn_type->fn, inputs.size());
    auto reversed = [&](bool flip) -> ExprPtr {
      ExprPtr r = reverse ? clone(*reverse) : std::make_unique<BoolLit>(false);
      if (!flip) return r;
      if (auto *b = dyn_cast<BoolLit>(r.get())) return std::make_unique<BoolLit>(!b->value);
      return std::make_unique<UnaryOp>(UnaryOpKind::Not, std::move(r));
    };
    auto keyword = [](const std::string &k, ExprPtr v) {
      std::vector<Keyword> kws;
      kws.push_back({k, {}, std::move(v)});
      return kws;
    };
    auto adjoint_of = [&](size_t k) { return element_adjoint(target, k); };
    if (kind.kind == ScanCombine::Kind::Sum) {
      // A one-element tuple `(x,)` gives a one-element tuple.
      std::optional<std::string> by = isa<Tuple>(input) ? adjoint_of(0) : std::optional<std::string>(adjoint_.at(target));
      if (const Name *x = as_name(*inputs[0]); by && x && is_active(x->id))
        contribute(x->id, call("tl.cumsum", list(name(*by), clone(*axis)), keyword("reverse", reversed(true))),
                   "associative_scan", target, value.span);
      return;
    }
    if (kind.kind != ScanCombine::Kind::FirstOrderRecurrence)
      fail(value.span, "tgrad differentiates tl.associative_scan with a running sum (combine(a, b) = a + b) or a "
                       "first-order linear recurrence (combine((a1, h1), (a2, h2)) = (a1 * a2, h1 * a2 + h2)); '" +
                           fn_type->fn->name + "' computes neither. Write the scan as one of these, or as a loop");
    const Name *a = as_name(*inputs[kind.coefficient]), *x = as_name(*inputs[kind.state]);
    if (!a || !x) fail(value.span, "tgrad needs the inputs of this tl.associative_scan as names");
    const std::string helper = affine_scan_helper();
    // In fp32, whatever the inputs' dtypes: the four elements of a scan
    // keep one type through the combine function.
    auto f32_name = [&](const std::string &n, const std::string &hint) {
      std::string fresh = names_.fresh(hint);
      emit_stmt(assign(fresh, cast_to(name(n), dotted_name("tl.float32"))));
      return fresh;
    };
    const std::string a32 = f32_name(a->id, a->id + "_f32");
    const std::string ones = names_.fresh("ones");
    emit_stmt(assign(ones, std::make_unique<BinOp>(BinaryOpKind::Add, call("tl.zeros_like", list(name(a32))),
                                                   std::make_unique<FloatLit>(1.0, "1.0"))));
    // scan((a, b, c, d), axis, helper, reverse)[k]
    auto scan = [&](ExprPtr b, ExprPtr c, ExprPtr d, bool flip, int64_t k) {
      ExprList elts;
      elts.push_back(name(a32));
      elts.push_back(std::move(b));
      elts.push_back(std::move(c));
      elts.push_back(std::move(d));
      ExprList args;
      args.push_back(std::make_unique<Tuple>(std::move(elts)));
      args.push_back(clone(*axis));
      args.push_back(name(helper));
      ExprPtr s = call("tl.associative_scan", std::move(args), keyword("reverse", reversed(flip)));
      ExprList idx;
      idx.push_back(int_lit(k));
      return std::make_unique<Subscript>(std::move(s), std::move(idx));
    };
    auto mul = [](ExprPtr l, ExprPtr r) { return std::make_unique<BinOp>(BinaryOpKind::Mul, std::move(l), std::move(r)); };
    auto zeros = [&]() { return call("tl.zeros_like", list(name(a32))); };
    // The adjoint g of a recurrence with coefficients a, given the adjoint bv of its values.
    auto adjoint_recurrence = [&](const std::string &bv, const std::string &hint) {
      const std::string bv32 = f32_name(bv, bv + "_f32");
      const std::string g = names_.fresh(hint);
      emit_stmt(assign(g, scan(mul(name(a32), name(bv32)), name(ones), name(bv32), /*flip=*/true, 3)));
      return g;
    };
    if (std::optional<std::string> bh = adjoint_of(kind.state)) {
      const std::string g = adjoint_recurrence(*bh, "g_" + x->id);
      const std::string x32 = f32_name(x->id, x->id + "_f32");
      const std::string previous = names_.fresh(x->id + "_previous");  // h[t-1], 0 before the first
      emit_stmt(assign(previous, scan(name(x32), name(ones), zeros(), /*flip=*/false, 3)));
      if (is_active(x->id)) contribute(x->id, name(g), "associative_scan", target, value.span);
      if (is_active(a->id)) contribute(a->id, mul(name(g), name(previous)), "associative_scan", target, value.span);
    }
    if (std::optional<std::string> bp = adjoint_of(kind.coefficient); bp && is_active(a->id)) {
      const std::string g = adjoint_recurrence(*bp, "g_" + a->id);
      const std::string previous = names_.fresh(a->id + "_previous_product");  // 1 before the first
      emit_stmt(assign(previous, scan(zeros(), name(ones), zeros(), /*flip=*/false, 2)));
      contribute(a->id, mul(name(g), name(previous)), "associative_scan", target, value.span);
    }
  }

  static bool n_active(const Expr &e, const std::set<std::string> &active) {
    auto *n = dyn_cast<Name>(&e);
    return n && active.count(n->id);
  }

  int64_t static_int(const Expr &e) {
    if (auto *i = dyn_cast<IntLit>(&e)) return static_cast<int64_t>(i->value);
    if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg) return -static_int(*u->operand);
    fail(e.span, "a permutation must be written with integer literals to be differentiated");
  }

  // Template instantiation: bind the rule's parameters, evaluate its
  // constexpr ifs, emit its locals under fresh names and its b<param>
  // assignments as contributions.
  void instantiate(const Function &rule, const Op &op, const std::string &target, const Expr &value) {
    std::map<std::string, const Expr *> bound;  // rule parameter -> forward expression
    std::vector<const Param *> inputs, keywords;
    bool seen_by = false;
    for (const Param &p : rule.params) {
      if (p.name == "y") continue;
      if (p.name == "by") {
        seen_by = true;
        continue;
      }
      (!seen_by ? inputs : keywords).push_back(&p);
    }
    if (op.args.size() < inputs.size())
      fail(value.span, "the adjoint rule of '" + op.key + "' needs " + std::to_string(inputs.size()) + " operands");
    size_t k = 0;
    for (; k < inputs.size(); ++k) bound[inputs[k]->name] = op.args[k];
    static const std::set<std::string> variadic = {"reshape", "broadcast_to", "trans", "permute", "expand_dims"};
    for (size_t j = 0; k < op.args.size(); ++k, ++j) {
      if (j < keywords.size()) bound[keywords[j]->name] = op.args[k];
      else if (!variadic.count(op.key))
        fail(value.span, "too many arguments for tgrad's adjoint of '" + op.key + "'");
    }
    for (const Keyword *kw : op.kws) {
      bool known = false;
      for (const Param *p : keywords) known |= p->name == kw->name;
      if (!known) {
        std::string supported;
        for (const Param *p : keywords) supported += (supported.empty() ? "" : ", ") + p->name;
        fail(kw->name_span, "tgrad's adjoint of '" + op.key + "' does not support the keyword '" + kw->name + "'" +
                                (supported.empty() ? "" : " (it supports: " + supported + ")"));
      }
      bound[kw->name] = kw->value.get();
    }
    for (const Param *p : keywords)
      if (!bound.count(p->name)) bound[p->name] = p->default_value.get();

    if (op.key == "gather") {  // the rule's one-hot sums are written for ranks 1 and 2
      const Name *src = dyn_cast<Name>(op.args[0]);
      const SType *t = src ? type_of_name(src->id) : nullptr;
      if (t && t->is_tensor() && t->shape.size() > 2)
        fail(value.span, "tgrad differentiates tl.gather on tensors of rank 1 and 2, not " + shape_str(t->shape) +
                             "; gather from a reshaped 2-D tensor");
    }
    Instance inst{*this, rule, op, target, value, bound, {}};
    inst.block(rule.body);
  }

  struct Instance {
    Engine &engine;
    const Function &rule;
    const Op &op;
    const std::string &target;
    const Expr &forward;
    std::map<std::string, const Expr *> bound;
    std::map<std::string, std::string> locals;  // rule local -> fresh name

    bool is_param(const std::string &n) const { return bound.count(n) > 0; }

    ExprPtr subst(const Expr &e) {
      ExprPtr c = clone(e);
      replace(c);
      return fold(std::move(c));
    }

    void replace(ExprPtr &e) {
      switch (e->kind) {
        case NodeKind::Name: {
          const std::string id = cast<Name>(e.get())->id;
          if (id == "y") e = name(target, e->span);
          else if (id == "by") e = engine.adjoint_of_result(target);
          else if (bound.count(id)) e = bound[id] ? clone(*bound[id]) : std::make_unique<NoneLit>();
          else if (locals.count(id)) e = name(locals[id]);
          else if (id == "libdevice") engine.uses_libdevice_ = true;
          return;
        }
        case NodeKind::Attribute: replace(cast<Attribute>(e.get())->value); return;
        case NodeKind::Subscript: {
          auto *sub = cast<Subscript>(e.get());
          replace(sub->value);
          for (ExprPtr &i : sub->indices) replace(i);
          // `by[k]` of a tuple-valued operation: element k itself.
          if (auto *t = dyn_cast<Tuple>(sub->value.get()); t && sub->indices.size() == 1)
            if (auto *k = dyn_cast<IntLit>(sub->indices[0].get()); k && k->value < t->elts.size()) {
              ExprPtr element = std::move(t->elts[static_cast<size_t>(k->value)]);
              e = std::move(element);
            }
          return;
        }
        case NodeKind::Call:
          replace(cast<Call>(e.get())->func);
          for (ExprPtr &a : cast<Call>(e.get())->args) replace(a);
          for (Keyword &k : cast<Call>(e.get())->keywords) replace(k.value);
          return;
        case NodeKind::UnaryOp: replace(cast<UnaryOp>(e.get())->operand); return;
        case NodeKind::BinOp:
          replace(cast<BinOp>(e.get())->lhs);
          replace(cast<BinOp>(e.get())->rhs);
          return;
        case NodeKind::Compare:
          replace(cast<Compare>(e.get())->left);
          for (ExprPtr &c : cast<Compare>(e.get())->comparators) replace(c);
          return;
        case NodeKind::Tuple:
          for (ExprPtr &x : cast<Tuple>(e.get())->elts) replace(x);
          return;
        default: return;
      }
    }

    // `not False` -> True; keywords given None are left out (the callee's default).
    static ExprPtr fold(ExprPtr e) {
      if (auto *u = dyn_cast<UnaryOp>(e.get()); u && u->op == UnaryOpKind::Not) {
        u->operand = fold(std::move(u->operand));
        if (auto *b = dyn_cast<BoolLit>(u->operand.get())) return std::make_unique<BoolLit>(!b->value, e->span);
        return e;
      }
      if (auto *c = dyn_cast<Call>(e.get())) {
        for (ExprPtr &a : c->args) a = fold(std::move(a));
        std::vector<Keyword> kept;
        for (Keyword &k : c->keywords) {
          k.value = fold(std::move(k.value));
          if (!isa<NoneLit>(k.value.get())) kept.push_back(std::move(k));
        }
        c->keywords = std::move(kept);
        return e;
      }
      if (auto *b = dyn_cast<BinOp>(e.get())) {
        b->lhs = fold(std::move(b->lhs));
        b->rhs = fold(std::move(b->rhs));
      }
      if (auto *u = dyn_cast<UnaryOp>(e.get())) u->operand = fold(std::move(u->operand));
      return e;
    }

    // A rule's constexpr condition, after substitution.
    bool condition(const Expr &e) {
      ExprPtr c = subst(e);
      if (auto *b = dyn_cast<BoolLit>(c.get())) return b->value;
      if (auto *i = dyn_cast<IntLit>(c.get())) return i->value != 0;
      if (isa<NoneLit>(c.get())) return false;
      if (auto *cmp = dyn_cast<Compare>(c.get()); cmp && cmp->ops.size() == 1 &&
                                                  (cmp->ops[0] == CompareOpKind::Is || cmp->ops[0] == CompareOpKind::IsNot) &&
                                                  isa<NoneLit>(cmp->comparators[0].get())) {
        bool is_none = isa<NoneLit>(cmp->left.get());
        return cmp->ops[0] == CompareOpKind::Is ? is_none : !is_none;
      }
      if (auto *b = dyn_cast<BoolOp>(c.get())) {  // `a or b`, `a and b` of such conditions
        bool any = false, all = true;
        for (const ExprPtr &v : b->values) {
          const bool x = condition(*v);
          any |= x;
          all &= x;
        }
        return b->op == BoolOpKind::Or ? any : all;
      }
      if (std::optional<bool> known = static_comparison(*c)) return *known;
      // `x.shape[k] < n` where the dimension is a symbol: taken as not below
      // (tile sizes: Triton itself rejects the backward if one is).
      if (auto *cmp = dyn_cast<Compare>(c.get());
          cmp && cmp->ops.size() == 1 && cmp->ops[0] == CompareOpKind::Lt && shape_dimension(*cmp->left) &&
          static_int(*cmp->comparators[0]))
        return false;
      fail(forward.span, "the adjoint of '" + op.key + "' needs its keyword arguments to be literals (True, False, None, "
                         "an integer), not " + emit::print_expr(*c));
    }

    // The type of x in `x.shape`, an operand's tensor type.
    const SType *shape_owner(const Expr &e) const {
      auto *attr = dyn_cast<Attribute>(&e);
      auto *x = attr && attr->attr == "shape" ? dyn_cast<Name>(attr->value.get()) : nullptr;
      const SType *t = x ? engine.type_of_name(x->id) : nullptr;
      return t && t->is_tensor() ? t : nullptr;
    }

    // `x.shape[k]` (k may count from the end): that dimension, known or a symbol.
    const sema::Dim *shape_dimension(const Expr &e) const {
      auto *sub = dyn_cast<Subscript>(&e);
      const SType *t = sub && sub->indices.size() == 1 ? shape_owner(*sub->value) : nullptr;
      std::optional<long long> axis = t ? static_int(*sub->indices[0]) : std::nullopt;
      if (!axis) return nullptr;
      const long long rank = static_cast<long long>(t->shape.size());
      if (*axis < 0) *axis += rank;
      return *axis >= 0 && *axis < rank ? &t->shape[static_cast<size_t>(*axis)] : nullptr;
    }

    // An integer the rule knows when it is instantiated: a literal (negated
    // or not), `len(x.shape)` (an operand's rank) or a known `x.shape[k]`.
    std::optional<long long> static_int(const Expr &e) const {
      if (auto *k = dyn_cast<IntLit>(&e)) return static_cast<long long>(k->value);
      if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg)
        if (std::optional<long long> v = static_int(*u->operand)) return -*v;
      if (const sema::Dim *d = shape_dimension(e)) return d->value ? std::optional<long long>(*d->value) : std::nullopt;
      auto *call = dyn_cast<Call>(&e);
      auto *fn = call ? dyn_cast<Name>(call->func.get()) : nullptr;
      if (!fn || fn->id != "len" || call->args.size() != 1) return std::nullopt;
      const SType *t = shape_owner(*call->args[0]);
      return t ? std::optional<long long>(static_cast<long long>(t->shape.size())) : std::nullopt;
    }

    // `a == b` (or !=, <, <=, >, >=) of two such integers.
    std::optional<bool> static_comparison(const Expr &c) const {
      auto *cmp = dyn_cast<Compare>(&c);
      if (!cmp || cmp->ops.size() != 1) return std::nullopt;
      std::optional<long long> a = static_int(*cmp->left), b = static_int(*cmp->comparators[0]);
      if (!a || !b) return std::nullopt;
      switch (cmp->ops[0]) {
        case CompareOpKind::Eq: return *a == *b;
        case CompareOpKind::NotEq: return *a != *b;
        case CompareOpKind::Lt: return *a < *b;
        case CompareOpKind::LtE: return *a <= *b;
        case CompareOpKind::Gt: return *a > *b;
        case CompareOpKind::GtE: return *a >= *b;
        default: return std::nullopt;
      }
    }

    void block(const StmtList &body) {
      for (const StmtPtr &s : body) {
        if (auto *i = dyn_cast<If>(s.get())) {
          block(condition(*i->cond) ? i->body : i->orelse);
          continue;
        }
        auto *a = dyn_cast<Assign>(s.get());
        if (!a) continue;
        const std::string lhs = cast<Name>(a->targets[0].get())->id;
        // b<param>: a contribution to that operand.
        if (lhs.size() > 1 && lhs[0] == 'b' && is_param(lhs.substr(1))) {
          const Expr *operand = bound[lhs.substr(1)];
          const Name *n = operand ? dyn_cast<Name>(operand) : nullptr;
          if (!n) continue;  // a literal or None: no adjoint
          if (!engine.is_active(n->id)) continue;
          engine.contribute(n->id, subst(*a->value), op.key, target, forward.span);
          continue;
        }
        // A local of the rule.
        ExprPtr v = subst(*a->value);
        std::string fresh = engine.names_.fresh(lhs);
        locals[lhs] = fresh;
        engine.emit_stmt(assign(fresh, std::move(v)));
      }
    }
  };

  bool is_active(const std::string &n) const { return carries_gradient(type_of_name(n)); }

  // Adds `e` to the adjoint of `x`, summed back to x's shape where the
  // operation broadcast x.
  // Contributions to x's adjoint that contribute() drops: an additive
  // accumulator's own term (its adjoint is loop-invariant), or a max whose
  // gradient is exactly zero (find_stabilizers).
  bool drops_contributions(const std::string &x) const { return frozen_.count(x) || stabilizers_.count(x); }

  void contribute(const std::string &x, ExprPtr e, const std::string &op, const std::string &y, const SourceSpan &span) {
    (void)span;
    if (drops_contributions(x)) return;
    bool summed = false;
    const SType *gx = request_.generic_shapes ? type_of_name(x) : nullptr;
    if (gx && gx->is_tensor() && broadcasts_operands(op)) {
      // Shapes unknown until Triton compiles the backward: the helper sums
      // over whatever axes the operation broadcast x along.
      e = call(unbroadcast_helper(), list(std::move(e), name(x)));
      summed = true;
    } else if (broadcasts_operands(op)) {
      const SType *tx = type_of_name(x), *ty = type_of_name(y);
      if (tx && ty && tx->is_tensor() && ty->is_tensor()) {
        const sema::SymShape &sx = tx->shape;
        // The shape the operands were broadcast to: y's, less the axis tl.join adds (tl.interleave doubles the last).
        sema::SymShape sy = ty->shape;
        if ((op == "join" || op == "interleave") && !sy.empty()) {
          sema::Dim last = sy.back();
          sy.pop_back();
          if (op == "interleave" && !sy.empty()) {
            if (last.value) sy.push_back(sema::Dim::known(*last.value / 2));
            else if (last.symbol.rfind("2 * ", 0) == 0) sy.push_back(sema::Dim::symbolic(last.symbol.substr(4)));
            else sy.push_back(sema::Dim::symbolic("(" + last.symbol + ") // 2"));
          }
        }
        const size_t rx = sx.size(), ry = sy.size();
        if (rx == 0 && ry > 0) {
          e = call("tl.sum", list(std::move(e)));
          summed = true;
        } else {
          for (size_t i = 0; i + rx < ry; ++i) {
            e = call("tl.sum", list(std::move(e), int_lit(0)));
            summed = true;
          }
          for (size_t k = 0; k < rx && ry >= rx; ++k) {
            const sema::Dim &dx = sx[k], &dy = sy[ry - rx + k];
            bool x_one = dx.value && *dx.value == 1, y_one = dy.value && *dy.value == 1;
            if (x_one && !y_one) {
              std::vector<Keyword> kw;
              kw.push_back({"keep_dims", {}, std::make_unique<BoolLit>(true)});
              e = call("tl.sum", list(std::move(e), int_lit(static_cast<int64_t>(k))), std::move(kw));
              summed = true;
            } else if (dx != dy && !x_one) {
              summed = true;  // symbolic dimensions assumed equal: assert it
            }
          }
        }
      }
    }
    auto it = adjoint_.find(x);
    const bool first = it == adjoint_.end();
    if (first && !summed) {
      // The first contribution: a plain adjoint name is an alias, not a copy.
      if (auto *n = dyn_cast<Name>(e.get())) {
        adjoint_[x] = n->id;
        aliased_.insert(x);
        return;
      }
      std::string b = names_.fresh("b" + x);
      adjoint_[x] = b;
      emit_stmt(assign(b, std::move(e)));
      return;
    }
    // Where a sum undid a broadcast, assert the shape it relied on.
    std::string holder = first ? names_.fresh("b" + x) : names_.fresh("_b" + x);
    if (summed) {
      emit_stmt(assign(holder, std::move(e)));
      ExprPtr cond = equals(std::make_unique<Attribute>(name(holder), "shape"), std::make_unique<Attribute>(name(x), "shape"));
      emit_stmt(std::make_unique<ExprStmt>(call("tl.static_assert", list(std::move(cond)))));
      if (first) {
        adjoint_[x] = holder;
        return;
      }
      e = name(holder);
    }
    if (aliased_.count(x)) {
      // The adjoint so far is another value's adjoint: start a new one.
      aliased_.erase(x);
      std::string b = names_.fresh("b" + x);
      emit_stmt(assign(b, std::make_unique<BinOp>(BinaryOpKind::Add, name(it->second), std::move(e))));
      adjoint_[x] = b;
      return;
    }
    emit_stmt(std::make_unique<AugAssign>(name(it->second), BinaryOpKind::Add, std::move(e)));
  }

  // `v.to(w.dtype)` where v already has w's dtype: drop the cast.
  static void remove_noop_casts(StmtList &body, const sema::TypeInfo &info) {
    std::function<void(ExprPtr &)> visit = [&](ExprPtr &e) {
      if (auto *c = dyn_cast<Call>(e.get())) {
        for (ExprPtr &a : c->args) visit(a);
        for (Keyword &k : c->keywords) visit(k.value);
        auto *attr = dyn_cast<Attribute>(c->func.get());
        if (attr && attr->attr == "to" && c->args.size() == 1 && c->keywords.empty()) {
          visit(attr->value);
          const SType *from = info.type_of(attr->value.get());
          const SType *to = info.type_of(c->args[0].get());
          if (from && to && from->is_tensor() && to->kind == SType::Kind::DType && !to->dtype_is_pointer &&
              from->elem.dtype == to->dtype && !from->elem.is_pointer) {
            ExprPtr receiver = std::move(attr->value);
            e = std::move(receiver);
          }
        } else {
          visit(c->func);
        }
        return;
      }
      if (auto *b = dyn_cast<BinOp>(e.get())) {
        visit(b->lhs);
        visit(b->rhs);
      } else if (auto *u = dyn_cast<UnaryOp>(e.get())) {
        visit(u->operand);
      } else if (auto *t = dyn_cast<Tuple>(e.get())) {
        for (ExprPtr &x : t->elts) visit(x);
      } else if (auto *a = dyn_cast<Attribute>(e.get())) {
        visit(a->value);
      }
    };
    for (StmtPtr &st : body) {
      if (auto *a = dyn_cast<Assign>(st.get())) visit(a->value);
      if (auto *a = dyn_cast<AugAssign>(st.get())) visit(a->value);
      if (auto *r = dyn_cast<Return>(st.get()); r && r->value) visit(r->value);
    }
  }

  const Module &module_;
  const SourceManager &sources_;
  const BackwardRequest &request_;
  DiagEngine &diags_;
  const Function *forward_ = nullptr;
  const Function *fn_ = nullptr;
  sema::ParamTypes bwd_types_;  // the backward kernel's parameter types, once built
  std::map<std::string, std::string> saved_;  // a value the forward stores -> the pointer it is stored through
  std::map<std::string, std::string> saved_dtype_;  // such a value, its pointer generic -> the dtype the backward asserts
  std::map<std::string, std::string> saved_base_;  // such a value -> the pointer parameter it is stored through
  AnfFunction anf_;
  sema::TypeInfo anf_types_;
  std::map<std::string, SType> name_types_;
  NameAllocator names_;
  std::map<std::string, std::string> adjoint_;  // primal name -> adjoint name
  std::set<std::string> aliased_;               // adjoints that are another value's adjoint
  std::map<std::string, std::map<int64_t, std::string>> tuple_adjoint_;  // tuple name -> element -> adjoint
  std::map<std::string, std::string> callee_backwards_;  // jit function signature -> its backward's name
  bool has_unbroadcast_helper_ = false;
  bool has_affine_scan_helper_ = false;
  std::vector<std::unique_ptr<Function>> extra_functions_;  // backwards of called jit functions
  int depth_ = 0;
  bool kernel_ = false;                                     // differentiating a kernel (pointer parameters)
  std::map<std::string, std::string> gradient_buffer_;     // pointer parameter -> its gradient pointer
  std::map<std::string, std::string> dual_name_;           // pointer value -> its gradient pointer
  std::map<const Stmt *, StmtPtr> dual_defs_;              // a pointer's definition -> its mirror's definition
  std::map<std::string, int> loads_per_base_;              // pointer parameter -> loads through it
  std::map<std::string, std::set<std::string>> offset_keys_;  // pointer parameter -> the offsets of its loads
  std::map<std::string, std::set<std::string>> mask_keys_;    // pointer parameter -> the lanes its loads' masks keep
  struct RegisterPartial {
    std::string acc;      // the register tile
    ExprPtr init;         // tl.zeros(shape, dtype=tl.float32)
    std::string pointer;  // this program's row of the scratch buffer, at the load's offsets
    std::string mask;
  };
  std::vector<RegisterPartial> register_partials_;
  std::vector<std::pair<const If *, bool>> branch_path_;  // collect(): the runtime ifs around the statement
  std::vector<const For *> loop_path_;                     // collect(): the runtime loops around the statement
  std::set<std::string> in_place_;                         // inputs the kernel also stores to (one gradient buffer)
  std::unique_ptr<Function> guarded_fn_;  // the forward with its early returns turned into ifs, if it has any
  std::unique_ptr<Function> split_fn_;    // ... and with `x = a if c else b` written as an if
  std::unique_ptr<Function> registers_fn_;  // ... and with its memory accumulators kept in registers
  std::vector<KeptAccumulator> kept_accumulators_;
  std::set<std::string> needs_zeros_;                      // inputs whose gradient buffers must start at zero
  std::map<std::string, std::string> consumed_;            // outputs whose upstream gradient the backward consumes -> why
  std::set<const MemoryOp *> consume_atomically_;          // stores of consumed outputs that programs may share
  std::set<std::string> partial_bases_;                    // inputs whose gradients go through partial sums
  std::map<std::string, std::string> partial_row_;         // such an input -> this program's partial-sum row
  std::map<std::string, std::string> shared_bases_;       // pointer parameters whose loads all add atomically -> why
  std::map<std::string, int> contributions_;               // pointer parameter -> gradients written so far
  std::vector<MemoryOp> memory_;
  std::optional<std::set<std::string>> kernel_reads_;       // every name the ANF kernel reads (computed once, if needed)
  std::map<std::string, std::vector<const Assign *>> defs_of_;  // name -> its definitions (any depth)
  std::map<const For *, std::vector<const Stmt *>> init_copy_;   // loop -> the statements setting its carried values
  std::set<std::string> active_, useful_;
  std::map<std::string, std::string> additive_update_;     // acc_3 (acc_2 + t) -> acc_2
  std::set<const Stmt *> carried_update_copy_;             // acc_2 = acc_3 of an additive accumulator
  std::set<std::string> frozen_;                           // adjoints that take no contributions now
  std::map<const For *, TapedLoop> taped_loops_;           // loops reversed with tapes
  std::map<const Stmt *, std::string> taped_update_copy_;  // acc_2 = acc_3 in such a loop -> acc_2
  std::vector<Backward::Tape> tapes_;
  std::set<const Stmt *> upstream_loads_;  // loads of upstream gradients nothing in the backward writes
  std::set<std::string> stabilizers_;                      // maxes whose gradient is exactly zero
  StmtList sweep_;
  StmtList *out_ = &sweep_;
  const Stmt *current_block_ = nullptr;
  std::string pending_comment_;
  bool uses_libdevice_ = false;
};

}  // namespace

std::optional<Backward> differentiate_typed(const Module &module, const SourceManager &sources,
                                            const BackwardRequest &request, DiagEngine &diags) {
  Engine general(module, sources, request, diags);
  std::optional<Backward> result = general.run();
  if (!result || !general.differentiates_a_kernel()) return result;
  const Function *fn = module.find_function(request.function);
  std::optional<SinglePassVersion> version = fn ? single_pass_version(*fn) : std::nullopt;
  if (!version) return result;
  // The one-pass version's own diagnostics are not the user's: where it
  // cannot be built, the looped backward serves every row length.
  DiagEngine quiet(sources);
  Engine one_pass(module, sources, request, quiet, version->forward.get());
  std::optional<Backward> single = one_pass.run();
  std::string why_not;
  if (!single) {
    std::ostringstream msg;
    quiet.print_all(msg);
    why_not = msg.str();
  }
  general.dispatch_by_row_length(*result, std::move(single), one_pass.backward_types(), *version, why_not);
  return result;
}

void Backward::add_buffer_needs(const Backward &other) {
  for (const std::string &z : other.zero_initialized)
    if (std::find(zero_initialized.begin(), zero_initialized.end(), z) == zero_initialized.end())
      zero_initialized.push_back(z);
  for (const auto &c : other.consumed_upstream)
    if (std::none_of(consumed_upstream.begin(), consumed_upstream.end(), [&](const auto &o) { return o.first == c.first; }))
      consumed_upstream.push_back(c);
  for (const std::string &o : other.saved_outputs)
    if (std::find(saved_outputs.begin(), saved_outputs.end(), o) == saved_outputs.end()) saved_outputs.push_back(o);
}

std::vector<std::string> Backward::parameters_after_forward() const {
  std::vector<std::string> out;
  for (const auto &g : gradient_buffers) out.push_back(g.second);
  for (const PartialSum &p : partial_sums) out.push_back(p.scratch);
  for (const PartialSum &p : partial_sums) out.push_back(p.numel);
  if (!partial_sums.empty()) out.push_back(num_programs_param);
  for (const Tape &t : tapes) out.push_back(t.scratch);
  for (const Tape &t : tapes)
    if (std::find(out.begin(), out.end(), t.trips_param) == out.end()) out.push_back(t.trips_param);
  return out;
}

}  // namespace tgrad::ad
