#include "src/ad/Redundancy.h"

#include <functional>

#include "src/ad/AnfWalk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

// The pointer operand of a memory call: `tl.load(pointer, ...)`, `tl.store(pointer, ...)`.
const Expr *pointer_argument(const Call &c) {
  if (!c.args.empty()) return c.args[0].get();
  for (const Keyword &k : c.keywords)
    if (k.name == "pointer") return k.value.get();
  return nullptr;
}

bool writes_memory(const std::string &callee) {
  return callee == "tl.store" || callee.rfind("tl.atomic_", 0) == 0;
}

// Library calls with an effect besides their value, or whose value is not a
// function of their operands alone.
bool has_effect(const std::string &callee) {
  static const std::set<std::string> effects = {
      "tl.store", "tl.debug_barrier", "tl.device_print", "tl.device_assert", "tl.static_print",
      "tl.static_assert", "tl.inline_asm_elementwise", "print"};
  return effects.count(callee) || callee.rfind("tl.atomic_", 0) == 0;
}

// Library namespaces whose functions compute values (tl.load aside).
bool library_call(const std::string &callee) {
  for (const char *prefix : {"tl.", "triton.", "libdevice.", "math."})
    if (callee.rfind(prefix, 0) == 0) return true;
  return false;
}

const Name *root_name(const Expr &e) {
  if (auto *n = dyn_cast<Name>(&e)) return n;
  if (auto *a = dyn_cast<Attribute>(&e)) return root_name(*a->value);
  return nullptr;
}

}  // namespace

Purity::Purity(const StmtList &body, std::set<std::string> pointer_params)
    : Purity(std::vector<const StmtList *>{&body}, std::move(pointer_params)) {}

Purity::Purity(const std::vector<const StmtList *> &blocks, std::set<std::string> pointer_params)
    : pointer_params_(std::move(pointer_params)) {
  values_ = pointer_params_;
  for (const StmtList *b : blocks) collect(*b);
  // Every store and atomic, at any depth, in statements of any kind.
  std::function<void(const Expr &)> visit = [&](const Expr &e) {
    auto *c = dyn_cast<Call>(&e);
    if (!c) return;
    if (writes_memory(emit::print_expr(*c->func))) {
      const Expr *p = pointer_argument(*c);
      std::set<std::string> reached = p ? pointer_params_reached(*p) : std::set<std::string>{};
      if (reached.empty()) writes_untraced_ = true;
      written_.insert(reached.begin(), reached.end());
    }
    for (const ExprPtr &a : c->args) visit(*a);
    for (const Keyword &k : c->keywords) visit(*k.value);
  };
  std::function<void(const StmtList &)> walk = [&](const StmtList &b) {
    for (const StmtPtr &s : b) {
      if (auto *a = dyn_cast<Assign>(s.get())) visit(*a->value);
      if (auto *a = dyn_cast<AugAssign>(s.get())) visit(*a->value);
      if (auto *x = dyn_cast<ExprStmt>(s.get())) visit(*x->value);
      if (auto *f = dyn_cast<For>(s.get())) walk(f->body);
      if (auto *w = dyn_cast<While>(s.get())) walk(w->body);
      if (auto *i = dyn_cast<If>(s.get())) {
        walk(i->body);
        walk(i->orelse);
      }
    }
  };
  for (const StmtList *b : blocks) walk(*b);
}

void Purity::collect(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (auto *a = dyn_cast<Assign>(s.get()))
      for (const ExprPtr &t : a->targets)
        if (auto *n = dyn_cast<Name>(t.get())) {
          defs_[n->id].push_back(a->value.get());
          values_.insert(n->id);
        }
    if (auto *a = dyn_cast<AugAssign>(s.get()))
      if (auto *n = dyn_cast<Name>(a->target.get())) {
        defs_[n->id].push_back(a->value.get());
        values_.insert(n->id);
      }
    if (auto *f = dyn_cast<For>(s.get())) {
      if (auto *n = dyn_cast<Name>(f->target.get())) {
        defs_[n->id].push_back(f->iter.get());
        values_.insert(n->id);
      }
      collect(f->body);
    }
    if (auto *w = dyn_cast<While>(s.get())) collect(w->body);
    if (auto *i = dyn_cast<If>(s.get())) {
      collect(i->body);
      collect(i->orelse);
    }
  }
}

std::set<std::string> Purity::pointer_params_reached(const Expr &e) const {
  std::set<std::string> reached, seen, frontier;
  reads(e, frontier);
  while (!frontier.empty()) {
    std::string n = *frontier.begin();
    frontier.erase(frontier.begin());
    if (!seen.insert(n).second) continue;
    if (pointer_params_.count(n)) reached.insert(n);
    auto it = defs_.find(n);
    if (it == defs_.end()) continue;
    for (const Expr *d : it->second) reads(*d, frontier);
  }
  return reached;
}

bool Purity::pure(const Expr &value) const {
  bool ok = true;
  std::function<void(const Expr &)> visit = [&](const Expr &e) {
    if (!ok) return;
    if (auto *c = dyn_cast<Call>(&e)) {
      const Name *root = root_name(*c->func);
      const bool method = isa<Attribute>(c->func.get()) && root && values_.count(root->id);
      const std::string callee = emit::print_expr(*c->func);
      if (!method && (!library_call(callee) || has_effect(callee))) {
        ok = false;
        return;
      }
      if (callee == "tl.load") {
        const Expr *p = pointer_argument(*c);
        std::set<std::string> reached = p ? pointer_params_reached(*p) : std::set<std::string>{};
        bool is_volatile = false;
        for (const Keyword &k : c->keywords)
          if (k.name == "volatile") is_volatile = !(isa<BoolLit>(k.value.get()) && !cast<BoolLit>(k.value.get())->value);
        if (reached.empty() || writes_untraced_ || is_volatile) ok = false;
        for (const std::string &r : reached) ok = ok && !written_.count(r);
      }
      for (const ExprPtr &a : c->args) visit(*a);
      for (const Keyword &k : c->keywords) visit(*k.value);
      return;
    }
    switch (e.kind) {
      case NodeKind::BinOp:
        visit(*cast<BinOp>(&e)->lhs);
        visit(*cast<BinOp>(&e)->rhs);
        return;
      case NodeKind::UnaryOp: visit(*cast<UnaryOp>(&e)->operand); return;
      case NodeKind::Compare:
        visit(*cast<Compare>(&e)->left);
        for (const ExprPtr &x : cast<Compare>(&e)->comparators) visit(*x);
        return;
      case NodeKind::BoolOp:
        for (const ExprPtr &x : cast<BoolOp>(&e)->values) visit(*x);
        return;
      case NodeKind::IfExp:
        visit(*cast<IfExp>(&e)->cond);
        visit(*cast<IfExp>(&e)->then_value);
        visit(*cast<IfExp>(&e)->else_value);
        return;
      case NodeKind::Subscript:
        visit(*cast<Subscript>(&e)->value);
        for (const ExprPtr &x : cast<Subscript>(&e)->indices) visit(*x);
        return;
      case NodeKind::Tuple:
        for (const ExprPtr &x : cast<Tuple>(&e)->elts) visit(*x);
        return;
      case NodeKind::List:
        for (const ExprPtr &x : cast<List>(&e)->elts) visit(*x);
        return;
      case NodeKind::Attribute: visit(*cast<Attribute>(&e)->value); return;
      default: return;  // names, literals, slices of literals
    }
  };
  visit(value);
  return ok;
}

void eliminate_common_subexpressions(AnfFunction &anf, const std::set<std::string> &pointer_params,
                                     const std::set<std::string> &user_names) {
  Function &fn = *anf.fn;
  Purity purity(fn.body, pointer_params);
  std::map<std::string, int> assigned;
  count_assignments(fn.body, assigned);
  std::map<std::string, std::string> replaced;  // removed or renamed name -> the name that now holds its value
  std::map<std::string, std::string> by_value;  // printed value -> the name assigned it
  // Renamed in place, and removed statements kept alive until the end:
  // `purity` holds pointers to the values of every definition.
  auto rename = [&](ExprPtr &e) {
    auto *n = dyn_cast<Name>(e.get());
    auto it = n ? replaced.find(n->id) : replaced.end();
    if (it != replaced.end()) n->id = it->second;
  };
  StmtList kept, removed;
  for (StmtPtr &s : fn.body) {
    StmtList one;
    one.push_back(std::move(s));
    rewrite_exprs(one, rename);
    StmtPtr st = std::move(one[0]);
    const std::string target = assigned_name(*st);
    if (!target.empty() && assigned[target] == 1 && purity.pure(*cast<Assign>(st.get())->value)) {
      std::string key = emit::print_expr(*cast<Assign>(st.get())->value);
      auto [it, fresh] = by_value.emplace(key, target);
      if (!fresh) {
        const std::string earlier = it->second;
        if (user_names.count(target) && !user_names.count(earlier)) {
          // The earlier name is a temporary: the value takes the user's name
          // (`offs_cm`, not `pid_m_times_BLOCK_SIZE_M_2`), from its definition on.
          for (auto &[from, to] : replaced)
            if (to == earlier) to = target;
          replaced[earlier] = target;
          rewrite_exprs(kept, rename);
          for (StmtPtr &k : kept)
            if (assigned_name(*k) == earlier) cast<Name>(cast<Assign>(k.get())->targets[0].get())->id = target;
          // The values printed before may name the temporary: print them again.
          std::set<std::string> holders;
          for (const auto &[value, holder] : by_value) holders.insert(holder == earlier ? target : holder);
          by_value.clear();
          for (const StmtPtr &k : kept)
            if (holders.count(assigned_name(*k))) by_value.emplace(emit::print_expr(*cast<Assign>(k.get())->value), assigned_name(*k));
        } else {
          replaced[target] = earlier;
        }
        removed.push_back(std::move(st));
        continue;
      }
    }
    kept.push_back(std::move(st));
  }
  fn.body = std::move(kept);
  for (auto &[loop, carried] : anf.carried)
    for (LoopCarried &c : carried) {
      auto it = replaced.find(c.init);
      if (it != replaced.end()) c.init = it->second;
    }
}

size_t hoist_loop_invariants(StmtList &body, StmtList &before, const Purity &purity, const std::string &loop_variable) {
  std::map<std::string, int> assigned, assigned_before;
  count_assignments(body, assigned);
  count_assignments(before, assigned_before);
  std::set<std::string> varying = {loop_variable};
  for (const auto &[n, count] : assigned) varying.insert(n);
  size_t moved = 0;
  StmtList kept;
  for (StmtPtr &s : body) {
    const std::string target = assigned_name(*s);
    bool invariant = !target.empty() && assigned[target] == 1 && !assigned_before.count(target) &&
                     purity.pure(*cast<Assign>(s.get())->value);
    if (invariant) {
      std::set<std::string> read;
      stmt_reads(*s, read);
      for (const std::string &r : read) invariant = invariant && !varying.count(r);
    }
    if (!invariant) {
      kept.push_back(std::move(s));
      continue;
    }
    varying.erase(target);
    before.push_back(std::move(s));
    ++moved;
  }
  body = std::move(kept);
  return moved;
}

}  // namespace tgrad::ad
