#include "src/ad/reverse/OwnerComputes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "src/ad/reverse/DeadCode.h"
#include "src/ad/reverse/GroupedOrder.h"
#include "src/ad/reverse/PrologueSaves.h"
#include "src/ad/reverse/TileOrientation.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {
namespace {

// A name no program defines: it stands for a carried value whose value at a
// given iteration tgrad cannot write down. If dead-code removal leaves it
// read, the gradient needs that value and stays with its atomics.
const char *const kNotAffine = "__tgrad_carried_not_affine__";

const Call *memory_write(const Stmt &s) {
  auto *es = dyn_cast<ExprStmt>(&s);
  auto *c = es ? dyn_cast<Call>(es->value.get()) : nullptr;
  if (!c) return nullptr;
  const std::string f = callee(*c);
  return f == "tl.store" || f.rfind("tl.atomic_", 0) == 0 || f == "tl.debug_barrier" ? c : nullptr;
}

// A memory adjoint's comment less its "atomic: <why>" line (MemorySchedule.cpp): in an owner-computes kernel the
// tile is summed in registers and written once, and the line would tell a reader the opposite.
std::string without_atomic_reason(const std::string &comment) {
  std::string out;
  size_t start = 0;
  while (start <= comment.size()) {
    size_t end = comment.find('\n', start);
    if (end == std::string::npos) end = comment.size();
    const std::string line = comment.substr(start, end - start);
    if (line.rfind("atomic: ", 0) != 0) out += (out.empty() ? "" : "\n") + line;
    start = end + 1;
  }
  return out;
}

bool writes_memory(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (memory_write(*s)) return true;
    if (auto *f = dyn_cast<For>(s.get()); f && writes_memory(f->body)) return true;
    if (auto *i = dyn_cast<If>(s.get()); i && (writes_memory(i->body) || writes_memory(i->orelse))) return true;
    if (auto *w = dyn_cast<While>(s.get()); w && writes_memory(w->body)) return true;
  }
  return false;
}

void drop_memory_writes(StmtList &block) {
  for (size_t k = block.size(); k-- > 0;) {
    Stmt &s = *block[k];
    if (memory_write(s)) {
      erase_keeping_comment(block, k);
      continue;
    }
    if (auto *f = dyn_cast<For>(&s)) drop_memory_writes(f->body);
    if (auto *i = dyn_cast<If>(&s)) {
      drop_memory_writes(i->body);
      drop_memory_writes(i->orelse);
    }
    if (auto *w = dyn_cast<While>(&s)) drop_memory_writes(w->body);
  }
}

// The names a statement assigns, at any depth.
void assigned_names(const Stmt &s, std::set<std::string> &out) {
  std::map<std::string, int> n;
  stmt_assignments(s, n);
  for (const auto &kv : n) out.insert(kv.first);
}

// A dimension or factor as tgrad writes it: digits are a literal, anything else a (constexpr) name.
ExprPtr factor_expr(const std::string &text) {
  return std::all_of(text.begin(), text.end(), ::isdigit) ? int_lit(std::stoll(text)) : name(text);
}

// The forward program's index over its whole grid, (pid0 * n1 + pid1) * n2 +
// pid2, in int64 (times a tile's element count it may pass 2**31):
// `pid(a)` and `count(a)` give the program id and grid size along axis a.
ExprPtr flat_program(const std::function<ExprPtr(int)> &pid, const std::function<ExprPtr(int)> &count) {
  ExprPtr first = pid(0);
  // (A loop's variable, an int under Triton's interpreter: tl.cast, which takes ints, not `.to`.)
  ExprPtr flat = isa<Name>(first.get()) ? call("tl.cast", list(std::move(first), dotted_name("tl.int64")))
                                        : cast_to(std::move(first), dotted_name("tl.int64"));
  for (int a = 1; a < 3; ++a)
    flat = binary(BinaryOpKind::Add, binary(BinaryOpKind::Mul, std::move(flat), count(a)), pid(a));
  return flat;
}

// The address of a saved tile's elements: scratch + flat * numel + the
// row-major offsets of a tile of `dims` (at most two).
ExprPtr saved_address(const std::string &scratch, ExprPtr flat, const std::vector<std::string> &dims) {
  ExprPtr numel = int_lit(1);
  for (size_t k = 0; k < dims.size(); ++k)
    numel = k == 0 ? factor_expr(dims[k]) : binary(BinaryOpKind::Mul, std::move(numel), factor_expr(dims[k]));
  ExprPtr at = binary(BinaryOpKind::Add, name(scratch), binary(BinaryOpKind::Mul, std::move(flat), std::move(numel)));
  auto lanes = [&](size_t k) { return call("tl.arange", list(int_lit(0), factor_expr(dims[k]))); };
  if (dims.size() == 1) return binary(BinaryOpKind::Add, std::move(at), lanes(0));
  if (dims.size() == 2) {
    auto slice = [] { return std::make_unique<Slice>(nullptr, nullptr, nullptr); };
    ExprList rows, cols;
    rows.push_back(slice());
    rows.push_back(std::make_unique<NoneLit>());
    cols.push_back(std::make_unique<NoneLit>());
    cols.push_back(slice());
    ExprPtr offsets = binary(BinaryOpKind::Add,
                             binary(BinaryOpKind::Mul, std::make_unique<Subscript>(lanes(0), std::move(rows)),
                                    factor_expr(dims[1])),
                             std::make_unique<Subscript>(lanes(1), std::move(cols)));
    return binary(BinaryOpKind::Add, std::move(at), std::move(offsets));
  }
  return at;
}

// Names whose value, at the end of `block`'s first `count` statements,
// derives from a loop among them (a replay of the forward's loop): in order,
// a loop taints every name it assigns, and an assignment taints its target
// when it reads a tainted name and clears it otherwise. `derived` gets the
// indices of the loops and of the statements that read a tainted name.
std::set<std::string> loop_results(const StmtList &block, size_t count, std::set<size_t> &derived) {
  std::set<std::string> tainted;
  for (size_t k = 0; k < count; ++k) {
    const Stmt &s = *block[k];
    std::set<std::string> assigned;
    assigned_names(s, assigned);
    if (isa<For>(&s) || isa<While>(&s)) {
      tainted.insert(assigned.begin(), assigned.end());
      derived.insert(k);
      continue;
    }
    std::set<std::string> r;
    deep_reads(s, r);
    bool reads_tainted = false;
    for (const std::string &n : r) reads_tainted |= tainted.count(n) > 0;
    if (reads_tainted) {
      derived.insert(k);
      tainted.insert(assigned.begin(), assigned.end());
    } else if (isa<Assign>(&s)) {
      for (const std::string &n : assigned) tainted.erase(n);
    }
  }
  return tainted;
}


// The names of `block` whose values depend on `tainted` (names) or on calls
// `is_seed` recognises: through assignments, a loop's range and an if's
// condition (control), and around loops (to the fixed point).
std::set<std::string> dependents(const StmtList &block, std::set<std::string> tainted,
                                 const std::function<bool(const Expr &)> &is_seed) {
  bool changed = true;
  auto depends = [&](const Expr &e) {
    std::set<std::string> r;
    reads(e, r);
    for (const std::string &n : r)
      if (tainted.count(n)) return true;
    bool seed = false;
    visit_expr(e, [&](const Expr &x) { seed |= is_seed(x); });
    return seed;
  };
  auto taint = [&](const std::string &n) { changed |= tainted.insert(n).second; };
  std::function<void(const StmtList &, bool)> walk = [&](const StmtList &b, bool control) {
    for (const StmtPtr &s : b) {
      if (auto *f = dyn_cast<For>(s.get())) {
        const bool c = control || depends(*f->iter);
        if (c)
          if (auto *v = dyn_cast<Name>(f->target.get())) taint(v->id);
        walk(f->body, c);
      } else if (auto *i = dyn_cast<If>(s.get())) {
        const bool c = control || depends(*i->cond);
        walk(i->body, c);
        walk(i->orelse, c);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        walk(w->body, control || depends(*w->cond));
      } else if (auto *a = dyn_cast<Assign>(s.get())) {
        if (control || depends(*a->value)) {
          std::set<std::string> targets;
          for (const ExprPtr &t : a->targets) reads(*t, targets);
          for (const std::string &t : targets) taint(t);
        }
      } else if (auto *a = dyn_cast<AugAssign>(s.get())) {
        if (control || depends(*a->value) || depends(*a->target))
          if (auto *t = dyn_cast<Name>(a->target.get())) taint(t->id);
      }
    }
  };
  while (changed) {
    changed = false;
    walk(block, false);
  }
  return tainted;
}

// Whether a statement reads or assigns a tainted name, at any depth.
bool touches(const Stmt &s, const std::set<std::string> &tainted) {
  std::set<std::string> names;
  deep_reads(s, names);
  assigned_names(s, names);
  for (const std::string &n : names)
    if (tainted.count(n)) return true;
  return false;
}

// `X = tl.swizzle2d(p0, p1, n0, n1, G)` with p0, p1 the program ids along
// axes 0 and 1 and n0, n1 the grid's sizes there renumbers the programs of the
// whole grid: a permutation. Summing over every program in the swizzled order
// is summing over every program, so the owners may take X[0] as the program id
// along axis 0 and X[1] as the one along axis 1. Rewrites `block` so
// (top-level statements), returning whether it did.
bool unswizzle(StmtList &block) {
  std::map<std::string, int> pid_axis, programs_axis;  // names assigned tl.program_id(a) / tl.num_programs(a)
  std::map<std::string, int> assigned;
  count_assignments(block, assigned);
  for (const StmtPtr &s : block) {
    const std::string n = assigned_name(*s);
    if (n.empty() || assigned[n] != 1) continue;
    const Expr &v = *cast<Assign>(s.get())->value;
    if (int a = program_axis_of(v); a >= 0) pid_axis[n] = a;
    if (int a = program_axis_of(v, "tl.num_programs"); a >= 0) programs_axis[n] = a;
  }
  auto axis_in = [](const Expr *e, const std::map<std::string, int> &names, const char *fn) {
    if (!e) return -1;
    if (auto *n = dyn_cast<Name>(e)) {
      auto it = names.find(n->id);
      return it == names.end() ? -1 : it->second;
    }
    return std::max(-1, program_axis_of(*e, fn));
  };
  bool changed = false;
  for (const StmtPtr &s : block) {
    const std::string x = assigned_name(*s);
    auto *c = x.empty() ? nullptr : dyn_cast<Call>(cast<Assign>(s.get())->value.get());
    if (!c || callee(*c) != "tl.swizzle2d" || c->args.size() < 4 || assigned[x] != 1) continue;
    if (axis_in(c->args[0].get(), pid_axis, "tl.program_id") != 0 ||
        axis_in(c->args[1].get(), pid_axis, "tl.program_id") != 1 ||
        axis_in(c->args[2].get(), programs_axis, "tl.num_programs") != 0 ||
        axis_in(c->args[3].get(), programs_axis, "tl.num_programs") != 1)
      continue;
    // Every read of X must be X[0] or X[1].
    bool only_elements = true;
    size_t element_reads = 0;
    visit_exprs(block, [&](const Expr &e) {
      if (auto *sub = dyn_cast<Subscript>(&e))
        if (auto *v = dyn_cast<Name>(sub->value.get()); v && v->id == x) {
          auto *i = sub->indices.size() == 1 ? dyn_cast<IntLit>(sub->indices[0].get()) : nullptr;
          if (!i || i->value > 1) only_elements = false;
          ++element_reads;
        }
    });
    std::map<std::string, int> read_count;
    count_reads(block, read_count);
    if (!only_elements || static_cast<size_t>(read_count[x]) != element_reads) continue;
    std::vector<ExprPtr> ids;
    ids.push_back(clone(*c->args[0]));
    ids.push_back(clone(*c->args[1]));
    rewrite_exprs(block, [&](ExprPtr &e) {
      auto *sub = dyn_cast<Subscript>(e.get());
      auto *v = sub ? dyn_cast<Name>(sub->value.get()) : nullptr;
      if (v && v->id == x) e = clone(*ids[cast<IntLit>(sub->indices[0].get())->value]);
    });
    changed = true;
  }
  return changed;
}

// Whether `e` reads `name`, itself or through the definitions `defs` of the names it reads (a few levels deep:
// `hi = (start_m + 1) * BLOCK_M`; a definition that reads its own name ends the walk).
bool reads_through(const Expr &e, const std::string &name, const std::map<std::string, const Expr *> &defs,
                   int depth = 0) {
  bool found = false;
  visit_expr(e, [&](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x)) {
      if (n->id == name) found = true;
      else if (auto d = defs.find(n->id); d != defs.end() && depth < 8 && reads_through(*d->second, name, defs, depth + 1))
        found = true;
    }
  });
  return found;
}

// The first forward program whose loop runs the owner's iteration `iteration`, where that loop's end is `end`,
// increasing in the program (`program`): `(program + c) * k` or `program * k + d` (k a positive integer or a
// tl.constexpr, asserted positive), with the names `end` reads resolved through `defs` (the statements that
// compute it in the owner's loop). A program runs the iteration when `iteration < end`, so the programs that do
// are those from `iteration // k - c + 1` (`(iteration - d) // k + 1`) on: the owner's loop starts there instead
// of testing every program (a causal forward's key blocks: the query blocks before the diagonal). Null where
// `end` has neither form.
ExprPtr first_program_running(const Expr &end, const std::string &program, const std::string &iteration,
                              const std::map<std::string, const Expr *> &defs,
                              const std::set<std::string> &constexprs, StmtList &assertions) {
  // Names resolved to their definitions (a few levels: `hi = (start_m + 1) * BLOCK_M`).
  std::function<const Expr *(const Expr *, int)> resolve = [&](const Expr *e, int depth) -> const Expr * {
    auto *n = dyn_cast<Name>(e);
    if (!n || n->id == program || depth > 4) return e;
    auto d = defs.find(n->id);
    return d == defs.end() ? e : resolve(d->second, depth + 1);
  };
  auto mentions = [&](const Expr &e) { return reads_through(e, program, defs); };
  auto is_program = [&](const Expr *e) {
    auto *n = dyn_cast<Name>(resolve(e, 0));
    return n && n->id == program;
  };
  // A positive step k: an integer literal, or a tl.constexpr parameter (asserted positive where it is used).
  auto positive = [&](const Expr *k) -> bool {
    if (auto *i = dyn_cast<IntLit>(k)) return i->value > 0;
    auto *n = dyn_cast<Name>(k);
    if (!n || !constexprs.count(n->id)) return false;
    assertions.push_back(std::make_unique<ExprStmt>(call(
        "tl.static_assert",
        list(std::make_unique<Compare>(name(n->id), std::vector<CompareOpKind>{CompareOpKind::Gt}, list(int_lit(0)))))));
    return true;
  };
  auto *mul = dyn_cast<BinOp>(resolve(&end, 0));
  auto *add = mul;
  if (mul && mul->op == BinaryOpKind::Mul) {
    for (auto [inner, k] : {std::pair{mul->lhs.get(), mul->rhs.get()}, std::pair{mul->rhs.get(), mul->lhs.get()}}) {
      if (mentions(*k)) continue;
      auto *sum = dyn_cast<BinOp>(resolve(inner, 0));
      if (is_program(inner)) {
        // program * k: runs where iteration < program * k, from iteration // k + 1 on.
        if (!positive(k)) return nullptr;
        return binary(BinaryOpKind::Add, binary(BinaryOpKind::FloorDiv, name(iteration), clone(*k)), int_lit(1));
      }
      if (!sum || sum->op != BinaryOpKind::Add) continue;
      for (auto [p, c] : {std::pair{sum->lhs.get(), sum->rhs.get()}, std::pair{sum->rhs.get(), sum->lhs.get()}}) {
        if (!is_program(p) || mentions(*c)) continue;
        if (!positive(k)) return nullptr;
        ExprPtr first = binary(BinaryOpKind::FloorDiv, name(iteration), clone(*k));
        if (auto *one = dyn_cast<IntLit>(c); one && one->value == 1) return first;  // (program + 1) * k
        return binary(BinaryOpKind::Add, binary(BinaryOpKind::Sub, std::move(first), clone(*c)), int_lit(1));
      }
    }
    return nullptr;
  }
  // program * k + d
  if (add && add->op == BinaryOpKind::Add) {
    for (auto [scaled, d] : {std::pair{add->lhs.get(), add->rhs.get()}, std::pair{add->rhs.get(), add->lhs.get()}}) {
      if (mentions(*d)) continue;
      auto *m = dyn_cast<BinOp>(resolve(scaled, 0));
      if (!m || m->op != BinaryOpKind::Mul) continue;
      for (auto [p, k] : {std::pair{m->lhs.get(), m->rhs.get()}, std::pair{m->rhs.get(), m->lhs.get()}}) {
        if (!is_program(p) || mentions(*k)) continue;
        if (!positive(k)) return nullptr;
        return binary(BinaryOpKind::Add,
                      binary(BinaryOpKind::FloorDiv, binary(BinaryOpKind::Sub, name(iteration), clone(*d)), clone(*k)),
                      int_lit(1));
      }
    }
  }
  return nullptr;
}

struct Atomic {
  size_t index;            // in the reverse loop's body
  std::string pointer, mask;
  const Expr *value;
  int line = 0;            // of the load whose gradient it adds
  std::string load_comment;
};


// Replaces the statements of `block` (and of its ifs) in `prefix` that assign `v` by `load`, at the first.
bool replace_definitions(StmtList &block, const std::string &v, const std::set<const Stmt *> &prefix, StmtPtr &&load) {
  bool placed = false;
  std::function<void(StmtList &)> walk = [&](StmtList &b) {
    for (size_t k = 0; k < b.size();) {
      if (auto *i = dyn_cast<If>(b[k].get())) {
        walk(i->body);
        walk(i->orelse);
        ++k;
        continue;
      }
      std::map<std::string, int> assigned;
      stmt_assignments(*b[k], assigned);
      if (!prefix.count(b[k].get()) || !assigned.count(v)) {
        ++k;
        continue;
      }
      if (!placed) {
        b[k] = std::move(load);
        placed = true;
        ++k;
      } else {
        erase_keeping_comment(b, k);
      }
    }
  };
  walk(block);
  return placed;
}

}  // namespace

// The gradient buffers a pointer is computed from (its definitions, followed back).
std::set<std::string> gradient_bases(const std::string &pointer, const std::multimap<std::string, const Expr *> &defs,
                                     const std::set<std::string> &gradient_params) {
  std::set<std::string> seen, out;
  std::vector<std::string> work{pointer};
  while (!work.empty()) {
    std::string n = work.back();
    work.pop_back();
    if (!seen.insert(n).second) continue;
    if (gradient_params.count(n)) out.insert(n);
    auto range = defs.equal_range(n);
    for (auto it = range.first; it != range.second; ++it) {
      std::set<std::string> r;
      reads(*it->second, r);
      work.insert(work.end(), r.begin(), r.end());
    }
  }
  return out;
}

void collect_defs(const StmtList &block, std::multimap<std::string, const Expr *> &defs) {
  for (const StmtPtr &s : block) {
    if (auto *a = dyn_cast<Assign>(s.get())) {
      std::set<std::string> targets;
      for (const ExprPtr &t : a->targets) reads(*t, targets);
      for (const std::string &t : targets) defs.insert({t, a->value.get()});
    }
    if (auto *f = dyn_cast<For>(s.get())) collect_defs(f->body, defs);
    if (auto *i = dyn_cast<If>(s.get())) {
      collect_defs(i->body, defs);
      collect_defs(i->orelse, defs);
    }
    if (auto *w = dyn_cast<While>(s.get())) collect_defs(w->body, defs);
  }
}

// The prologue: the backward's statements before its reverse loop, run once
// per forward program on the forward's grid (as the backward kernel ran
// them), writing no gradient, then saving each value in `saved` at its
// program's row of the scratch buffer.
static std::unique_ptr<Function> build_prologue(
    const Function &bwd, size_t loop_at, const std::vector<Backward::SavedTile> &saved,
    const std::map<std::string, std::pair<std::vector<std::string>, std::string>> &saved_at,
    NameAllocator &function_names) {
  auto prologue = std::make_unique<Function>();
  prologue->name = function_names.fresh(bwd.name + "_prologue");
  prologue->span = bwd.span;
  prologue->decorators = bwd.decorators;
  for (const Param &p : bwd.params)
    prologue->params.push_back({p.name, p.span, p.annotation ? clone(*p.annotation) : nullptr, nullptr});
  for (const Backward::SavedTile &t : saved) prologue->params.push_back({t.scratch, {}, nullptr, nullptr});
  StmtList all;
  for (const StmtPtr &s : bwd.body) {
    all.push_back(clone(*s));
    all.back()->leading_comment = s->leading_comment;  // the `# Grad of:` lines of the epilogue's adjoint
  }
  unswizzle(all);  // the owners index the saved rows by the program ids tl.swizzle2d permutes
  for (size_t k = 0; k < loop_at && k < all.size(); ++k) prologue->body.push_back(std::move(all[k]));
  drop_memory_writes(prologue->body);
  for (size_t k = 0; k < saved.size(); ++k) {
    const Backward::SavedTile &t = saved[k];
    ExprPtr flat = flat_program([](int a) { return call("tl.program_id", list(int_lit(a))); },
                                [](int a) { return call("tl.num_programs", list(int_lit(a))); });
    // (In the pointer's element type where the owners read it so: the cast each of their uses made.)
    ExprPtr value = name(t.value);
    if (!t.dtype_of.empty())
      value = std::make_unique<Call>(std::make_unique<Attribute>(std::move(value), "to"),
                                     list(dotted_name(t.dtype_of + ".dtype.element_ty")), std::vector<Keyword>{});
    std::vector<Keyword> kws;
    ExprPtr address;
    if (auto at = saved_at.find(t.scratch); at != saved_at.end()) {  // laid out like a forward output
      address = offset_address(t.scratch, at->second.first);
      kws.push_back({"mask", {}, name(at->second.second)});
    } else {
      address = saved_address(t.scratch, std::move(flat), t.tile_shape);
    }
    auto store = std::make_unique<ExprStmt>(call("tl.store", list(std::move(address), std::move(value)), std::move(kws)));
    if (k == 0)
      store->leading_comment = "Saved for the owner-computes kernels, at this program's row: each owner reads "
                               "them instead of computing them again for every program it sums over";
    prologue->body.push_back(std::move(store));
  }
  remove_dead_code(prologue->body);
  return prologue;
}

OwnerComputesResult gather_gradients_by_owner(Function &bwd,
                                              const std::vector<std::pair<std::string, std::string>> &gradients,
                                              const Module &context, const sema::ParamTypes &types,
                                              const SourceManager &sources, NameAllocator &names,
                                              NameAllocator &function_names, bool allow_prologue,
                                              const std::vector<Backward::SavedTile> &prior) {
  OwnerComputesResult out;
  StmtList &body = bwd.body;
  std::set<std::string> gradient_params;
  std::map<std::string, std::string> input_of;
  for (const auto &[input, gradient] : gradients) {
    gradient_params.insert(gradient);
    input_of[gradient] = input;
  }
  std::multimap<std::string, const Expr *> defs;
  collect_defs(body, defs);
  auto atomic_gradient = [&](const Call &c) -> std::string {
    if (callee(c) != "tl.atomic_add" || c.args.size() < 2 || !isa<Name>(c.args[0].get())) return "";
    std::set<std::string> bases = gradient_bases(cast<Name>(c.args[0].get())->id, defs, gradient_params);
    return bases.size() == 1 ? *bases.begin() : "";
  };

  // 1. The reverse loop: the last top-level loop that adds to a gradient with atomics.
  size_t loop_at = body.size();
  for (size_t k = 0; k < body.size(); ++k)
    if (auto *f = dyn_cast<For>(body[k].get()))
      for (const StmtPtr &s : f->body)
        if (const Call *c = memory_write(*s); c && !atomic_gradient(*c).empty()) loop_at = k;
  if (loop_at == body.size()) return out;
  const For &loop = *cast<For>(body[loop_at].get());
  const int loop_line = loop.span.begin.line;
  const std::string where = "line " + std::to_string(loop_line) + ": ";

  // Each gradient's atomics: all of them in that loop's body, at its top level.
  std::map<std::string, std::vector<Atomic>> atomics;
  std::map<std::string, int> atomics_elsewhere;
  const StmtList *other_loop_body = nullptr;  // while counting the body of another top-level loop
  std::function<void(const StmtList &, bool)> count_atomics = [&](const StmtList &block, bool top_of_loop) {
    for (size_t k = 0; k < block.size(); ++k) {
      const Stmt &s = *block[k];
      if (const Call *c = memory_write(s)) {
        const std::string g = atomic_gradient(*c);
        if (g.empty()) {
          // Any other write to a gradient buffer (a plain store, another atomic): leave it alone.
          std::set<std::string> r;
          if (!c->args.empty()) r = gradient_bases(emit::print_expr(*c->args[0]), defs, gradient_params);
          for (const std::string &b : r) ++atomics_elsewhere[b];
          continue;
        }
        if (!top_of_loop) {
          // Atomics at the top level of another top-level loop (the other stage of a two-stage causal forward)
          // only add to the same buffer: gathering this loop's commutes with them (a later pass may gather them
          // too).
          if (&block != other_loop_body) ++atomics_elsewhere[g];
          continue;
        }
        const Keyword *mask = nullptr;
        for (const Keyword &kw : c->keywords)
          if (kw.name == "mask") mask = &kw;
        Atomic a{k, cast<Name>(c->args[0].get())->id, "", c->args[1].get(), s.span.begin.line, s.leading_comment};
        if (mask) {
          if (!isa<Name>(mask->value.get())) {
            ++atomics_elsewhere[g];
            continue;
          }
          a.mask = cast<Name>(mask->value.get())->id;
        }
        atomics[g].push_back(a);
        continue;
      }
      if (auto *f = dyn_cast<For>(&s)) {
        const StmtList *outer = other_loop_body;
        if (&block == &body && &s != body[loop_at].get()) other_loop_body = &f->body;
        count_atomics(f->body, &s == body[loop_at].get());
        other_loop_body = outer;
      }
      if (auto *i = dyn_cast<If>(&s)) {
        count_atomics(i->body, false);
        count_atomics(i->orelse, false);
      }
      if (auto *w = dyn_cast<While>(&s)) count_atomics(w->body, false);
    }
  };
  count_atomics(body, false);

  // The program axes the kernel reads.
  std::set<int> axes;
  bool axis_unknown = false;
  visit_exprs(body, [&](const Expr &e) {
    const int a = program_axis_of(e);
    if (a >= 0) axes.insert(a);
    if (a == -1) axis_unknown = true;
  });

  // The loop: `for k in range(lo, hi, step)`.
  auto *range = dyn_cast<Call>(loop.iter.get());
  auto *loop_var = dyn_cast<Name>(loop.target.get());
  const std::string range_name = range ? callee(*range) : "";
  const bool simple_range = range && loop_var && (range_name == "range" || range_name == "tl.range") &&
                            !range->args.empty() && range->args.size() <= 3;

  // The backward's types, for the accumulator's shape: analysed once, when a gradient first gets that far.
  DiagEngine quiet(sources);
  std::optional<sema::TypeInfo> info;
  bool analysed = false;
  auto type_of_name = [&](const std::string &n) -> const SType * {
    if (!analysed) {
      info = sema::analyze(context, bwd, types, quiet);
      analysed = true;
    }
    auto d = defs.find(n);
    return info && d != defs.end() ? info->type_of(d->second) : nullptr;
  };

  // The pointer parameter a pointer is computed from, where it is one float pointer with that parameter's element
  // type as the backward types it ("" otherwise).
  std::set<std::string> pointer_params, forward_pointers;
  for (const auto &[n, t] : types)
    if (t.is_tensor() && t.elem.is_pointer) {
      pointer_params.insert(n);
      if (!gradient_params.count(n)) forward_pointers.insert(n);
    }
  // A name's one definition in the backward kernel, or null; the names its statements before the reverse loop
  // assign (what a prologue computes).
  auto definition = [&](const std::string &n) -> const Expr * {
    return defs.count(n) == 1 ? defs.find(n)->second : nullptr;
  };
  std::set<std::string> prologue_names;
  for (size_t k = 0; k < loop_at && k < body.size(); ++k) assigned_names(*body[k], prologue_names);
  // Tiles saved laid out like a forward output (cast_operand_tiles): scratch -> the offsets and mask the prologue
  // stores them at.
  std::map<std::string, std::pair<std::vector<std::string>, std::string>> saved_at;
  auto pointer_param = [&](const std::string &p) -> std::string {
    if (pointer_params.count(p)) return p;
    std::set<std::string> from = gradient_bases(p, defs, pointer_params);
    const SType *t = from.size() == 1 ? type_of_name(p) : nullptr;
    if (!t || !t->is_tensor() || !t->elem.is_pointer || t->elem.dtype != types.at(*from.begin()).elem.dtype) return "";
    return *from.begin();
  };
  // The gradients one owner kernel gathers: first all of them together
  // (attention's dK and dV need the same recomputed scores: one kernel
  // computes them once), then, where that declines, each on its own.
  std::vector<std::vector<std::string>> groups;
  if (atomics.size() > 1) {
    groups.emplace_back();
    for (const auto &kv : atomics) groups.back().push_back(kv.first);
  }
  for (const auto &kv : atomics) groups.push_back({kv.first});
  std::set<std::string> gathered;
  for (const std::vector<std::string> &group : groups) {
    if (std::any_of(group.begin(), group.end(), [&](const std::string &g) { return gathered.count(g) > 0; })) continue;
    const bool together = group.size() > 1;
    std::string gradient, inputs_text;
    for (const std::string &g : group) {
      gradient += (gradient.empty() ? "" : "_") + g;
      inputs_text += (inputs_text.empty() ? "'" : ", '") + input_of[g] + "'";
    }
    const std::string what = together ? "the gradients of " + inputs_text + " (" + gradient + ")"
                                      : "the gradient of " + inputs_text + " (" + gradient + ")";
    // (Where gathering them together declines, each is tried alone, which explains itself.)
    auto decline = [&](const std::string &why) {
      if (!together)
        out.explanations.push_back(where + what + " stays with atomics from every program: no owner-computes kernel, " +
                                   why);
    };
    if (std::any_of(group.begin(), group.end(), [&](const std::string &g) { return atomics_elsewhere.count(g) > 0; })) {
      decline("because it is also written outside the top level of the loop's body");
      continue;
    }
    if (std::any_of(group.begin(), group.end(), [&](const std::string &g) { return atomics.at(g).size() != 1; })) {
      decline("because the loop adds to it at several places");
      continue;
    }
    std::vector<const Atomic *> group_atomics;
    for (const std::string &g : group) group_atomics.push_back(&atomics.at(g)[0]);
    if (axis_unknown) {
      decline("because the kernel reads a program id of an axis tgrad cannot tell");
      continue;
    }
    if (!simple_range) {
      decline("because the loop is not `for v in range(...)`");
      continue;
    }

    // 2. The statements as the owners see them: swizzled program ids as the ids themselves.
    StmtList work;
    for (const StmtPtr &s : body) work.push_back(clone(*s));
    const bool unswizzled = unswizzle(work);
    // A 1-D grid in grouped order: its row and column ids as a 2-D grid's.
    const std::optional<GroupedOrder> grouped =
        unswizzled ? std::nullopt : read_grouped_order_as_2d(work, loop_at);
    const std::set<int> gradient_axes = grouped ? std::set<int>{0, 1} : axes;
    For &wloop = *cast<For>(work[loop_at].get());

    // 3. Which program axes the tiles' addresses and masks depend on (the same for every gradient gathered).
    // A loop whose end the forward's programs differ in (causal attention's `hi = (start_m + 1) * BLOCK_M`)
    // counts as independent of that axis where its start and step are: the owners enumerate the iterations
    // of the program with the most, and a program's contribution counts only where its loop runs that
    // iteration (a guard, below).
    std::map<int, bool> guarded_axis;                // axis -> only the loop's end depends on it
    std::map<int, std::set<std::string>> on_axis_names;  // axis -> the names that depend on it (once per axis)
    for (int a : gradient_axes) {
      const auto seed = [a](const Expr &e) { return program_axis_of(e) == a; };
      std::set<std::string> t = dependents(work, {}, seed);
      auto on_axis = [&](const Expr *e) {
        if (!e) return false;
        std::set<std::string> r;
        reads(*e, r);
        bool d = std::any_of(r.begin(), r.end(), [&](const std::string &n) { return t.count(n) > 0; });
        visit_expr(*e, [&](const Expr &x) { d |= seed(x); });
        return d;
      };
      if (simple_range && range->args.size() >= 2 && on_axis(range->args[1].get()) && !on_axis(range->args[0].get()) &&
          (range->args.size() < 3 || (!on_axis(range->args[2].get()) && (isa<IntLit>(range->args[2].get()) ||
                                                                          isa<Name>(range->args[2].get()))))) {
        // (The dependences again, with the loop's end a name nothing taints.)
        ExprPtr end = std::move(cast<Call>(wloop.iter.get())->args[1]);
        cast<Call>(wloop.iter.get())->args[1] = name(kNotAffine);
        t = dependents(work, {}, seed);
        cast<Call>(wloop.iter.get())->args[1] = std::move(end);
        guarded_axis[a] = true;
      }
      on_axis_names[a] = std::move(t);
    }
    std::vector<int> summed;
    bool same_axes = true;
    for (size_t g = 0; g < group_atomics.size(); ++g) {
      const Atomic &atomic = *group_atomics[g];
      std::vector<int> mine;
      for (int a : gradient_axes) {
        const std::set<std::string> &t = on_axis_names[a];
        if (!t.count(atomic.pointer) && (atomic.mask.empty() || !t.count(atomic.mask))) mine.push_back(a);
      }
      if (g == 0) summed = mine;
      same_axes &= mine == summed;
    }
    if (!same_axes) {
      decline("because their addresses depend on different program axes");
      continue;
    }
    if (summed.empty()) {
      decline("because its addresses or mask depend on every program axis the kernel reads (directly, or through "
              "the loop around them, as a grid-stride loop's do), so there is no axis of programs an owner could sum "
              "over");
      continue;
    }
    if (summed.size() > 1) {
      decline("because its addresses depend on none of several program axes (an owner would loop over more than "
              "one axis, not built yet)");
      continue;
    }
    const int axis = summed[0];

    // 4. Carried values: each advanced by a step the loop does not change.
    // (Carried: assigned in the body and read there before that assignment.)
    const std::set<std::string> exposed = live_before(wloop.body, {});
    std::set<std::string> carried;
    std::map<std::string, int> body_assigned;
    count_assignments(wloop.body, body_assigned);
    for (const auto &kv : body_assigned)
      if (exposed.count(kv.first)) carried.insert(kv.first);
    std::set<std::string> seeds = carried;
    seeds.insert(loop_var->id);
    const std::set<std::string> varying = dependents(wloop.body, seeds, [](const Expr &) { return false; });
    if (std::any_of(group_atomics.begin(), group_atomics.end(), [&](const Atomic *a) {
          return !varying.count(a->pointer) && (a->mask.empty() || !varying.count(a->mask));
        })) {
      decline("because its addresses do not move with the loop");
      continue;
    }
    struct Step {
      ExprPtr amount;
      bool subtract = false;
    };
    std::map<std::string, Step> steps;  // affine carried values
    std::set<const Stmt *> carried_copies;
    for (const std::string &x : carried) {
      const Assign *copy = top_level_assignment(wloop.body, x);
      auto *y = copy ? dyn_cast<Name>(copy->value.get()) : nullptr;
      if (copy) carried_copies.insert(copy);
      const Assign *update = y ? top_level_assignment(wloop.body, y->id) : nullptr;
      auto *b = update ? dyn_cast<BinOp>(update->value.get()) : nullptr;
      if (!b || body_assigned[x] != 1 || (b->op != BinaryOpKind::Add && b->op != BinaryOpKind::Sub)) continue;
      auto is_x = [&](const Expr *e) { return isa<Name>(e) && cast<Name>(e)->id == x; };
      const Expr *amount = is_x(b->lhs.get()) ? b->rhs.get() : b->op == BinaryOpKind::Add && is_x(b->rhs.get()) ? b->lhs.get() : nullptr;
      if (!amount) continue;
      std::set<std::string> r;
      reads(*amount, r);
      bool invariant = true;
      for (const std::string &n : r) invariant &= !varying.count(n);
      if (invariant) steps[x] = Step{clone(*amount), b->op == BinaryOpKind::Sub};
    }

    // 5. The owner's statements: what comes before the loop, then the loop's body at iteration `it`.
    // How many programs the owner loops over: the forward's grid size along
    // the axis (a parameter), or the grouped ordering's count of rows or
    // columns, which the kernel computes.
    const std::string programs = !grouped ? names.fresh("num_programs_" + std::to_string(axis))
                                 : axis == 0 ? grouped->rows_name
                                             : grouped->columns_name;
    std::string program;  // the forward's program id along the axis, which the owner loops over
    StmtList seq;
    std::set<const Stmt *> from_prefix;  // the statements before the reverse loop (the per-program prefix)
    for (size_t k = 0; k < loop_at; ++k) {
      const std::string n = assigned_name(*work[k]);
      if (program.empty() && !n.empty() && program_axis_of(*cast<Assign>(work[k].get())->value) == axis) {
        std::map<std::string, int> count;
        count_assignments(work, count);
        if (count[n] == 1) {
          program = n;
          continue;
        }
      }
      seq.push_back(clone(*work[k]));
      from_prefix.insert(seq.back().get());
    }
    if (program.empty()) program = names.fresh("program_" + std::to_string(axis));
    // The iteration this program owns.
    const Expr *lo = range->args.size() >= 2 ? range->args[0].get() : nullptr;
    const Expr *step = range->args.size() == 3 ? range->args[2].get() : nullptr;
    auto literal = [](const Expr *e, uint64_t v) { return e && isa<IntLit>(e) && cast<IntLit>(e)->value == v; };
    const bool counts_from_zero = (!lo || literal(lo, 0)) && (!step || literal(step, 1));
    const std::string iteration = counts_from_zero ? loop_var->id : names.fresh(loop_var->id + "_iteration");
    StmtList head;
    {
      StmtPtr own = assign(iteration, call("tl.program_id", list(int_lit(axis))));
      own->leading_comment = "The iteration of the loop at line " + std::to_string(loop_line) +
                             " this program owns the gradient tile of, and its fixed program ids";
      head.push_back(std::move(own));
      if (!counts_from_zero) {
        // After the prefix, which may compute the loop's start (a block pointer's offset).
        ExprPtr at = name(iteration);
        if (step) at = std::make_unique<BinOp>(BinaryOpKind::Mul, std::move(at), clone(*step));
        if (lo) at = std::make_unique<BinOp>(BinaryOpKind::Add, clone(*lo), std::move(at));
        seq.push_back(assign(loop_var->id, std::move(at)));
      }
    }
    // Body statements the loop does not change first, then the carried values at the iteration.
    for (const StmtPtr &s : wloop.body) {
      if (!touches(*s, varying) && !memory_write(*s)) seq.push_back(clone(*s));
    }
    for (const std::string &x : carried) {
      auto st = steps.find(x);
      if (st == steps.end()) {
        seq.push_back(assign(x, name(kNotAffine)));
        continue;
      }
      ExprPtr times = std::make_unique<BinOp>(BinaryOpKind::Mul, name(counts_from_zero ? loop_var->id : iteration),
                                              clone(*st->second.amount));
      seq.push_back(assign(x, std::make_unique<BinOp>(st->second.subtract ? BinaryOpKind::Sub : BinaryOpKind::Add,
                                                      name(x), std::move(times))));
    }
    std::vector<std::string> accs;  // each gradient's tile, summed in registers
    for (const std::string &g : group) accs.push_back(names.fresh("d" + input_of[g] + "_tile"));
    for (size_t k = 0; k < wloop.body.size(); ++k) {
      const Stmt &s = *wloop.body[k];
      if (carried_copies.count(dyn_cast<Assign>(&s))) continue;
      bool added = false;
      for (size_t g = 0; g < group_atomics.size(); ++g) {
        if (k != group_atomics[g]->index) continue;
        StmtPtr add =
            assign(accs[g], std::make_unique<BinOp>(BinaryOpKind::Add, name(accs[g]), clone(*group_atomics[g]->value)));
        add->leading_comment = without_atomic_reason(s.leading_comment);
        seq.push_back(std::move(add));
        added = true;
      }
      if (added) continue;
      if (touches(s, varying) && !memory_write(s)) seq.push_back(clone(s));
    }
    drop_memory_writes(seq);
    // The forward's program id along the axis becomes the owner's loop variable, its grid size a parameter.
    rewrite_exprs(seq, [&](ExprPtr &e) {
      if (program_axis_of(*e) == axis) e = name(program);
      else if (program_axis_of(*e, "tl.num_programs") == axis) e = name(programs);
    });
    cast_loop_variable_portably(seq, program);

    // 6. Split: what depends on the program looped over goes in the loop.
    const std::set<std::string> per_program = dependents(seq, {program}, [](const Expr &) { return false; });
    if (std::any_of(group_atomics.begin(), group_atomics.end(), [&](const Atomic *a) {
          return per_program.count(a->pointer) || (!a->mask.empty() && per_program.count(a->mask));
        })) {
      decline("because its addresses depend on the program id along axis " + std::to_string(axis) +
              " after all (through a value computed in the loop)");
      continue;
    }
    std::vector<std::vector<std::string>> tiles_dims;
    for (const Atomic *a : group_atomics) {
      const SType *pointer_type = type_of_name(a->pointer);
      std::optional<std::vector<std::string>> tile_dims;
      if (pointer_type && pointer_type->is_tensor()) tile_dims = dimension_texts(*pointer_type);
      if (!tile_dims || tile_dims->empty()) break;
      tiles_dims.push_back(*tile_dims);
    }
    if (tiles_dims.size() != group_atomics.size()) {
      decline("because tgrad cannot write the shape of its tile");
      continue;
    }
    auto owner = std::make_unique<Function>();
    owner->name = function_names.fresh(bwd.name + "_" + gradient);
    owner->span = bwd.span;
    owner->decorators = bwd.decorators;
    for (const Param &p : bwd.params)
      owner->params.push_back({p.name, p.span, p.annotation ? clone(*p.annotation) : nullptr, nullptr});
    if (!grouped) owner->params.push_back({programs, {}, nullptr, nullptr});
    for (StmtPtr &s : head) owner->body.push_back(std::move(s));
    auto inner = std::make_unique<For>(name(program),
                                       call("range", list(int_lit(0), name(programs))), StmtList{}, loop.span);
    for (StmtPtr &s : seq) {
      const bool in_loop = touches(*s, per_program) ||
                           std::find(accs.begin(), accs.end(), assigned_name(*s)) != accs.end();
      (in_loop ? inner->body : owner->body).push_back(std::move(s));
    }
    for (size_t g = 0; g < group_atomics.size(); ++g) {
      ExprList dims;
      for (const std::string &d : tiles_dims[g]) dims.push_back(factor_expr(d));
      std::vector<Keyword> fp32;
      fp32.push_back({"dtype", {}, dotted_name("tl.float32")});
      StmtPtr zero = assign(accs[g], call("tl.zeros", list(std::make_unique<Tuple>(std::move(dims))), std::move(fp32)));
      if (g == 0)
        zero->leading_comment = std::string(together ? "Its gradient tiles" : "Its gradient tile") +
                                ", summed over the forward's programs along axis " + std::to_string(axis) +
                                " (the programs that read it) in registers";
      owner->body.push_back(std::move(zero));
    }
    if (guarded_axis.count(axis)) {
      // Each forward program's loop ends where it does: its contribution counts only for iterations it runs.
      ExprPtr end = clone(*range->args[1]);
      rewrite_expr(end, [&](ExprPtr &e) {
        if (program_axis_of(*e) == axis) e = name(program);
        else if (program_axis_of(*e, "tl.num_programs") == axis) e = name(programs);
      });
      std::set<std::string> need;
      reads(*end, need);
      StmtList before, rest;
      std::vector<bool> keep(inner->body.size(), false);
      for (size_t k = inner->body.size(); k-- > 0;) {
        std::set<std::string> assigned;
        assigned_names(*inner->body[k], assigned);
        if (std::none_of(assigned.begin(), assigned.end(), [&](const std::string &n) { return need.count(n) > 0; }))
          continue;
        keep[k] = true;
        deep_reads(*inner->body[k], need);
      }
      for (size_t k = 0; k < inner->body.size(); ++k) (keep[k] ? before : rest).push_back(std::move(inner->body[k]));
      // Where the end grows with the program, the programs that run this iteration are those from one on: the
      // loop starts there, without a test per program (and MaskPeeling can split it at a causal diagonal).
      std::map<std::string, const Expr *> end_defs;
      for (const StmtPtr &st : before)
        if (auto *a = dyn_cast<Assign>(st.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()))
          end_defs.emplace(cast<Name>(a->targets[0].get())->id, a->value.get());
      const std::set<std::string> constexprs = constexpr_params(bwd);
      StmtList assertions;
      const std::string from = names.fresh(program + "_from");
      // The statement that assigns `from`: one bound, or, where the end is chosen by an if on tl.constexpr
      // parameters (a module generic over IS_CAUSAL: `hi = (start_m + 1) * BLOCK_M if IS_CAUSAL else N_CTX`), an
      // if with a bound per branch. A branch whose end does not depend on the program runs every iteration the
      // owners have (their grid is the largest number of iterations over the programs): from 0.
      StmtPtr first_stmt;
      if (ExprPtr first = first_program_running(*end, program, loop_var->id, end_defs, constexprs, assertions))
        first_stmt = assign(from, call("max", list(int_lit(0), std::move(first))));
      auto *end_name = dyn_cast<Name>(end.get());
      const If *chooser = nullptr;
      for (const StmtPtr &st : before)
        if (auto *i = dyn_cast<If>(st.get()); i && end_name) {
          std::set<std::string> assigned;
          assigned_names(*st, assigned);
          if (assigned.count(end_name->id)) chooser = i;
        }
      if (!first_stmt && chooser && !end_defs.count(end_name->id) && reads_only(*chooser->cond, constexprs)) {
        StmtList branches[2];
        bool ok = true;
        for (int side = 0; side < 2 && ok; ++side) {
          const StmtList &branch = side == 0 ? chooser->body : chooser->orelse;
          std::map<std::string, const Expr *> branch_defs = end_defs;
          for (const StmtPtr &st : branch)
            if (auto *a = dyn_cast<Assign>(st.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get()))
              branch_defs[cast<Name>(a->targets[0].get())->id] = a->value.get();
            else ok = false;  // (plain assignments only)
          auto d = branch_defs.find(end_name->id);
          if (!ok || d == branch_defs.end()) {
            ok = false;
            break;
          }
          if (!reads_through(*d->second, program, branch_defs)) {
            branches[side].push_back(assign(from, int_lit(0)));
            continue;
          }
          ExprPtr first = first_program_running(*d->second, program, loop_var->id, branch_defs, constexprs,
                                                assertions);
          if (!first) ok = false;
          else branches[side].push_back(assign(from, call("max", list(int_lit(0), std::move(first)))));
        }
        if (ok)
          first_stmt = std::make_unique<If>(clone(*chooser->cond), std::move(branches[0]), std::move(branches[1]),
                                            chooser->span);
      }
      if (first_stmt) {
        auto *r = cast<Call>(inner->iter.get());
        for (StmtPtr &st : assertions) owner->body.push_back(std::move(st));
        owner->body.push_back(std::move(first_stmt));
        r->args[0] = name(from);
        for (StmtPtr &st : rest) before.push_back(std::move(st));
        inner->leading_comment = "From the first program whose loop runs this iteration (its end depends on the program)";
      } else {
        ExprPtr runs = std::make_unique<Compare>(name(loop_var->id), std::vector<CompareOpKind>{CompareOpKind::Lt},
                                                 list(std::move(end)));
        auto guard = std::make_unique<If>(std::move(runs), std::move(rest), StmtList{}, loop.span);
        guard->leading_comment = "Only where that program's loop runs this iteration (its end depends on the program)";
        before.push_back(std::move(guard));
      }
      if (range->args.size() == 3 && isa<Name>(range->args[2].get())) {
        auto positive = std::make_unique<ExprStmt>(call(
            "tl.static_assert", list(std::make_unique<Compare>(clone(*range->args[2]),
                                                               std::vector<CompareOpKind>{CompareOpKind::Gt},
                                                               list(int_lit(0))))));
        owner->body.push_back(std::move(positive));
      }
      inner->body = std::move(before);
    }
    For &program_loop = *inner;
    owner->body.push_back(std::move(inner));
    for (size_t g = 0; g < group_atomics.size(); ++g) {
      const Atomic &atomic = *group_atomics[g];
      std::vector<Keyword> kws;
      if (!atomic.mask.empty()) kws.push_back({"mask", {}, name(atomic.mask)});
      kws.push_back({"sem", {}, std::make_unique<StrLit>("relaxed", "\"relaxed\"")});
      ExprList flush_args;
      flush_args.push_back(name(atomic.pointer));
      flush_args.push_back(name(accs[g]));
      auto flush = std::make_unique<ExprStmt>(call("tl.atomic_add", std::move(flush_args), std::move(kws)));
      if (g == 0)
        flush->leading_comment = "One addition per element and owner: programs along axis " + std::to_string(axis) +
                                 " no longer add to it one by one";
      owner->body.push_back(std::move(flush));
    }
    remove_dead_code(owner->body);

    // 7. What the owner still needs that it cannot have.
    std::set<std::string> read;
    block_reads(owner->body, read);
    if (read.count(kGroupedProgramId)) {
      decline("because it reads the forward's program id other than through the grouped ordering of its programs");
      continue;
    }
    if (read.count(kNotAffine)) {
      std::string which;
      for (const std::string &x : carried)
        if (!steps.count(x) && read.count(x)) which = x;
      decline("because it needs the value '" + which + "' the loop carries, which is not advanced by a fixed step");
      continue;
    }
    auto replays = [&] {
      for (const StmtPtr &s : program_loop.body)
        if (isa<For>(s.get()) || isa<While>(s.get())) return true;
      return false;
    };
    // A replay of the forward's loop per program looped over: the values the
    // rest reads of it come from the prologue instead, saved per program.
    std::vector<std::string> reads_saved;
    std::vector<Backward::SavedTile> new_saved;  // kept once the owner is accepted
    if (replays() && !prior.empty()) {
      decline("because what it adds needs a value of the forward's loop (a replay), and the prologue of another "
              "loop's owners does not save it");
      continue;
    }
    if (replays() && !allow_prologue) {
      decline("because what it adds needs a value of the forward's loop (a replay): each owner would replay that "
              "loop once per program it sums over (--deterministic saves it per program in a prologue kernel "
              "instead)");
      continue;
    }
    if (replays() && grouped) {
      decline("because what it adds needs a value of the forward's loop (a replay), and saving it per program is "
              "not built for a grid in grouped order");
      continue;
    }
    if (replays()) {
      StmtList &pbody = program_loop.body;
      size_t boundary = 0;
      while (boundary < pbody.size() && from_prefix.count(pbody[boundary].get())) ++boundary;
      bool ordered = true;
      for (size_t k = boundary; k < pbody.size(); ++k) ordered &= !from_prefix.count(pbody[k].get());
      std::string why_not = ordered ? "" : "the loop's statements are not in order (please report)";
      std::set<size_t> replay;
      const std::set<std::string> results = loop_results(pbody, boundary, replay);
      StmtList rest;
      for (size_t k = boundary; k < pbody.size(); ++k) rest.push_back(clone(*pbody[k]));
      // A name the owner assigns before this loop from the reverse loop's
      // body (its iteration variable, masks and pointers of the iteration)
      // is that value where the rest reads it, whatever the replayed loop,
      // which reuses the forward's names, leaves in it: the replay goes.
      std::set<std::string> of_the_iteration;
      for (const StmtPtr &st : owner->body) {
        if (st.get() != &program_loop && !from_prefix.count(st.get())) assigned_names(*st, of_the_iteration);
      }
      std::set<std::string> needed;
      for (const std::string &n : live_before(rest, {}))
        if (results.count(n) && !of_the_iteration.count(n)) needed.insert(n);
      StmtList loads;
      for (const std::string &v : needed) {
        if (!why_not.empty()) break;
        const SType *t = type_of_name(v);
        std::optional<std::vector<std::string>> dims;
        if (t && t->is_tensor() && !t->elem.is_pointer && t->shape.size() <= 2 &&
            (sema::is_float(t->elem.dtype) || (sema::is_integer(t->elem.dtype) && sema::bits(t->elem.dtype) >= 8)))
          dims = dimension_texts(*t);
        if (!dims) {
          why_not = "'" + v + "' is not a tile of numbers of a size tgrad can write down";
          break;
        }
        auto same = [&](const Backward::SavedTile &x) { return x.value == v; };
        std::string scratch;
        if (auto old = std::find_if(out.saved.begin(), out.saved.end(), same); old != out.saved.end()) {
          scratch = old->scratch;
        } else {
          scratch = names.fresh(v + "_saved");
          new_saved.push_back({scratch, v, *dims, t->elem.dtype, "", false, ""});
        }
        reads_saved.push_back(scratch);
        ExprPtr flat = flat_program(
            [&](int a) { return a == axis ? name(program) : call("tl.program_id", list(int_lit(a))); },
            [&](int a) { return a == axis ? name(programs) : call("tl.num_programs", list(int_lit(a))); });
        StmtPtr load = assign(v, call("tl.load", list(saved_address(scratch, std::move(flat), *dims))));
        load->leading_comment = "'" + v + "' of the forward's program, which the prologue saved: the forward's loop "
                                "is not replayed here";
        loads.push_back(std::move(load));
      }
      if (why_not.empty()) {
        for (size_t k = 0; k < loads.size(); ++k)
          pbody.insert(pbody.begin() + static_cast<std::ptrdiff_t>(boundary + k), std::move(loads[k]));
        for (auto k = replay.rbegin(); k != replay.rend(); ++k) pbody.erase(pbody.begin() + static_cast<std::ptrdiff_t>(*k));
        remove_dead_code(owner->body);
        if (replays()) why_not = "the replay is still needed after the saved values replace it";
      }
      if (!why_not.empty()) {
        decline("because what it adds needs values of the forward's loop (a replay), and a prologue cannot save "
                "them: " + why_not);
        continue;
      }
      for (const std::string &scratch : reads_saved) owner->params.push_back({scratch, {}, nullptr, nullptr});
    }
    // Row statistics of the forward's program (FA2's rowsum(dO * O): a reduction over tiles the program
    // loads) that every owner would recompute in every iteration: the prologue computes them once per
    // program and the owners load them.
    bool saved_statistics = false, saved_cast_tiles = false;
    if (reads_saved.empty() && !grouped) {
      // (What the statements from this loop on assign: a value an earlier call's prologue saved after them
      // is this loop's only where they leave it alone.)
      std::set<std::string> assigned_from_loop;
      for (size_t k = loop_at; k < body.size(); ++k) assigned_names(*body[k], assigned_from_loop);
      for (const std::string &v : row_statistics(program_loop.body, from_prefix, type_of_name)) {
        const SType *t = type_of_name(v);
        const std::vector<std::string> dims = *dimension_texts(*t);
        auto same = [&](const Backward::SavedTile &x) { return x.value == v; };
        std::string scratch;
        if (!prior.empty()) {
          auto earlier = std::find_if(prior.begin(), prior.end(), same);
          if (earlier == prior.end() || assigned_from_loop.count(v)) continue;  // recomputed by the owner
          scratch = earlier->scratch;
        } else if (auto old = std::find_if(out.saved.begin(), out.saved.end(), same); old != out.saved.end()) {
          scratch = old->scratch;
        } else if (auto fresh = std::find_if(new_saved.begin(), new_saved.end(), same); fresh != new_saved.end()) {
          scratch = fresh->scratch;
        } else {
          scratch = names.fresh(v + "_saved");
          new_saved.push_back({scratch, v, dims, t->elem.dtype, "", false, ""});
        }
        reads_saved.push_back(scratch);
        ExprPtr flat = flat_program(
            [&](int a) { return a == axis ? name(program) : call("tl.program_id", list(int_lit(a))); },
            [&](int a) { return a == axis ? name(programs) : call("tl.num_programs", list(int_lit(a))); });
        StmtPtr load = assign(v, call("tl.load", list(saved_address(scratch, std::move(flat), dims))));
        load->leading_comment = "'" + v + "' of the forward's program, a reduction the prologue computed once per "
                                "program: not recomputed by every owner";
        replace_definitions(program_loop.body, v, from_prefix, std::move(load));
        saved_statistics = true;
      }
      // Tiles computed from several loads that the owner reads only cast to a pointer's element type (the relu
      // epilogue's masked dC): the prologue saves each once per program in that type.
      if (prior.empty())
        for (const auto &[value, tile] :
             cast_operand_tiles(program_loop.body, from_prefix, types, type_of_name, pointer_param, forward_pointers,
                                definition, prologue_names, input_of)) {
          const std::string v = value, pointer = tile.pointer;  // (named for the lambda below)
          const std::vector<std::string> dims = *dimension_texts(*type_of_name(v));
          auto same = [&](const Backward::SavedTile &x) { return x.value == v && x.dtype_of == pointer; };
          std::string scratch;
          if (auto old = std::find_if(out.saved.begin(), out.saved.end(), same); old != out.saved.end()) {
            scratch = old->scratch;
          } else if (auto fresh = std::find_if(new_saved.begin(), new_saved.end(), same); fresh != new_saved.end()) {
            scratch = fresh->scratch;
          } else {
            scratch = names.fresh(v + "_saved");
            new_saved.push_back({scratch, v, dims, types.at(pointer).elem.dtype, tile.like, false, pointer});
            saved_at[scratch] = {tile.offsets, tile.mask};
          }
          reads_saved.push_back(scratch);
          std::vector<Keyword> masked;
          masked.push_back({"mask", {}, name(tile.mask)});
          masked.push_back({"other", {}, std::make_unique<FloatLit>(0.0, "0.0")});
          StmtPtr load = assign(v, call("tl.load", list(offset_address(scratch, tile.offsets)), std::move(masked)));
          load->leading_comment = "'" + v + "' in " + pointer + "'s dtype, which its every use here casts it to, "
                                  "saved by the prologue laid out like '" + tile.like + "': one tile loaded instead "
                                  "of the tiles it is computed from";
          replace_definitions(program_loop.body, v, from_prefix, std::move(load));
          saved_statistics = saved_cast_tiles = true;
        }
      if (saved_statistics) {
        remove_dead_code(owner->body);
        for (const std::string &scratch : reads_saved) owner->params.push_back({scratch, {}, nullptr, nullptr});
      }
    }
    sema::ParamTypes owner_types = types;
    if (!grouped) owner_types[programs] = SType::tensor({sema::DType::Int32, false}, {});
    for (const auto *saved : {&out.saved, &new_saved})
      for (const Backward::SavedTile &t : *saved)
        if (std::find(reads_saved.begin(), reads_saved.end(), t.scratch) != reads_saved.end())
          owner_types[t.scratch] = SType::tensor({t.dtype, true}, {});
    DiagEngine check(sources);
    std::optional<sema::TypeInfo> owner_info = sema::analyze(context, *owner, owner_types, check);
    if (!owner_info || check.has_errors()) {
      if (std::getenv("TGRAD_DEBUG_OWNERS")) {
        check.print_all(std::cerr);
        std::cerr << emit::print_function(*owner);
      }
      decline("because the kernel tgrad built for it does not type (please report)");
      continue;
    }
    // The owner's tiles the way round its own tile is (src/ad/reverse/TileOrientation.h), where that types.
    std::string oriented;
    {
      StmtList before = clone(program_loop.body);
      oriented = orient_loop_tiles(*owner, program_loop, *owner_info);
      DiagEngine recheck(sources);
      if (!oriented.empty() && (!sema::analyze(context, *owner, owner_types, recheck) || recheck.has_errors())) {
        if (std::getenv("TGRAD_DEBUG_OWNERS")) {
          recheck.print_all(std::cerr);
          std::cerr << emit::print_function(*owner);
        }
        program_loop.body = std::move(before);
        oriented.clear();
      }
    }

    out.saved.insert(out.saved.end(), new_saved.begin(), new_saved.end());
    Backward::OwnerKernel launch;
    launch.name = owner->name;
    launch.saved_tiles = reads_saved;
    launch.gradients = group;
    for (const std::string &g : group) launch.inputs.push_back(input_of[g]);
    launch.summed_axis = axis;
    launch.programs_param = grouped ? "" : programs;
    if (grouped) launch.grid_sizes = {axis == 0 ? nullptr : grouped->rows, axis == 1 ? nullptr : grouped->columns};
    launch.loop_line = loop.span.begin.line;
    launch.loop_column = loop.span.begin.column;
    launch.loop_range = emit::print_expr(*loop.iter);
    {
      std::unique_ptr<Function> context_fn = clone_signature(bwd);
      for (size_t k = 0; k < loop_at; ++k) context_fn->body.push_back(clone(*body[k]));
      context_fn->body.push_back(std::make_unique<For>(clone(*loop.target), clone(*loop.iter), StmtList{}, loop.span));
      launch.loop_context = std::move(context_fn);
    }
    launch.why = where + what + (together ? " are gathered by their owners: '" : " is gathered by its owners: '") +
                 owner->name +
                 "' runs one program per " +
                 "iteration of the loop and program along the other axes, loops over the forward's programs along " +
                 "axis " + std::to_string(axis) + " (its addresses do not depend on tl.program_id(" +
                 std::to_string(axis) + ")" + (unswizzled ? "; tl.swizzle2d only permutes the programs" : "") +
                 (grouped ? "; the 1-D grid's grouped ordering enumerates each (" + grouped->row + ", " +
                                grouped->column + ") once, so axis 0 stands for " + grouped->row + " over " +
                                grouped->rows_name + " programs and axis 1 for " + grouped->column + " over " +
                                grouped->columns_name + ", valid where the forward runs " + grouped->rows_name +
                                " * " + grouped->columns_name + " programs as that ordering requires"
                          : "") +
                 "), sums their contributions in registers and adds the tile once, instead of an atomic addition " +
                 "from every program in every iteration" +
                 (reads_saved.empty() ? std::string()
                  : saved_cast_tiles
                      ? "; the tiles it reads that the forward's program computes from several loads and it casts to "
                        "a pointer's element type (a masked upstream gradient, an operand of tl.dot) come from the "
                        "prologue kernel, which computes each element once, in that type, laid out like the output"
                  : saved_statistics
                      ? "; the row statistics it reads of each forward program (a reduction over tiles that program "
                        "loads) come from the prologue kernel, which computes them once per program"
                      : "; what they add needs the forward's loop, which the prologue kernel replays "
                        "once per forward program, saving the values the owners read") +
                 (oriented.empty() ? std::string()
                                   : "; it holds the loop's " + oriented +
                                         ", its own tile's axis first, so that no computed tile is transposed in "
                                         "registers (each rewrite an identity of the transpose)");
    out.explanations.push_back(launch.why);
    out.launches.push_back(launch);
    out.kernels.push_back(std::move(owner));
    // The backward kernel no longer adds them.
    auto &lbody = cast<For>(body[loop_at].get())->body;
    std::vector<size_t> erased;
    for (const Atomic *a : group_atomics) erased.push_back(a->index);
    std::sort(erased.rbegin(), erased.rend());
    for (size_t index : erased) {
      erase_keeping_comment(lbody, index);
      for (auto &[g, l] : atomics)
        for (Atomic &a : l)
          if (a.index > index) --a.index;
    }
    gathered.insert(group.begin(), group.end());
  }
  if (!out.saved.empty()) out.prologue = build_prologue(bwd, loop_at, out.saved, saved_at, function_names);
  if (!out.kernels.empty()) {
    remove_dead_code(body);
    out.backward_kernel_writes = writes_memory(body);
  }
  return out;
}

}  // namespace tgrad::ad::reverse
