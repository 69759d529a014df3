#include "src/ad/Readability.h"

#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {
namespace {

using namespace ast;

// Builtins that read or write memory, synchronize, print, check or draw
// random numbers: a value computed by one stays where it is.
bool impure_builtin(const std::string &callee) {
  static const std::set<std::string> names = {
      "tl.load",        "tl.store",         "tl.debug_barrier",      "tl.device_print", "tl.static_print",
      "tl.device_assert", "tl.static_assert", "tl.inline_asm_elementwise", "tl.rand",   "tl.randn",
      "tl.randint",     "tl.randint4x",     "tl.make_block_ptr",     "tl.advance",      "tl.make_tensor_descriptor"};
  return names.count(callee) || callee.rfind("tl.atomic_", 0) == 0;
}

// Methods of a tensor that compute a value (`x.to(...)`, `x.reshape(...)`).
bool pure_method(const std::string &name) {
  static const std::set<std::string> names = {"to", "reshape", "trans", "broadcast_to", "expand_dims", "permute",
                                              "view", "sum", "max", "min"};
  return names.count(name) > 0;
}

// A callee as the printer writes it (`tl.load`, `x.to`, `min`), without the
// printer for the usual dotted names: this runs for every call of a long
// backward, several times.
std::string callee_text(const Expr &f) {
  if (auto *n = dyn_cast<Name>(&f)) return n->id;
  if (auto *a = dyn_cast<Attribute>(&f)) {
    const Expr *base = a->value.get();
    if (isa<Name>(base) || isa<Attribute>(base)) return callee_text(*base) + "." + a->attr;
  }
  return emit::print_expr(f);
}

// Whether `e` computes a value only, or (`loads`) also reads memory with
// tl.load: such a value moves only past statements that write no memory.
bool is_pure(const Expr &e, bool loads = false) {
  bool pure = true;
  visit_expr(e, [&](const Expr &x) {
    auto *c = dyn_cast<Call>(&x);
    if (!c) return;
    if (loads && callee_text(*c->func) == "tl.load") return;
    if (auto *a = dyn_cast<Attribute>(c->func.get())) {
      const std::string callee = callee_text(*c->func);
      const bool library = callee.rfind("tl.", 0) == 0 || callee.rfind("libdevice.", 0) == 0 ||
                           callee.rfind("triton.language.", 0) == 0;
      if (library ? impure_builtin(callee) : !pure_method(a->attr)) pure = false;
      return;
    }
    auto *n = dyn_cast<Name>(c->func.get());
    if (!n || (n->id != "min" && n->id != "max" && n->id != "float" && n->id != "int")) pure = false;
  });
  return pure;
}

std::vector<ExprPtr *> own_expressions(Stmt &s);
std::vector<StmtList *> nested_blocks(Stmt &s);

bool reads_memory(const Expr &e) {
  bool found = false;
  visit_expr(e, [&](const Expr &x) {
    if (auto *c = dyn_cast<Call>(&x)) found |= callee_text(*c->func) == "tl.load";
  });
  return found;
}

// Whether a statement (at any depth) may write memory or waits at a barrier:
// a store, an atomic, a barrier, a print or check, a method other than a
// known pure one (`desc.store(...)`), or a call of a function of the module.
bool writes_memory(Stmt &s) {
  bool found = false;
  auto check = [&](const Expr &e) {
    visit_expr(e, [&](const Expr &x) {
      auto *c = dyn_cast<Call>(&x);
      if (!c) return;
      const std::string f = callee_text(*c->func);
      if (f == "tl.load") return;
      if (!is_pure(x, true)) found = true;
    });
  };
  for (ExprPtr *e : own_expressions(s)) check(**e);
  if (auto *w = dyn_cast<While>(&s)) check(*w->cond);
  for (StmtList *nested : nested_blocks(s))
    for (StmtPtr &st : *nested) found |= writes_memory(*st);
  return found;
}

// The expressions a statement evaluates itself (not those of the blocks it holds).
std::vector<ExprPtr *> own_expressions(Stmt &s) {
  switch (s.kind) {
    case NodeKind::Assign: return {&cast<Assign>(&s)->value};
    case NodeKind::AugAssign: return {&cast<AugAssign>(&s)->value};
    case NodeKind::AnnAssign:
      if (cast<AnnAssign>(&s)->value) return {&cast<AnnAssign>(&s)->value};
      return {};
    case NodeKind::ExprStmt: return {&cast<ExprStmt>(&s)->value};
    case NodeKind::Return:
      if (cast<Return>(&s)->value) return {&cast<Return>(&s)->value};
      return {};
    case NodeKind::If: return {&cast<If>(&s)->cond};
    case NodeKind::For: return {&cast<For>(&s)->iter};
    default: return {};  // a while's condition runs every iteration: nothing moves into it
  }
}

std::vector<StmtList *> nested_blocks(Stmt &s) {
  if (auto *i = dyn_cast<If>(&s)) return {&i->body, &i->orelse};
  if (auto *f = dyn_cast<For>(&s)) return {&f->body};
  if (auto *w = dyn_cast<While>(&s)) return {&w->body};
  return {};
}

// How many times each name is read in a statement / a block, at any depth.
// (Hash maps: the folder only looks names up, and a long function's names
// share long prefixes, which an ordered map compares again and again.)
using NameCounts = std::unordered_map<std::string, int>;
void count_name_reads(const StmtList &block, NameCounts &out);
void count_stmt_reads(Stmt &s, NameCounts &out) {
  auto expr = [&](const Expr &e) {
    visit_expr(e, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x)) ++out[n->id];
    });
  };
  for (ExprPtr *e : own_expressions(s)) expr(**e);
  if (auto *a = dyn_cast<AugAssign>(&s)) expr(*a->target);
  if (auto *w = dyn_cast<While>(&s)) expr(*w->cond);
  for (StmtList *b : nested_blocks(s)) count_name_reads(*b, out);
}
void count_name_reads(const StmtList &block, NameCounts &out) {
  for (const StmtPtr &s : block) count_stmt_reads(*s, out);
}

// Two comments as one, the first above the second (a statement that goes
// leaves its comment to the one after it).
std::string comment_lines(const std::string &first, const std::string &second) {
  if (first.empty()) return second;
  return second.empty() ? first : first + "\n" + second;
}

// The first line of a statement as printed, without its indentation.
size_t printed_width(const Stmt &s) {
  switch (s.kind) {
    case NodeKind::Assign: {
      auto *a = cast<Assign>(&s);
      size_t w = emit::print_expr(*a->value).size();
      for (const ExprPtr &t : a->targets) w += emit::print_expr(*t).size() + 3;
      return w;
    }
    case NodeKind::AugAssign: {
      auto *a = cast<AugAssign>(&s);
      return emit::print_expr(*a->target).size() + 4 + emit::print_expr(*a->value).size();
    }
    case NodeKind::ExprStmt: return emit::print_expr(*cast<ExprStmt>(&s)->value).size();
    case NodeKind::Return: {
      auto *r = cast<Return>(&s);
      return 7 + (r->value ? emit::print_expr(*r->value).size() : 0);
    }
    case NodeKind::If: return 4 + emit::print_expr(*cast<If>(&s)->cond).size();
    case NodeKind::For: {
      auto *f = cast<For>(&s);
      return 9 + emit::print_expr(*f->target).size() + emit::print_expr(*f->iter).size();
    }
    default: return 0;
  }
}

class Folder {
 public:
  Folder(Function &fn, const std::set<std::string> &keep) : keep_(keep), root_(fn.body) {
    for (const Param &p : fn.params) keep_.insert(p.name);
    count_assignments(fn.body, assigned_);
    count_name_reads(fn.body, reads_);
  }

  void block(StmtList &b, int depth) {
    for (StmtPtr &s : b)
      for (StmtList *nested : nested_blocks(*s)) block(*nested, depth + 1);
    for (size_t j = 0; j < b.size();) {
      if (rename(b, j)) continue;
      ++j;
    }
    fold_all(b, depth);
    // What is still named twice for one value (the replay's names next to
    // the adjoint's) is merged after the folding, which writes a value used
    // once in place, as a person would, rather than naming it.
    if (merge_duplicates(b)) fold_all(b, depth);
  }

 private:
  // Folds the block's temporaries front to back. Which statement reads each
  // name (in its own expressions) and how many statements before each write
  // memory are found once: a folded statement leaves a hole until the end,
  // so that positions hold, and its reads move with its value.
  void fold_all(StmtList &b, int depth) {
    std::unordered_map<std::string, size_t> use_at;
    std::vector<size_t> writes_before(b.size() + 1, 0);
    for (size_t k = 0; k < b.size(); ++k) {
      for (ExprPtr *e : own_expressions(*b[k]))
        visit_expr(**e, [&](const Expr &x) {
          if (auto *n = dyn_cast<Name>(&x)) use_at.emplace(n->id, k);
        });
      writes_before[k + 1] = writes_before[k] + (writes_memory(*b[k]) ? 1 : 0);
    }
    bool folded = false;
    std::vector<std::string> hole_comments(b.size());
    for (size_t i = 0; i < b.size(); ++i)
      folded |= fold(b, i, depth, use_at, writes_before, hole_comments[i]);
    if (!folded) return;
    // Comments of folded statements go to the next statement that stays.
    StmtList kept;
    std::string pending;
    for (size_t k = 0; k < b.size(); ++k) {
      StmtPtr &st = b[k];
      if (!st) {
        pending = comment_lines(pending, hole_comments[k]);
        continue;
      }
      st->leading_comment = comment_lines(pending, st->leading_comment);
      pending.clear();
      kept.push_back(std::move(st));
    }
    b = std::move(kept);
  }

  // `y = e` after `x = e` in the same block, both assigned once and e's
  // operands too (so both hold one value wherever y is read): y's reads
  // become x and its statement goes (the replay's `offs_k[None, :]` named
  // twice). A name of the user's stays.
  bool merge_duplicates(StmtList &b) {
    bool merged = false;
    std::unordered_map<std::string, std::string> first;  // printed value -> the name that holds it
    for (size_t k = 0; k < b.size();) {
      auto *a = dyn_cast<Assign>(b[k].get());
      auto *y = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
      if (!y || assigned_[y->id] != 1 || !is_pure(*a->value) || isa<Name>(a->value.get())) {
        ++k;
        continue;
      }
      bool fixed = true;
      visit_expr(*a->value, [&](const Expr &x) {
        if (auto *n = dyn_cast<Name>(&x); n && assigned_[n->id] > 1) fixed = false;
      });
      const std::string text = emit::print_expr(*a->value);
      auto it = fixed ? first.find(text) : first.end();
      if (it == first.end() || keep_.count(y->id)) {
        if (fixed) first.emplace(text, y->id);
        ++k;
        continue;
      }
      reads_[it->second] += reads_[y->id];
      reads_.erase(y->id);
      if (k + 1 < b.size()) b[k + 1]->leading_comment = comment_lines(b[k]->leading_comment, b[k + 1]->leading_comment);
      const std::string from = y->id;
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(k));
      rename_reads(root_, from, it->second);  // the whole function: a loop's value is read after it too
      merged = true;
    }
    return merged;
  }

  // Every read of `from` in the statements of `b` (at any depth) becomes `to`.
  static void rename_reads(StmtList &b, const std::string &from, const std::string &to) {
    for (StmtPtr &s : b) {
      for (ExprPtr *e : own_expressions(*s))
        rewrite_expr(*e, [&](ExprPtr &x) {
          if (auto *n = dyn_cast<Name>(x.get()); n && n->id == from) n->id = to;
        });
      if (auto *a = dyn_cast<AugAssign>(s.get()))
        if (auto *n = dyn_cast<Name>(a->target.get()); n && n->id == from) n->id = to;
      if (auto *w = dyn_cast<While>(s.get()))
        rewrite_expr(w->cond, [&](ExprPtr &x) {
          if (auto *n = dyn_cast<Name>(x.get()); n && n->id == from) n->id = to;
        });
      for (StmtList *nested : nested_blocks(*s)) rename_reads(*nested, from, to);
    }
  }

  // `x = t` at b[j], with `t = e` earlier in `b` and t used only here: the
  // earlier statement becomes `x = e` (a load's value named as the user
  // named it), where nothing in between reads or assigns x. Whether it did.
  bool rename(StmtList &b, size_t j) {
    auto *copy = dyn_cast<Assign>(b[j].get());
    if (!copy || copy->targets.size() != 1) return false;
    auto *x = dyn_cast<Name>(copy->targets[0].get());
    auto *t = dyn_cast<Name>(copy->value.get());
    if (!x || !t || keep_.count(t->id) || assigned_[t->id] != 1 || reads_[t->id] != 1) return false;
    for (size_t i = j; i-- > 0;) {
      auto *def = dyn_cast<Assign>(b[i].get());
      auto *n = def && def->targets.size() == 1 ? dyn_cast<Name>(def->targets[0].get()) : nullptr;
      if (n && n->id == t->id) {
        n->id = x->id;
        if (j + 1 < b.size())
          b[j + 1]->leading_comment = comment_lines(b[j]->leading_comment, b[j + 1]->leading_comment);
        reads_.erase(t->id);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(j));
        return true;
      }
      // In between: x must be neither read nor assigned.
      NameCounts names;
      stmt_assignments(*b[i], names);
      count_stmt_reads(*b[i], names);
      if (names.count(x->id)) return false;
    }
    return false;
  }

  // Moves `t = e` at b[i] into its one use in a later statement of `b`; whether it did.
  bool fold(StmtList &b, size_t i, int depth, std::unordered_map<std::string, size_t> &use_at,
            const std::vector<size_t> &writes_before, std::string &hole_comment) {
    auto *a = dyn_cast<Assign>(b[i].get());
    if (!a || a->targets.size() != 1) return false;
    auto *target = dyn_cast<Name>(a->targets[0].get());
    if (!target) return false;
    const std::string t = target->id;
    if (keep_.count(t) || assigned_[t] != 1 || reads_[t] != 1 || !is_pure(*a->value, true)) return false;
    auto use = use_at.find(t);
    if (use == use_at.end() || use->second <= i) return false;  // read in a nested block: it stays
    const size_t j = use->second;
    // A value that loads moves past no statement that writes memory.
    if (reads_memory(*a->value) && writes_before[j] != writes_before[i + 1]) return false;
    // Nor past one that assigns an operand: only a name assigned more than
    // once (its one assignment precedes this statement) can be.
    std::set<std::string> operands;
    visit_expr(*a->value, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x)) operands.insert(n->id);
    });
    for (const std::string &op : operands) {
      if (assigned_[op] <= 1) continue;
      for (size_t k = i + 1; k < j; ++k) {
        NameCounts changed;
        stmt_assignments(*b[k], changed);
        if (changed.count(op)) return false;
      }
    }
    // The use: substitute, unless the line grows too long.
    StmtPtr candidate = clone(*b[j]);
    for (ExprPtr *e : own_expressions(*candidate))
      rewrite_expr(*e, [&](ExprPtr &x) {
        if (auto *n = dyn_cast<Name>(x.get()); n && n->id == t) x = clone(*a->value);
      });
    if (static_cast<size_t>(4 * depth) + printed_width(*candidate) > kMaxLineColumns) return false;
    candidate->leading_comment = b[j]->leading_comment;
    b[j] = std::move(candidate);
    // What the folded value reads is now read at j.
    for (const std::string &op : operands)
      if (auto u = use_at.find(op); u != use_at.end() && u->second == i) u->second = j;
    // A hole until fold_all closes it; its comment goes to the next statement.
    hole_comment = b[i]->leading_comment;
    b[i].reset();
    reads_.erase(t);
    return true;
  }

  std::set<std::string> keep_;
  NameCounts assigned_, reads_;
  StmtList &root_;                              // the function's body
};

}  // namespace

void fold_single_use_temporaries(Function &fn, const std::set<std::string> &keep) {
  Folder(fn, keep).block(fn.body, 1);
}

}  // namespace tgrad::ad
