#include "src/ad/reverse/TileOrientation.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {
namespace {

bool is_call(const Expr *e, const char *name) {
  auto *c = e ? dyn_cast<Call>(e) : nullptr;
  return c && callee(*c) == name;
}

// `tl.trans(x)` -> x, else null.
const Expr *transposed_operand(const Expr *e) {
  auto *c = e ? dyn_cast<Call>(e) : nullptr;
  return c && callee(*c) == "tl.trans" && c->args.size() == 1 && c->keywords.empty() ? c->args[0].get() : nullptr;
}

ExprPtr trans(ExprPtr e) { return call("tl.trans", list(std::move(e))); }

// Functions applied element by element: a transposed argument gives the transposed result.
bool elementwise(const std::string &f) {
  static const std::set<std::string> known = {
      "tl.where",     "tl.exp",        "tl.exp2",       "tl.log",       "tl.log2",      "tl.sqrt",
      "tl.rsqrt",     "tl.abs",        "tl.maximum",    "tl.minimum",   "tl.sigmoid",   "tl.fma",
      "tl.math.exp",  "tl.math.exp2",  "tl.math.log",   "tl.math.log2", "tl.math.sqrt", "tl.math.rsqrt",
      "tl.math.abs",  "tl.math.fma",   "tl.fdiv",       "tl.math.fdiv", "tl.div_rn",    "tl.math.div_rn",
      "tl.sin",       "tl.cos",        "tl.math.sin",   "tl.math.cos",  "tl.erf",       "tl.math.erf",
      "tl.clamp",     "tl.math.tanh",  "tl.exp2_approx"};
  return known.count(f) > 0;
}

struct Orientation {
  const sema::TypeInfo &types;
  std::map<std::string, const Expr *> single_def;  // names assigned once: their value
  std::map<std::string, const SType *> type_of_name;
  std::set<std::string> flipped;                   // names held transposed
  std::set<std::string> in_loop;                   // names the loop assigns
  std::set<std::string> assigned_more_than_once;

  const SType *type(const Expr &e) const {
    if (auto *n = dyn_cast<Name>(&e)) {
      auto it = type_of_name.find(n->id);
      if (it != type_of_name.end()) return it->second;
    }
    return types.type_of(&e);
  }
  size_t rank(const Expr &e) const {
    const SType *t = type(e);
    if (!t) return 99;
    return t->is_tensor() ? t->shape.size() : 0;
  }

  // A value one of whose dimensions is 1 (a broadcast row or column), built from broadcasts without a transpose.
  bool broadcast_shaped(const Expr &e) const {
    const SType *t = type(e);
    if (!t || !t->is_tensor() || t->shape.size() != 2) return false;
    return (t->shape[0].value && *t->shape[0].value == 1) || (t->shape[1].value && *t->shape[1].value == 1);
  }

  // Whether every name `e` reads is assigned at most once in the kernel: `e` then means the same wherever
  // it is written out again.
  bool reads_only_single_definitions(const Expr &e) const {
    std::set<std::string> names;
    reads(e, names);
    for (const std::string &n : names)
      if (assigned_more_than_once.count(n)) return false;
    return true;
  }

  static bool has_trans(const Expr &e) {
    bool any = false;
    visit_expr(e, [&](const Expr &x) { any |= is_call(&x, "tl.trans"); });
    return any;
  }

  // The transpose of `e` (an expression of the original kernel), or null where tgrad cannot write it.
  ExprPtr T(const Expr &e) const {
    if (auto *n = dyn_cast<Name>(&e)) {
      if (flipped.count(n->id)) return clone(e);
      const size_t r = rank(e);
      if (r == 0) return clone(e);
      if (r == 1) return broadcast(clone(e), true);  // a row [n] broadcast as [1, n] becomes [n, 1]
      if (r != 2) return nullptr;
      auto d = single_def.find(n->id);
      if (d != single_def.end())
        if (const Expr *inner = transposed_operand(d->second); inner && isa<Name>(inner) &&
                                                               reads_only_single_definitions(*inner))
          return clone(*inner);  // (y^T)^T = y
      if (d != single_def.end() && broadcast_shaped(e) && reads_only_single_definitions(*d->second)) {
        // A mask, offsets or statistic row or column: written the other way round, not transposed.
        if (ExprPtr inlined = T(*d->second); inlined && !has_trans(*inlined)) return inlined;
      }
      return trans(clone(e));
    }
    if (rank(e) == 0 && !isa<Call>(&e)) return clone(e);
    if (isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e)) return clone(e);
    if (auto *s = dyn_cast<Subscript>(&e)) {
      const int b = broadcast_axis(*s);
      if (b == 0 || rank(*s->value) != 1) return nullptr;
      return broadcast(clone(*s->value), b == 2);
    }
    if (auto *b = dyn_cast<BinOp>(&e)) {
      ExprPtr l = T(*b->lhs), r = T(*b->rhs);
      if (!l || !r) return nullptr;
      return std::make_unique<BinOp>(b->op, std::move(l), std::move(r));
    }
    if (auto *u = dyn_cast<UnaryOp>(&e)) {
      ExprPtr o = T(*u->operand);
      return o ? std::make_unique<UnaryOp>(u->op, std::move(o)) : nullptr;
    }
    if (auto *c = dyn_cast<Compare>(&e)) {
      ExprPtr l = T(*c->left);
      if (!l) return nullptr;
      ExprList rs;
      for (const ExprPtr &x : c->comparators) {
        ExprPtr y = T(*x);
        if (!y) return nullptr;
        rs.push_back(std::move(y));
      }
      return std::make_unique<Compare>(std::move(l), c->ops, std::move(rs));
    }
    if (auto *bo = dyn_cast<BoolOp>(&e)) {
      ExprList vs;
      for (const ExprPtr &x : bo->values) {
        ExprPtr y = T(*x);
        if (!y) return nullptr;
        vs.push_back(std::move(y));
      }
      return std::make_unique<BoolOp>(bo->op, std::move(vs));
    }
    if (auto *a = dyn_cast<Attribute>(&e)) {
      // A dtype is the same either way round; the shape of a flipped tile is the flipped shape, which is what
      // the transposed expression around it needs.
      auto *base = as_name(a->value.get());
      if (a->attr == "dtype" || a->attr == "type") return clone(e);
      if (a->attr == "shape" && base && flipped.count(base->id)) return clone(e);
      return nullptr;
    }
    auto *c = dyn_cast<Call>(&e);
    if (!c) return nullptr;
    if (auto *method = dyn_cast<Attribute>(c->func.get()); method && method->attr == "to") {
      ExprPtr v = T(*method->value);
      if (!v) return nullptr;
      ExprList args;
      for (const ExprPtr &x : c->args) args.push_back(clone(*x));
      std::vector<Keyword> kws;
      for (const Keyword &k : c->keywords) kws.push_back({k.name, k.name_span, clone(*k.value)});
      return std::make_unique<Call>(std::make_unique<Attribute>(std::move(v), "to"), std::move(args), std::move(kws));
    }
    const std::string f = callee(*c);
    if (f == "float" || f == "int") return clone(e);
    if (f == "tl.trans" && c->args.size() == 1 && c->keywords.empty()) {
      if (rank(*c->args[0]) != 2) return nullptr;
      return clone(*c->args[0]);
    }
    if (f == "tl.dot") {
      if (c->args.size() < 2) return nullptr;
      ExprPtr a = T(*c->args[0]), b = T(*c->args[1]);
      if (!a || !b) return nullptr;
      ExprList args = list(std::move(b), std::move(a));
      if (c->args.size() > 2) {
        ExprPtr acc = T(*c->args[2]);
        if (!acc) return nullptr;
        args.push_back(std::move(acc));
      }
      std::vector<Keyword> kws;
      for (const Keyword &k : c->keywords) {
        if (k.name == "acc") {
          ExprPtr acc = T(*k.value);
          if (!acc) return nullptr;
          kws.push_back({k.name, k.name_span, std::move(acc)});
        } else if (rank(*k.value) == 0) {
          kws.push_back({k.name, k.name_span, clone(*k.value)});
        } else {
          return nullptr;
        }
      }
      return std::make_unique<Call>(clone(*c->func), std::move(args), std::move(kws));
    }
    if (f == "tl.expand_dims" && c->args.size() == 2 && c->keywords.empty() && rank(*c->args[0]) == 1) {
      auto *axis = dyn_cast<IntLit>(c->args[1].get());
      if (!axis || axis->value > 1) return nullptr;
      return call("tl.expand_dims", list(clone(*c->args[0]), int_lit(axis->value == 1 ? 0 : 1)));
    }
    // tl.zeros(x.shape, dtype=...) and tl.full(x.shape, v, dtype=...) of a flipped x: the same call, whose
    // shape is now the flipped one (a value the same in every lane is its own transpose).
    if ((f == "tl.zeros" || f == "tl.full") && !c->args.empty()) {
      auto *shape = dyn_cast<Attribute>(c->args[0].get());
      auto *of = shape ? as_name(shape->value.get()) : nullptr;
      if (!of || shape->attr != "shape" || !flipped.count(of->id)) return nullptr;
      for (size_t k = 1; k < c->args.size(); ++k)
        if (rank(*c->args[k]) != 0) return nullptr;
      for (const Keyword &k : c->keywords)
        if (rank(*k.value) != 0 && k.name != "dtype") return nullptr;
      return clone(e);
    }
    if (f == "tl.broadcast_to" && c->args.size() == 2 && c->keywords.empty()) {
      auto *shape = dyn_cast<Attribute>(c->args[1].get());
      auto *of = shape ? as_name(shape->value.get()) : nullptr;
      if (!of || shape->attr != "shape" || !flipped.count(of->id)) return nullptr;
      ExprPtr v = T(*c->args[0]);
      return v ? call("tl.broadcast_to", list(std::move(v), clone(*c->args[1]))) : nullptr;
    }
    if (elementwise(f)) {
      ExprList args;
      for (const ExprPtr &x : c->args) {
        ExprPtr y = T(*x);
        if (!y) return nullptr;
        args.push_back(std::move(y));
      }
      std::vector<Keyword> kws;
      for (const Keyword &k : c->keywords) {
        if (rank(*k.value) != 0) return nullptr;
        kws.push_back({k.name, k.name_span, clone(*k.value)});
      }
      return std::make_unique<Call>(clone(*c->func), std::move(args), std::move(kws));
    }
    return nullptr;
  }
};

// Rewrites, children first, by the identities of the transpose, so that a reader of a flipped tile loses the
// transposes it no longer needs: (x^T)^T = x; x^T.to(t) = (x.to(t))^T; (a^T b^T)^T = b a; sum(x^T, k) = sum(x, 1-k).
void simplify(ExprPtr &e) {
  for_each_child(*e, [](ExprPtr &child) { simplify(child); });
  auto *c = dyn_cast<Call>(e.get());
  if (!c) return;
  if (auto *method = dyn_cast<Attribute>(c->func.get()); method && method->attr == "to") {
    if (const Expr *inner = transposed_operand(method->value.get())) {
      ExprPtr x = clone(*inner);
      method->value = std::move(x);
      ExprPtr whole = std::move(e);
      e = trans(std::move(whole));
    }
    return;
  }
  const std::string f = callee(*c);
  if (f == "tl.trans" && c->args.size() == 1) {
    if (const Expr *inner = transposed_operand(c->args[0].get())) {
      e = clone(*inner);
      return;
    }
    auto *d = dyn_cast<Call>(c->args[0].get());
    if (d && callee(*d) == "tl.dot" && d->args.size() == 2) {
      const Expr *a = transposed_operand(d->args[0].get()), *b = transposed_operand(d->args[1].get());
      if (a && b) {
        std::vector<Keyword> kws;
        for (const Keyword &k : d->keywords) kws.push_back({k.name, k.name_span, clone(*k.value)});
        e = std::make_unique<Call>(clone(*d->func), list(clone(*b), clone(*a)), std::move(kws));
      }
    }
    return;
  }
  if (f == "tl.sum" && c->args.size() == 2 && c->keywords.empty()) {
    const Expr *inner = transposed_operand(c->args[0].get());
    auto *axis = dyn_cast<IntLit>(c->args[1].get());
    if (inner && axis && axis->value <= 1) e = call("tl.sum", list(clone(*inner), int_lit(axis->value == 1 ? 0 : 1)));
  }
}

// Register transposes in `block`: tl.trans of a value computed in the loop other than by a load.
int register_transposes(const StmtList &block, const std::map<std::string, const Expr *> &defs,
                        const std::set<std::string> &in_loop) {
  int count = 0;
  visit_exprs(block, [&](const Expr &x) {
    const Expr *operand = transposed_operand(&x);
    if (!operand) return;
    while (auto *c = dyn_cast<Call>(operand)) {  // through casts
      auto *m = dyn_cast<Attribute>(c->func.get());
      if (!m || m->attr != "to") break;
      operand = m->value.get();
    }
    // Through names and casts to what computes the operand.
    const Expr *v = operand;
    for (int depth = 0; v && depth < 16; ++depth) {
      if (auto *n = dyn_cast<Name>(v)) {
        if (!in_loop.count(n->id)) return;  // computed before the loop
        auto d = defs.find(n->id);
        v = d == defs.end() ? nullptr : d->second;
        continue;
      }
      auto *c = dyn_cast<Call>(v);
      auto *m = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
      if (!m || m->attr != "to") break;
      v = m->value.get();
    }
    if (is_call(v, "tl.load")) return;  // a tile just loaded
    ++count;
  });
  return count;
}

// `y = tl.trans(x)` after `x = tl.dot(a, b)` in the same block, x read nowhere else: y = tl.trans(tl.dot(a, b)),
// simplified (to `tl.dot(b, a)` where a and b are transposes), x's statement gone. (The operands are read
// where x was computed: valid where nothing they read is assigned between, checked statement by statement.)
void fold_transposed_products(StmtList &block, const Function &kernel) {
  std::map<std::string, int> read_count;
  count_reads(kernel.body, read_count);
  for (size_t k = 0; k < block.size(); ++k) {
    if (auto *i = dyn_cast<If>(block[k].get())) {
      fold_transposed_products(i->body, kernel);
      fold_transposed_products(i->orelse, kernel);
      continue;
    }
    auto *use = dyn_cast<Assign>(block[k].get());
    const Expr *x = use && use->targets.size() == 1 ? transposed_operand(use->value.get()) : nullptr;
    auto *xn = x ? dyn_cast<Name>(x) : nullptr;
    if (!xn || read_count[xn->id] != 1) continue;
    for (size_t j = k; j-- > 0;) {
      auto *def = dyn_cast<Assign>(block[j].get());
      auto *target = def && def->targets.size() == 1 ? as_name(def->targets[0].get()) : nullptr;
      if (!target || target->id != xn->id) continue;
      if (!is_call(def->value.get(), "tl.dot") || cast<Call>(def->value.get())->args.size() != 2) break;
      std::set<std::string> operands;
      reads(*def->value, operands);
      std::map<std::string, int> between;
      for (size_t m = j + 1; m < k; ++m) stmt_assignments(*block[m], between);
      if (std::any_of(operands.begin(), operands.end(), [&](const std::string &n) { return between.count(n) > 0; }))
        break;
      ExprPtr folded = trans(std::move(def->value));
      simplify(folded);
      use->value = std::move(folded);
      block.erase(block.begin() + static_cast<std::ptrdiff_t>(j));
      --k;
      break;
    }
  }
}

// Each name's value where an assignment (at any depth) gives it one: the last such, for its type.
void collect_definitions(const StmtList &block, std::map<std::string, const Expr *> &defs) {
  for (const StmtPtr &s : block) {
    if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1)
      if (auto *n = as_name(a->targets[0].get())) defs[n->id] = a->value.get();
    if (auto *i = dyn_cast<If>(s.get())) {
      collect_definitions(i->body, defs);
      collect_definitions(i->orelse, defs);
    } else if (auto *f = dyn_cast<For>(s.get())) {
      collect_definitions(f->body, defs);
    } else if (auto *w = dyn_cast<While>(s.get())) {
      collect_definitions(w->body, defs);
    }
  }
}

}  // namespace

std::string orient_loop_tiles(Function &kernel, For &loop, const sema::TypeInfo &types) {
  Orientation o{types, {}, {}, {}, {}, {}};
  std::map<std::string, int> assigned;
  std::map<std::string, const Expr *> defs;
  collect_definitions(kernel.body, defs);
  count_assignments(kernel.body, assigned);
  std::map<std::string, int> loop_assigned;
  count_assignments(loop.body, loop_assigned);
  for (const auto &kv : loop_assigned) o.in_loop.insert(kv.first);
  // A name assigned the same expression everywhere (a mask written again in each branch of a tl.constexpr if,
  // or in the replay and again in the adjoint) means one value wherever its inputs do: counted as assigned once.
  std::map<std::string, std::vector<const Expr *>> all_defs;
  each_assignment(kernel.body, [&](const std::string &n, const Expr &v) { all_defs[n].push_back(&v); });
  for (auto &[n, count] : assigned) {
    auto d = all_defs.find(n);
    if (count > 1 && d != all_defs.end() && static_cast<int>(d->second.size()) == count &&
        std::all_of(d->second.begin(), d->second.end(), [&](const Expr *v) { return ast::equal(*v, *d->second[0]); })) {
      if (loop_assigned[n] == count) loop_assigned[n] = 1;  // (every definition in the loop: the loop's own)
      count = 1;
    }
  }
  for (const auto &[n, count] : assigned)
    if (count > 1) o.assigned_more_than_once.insert(n);
  for (const auto &[n, v] : defs) {
    if (assigned[n] == 1) o.single_def[n] = v;
    if (const SType *t = types.type_of(v)) o.type_of_name[n] = t;
  }

  // The shape to flip: that of the first computed tile the loop transposes in registers.
  std::optional<sema::SymShape> shape;
  visit_exprs(loop.body, [&](const Expr &x) {
    const Expr *operand = transposed_operand(&x);
    if (shape || !operand) return;
    const SType *t = o.type(*operand);
    if (!t || !t->is_tensor() || t->shape.size() != 2) return;
    const std::set<std::string> in_loop = o.in_loop;
    StmtList probe;
    probe.push_back(std::make_unique<ExprStmt>(clone(x)));
    if (register_transposes(probe, defs, in_loop) == 0) return;
    shape = t->shape;
  });
  const bool debug = std::getenv("TGRAD_DEBUG_ORIENT") != nullptr;
  if (debug) std::cerr << "orient: shape " << (shape ? sema::shape_str(*shape) : "none") << "\n";
  if (!shape) return "";
  const sema::SymShape flipped_shape{(*shape)[1], (*shape)[0]};

  // The tiles of that shape the loop computes: assigned only in the loop, and not carried by it.
  const std::set<std::string> carried = live_before(loop.body, {});
  for (const std::string &n : o.in_loop) {
    if (assigned[n] != loop_assigned[n] || carried.count(n)) continue;
    auto t = o.type_of_name.find(n);
    if (t == o.type_of_name.end() || !t->second->is_tensor() || t->second->shape != *shape) continue;
    o.flipped.insert(n);
  }
  if (debug) for (const auto &n : o.flipped) std::cerr << "orient: flip " << n << "\n";
  if (o.flipped.empty()) return "";
  const int before = register_transposes(loop.body, defs, o.in_loop);

  // Rewrite a copy: the flipped tiles' definitions transposed, everything else reading them through tl.trans.
  StmtList body = clone(loop.body);
  bool ok = true;
  std::function<void(StmtList &, const StmtList &)> rewrite = [&](StmtList &block, const StmtList &original) {
    for (size_t k = 0; k < block.size() && ok; ++k) {
      Stmt &s = *block[k];
      const Stmt &orig = *original[k];
      std::string target;
      if (auto *a = dyn_cast<Assign>(&s); a && a->targets.size() == 1)
        if (auto *n = as_name(a->targets[0].get())) target = n->id;
      if (auto *a = dyn_cast<AugAssign>(&s))
        if (auto *n = as_name(a->target.get())) target = n->id;
      if (!target.empty() && o.flipped.count(target)) {
        const Expr &value = isa<Assign>(&orig) ? *cast<Assign>(&orig)->value : *cast<AugAssign>(&orig)->value;
        ExprPtr t = o.T(value);
        if (!t) {
          if (std::getenv("TGRAD_DEBUG_ORIENT")) std::cerr << "orient: cannot transpose " << emit::print_expr(value) << "\n";
          ok = false;
          return;
        }
        if (auto *a = dyn_cast<Assign>(&s)) a->value = std::move(t);
        else cast<AugAssign>(&s)->value = std::move(t);
        continue;
      }
      if (auto *i = dyn_cast<If>(&s)) {
        rewrite(i->body, cast<If>(&orig)->body);
        rewrite(i->orelse, cast<If>(&orig)->orelse);
      } else if (auto *f = dyn_cast<For>(&s)) {
        rewrite(f->body, cast<For>(&orig)->body);
      } else if (isa<While>(&s)) {
        ok = false;
        return;
      }
      // Readers of a flipped tile read its transpose (a dtype reads the same; a shape would not). Walked
      // parents first, so that a name under `.dtype` is seen as such.
      std::function<void(ExprPtr &)> substitute = [&](ExprPtr &x) {
        if (auto *a = dyn_cast<Attribute>(x.get()))
          if (auto *n = as_name(a->value.get()); n && o.flipped.count(n->id)) {
            if (a->attr == "to") a->value = trans(clone(*n));  // a cast of the transpose
            else if (a->attr != "dtype" && a->attr != "type") ok = false;
            return;
          }
        if (auto *n = dyn_cast<Name>(x.get()); n && o.flipped.count(n->id)) {
          x = trans(clone(*n));
          return;
        }
        for_each_child(*x, substitute);
      };
      auto rewrite_root = [&](ExprPtr &root) {
        if (!root) return;
        substitute(root);
        simplify(root);
      };
      if (auto *i = dyn_cast<If>(&s)) rewrite_root(i->cond);
      else if (auto *f = dyn_cast<For>(&s)) rewrite_root(f->iter);
      else if (auto *a = dyn_cast<Assign>(&s)) rewrite_root(a->value);
      else if (auto *a = dyn_cast<AugAssign>(&s)) rewrite_root(a->value);
      else if (auto *es = dyn_cast<ExprStmt>(&s)) rewrite_root(es->value);
      else if (!isa<Pass>(&s)) ok = false;
    }
  };
  rewrite(body, loop.body);
  if (ok) fold_transposed_products(body, kernel);
  if (debug) std::cerr << "orient: rewrite " << (ok ? "ok" : "failed") << "\n";
  if (!ok) return "";
  // Statements after the loop may not read the flipped tiles (they are the loop's own).
  std::set<std::string> after;
  bool past = false;
  for (const StmtPtr &s : kernel.body) {
    if (s.get() == &loop) past = true;
    else if (past) deep_reads(*s, after);
  }
  for (const std::string &n : o.flipped)
    if (after.count(n)) {
      if (debug) std::cerr << "orient: '" << n << "' is read after the loop\n";
      return "";
    }
  const int now = register_transposes(body, defs, o.in_loop);
  if (debug) std::cerr << "orient: register transposes " << before << " -> " << now << "\n";
  if (now >= before) return "";
  loop.body = std::move(body);
  return "[" + (*shape)[0].str() + ", " + (*shape)[1].str() + "] tiles as [" + flipped_shape[0].str() + ", " +
         flipped_shape[1].str() + "]";
}

}  // namespace tgrad::ad::reverse
