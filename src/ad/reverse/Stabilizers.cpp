// The stabilizer proof: which maxes (the running max of a softmax) have a
// gradient that is exactly zero, so the backward need not carry theirs.
#include <cmath>

#include "src/ad/reverse/Engine.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::ad::reverse {

void Engine::check_dependence_kept(const std::string &target, const Expr &value, const std::string &operand) {
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
  // Often the cause is upstream: a name an if assigns a value of one type on one branch and of another on the
  // other (`p = tl.load(seqpos + i)` where `seqpos is not None`, `p = i` else). Triton compiles one branch per
  // specialization; tgrad, typing both, cannot tell what follows.
  if (std::optional<std::pair<std::string, std::string>> host = host_function_behind(value)) {
    why = "tgrad cannot tell what this expression computes: '" + host->first + "' comes from '" + host->second +
          "', a Python function tgrad keeps as host code (it does not read as tile language)";
    advice = "Write '" + host->second + "' with what a @triton.jit function may use, or compute the value on the host "
             "and pass it as a tl.constexpr";
  } else if (std::optional<std::string> merge = divergent_branch_types(value)) {
    why = "tgrad cannot tell what this expression computes: " + *merge;
    advice = "Give the parameters' types with --arg so that both branches agree, or assign the same type on both "
             "(`p = i * 1.0`)";
  }
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

std::optional<std::string> Engine::search_upstream(
    const Expr &value, const std::function<std::optional<std::string>(const std::string &, const Expr *)> &look) {
  // Each name's definition: its assignment, or a compile-time value's `NAME: tl.constexpr = ...`.
  std::map<std::string, const Expr *> defs;
  each_assignment(anf_.fn->body, [&](const std::string &n, const Expr &v) { defs.emplace(n, &v); });
  std::function<void(const StmtList &)> annotated = [&](const StmtList &block) {
    for (const StmtPtr &st : block) {
      if (auto *a = dyn_cast<AnnAssign>(st.get()); a && a->value && isa<Name>(a->target.get()))
        defs.emplace(cast<Name>(a->target.get())->id, a->value.get());
      if (auto *f = dyn_cast<For>(st.get())) annotated(f->body);
      if (auto *w = dyn_cast<While>(st.get())) annotated(w->body);
      if (auto *i = dyn_cast<If>(st.get())) {
        annotated(i->body);
        annotated(i->orelse);
      }
    }
  };
  annotated(anf_.fn->body);
  std::set<std::string> seen, frontier;
  reads(value, frontier);
  for (int depth = 0; depth < 8 && !frontier.empty(); ++depth) {
    std::set<std::string> next;
    for (const std::string &n : frontier) {
      if (!seen.insert(n).second) continue;
      auto d = defs.find(n);
      const Expr *definition = d == defs.end() ? nullptr : d->second;
      if (std::optional<std::string> found = look(n, definition)) return found;
      if (definition) reads(*definition, next);
    }
    frontier = std::move(next);
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> Engine::host_function_behind(const Expr &value) {
  const std::set<std::string> host(module_.host_names.begin(), module_.host_names.end());
  std::string defined;
  std::optional<std::string> callee = search_upstream(value, [&](const std::string &n, const Expr *definition) {
    std::optional<std::string> out;
    if (definition)
      visit_expr(*definition, [&](const Expr &e) {
        if (auto *c = dyn_cast<Call>(&e))
          if (auto *f = dyn_cast<Name>(c->func.get()); f && host.count(f->id) && !out) out = f->id;
      });
    if (out) defined = n;
    return out;
  });
  if (!callee) return std::nullopt;
  return std::make_pair(defined, *callee);
}

std::optional<std::string> Engine::divergent_branch_types(const Expr &value) {
  // The names the value reads, and theirs (a few A-normal-form steps back).
  return search_upstream(value, [&](const std::string &n, const Expr *) -> std::optional<std::string> {
    // (Even a name sema typed: it may have kept one branch's type, `p` int32 though one branch loads fp32.)
    // An if (at any depth) whose two branches both assign n, with values sema types differently.
    std::optional<std::string> found;
    std::function<void(const StmtList &)> walk = [&](const StmtList &block) {
      for (const StmtPtr &s : block) {
        if (found) return;
        if (auto *f = dyn_cast<For>(s.get())) walk(f->body);
        auto *i = dyn_cast<If>(s.get());
        if (!i) continue;
        std::string user_name;  // the name as the user wrote it (A-normal form renames merged values)
        auto assigned_type = [&](const StmtList &branch) -> const SType * {
          const SType *out = nullptr;
          for (const StmtPtr &b : branch)
            if (auto *a = dyn_cast<Assign>(b.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()) &&
                                                       cast<Name>(a->targets[0].get())->id == n) {
              out = isa<Name>(a->value.get()) ? type_of_name(cast<Name>(a->value.get())->id)
                                              : anf_types_.type_of(a->value.get());
              std::string written = source_text(a->targets[0]->span);
              // (A merge copy `p_3 = p` has no span of its own: the copied name, where n is it renamed.)
              if (auto *v = dyn_cast<Name>(a->value.get()); written.empty() && v && n.rfind(v->id + "_", 0) == 0)
                written = v->id;
              if (user_name.empty() && !written.empty() &&
                  written.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
                      std::string::npos)
                user_name = written;
            }
          return out;
        };
        const SType *x = assigned_type(i->body), *y = assigned_type(i->orelse);
        if (x && y && is_known(*x) && is_known(*y) && x->str() != y->str()) {
          std::string cond = source_text(i->cond->span);
          if (cond.empty()) cond = emit::print_expr(*i->cond);
          found = "'" + (user_name.empty() ? n : user_name) + "' is " + x->str() + " where `" + cond + "` (line " +
                  std::to_string(i->span.begin.line) +
                  ") and " + y->str() + " otherwise";
          return;
        }
        walk(i->body);
        walk(i->orelse);
      }
    };
    walk(anf_.fn->body);
    return found;
  });
}

void Engine::collect_blocks(const StmtList &block, std::vector<const StmtList *> &out) {
  out.push_back(&block);
  for (const StmtPtr &s : block) {
    if (auto *f = dyn_cast<For>(s.get())) collect_blocks(f->body, out);
    if (auto *i = dyn_cast<If>(s.get())) {
      collect_blocks(i->body, out);
      collect_blocks(i->orelse, out);
    }
  }
}

std::optional<int64_t> Engine::reduce_axis(const Op &op) {
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

size_t Engine::rank_of(const Expr *e) {
  const SType *t = anf_types_.type_of(e);
  return t && t->is_tensor() ? t->shape.size() : 0;
}

std::optional<Engine::Motion> Engine::motion_of(const Expr &value, size_t rank, size_t full_rank, int64_t axis,
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

std::set<std::string> Engine::find_stabilizers(const StmtList &body, const std::set<std::string> &active) {
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

}  // namespace tgrad::ad::reverse
