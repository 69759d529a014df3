#include "src/ad/reverse/DeadCode.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {

namespace {

// Each loop's fixed point so far in one remove_dead_code: a later visit of the loop (the next iteration of an
// enclosing loop's fixed point, or the erasing pass) has at least as much live after it, and the analysis is
// monotone, so the earlier fixed point is a start below the new one: one walk confirms it where the loop's own
// reads did not change, instead of the two or more of a start from what is live after (2^depth walks of the
// innermost body of loops nested d deep).
using LoopEnds = std::unordered_map<const Stmt *, std::unordered_set<std::string>>;

std::unordered_set<std::string> live_in(StmtList &body, std::unordered_set<std::string> live, bool erase,
                                        LoopEnds *loop_ends);

}  // namespace

std::unordered_set<std::string> live_in(StmtList &body, std::unordered_set<std::string> live, bool erase) {
  return live_in(body, std::move(live), erase, nullptr);
}

namespace {

std::unordered_set<std::string> live_in(StmtList &body, std::unordered_set<std::string> live, bool erase,
                                        LoopEnds *loop_ends) {
  for (size_t k = body.size(); k-- > 0;) {
    Stmt &s = *body[k];
    auto drop = [&] { erase_keeping_comment(body, k); };
    if (auto *a = dyn_cast<Assign>(&s)) {
      if (const Name *t = a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr) {
        // (Most assignments bind one name: no set of targets.)
        if (!live.erase(t->id)) {
          if (erase) drop();
          continue;
        }
        reads(*a->value, live);
        continue;
      }
      std::unordered_set<std::string> targets;
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
      std::unordered_set<std::string> end = live, in;
      if (loop_ends)
        if (auto known = loop_ends->find(f); known != loop_ends->end()) end.insert(known->second.begin(), known->second.end());
      while (true) {
        in = live_in(f->body, end, false, loop_ends);
        in.erase(var);
        std::unordered_set<std::string> next = live;
        next.insert(in.begin(), in.end());
        next.insert(end.begin(), end.end());  // (from a warm start: never below it)
        if (next == end) break;
        end = std::move(next);
      }
      if (loop_ends) (*loop_ends)[f] = end;
      if (erase) {
        live_in(f->body, end, true, loop_ends);
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
      std::unordered_set<std::string> then_in = live_in(i->body, live, erase, loop_ends),
                                      else_in = live_in(i->orelse, live, erase, loop_ends);
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

}  // namespace

void remove_dead_code(StmtList &body) {
  LoopEnds ends;
  live_in(body, {}, true, &ends);
}

std::set<std::string> names_accessed_by(const StmtList &block, const std::string &access) {
  std::set<std::string> out;
  visit_exprs(block, [&](const Expr &e) {
    auto *c = dyn_cast<Call>(&e);
    if (c && !c->args.empty() && emit::print_expr(*c->func) == access) reads(*c->args[0], out);
  });
  return out;
}

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

namespace {

// A Python number as the backward writes one (0.0, -1, float('-inf')): a
// constexpr, with no .shape or .dtype for a later statement to read.
bool is_python_number(const Expr &e) {
  if (isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e)) return true;
  if (auto *u = dyn_cast<UnaryOp>(&e)) return is_python_number(*u->operand);
  if (auto *c = dyn_cast<Call>(&e)) {
    auto *f = dyn_cast<Name>(c->func.get());
    return f && (f->id == "float" || f->id == "int");
  }
  return false;
}

}  // namespace

void read_types_from_loop_inputs(StmtList &body) {
  std::map<std::string, int> assigned;
  count_assignments(body, assigned);
  // Top-level names bound to a Python number: a loop that carries one from
  // there makes it a tensor, so after the loop its type is not the entry's.
  std::set<std::string> numbers;
  for (const StmtPtr &s : body)
    if (auto *a = dyn_cast<Assign>(s.get()); a && is_python_number(*a->value)) numbers.insert(assigned_name(*a));
  // What each top-level statement assigns, once.
  std::vector<std::map<std::string, int>> assigns(body.size());
  for (size_t j = 0; j < body.size(); ++j) stmt_assignments(*body[j], assigns[j]);
  for (size_t k = 0; k < body.size(); ++k) {
    auto *loop = dyn_cast<For>(body[k].get());
    if (!loop) continue;
    const std::set<std::string> exposed = live_before(loop->body, {});
    std::map<std::string, int> in_body;
    count_assignments(loop->body, in_body);
    // Each carried value's entry: the last top-level `x = y` before the loop, y assigned once.
    std::map<std::string, std::string> entry;
    for (size_t j = 0; j < k; ++j)
      for (const auto &kv : assigns[j]) {
        const std::string &x = kv.first;
        if (!in_body.count(x) || !exposed.count(x)) continue;
        auto *a = dyn_cast<Assign>(body[j].get());
        auto *y = a && assigned_name(*a) == x ? dyn_cast<Name>(a->value.get()) : nullptr;
        if (y && assigned[y->id] <= 1 && !numbers.count(y->id)) entry[x] = y->id;
        else entry.erase(x);
      }
    // After the loop, until x is assigned again, its type is its entry's.
    for (size_t j = k + 1; j < body.size() && !entry.empty(); ++j) {
      StmtList one;
      one.push_back(std::move(body[j]));
      rewrite_exprs(one, [&](ExprPtr &e) {
        auto *attr = dyn_cast<Attribute>(e.get());
        auto *v = attr && (attr->attr == "dtype" || attr->attr == "shape") ? dyn_cast<Name>(attr->value.get()) : nullptr;
        auto it = v ? entry.find(v->id) : entry.end();
        if (it != entry.end()) attr->value = std::make_unique<Name>(it->second);
      });
      body[j] = std::move(one[0]);
      for (const auto &kv : assigns[j]) entry.erase(kv.first);  // another value from here on
    }
  }
}

int read_types_from_casts(StmtList &body) {
  // The candidates `x = y.to(tl.float32)` (and `x = tl.zeros(..., dtype=tl.float32)`) first: most backwards have none,
  // and then nothing is counted or rewritten.
  std::vector<std::pair<std::string, const Expr *>> candidates;
  std::function<void(const StmtList &)> collect = [&](const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1) {
        auto *n = dyn_cast<Name>(a->targets[0].get());
        auto *c = dyn_cast<Call>(a->value.get());
        auto *m = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
        auto *dt = c && c->args.size() == 1 && c->keywords.empty() ? dyn_cast<Attribute>(c->args[0].get()) : nullptr;
        auto *tl = dt ? dyn_cast<Name>(dt->value.get()) : nullptr;
        if (n && m && m->attr == "to" && tl && tl->id == "tl" && sema::is_dtype_name(dt->attr))
          candidates.emplace_back(n->id, dt);
        // `acc = tl.zeros(shape, dtype=tl.float32)` (or tl.full): acc.dtype is tl.float32 too.
        auto *lib = m ? dyn_cast<Name>(m->value.get()) : nullptr;
        if (n && lib && lib->id == "tl" && (m->attr == "zeros" || m->attr == "full"))
          for (const Keyword &k : c->keywords) {
            auto *kd = k.name == "dtype" ? dyn_cast<Attribute>(k.value.get()) : nullptr;
            auto *ktl = kd ? dyn_cast<Name>(kd->value.get()) : nullptr;
            if (ktl && ktl->id == "tl" && sema::is_dtype_name(kd->attr)) candidates.emplace_back(n->id, kd);
          }
      }
      if (auto *i = dyn_cast<If>(s.get())) {
        collect(i->body);
        collect(i->orelse);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        collect(f->body);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        collect(w->body);
      }
    }
  };
  collect(body);
  if (candidates.empty()) return 0;
  std::unordered_map<std::string, int> count;
  count_assignments(body, count);
  std::map<std::string, const Expr *> cast_to;  // name -> the dtype it is cast to (`tl.float32`), if assigned once
  for (const auto &[n, dt] : candidates)
    if (count[n] == 1) cast_to[n] = dt;
  int replaced = 0;
  rewrite_exprs(body, [&](ExprPtr &e) {
    auto *a = dyn_cast<Attribute>(e.get());
    auto *n = a && a->attr == "dtype" ? dyn_cast<Name>(a->value.get()) : nullptr;
    if (!n) return;
    auto it = cast_to.find(n->id);
    if (it == cast_to.end()) return;
    e = clone(*it->second);
    ++replaced;
  });
  return replaced;
}

}  // namespace tgrad::ad::reverse
