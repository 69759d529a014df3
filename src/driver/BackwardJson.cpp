#include "src/driver/BackwardJson.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "src/ad/AnfWalk.h"
#include "src/ad/GenericTypes.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"
#include "tgrad/tgrad.h"

namespace tgrad::driver {

using nlohmann::json;
using namespace ast;

namespace {

// Whether the gradient buffer `gradient` is written by one owner-computes kernel and by no other kernel of the
// backward: each owner program adds its tile once, so each element receives one addition (two programs meet only
// where the forward's own tiles alias, wrapped rows of a `% M` adding exact zeros), which a buffer in the input's
// dtype takes as exactly as a float32 one.
bool added_once_by_its_owner(const tgrad::ad::Backward &bwd, const std::string &gradient) {
  const tgrad::ad::Backward::OwnerKernel *owner = nullptr;
  for (const auto &o : bwd.owner_kernels)
    if (std::find(o.gradients.begin(), o.gradients.end(), gradient) != o.gradients.end()) {
      if (owner) return false;  // two owners (the two stages of a causal forward) add to it
      owner = &o;
    }
  if (!owner || !bwd.module) return false;
  for (const auto &f : bwd.module->functions) {
    if (f->name == owner->name) continue;
    std::set<std::string> read;
    tgrad::ad::block_reads(f->body, read);
    if (read.count(gradient)) return false;
  }
  return true;
}


// ------------------------------------------------ launch expressions
//
// The grammar (include/tgrad/launch_protocol.schema.json, "expr"):
//   integer | boolean | string
//   {"arg": NAME}            the value the forward was launched with (scalar or constexpr)
//   {"numel": NAME}          the number of elements of the tensor passed for pointer NAME
//   {"grid": AXIS}           the forward's grid size along AXIS (0, 1, 2)
//   {"program_id": AXIS}     a program's id (only inside "max_over_programs")
//   {"value": NAME}          a launch value the caller chooses ("launch_values")
//   {"param": NAME}          the value passed for the backward's size parameter NAME (one whose
//                            "value" is null: tgrad could not express it)
//   {"device": "multi_processor_count"}
//   {"add"|"sub"|"mul"|"floordiv"|"mod"|"cdiv"|"min"|"max": [E, E, ...]}
//   {"eq"|"ne"|"lt"|"le"|"gt"|"ge": [E, E]}, {"and"|"or": [E, ...]}, {"not": E}
//   {"if": [COND, THEN, ELSE]}
//   {"max_over_programs": E}  the largest value of E over every program of the forward's grid

json op(const char *name, std::vector<json> args) { return json{{name, std::move(args)}}; }

class ExprTranslator {
 public:
  // `known`: parameters whose values the request gives (-D): their values, and an if on them takes its branch.
  // `module`: where the jit helpers a value calls are found (FlagGems' `prev_multiple_of(N, TILE_N)`).
  explicit ExprTranslator(const Function &fn, const sema::ParamTypes *known = nullptr, const Module *module = nullptr)
      : fn_(fn), known_(known), module_(module) {}

  // The expression over launch values, or nullopt with `why` set.
  std::optional<json> translate(const Expr &e, int depth = 0) {
    if (depth > 32) return fail("the expression is too deep");
    if (auto *i = dyn_cast<IntLit>(&e)) return json(i->value);
    if (auto *b = dyn_cast<BoolLit>(&e)) return json(b->value);
    if (auto *s = dyn_cast<StrLit>(&e)) return json(s->value);
    if (auto *n = dyn_cast<Name>(&e)) {
      // A local: its value where the loop starts (symbolic execution below).
      if (auto it = env_.find(n->id); it != env_.end()) {
        if (it->second) return *it->second;
        return fail("'" + n->id + "' is not computed in a way the protocol expresses before the loop");
      }
      if (in_helper_) return fail("'" + n->id + "' in a helper is not one of its parameters or locals");
      for (const Param &p : fn_.params)
        if (p.name == n->id) {
          if (known_)
            if (auto k = known_->find(n->id); k != known_->end() && k->second.known) {
              if (k->second.kind == sema::SType::Kind::Bool) return json(k->second.b);
              if (k->second.kind == sema::SType::Kind::Int) return json(k->second.n);
            }
          return json{{"arg", n->id}};
        }
      return fail("'" + n->id + "' is not a launch argument or a value computed before the loop");
    }
    if (auto *b = dyn_cast<BinOp>(&e)) {
      const char *name = b->op == BinaryOpKind::Add        ? "add"
                         : b->op == BinaryOpKind::Sub      ? "sub"
                         : b->op == BinaryOpKind::Mul      ? "mul"
                         : b->op == BinaryOpKind::FloorDiv ? "floordiv"
                         : b->op == BinaryOpKind::Mod      ? "mod"
                                                           : nullptr;
      if (!name) return fail("'" + emit::print_expr(e) + "' uses an operator the protocol does not express");
      auto l = translate(*b->lhs, depth + 1), r = translate(*b->rhs, depth + 1);
      if (!l || !r) return std::nullopt;
      return op(name, {*l, *r});
    }
    if (auto *u = dyn_cast<UnaryOp>(&e)) {
      auto x = translate(*u->operand, depth + 1);
      if (!x) return std::nullopt;
      if (u->op == UnaryOpKind::Neg) return op("sub", {0, *x});
      if (u->op == UnaryOpKind::Not) return json{{"not", *x}};
      if (u->op == UnaryOpKind::Pos) return x;
      return fail("'" + emit::print_expr(e) + "' uses an operator the protocol does not express");
    }
    if (auto *c = dyn_cast<Compare>(&e)) {
      if (c->ops.size() != 1) return fail("chained comparison");
      static const std::map<CompareOpKind, const char *> names = {
          {CompareOpKind::Eq, "eq"}, {CompareOpKind::NotEq, "ne"}, {CompareOpKind::Lt, "lt"},
          {CompareOpKind::LtE, "le"}, {CompareOpKind::Gt, "gt"},    {CompareOpKind::GtE, "ge"}};
      auto it = names.find(c->ops[0]);
      auto l = translate(*c->left, depth + 1), r = translate(*c->comparators[0], depth + 1);
      if (it == names.end()) return fail("'" + emit::print_expr(e) + "' is a comparison the protocol does not express");
      if (!l || !r) return std::nullopt;
      return op(it->second, {*l, *r});
    }
    if (auto *b = dyn_cast<BoolOp>(&e)) {
      std::vector<json> xs;
      for (const ExprPtr &v : b->values) {
        auto x = translate(*v, depth + 1);
        if (!x) return std::nullopt;
        xs.push_back(*x);
      }
      return op(b->op == BoolOpKind::And ? "and" : "or", xs);
    }
    if (auto *i = dyn_cast<IfExp>(&e)) {
      auto c = translate(*i->cond, depth + 1), a = translate(*i->then_value, depth + 1),
           b = translate(*i->else_value, depth + 1);
      if (!c || !a || !b) return std::nullopt;
      return op("if", {*c, *a, *b});
    }
    if (auto *c = dyn_cast<Call>(&e)) {
      if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && attr->attr == "to") return translate(*attr->value, depth + 1);
      const std::string callee = emit::print_expr(*c->func);
      auto axis = [&]() -> std::optional<int64_t> {
        const Expr *a = ad::call_argument(*c, 0, "axis");
        auto *i = a ? dyn_cast<IntLit>(a) : nullptr;
        return i ? std::optional<int64_t>(i->value) : std::nullopt;
      };
      if (callee == "tl.program_id" && axis()) return json{{"program_id", *axis()}};
      // Compiler hints return their first operand (`lo = tl.multiple_of(lo, BLOCK_M)`).
      if (sema::is_compiler_hint(callee) && !c->args.empty())
        return translate(*c->args[0], depth + 1);
      if (callee == "tl.num_programs" && axis()) return json{{"grid", *axis()}};
      // A choice between scalars (a while loop's trip count, src/ad/WhileLoops.h): the protocol's if.
      if (callee == "tl.where" && c->args.size() == 3 && c->keywords.empty()) {
        auto cond = translate(*c->args[0], depth + 1), a = translate(*c->args[1], depth + 1),
             b = translate(*c->args[2], depth + 1);
        if (!cond || !a || !b) return std::nullopt;
        return op("if", {*cond, *a, *b});
      }
      if (const Function *helper = arithmetic_helper(*c)) return call_helper(*helper, *c, depth);
      const char *name = callee == "tl.cdiv" || callee == "triton.cdiv"                 ? "cdiv"
                         : callee == "min" || callee == "tl.minimum"                       ? "min"
                         : callee == "max" || callee == "tl.maximum"                       ? "max"
                                                                                           : nullptr;
      if (name && c->args.size() == 2 && c->keywords.empty()) {
        auto l = translate(*c->args[0], depth + 1), r = translate(*c->args[1], depth + 1);
        if (!l || !r) return std::nullopt;
        return op(name, {*l, *r});
      }
    }
    return fail("'" + emit::print_expr(e) + "' is computed in a way the protocol does not express");
  }

  // The largest trip count of `for v in range(...)` over the forward's programs.
  std::optional<json> trips(const For &loop) {
    env_.clear();
    if (!execute(fn_.body, loop)) return fail("the loop was not found");
    auto *c = dyn_cast<Call>(loop.iter.get());
    const std::string callee = c ? emit::print_expr(*c->func) : "";
    if (!c || (callee != "range" && callee != "tl.range") || c->args.empty() || c->args.size() > 3)
      return fail("the loop is not over range(...) with one to three arguments");
    json lo = 0, step = 1;
    std::optional<json> hi;
    if (c->args.size() == 1) {
      hi = translate(*c->args[0]);
    } else {
      auto l = translate(*c->args[0]);
      if (!l) return std::nullopt;
      lo = *l;
      hi = translate(*c->args[1]);
      if (c->args.size() == 3) {
        auto s = translate(*c->args[2]);
        if (!s) return std::nullopt;
        step = *s;
      }
    }
    if (!hi) return std::nullopt;
    // A literal negative step (range(n - 1, -1, -1)): the loop counts down.
    if (c->args.size() == 3)
      if (auto *neg = dyn_cast<UnaryOp>(c->args[2].get()); neg && neg->op == UnaryOpKind::Neg && isa<IntLit>(neg->operand.get()))
        return json{{"max_over_programs",
                     op("max", {0, op("cdiv", {op("sub", {lo, *hi}), json(cast<IntLit>(neg->operand.get())->value)})})}};
    return json{{"max_over_programs", op("max", {0, op("cdiv", {op("sub", {*hi, lo}), step})})}};
  }

  // `e` as an expression over launch values where `target`, a statement of the function, runs: the locals it reads
  // take their values on the path to it.
  std::optional<json> at(const Stmt &target, const Expr &e) {
    env_.clear();
    if (!execute(fn_.body, target)) return fail("the statement was not found");
    return translate(e);
  }

  const std::string &why() const { return why_; }

 private:
  std::nullopt_t fail(const std::string &why) {
    if (why_.empty()) why_ = why;
    return std::nullopt;
  }

  // Each local's value as an expression over launch values (nullopt: not
  // expressible), by executing the function's statements symbolically up
  // to `target`. An if's branches give {"if": [cond, then, else]} where they
  // differ; a name a loop assigns is unknown after it. Returns whether the
  // target was reached (its path's values are in env_).
  using Env = std::map<std::string, std::optional<json>>;
  bool execute(const StmtList &body, const Stmt &target) {
    for (const StmtPtr &s : body) {
      if (s.get() == &target) return true;
      if (auto *a = dyn_cast<Assign>(s.get())) {
        for (const ExprPtr &t : a->targets) bind(*t, a->value.get());
      } else if (auto *a = dyn_cast<AugAssign>(s.get())) {
        BinOp sum(a->op, clone(*a->target), clone(*a->value), a->span);
        bind(*a->target, &sum);
      } else if (auto *i = dyn_cast<If>(s.get())) {
        std::string why = why_;
        std::optional<json> cond = translate(*i->cond);
        why_ = why;
        // A condition the request decides (-D IS_VARLEN=False): only its branch runs.
        if (cond && (cond->is_boolean() || cond->is_number_integer())) {
          const bool taken = cond->is_boolean() ? cond->get<bool>() : cond->get<long long>() != 0;
          if (execute(taken ? i->body : i->orelse, target)) return true;
          continue;
        }
        Env before = env_;
        const bool in_then = execute(i->body, target);
        Env then_env = env_;
        if (in_then) return true;
        env_ = before;
        if (execute(i->orelse, target)) return true;
        Env else_env = env_;
        env_ = before;
        std::set<std::string> names;
        for (const auto &kv : then_env) names.insert(kv.first);
        for (const auto &kv : else_env) names.insert(kv.first);
        for (const std::string &n : names) {
          auto x = then_env.find(n), y = else_env.find(n);
          if (x == then_env.end() || y == else_env.end() || !x->second || !y->second || !cond) {
            // Defined on one path only (a constexpr-guarded name), or not expressible.
            env_[n] = x != then_env.end() && y != else_env.end() && x->second && y->second && *x->second == *y->second
                          ? x->second
                          : std::nullopt;
            continue;
          }
          env_[n] = *x->second == *y->second ? *x->second : op("if", {*cond, *x->second, *y->second});
        }
      } else if (isa<For>(s.get()) || isa<While>(s.get())) {
        std::map<std::string, int> assigned;
        ad::stmt_assignments(*s, assigned);
        for (const auto &kv : assigned) env_[kv.first] = std::nullopt;
        const StmtList &loop_body = isa<For>(s.get()) ? cast<For>(s.get())->body : cast<While>(s.get())->body;
        if (execute(loop_body, target)) return true;
      }
    }
    return false;
  }

  void bind(const Expr &target, const Expr *value) {
    if (auto *n = dyn_cast<Name>(&target)) {
      std::string why = why_;
      env_[n->id] = value ? translate(*value) : std::nullopt;
      why_ = why;
      return;
    }
    if (auto *t = dyn_cast<Tuple>(&target)) {
      auto *v = value ? dyn_cast<Tuple>(value) : nullptr;
      std::vector<std::optional<json>> parts;
      for (size_t k = 0; k < t->elts.size(); ++k) {
        std::string why = why_;
        parts.push_back(v && v->elts.size() == t->elts.size() ? translate(*v->elts[k]) : std::nullopt);
        why_ = why;
      }
      // Python evaluates the whole right side first.
      for (size_t k = 0; k < t->elts.size(); ++k)
        if (auto *n = dyn_cast<Name>(t->elts[k].get())) env_[n->id] = parts[k];
    }
  }

  // A jit helper of the module called by name whose body assigns names and returns a value (no loop, no if, no
  // memory access: what the statements below express), or null.
  const Function *arithmetic_helper(const Call &c) const {
    auto *callee = dyn_cast<Name>(c.func.get());
    if (!module_ || !callee) return nullptr;
    for (const auto &f : module_->functions) {
      if (f->name != callee->id || f->body.empty() || !isa<Return>(f->body.back().get())) continue;
      for (const StmtPtr &s : f->body)
        if (auto *e = dyn_cast<ExprStmt>(s.get()); e && !isa<StrLit>(e->value.get())) return nullptr;  // (a docstring)
        else if (!e && !isa<Assign>(s.get()) && !isa<Return>(s.get()) && !isa<Pass>(s.get())) return nullptr;
      return f.get();
    }
    return nullptr;
  }

  // The helper's returned value with its parameters bound to the call's arguments (or their defaults).
  std::optional<json> call_helper(const Function &helper, const Call &c, int depth) {
    Env inner;
    for (size_t k = 0; k < helper.params.size(); ++k) {
      const Param &p = helper.params[k];
      const Expr *arg = ad::call_argument(c, k, p.name);
      if (!arg) arg = p.default_value.get();
      if (!arg) return fail("the call of '" + helper.name + "' does not give '" + p.name + "'");
      std::optional<json> v = translate(*arg, depth + 1);
      if (!v) return std::nullopt;
      inner[p.name] = *v;
    }
    Env outer = std::move(env_);
    const bool was_in_helper = in_helper_;
    env_ = std::move(inner);
    in_helper_ = true;
    std::optional<json> out;
    for (const StmtPtr &s : helper.body) {
      if (auto *a = dyn_cast<Assign>(s.get()))
        for (const ExprPtr &t : a->targets) bind(*t, a->value.get());
      if (auto *r = dyn_cast<Return>(s.get())) {
        out = r->value ? translate(*r->value, depth + 1) : fail("'" + helper.name + "' returns nothing");
        break;
      }
    }
    env_ = std::move(outer);
    in_helper_ = was_in_helper;
    return out;
  }

  const Function &fn_;
  const sema::ParamTypes *known_ = nullptr;
  const Module *module_ = nullptr;
  bool in_helper_ = false;
  Env env_;
  std::string why_;
};

// The forward's loops that start at (line, column): one, or one per call of
// an inlined helper that holds it.
void find_loops(const StmtList &body, int line, int column, std::vector<const For *> &out) {
  for (const StmtPtr &s : body) {
    if (auto *f = dyn_cast<For>(s.get())) {
      if (f->span.begin.line == line && f->span.begin.column == column) out.push_back(f);
      find_loops(f->body, line, column, out);
    } else if (auto *i = dyn_cast<If>(s.get())) {
      find_loops(i->body, line, column, out);
      find_loops(i->orelse, line, column, out);
    } else if (auto *w = dyn_cast<While>(s.get())) {
      find_loops(w->body, line, column, out);
    }
  }
}

json numel(const std::string &p) { return json{{"numel", p}}; }

// The backward's `tl.device_assert(COND, "tgrad: ...")` statements: the layouts its plain gradient stores assume
// (rows that do not overlap: `stride >= n_cols`, src/ad/AccessAnalysis.cpp), in the order they appear.
void find_assumptions(const StmtList &body, std::vector<std::pair<const ExprStmt *, const Call *>> &out) {
  for (const StmtPtr &s : body) {
    if (auto *e = dyn_cast<ExprStmt>(s.get())) {
      auto *c = dyn_cast<Call>(e->value.get());
      if (c && c->args.size() == 2 && emit::print_expr(*c->func) == "tl.device_assert")
        if (auto *m = dyn_cast<StrLit>(c->args[1].get()); m && m->value.rfind("tgrad: ", 0) == 0) out.push_back({e, c});
    } else if (auto *f = dyn_cast<For>(s.get())) {
      find_assumptions(f->body, out);
    } else if (auto *i = dyn_cast<If>(s.get())) {
      find_assumptions(i->body, out);
      find_assumptions(i->orelse, out);
    } else if (auto *w = dyn_cast<While>(s.get())) {
      find_assumptions(w->body, out);
    }
  }
}

// What the backward's plain stores assume of the launch, as checks over launch values a launcher evaluates before
// it runs the backward: a device assertion fires only in Triton's debug mode, and where the assumption fails (an
// input whose rows overlap, `x.expand(...)`: stride 0), programs' plain stores race and the gradient is wrong
// without a word. Each assertion of every kernel counts, whichever flag values or branch launch it: a launch that
// breaks one is refused even where its branch would not have needed it (rows that overlap are rare; a wrong
// gradient is not an option).
json host_assumptions(const ast::Module &backward) {
  json out = json::array();
  for (const auto &fn : backward.functions) {
    std::vector<std::pair<const ExprStmt *, const Call *>> found;
    find_assumptions(fn->body, found);
    for (const auto &[stmt, call] : found) {
      ExprTranslator translate(*fn);
      std::optional<json> check = translate.at(*stmt, *call->args[0]);
      json e = {{"kernel", fn->name},
                {"assumes", emit::print_expr(*call->args[0])},
                {"message", cast<StrLit>(call->args[1].get())->value}};
      e["check"] = check ? *check : json(nullptr);
      if (!check) e["why"] = "not checked before the launch: " + translate.why();
      const bool seen = std::any_of(out.begin(), out.end(), [&](const json &o) {
        return o["check"] == e["check"] && o["assumes"] == e["assumes"];
      });
      if (!seen) out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace

json launch_protocol(const ast::Module &module, const ad::BackwardRequest &request, const ad::Backward &bwd) {
  const ast::Function *fn = module.find_function(request.function);
  const bool kernel = !bwd.gradient_buffers.empty() || bwd.output_adjoints.empty();
  json out;
  out["tgrad_version"] = kVersion;
  out["protocol"] = 2;
  out["forward"] = request.function;
  out["backward"] = bwd.backward_name;
  out["kind"] = kernel ? "kernel" : "tile function";
  // Each parameter's types: the one given, or those the generic backward serves.
  auto types_of = [&](const std::string &name) -> json {
    auto it = request.param_types.find(name);
    if (it != request.param_types.end()) return json::array({it->second.str()});
    for (const auto &g : bwd.generic_types)
      if (g.first == name) return g.second;
    return json::array();
  };
  auto gradient_of = [&](const std::string &name) -> std::string {
    for (const auto &g : bwd.gradient_buffers)
      if (g.first == name) return g.second;
    return "";
  };
  const bool has_partial_sums = !bwd.partial_sums.empty();
  const ast::Function *forward = bwd.forward ? bwd.forward.get() : fn;
  const std::vector<unsigned> accesses = fn && kernel ? ad::pointer_accesses(module, *forward) : std::vector<unsigned>{};
  json params = json::array();
  for (size_t k = 0; fn && k < fn->params.size(); ++k) {
    const std::string &p = fn->params[k].name;
    json e = {{"name", p}, {"types", types_of(p)}};
    if (k < accesses.size() && accesses[k]) {
      json kinds = json::array();
      if (accesses[k] & ad::kLoad) kinds.push_back("load");
      if (accesses[k] & ad::kStore) kinds.push_back("store");
      if (accesses[k] & ad::kAtomic) kinds.push_back("atomic");
      e["accesses"] = kinds;
    }
    bool wrt = std::find(request.wrt.begin(), request.wrt.end(), p) != request.wrt.end();
    if (fn->is_constexpr_param(k)) e["role"] = "constexpr";
    else if (wrt) e["role"] = "differentiated input";
    else if (!gradient_of(p).empty()) e["role"] = "output";
    else e["role"] = "forward argument";
    if (!gradient_of(p).empty()) e["gradient"] = gradient_of(p);
    for (const auto &z : bwd.zero_gradients)
      if (z.first == p) e["zero_gradient"] = {{"why", z.second}};
    // What the buffer must hold when the backward runs.
    e["contents"] = "as passed to the forward";
    if (std::find(bwd.saved_outputs.begin(), bwd.saved_outputs.end(), p) != bwd.saved_outputs.end()) {
      e["contents"] = "as the forward left it";
      e["why"] = "the backward reads the values the forward stored here instead of computing them again";
    }
    params.push_back(e);
  }
  for (size_t k = 0; k < bwd.gradient_buffers.size(); ++k) {
    const bool input = k < bwd.input_gradients;
    const std::string &of = bwd.gradient_buffers[k].first;
    const bool zeros = std::find(bwd.zero_initialized.begin(), bwd.zero_initialized.end(), of) != bwd.zero_initialized.end();
    json e = {{"name", bwd.gradient_buffers[k].second},
              {"types", types_of(of)},
              {"role", input ? "input gradient" : "output gradient"},
              {"of", of},
              {"shape_of", of},
              {"pass_by_keyword", true}};
    const auto consumed = std::find_if(bwd.consumed_upstream.begin(), bwd.consumed_upstream.end(),
                                       [&](const auto &c) { return c.first == of; });
    if (!input && consumed != bwd.consumed_upstream.end()) {
      e["contents"] = "upstream gradient";
      e["dtype"] = "float32";
      e["consumed"] = true;
      e["why"] = "a float32 copy of the gradient of the loss with respect to what the forward stored through " + of +
                 ", which the backward overwrites: the forward may write an address more than once (" +
                 consumed->second + "), and only the last value written takes the gradient";
    } else if (!input) {
      e["contents"] = "upstream gradient";
      e["why"] = "the gradient of the loss with respect to what the forward stored through " + of;
    } else if (std::find(bwd.in_place.begin(), bwd.in_place.end(), of) != bwd.in_place.end()) {
      e["contents"] = "upstream gradient";
      e["dtype"] = "float32";
      e["consumed"] = true;
      e["in_place"] = true;
      e["why"] = "the kernel updates " + of + " in place: on entry a float32 copy of the gradient of the loss with "
                 "respect to " + of + " after the kernel, on return the gradient with respect to " + of +
                 (std::find(bwd.saved_outputs.begin(), bwd.saved_outputs.end(), of) != bwd.saved_outputs.end()
                      ? " before it (" + of + " itself is passed as the forward left it: the kernel reads it back)"
                      : " before it (the forward's arguments are passed as they were before the kernel)");
    } else if (zeros) {
      e["contents"] = "zeros";
      e["why"] = "the backward adds to it (atomics, or additions in place) or does not write every element";
      const bool zeros_anyway = std::any_of(bwd.layout_assumptions.begin(), bwd.layout_assumptions.end(),
                                            [&](const ad::Backward::LayoutAssumption &l) {
                                              return l.input == of && l.zeros_anyway;
                                            });
      for (const ad::Backward::LayoutAssumption &l : bwd.layout_assumptions)
        if (l.input == of && !zeros_anyway) {
          e["zeros_unless"] = l.flag;
          e["why"] = "the backward stores every element the forward loads where " + l.flag + " is 1, and adds "
                     "atomically into zeros where it is 0";
        }
      if (added_once_by_its_owner(bwd, bwd.gradient_buffers[k].second)) {
        e["additions"] = "one per element";
        e["why"] = e.contains("zeros_unless")
                       ? "its owner-computes kernel stores each tile once where " +
                             e["zeros_unless"].get<std::string>() + " is 1, else adds it once into zeros (one "
                             "addition per element, the owner's); elements the forward does not load stay zero"
                       : "its owner-computes kernel adds each tile once (tl.atomic_add into zeros: one addition per "
                         "element, the owner's); elements the forward does not load stay zero";
      }
    } else {
      e["contents"] = "any";
      e["why"] = "the backward writes every element the forward loads (under the load's mask)";
    }
    params.push_back(e);
  }
  json launch_values = json::object();
  if (has_partial_sums)
    launch_values["G"] = {{"min", 1},
                          {"max", json{{"grid", 0}}},
                          {"default", op("min", {json{{"grid", 0}}, json{{"device", "multi_processor_count"}}})},
                          {"why", "the backward's programs: each loops over every G-th program of the forward and "
                                  "sums its share of the weights' gradients in its own row of the scratch"}};
  json scratch = json::array();
  for (const auto &p : bwd.partial_sums) {
    json shape = json::array({json{{"value", "G"}}, numel(p.input)});
    params.push_back({{"name", p.scratch}, {"types", {"*fp32"}}, {"role", "scratch"}, {"pass_by_keyword", true},
                      {"dtype", "float32"}, {"shape", shape}, {"contents", "any"},
                      {"why", "per-program partial sums of " + p.gradient + "; each program zeroes its row"}});
    scratch.push_back({{"name", p.scratch}, {"dtype", "float32"}, {"shape", shape}, {"contents", "any"},
                       {"why", "per-program partial sums of " + p.gradient + "; each program zeroes its row"}});
  }
  for (const auto &p : bwd.partial_sums)
    params.push_back({{"name", p.numel}, {"types", {"i32"}}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", numel(p.input)}, {"why", "the length of a row of " + p.scratch}});
  if (!bwd.num_programs_param.empty())
    params.push_back({{"name", bwd.num_programs_param}, {"types", {"i32"}}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", json{{"grid", 0}}}, {"why", "the forward's programs along axis 0, which the backward's "
                                                            "programs share out"}});
  // Tapes: [programs, trips, numel(value)] each; trips bounds every program's trip count of the loop.
  const json programs = op("mul", {json{{"grid", 0}}, json{{"grid", 1}}, json{{"grid", 2}}});
  std::map<std::string, json> trips_value;  // trips parameter -> its expression
  std::map<std::string, std::string> trips_why;
  for (const auto &t : bwd.tapes) {
    if (trips_value.count(t.trips_param)) continue;
    // The forward as differentiated (block pointers lowered, helpers that access memory inlined).
    std::vector<const For *> loops;
    if (forward) find_loops(forward->body, t.loop_line, t.loop_column, loops);
    const For *loop = loops.empty() ? nullptr : loops[0];
    ExprTranslator translate(*forward, &request.param_types, &module);
    std::optional<json> trips;
    std::vector<json> each;
    for (const For *l : loops)
      if (std::optional<json> one = translate.trips(*l)) each.push_back(*one);
    if (!loops.empty() && each.size() == loops.size()) trips = each.size() == 1 ? each[0] : op("max", each);
    trips_value[t.trips_param] = trips ? *trips : json(nullptr);
    trips_why[t.trips_param] =
        "at least the most iterations any program of the forward runs of the loop at line " + std::to_string(t.loop_line) +
        " (" + t.loop_range + "); smaller, the gradients come out NaN" +
        (trips ? std::string()
               : "; tgrad cannot express the bound: " + (loop ? translate.why() : std::string("the loop was not found")) +
                     ". Pass the largest trip count yourself, or give the tl.constexpr flags its computation tests "
                     "(an `if IS_VARLEN:` whose branch loads the length) with -D");
  }
  // A tile's element count from its factors: numbers, or constexpr arguments by name.
  auto elements_of = [&](const std::vector<std::string> &tile) {
    json elements = 1;
    for (const std::string &d : tile) {
      json dim = std::all_of(d.begin(), d.end(), ::isdigit) ? json(std::stoll(d)) : json{{"arg", d}};
      elements = elements == json(1) ? dim : op("mul", {elements, dim});
    }
    return elements;
  };
  std::vector<std::string> trips_done;
  for (const auto &t : bwd.tapes) {
    const json &trips = trips_value.at(t.trips_param);
    json shape = json::array({programs, trips.is_null() ? json{{"param", t.trips_param}} : trips});
    json elements = elements_of(t.tile_shape);
    if (!t.other_tile_shapes.empty()) {  // specializations taping other sizes under this name: the largest
      std::vector<json> each{elements};
      for (const auto &o : t.other_tile_shapes) each.push_back(elements_of(o));
      elements = op("max", each);
    }
    shape.push_back(elements);
    const std::string why = "the value of '" + t.value + "' entering each iteration of the loop at line " +
                            std::to_string(t.loop_line) + " (" + t.loop_range + "), per program: the backward runs " +
                            "that loop in reverse";
    // Triton's signature spelling ("*fp32", "*i64") and torch's dtype name (tl's: float32, int64).
    const bool integer = sema::is_integer(t.dtype);
    const std::string type = std::string("*") + (integer ? "i" + std::to_string(sema::bits(t.dtype)) : "fp32");
    const std::string dtype = sema::tl_name(t.dtype);
    params.push_back({{"name", t.scratch}, {"types", {type}}, {"role", "scratch"}, {"pass_by_keyword", true},
                      {"dtype", dtype}, {"shape", shape}, {"contents", "any"}, {"why", why}});
    scratch.push_back({{"name", t.scratch}, {"dtype", dtype}, {"shape", shape}, {"contents", "any"}, {"why", why}});
  }
  for (const auto &t : bwd.tapes) {
    if (std::find(trips_done.begin(), trips_done.end(), t.trips_param) != trips_done.end()) continue;
    trips_done.push_back(t.trips_param);
    params.push_back({{"name", t.trips_param}, {"types", {"i32"}}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", trips_value.at(t.trips_param)}, {"why", trips_why.at(t.trips_param)}});
  }
  // Saved tiles: [programs, numel(value)] each, which the prologue writes and the owner-computes kernels read.
  std::set<std::string> owner_params;
  for (const auto &t : bwd.saved_tiles) {
    // Laid out like an output of the forward (the backward kernel saves a row statistic at that output's rows),
    // or one row per forward program (the prologue saves it).
    const json shape = t.like.empty() ? json::array({programs, elements_of(t.tile_shape)}) : json::array({numel(t.like)});
    const std::string why =
        t.like.empty() ? "the value of '" + t.value + "' in each program of the forward, which " + bwd.prologue_kernel +
                             " computes once per program for the owner-computes kernels to read"
        : t.by_backward_kernel
            ? "the row statistic '" + t.value + "', which " + bwd.backward_name + " saves at the rows of '" + t.like +
                  "' (laid out like it) for the owner-computes kernels to read"
            : "the tile '" + t.value + "' in the dtype of '" + t.dtype_of + "' (what the owner-computes kernels cast "
                  "it to), which " + bwd.prologue_kernel + " computes once at each element of '" + t.like +
                  "' (laid out like it) for them to read";
    const bool integer = sema::is_integer(t.dtype);
    const std::string type = std::string("*") + (integer ? "i" : "fp") + std::to_string(sema::bits(t.dtype));
    const std::string dtype = sema::tl_name(t.dtype);
    json param = {{"name", t.scratch}, {"types", {t.dtype == sema::DType::BF16 ? "*bf16" : type}},
                  {"role", "scratch"}, {"pass_by_keyword", true}, {"dtype", dtype}, {"shape", shape},
                  {"contents", "any"}, {"why", why}};
    json entry = {{"name", t.scratch}, {"dtype", dtype}, {"shape", shape}, {"contents", "any"}, {"why", why}};
    if (!t.dtype_of.empty()) {  // (the dtype a launch passes there: `dtype` is the one this backward was typed for)
      for (const json &q : params)
        if (q.contains("name") && q["name"] == t.dtype_of && q.contains("types")) param["types"] = q["types"];
      param["dtype_of"] = t.dtype_of;
      entry["dtype_of"] = t.dtype_of;
    }
    if (!t.like.empty()) {
      param["like"] = t.like;
      entry["like"] = t.like;
    }
    params.push_back(param);
    scratch.push_back(entry);
    if (!t.by_backward_kernel) owner_params.insert(t.scratch);  // not the backward kernel's (a prologue's)
  }
  // Layout flags: 1 where a box of strides keeps a gradient's cells apart (its plain stores), else 0 (its atomic
  // additions into zeros). One flag's boxes in several specializations must all be apart.
  std::map<std::string, json> flag_checks;
  std::map<std::string, std::string> flag_texts;
  std::vector<std::string> flags_in_order;
  for (const ad::Backward::LayoutAssumption &l : bwd.layout_assumptions) {
    json extents = json::array(), strides = json::array();
    std::string text;
    bool expressed = forward != nullptr;
    std::optional<ExprTranslator> translator;
    if (forward) translator.emplace(*forward);
    for (const auto &[extent, stride] : l.extent_stride) {
      if (!expressed) break;
      ExprTranslator &translate = *translator;
      std::optional<json> e = translate.translate(*extent), s = translate.translate(*stride);
      expressed = e && s;
      if (!expressed) break;
      extents.push_back(*e);
      strides.push_back(*s);
      text += (text.empty() ? "" : ", ") + emit::print_expr(*stride) + " over " + emit::print_expr(*extent);
    }
    // (Not expressed: 0, the atomic additions, always right.)
    json check = expressed ? json{{"disjoint", json::array({extents, strides})}} : json(false);
    if (!flag_checks.count(l.flag)) {
      flags_in_order.push_back(l.flag);
      flag_checks[l.flag] = check;
      flag_texts[l.flag] = "'" + l.input + "' (" + text + ")";
    } else if (flag_checks[l.flag] != check) {
      flag_checks[l.flag] = op("and", {flag_checks[l.flag], check});
      flag_texts[l.flag] += " and (" + text + ")";
    }
  }
  for (const std::string &f : flags_in_order)
    params.push_back({{"name", f}, {"types", {"i32"}}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", op("if", {flag_checks[f], 1, 0})},
                      {"why", "1 where the strides keep the cells of " + flag_texts[f] + " apart: each program and "
                              "lane then stores its own addresses of the gradient; 0 (an expanded view: stride 0) "
                              "makes the backward add them atomically into zeros"}});
  // Owner-computes kernels: the forward's grid size along the axis each loops over.
  std::set<std::string> programs_params;
  for (const auto &o : bwd.owner_kernels) {
    if (o.programs_param.empty()) continue;  // the kernel computes what it loops over
    owner_params.insert(o.programs_param);
    if (!programs_params.insert(o.programs_param).second) continue;
    params.push_back({{"name", o.programs_param}, {"types", {"i32"}}, {"role", "size"}, {"pass_by_keyword", true},
                      {"value", json{{"grid", o.summed_axis}}},
                      {"why", "the forward's grid size along axis " + std::to_string(o.summed_axis) + ": " + o.name +
                                  "'s programs loop over the forward's programs along it"}});
  }
  for (const std::string &b : bwd.output_adjoints) params.push_back({{"name", b}, {"role", "output adjoint"}});
  out["parameters"] = params;
  out["launch_values"] = launch_values;
  if (kernel) {
    // The backward takes the forward's arguments in order (constexprs
    // included), then its own parameters by keyword.
    json call = {{"positional", json::array()}, {"keyword", json::array()}};
    for (size_t k = 0; fn && k < fn->params.size(); ++k) call["positional"].push_back(fn->params[k].name);
    for (const json &p : params)
      if (p.contains("pass_by_keyword") && !owner_params.count(p["name"].get<std::string>()))
        call["keyword"].push_back(p["name"]);
    json kernels = json::array();
    if (!has_partial_sums) {
      if (!bwd.prologue_kernel.empty()) {
        json prologue_call = call;
        for (const auto &t : bwd.saved_tiles) prologue_call["keyword"].push_back(t.scratch);
        kernels.push_back({{"name", bwd.prologue_kernel},
                           {"grid", json::array({json{{"grid", 0}}, json{{"grid", 1}}, json{{"grid", 2}}})},
                           {"call", prologue_call},
                           {"why", "runs the backward's per-program prefix once per program of the forward's grid "
                                   "(with a replay of the forward's loop where the owners need one) and saves what "
                                   "the owner-computes kernels need of it"}});
      }
      if (bwd.backward_kernel_writes)
        kernels.push_back({{"name", bwd.backward_name},
                           {"grid", json::array({json{{"grid", 0}}, json{{"grid", 1}}, json{{"grid", 2}}})},
                           {"call", call}});
      // Each owner-computes kernel: the forward's grid with the axis it sums over replaced by the loop's iterations.
      for (const auto &o : bwd.owner_kernels) {
        std::vector<const For *> loops;
        if (forward) find_loops(forward->body, o.loop_line, o.loop_column, loops);
        std::optional<json> trips;
        std::string why_not = "the loop was not found";
        if (loops.size() == 1) {
          ExprTranslator translate(*forward, nullptr, &module);
          trips = translate.trips(*loops[0]);
          why_not = translate.why();
        } else if (loops.size() > 1 && o.loop_context && !o.loop_context->body.empty()) {
          // Several loops at that position (one helper inlined twice): the loop as the backward kernel had it.
          ExprTranslator translate(*o.loop_context);
          trips = translate.trips(*cast<For>(o.loop_context->body.back().get()));
          why_not = translate.why();
        }
        json grid = json::array({json{{"grid", 0}}, json{{"grid", 1}}, json{{"grid", 2}}});
        // A grid of its own (a grouped ordering read as 2-D): its sizes over launch values.
        std::string grid_why;
        for (size_t a = 0; forward && a < o.grid_sizes.size(); ++a) {
          if (!o.grid_sizes[a]) continue;
          ExprTranslator translate(*forward);
          std::optional<json> size = translate.translate(*o.grid_sizes[a]);
          grid[a] = size ? *size : json(nullptr);
          if (!size) grid_why = "tgrad cannot express its grid size along axis " + std::to_string(a) + " (" +
                                translate.why() + ")";
        }
        grid[o.summed_axis] = trips ? *trips : json(nullptr);
        if (o.longest_first) std::swap(grid[0], grid[1]);  // (src/ad/reverse/LongestFirst.h)
        json owner_call = call;
        if (!o.programs_param.empty()) owner_call["keyword"].push_back(o.programs_param);
        for (const std::string &t : o.saved_tiles)
          if (!owner_params.count(t) && std::find(owner_call["keyword"].begin(), owner_call["keyword"].end(), t) != owner_call["keyword"].end())
            continue;  // (saved by the backward kernel: in its call already)
          else
            owner_call["keyword"].push_back(t);
        json entry = {{"name", o.name}, {"grid", grid}, {"call", owner_call}, {"why", o.why}};
        if (!trips)
          entry["why"] = o.why + "; tgrad cannot express the loop's trip count (" + why_not +
                         "): launch it over at least the most iterations any program of the forward runs";
        if (!grid_why.empty()) entry["why"] = entry["why"].get<std::string>() + "; " + grid_why;
        kernels.push_back(entry);
      }
    } else {
      // Launched in this order: the backward over G programs, then one reduction per partial-sum buffer.
      kernels.push_back({{"name", bwd.backward_name}, {"grid", json::array({json{{"value", "G"}}})}, {"call", call}});
      for (const auto &p : bwd.partial_sums)
        kernels.push_back({{"name", bwd.reduce_kernel},
                           {"grid", json::array({op("cdiv", {numel(p.input), ad::Backward::kReduceBlock})})},
                           {"arguments",
                            {{"partial", {{"buffer", p.scratch}}},
                             {"gradient", {{"buffer", p.gradient}}},
                             {"numel", numel(p.input)},
                             {"rows", {{"value", "G"}}},
                             {"BLOCK", ad::Backward::kReduceBlock},
                             {"ROWS", ad::Backward::kReduceRows}}},
                           {"why", "sums the G rows of " + p.scratch + " into " + p.gradient}});
    }
    out["kernels"] = kernels;
    if (!request.tiling.empty()) {
      // Each kernel may take launch values of its own where the kernels share nothing but what they each write:
      // every kernel an owner writing gradients no other kernel writes, no scratch, no prologue. Each then computes
      // its gradients of the forward as launched with its own block sizes, which by the user's declaration is
      // the forward as launched. Else one set of values serves every kernel (they meet in scratch and partial
      // gradients, which are the same only for the same values).
      bool apart = !has_partial_sums && bwd.prologue_kernel.empty() && !bwd.backward_kernel_writes &&
                   scratch.empty() && !bwd.owner_kernels.empty();
      std::set<std::string> written;  // (every scratch parameter is in `scratch` too)
      for (const auto &o : bwd.owner_kernels)
        for (const std::string &g : o.gradients) apart &= written.insert(g).second;
      out["tiling"] = {{"constexprs", request.tiling},
                       {"kernels_apart", apart},
                       {"why", "the user declares (--tiling) that these constexprs only tile the computation: the "
                               "forward's outputs are the same for any power of two in them, so the backward may be "
                               "launched with values of its own, the grid sizes it reads being the forward's grid for "
                               "those values" +
                                   std::string(apart ? "; each kernel writes gradients no other kernel writes and "
                                                       "they share no scratch, so each may take values of its own"
                                                     : "; the kernels share scratch or gradients, so one set of "
                                                       "values serves them all")}};
    }
  } else {
    json returns = json::array();
    for (const std::string &w : request.wrt) returns.push_back({{"adjoint_of", w}});
    out["returns"] = returns;
  }
  out["scratch_buffers"] = scratch;
  json adjoints = json::array();
  for (const std::string &e : bwd.explanations) adjoints.push_back({{"why", e}});
  out["memory_adjoints"] = adjoints;
  json assumed = bwd.module ? host_assumptions(*bwd.module) : json::array();
  if (!assumed.empty()) out["assumptions"] = assumed;
  return out;
}

std::string backward_json(const ast::Module &module, const ad::BackwardRequest &request, const ad::Backward &bwd) {
  return launch_protocol(module, request, bwd).dump(2) + "\n";
}

}  // namespace tgrad::driver
