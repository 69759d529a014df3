#include "src/ad/Readability.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tgrad/ast/Equal.h"
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
      // (An assertion reads values and writes nothing: a load may move past it.)
      if (f == "tl.load" || f == "tl.static_assert" || f == "tl.device_assert") return;
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
template <class Counts>
void count_name_reads(const StmtList &block, Counts &out);
template <class Counts>
void count_stmt_reads(Stmt &s, Counts &out) {
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
template <class Counts>
void count_name_reads(const StmtList &block, Counts &out) {
  for (const StmtPtr &s : block) count_stmt_reads(*s, out);
}

// The count of one name, where the counters above index by every name: the
// forward scans ask about one name per statement, and a map of all of a
// statement's names for each was most of their time.
struct OneNameCount {
  const std::string &name;
  int count = 0;
  int ignored = 0;
  int &operator[](const std::string &n) { return n == name ? count : ignored; }
};

// How many times `s` (at any depth) reads `name`.
int reads_of(Stmt &s, const std::string &name) {
  OneNameCount one{name};
  count_stmt_reads(s, one);
  return one.count;
}

// Whether a block (at any depth) reads or assigns `name`.
bool mentions(const StmtList &block, const std::string &name) {
  OneNameCount one{name};
  count_name_reads(block, one);
  for (const StmtPtr &s : block) one.count += assignments_of(*s, name);
  return one.count > 0;
}

// Two comments as one, the first above the second (a statement that goes
// leaves its comment to the one after it).
std::string comment_lines(const std::string &first, const std::string &second) {
  if (first.empty()) return second;
  return second.empty() ? first : first + "\n" + second;
}

// Calls `fn` on each line of `text`, as std::getline splits it (a final
// newline ends the last line; it does not start another), without a stream.
template <class Fn>
void for_each_line(const std::string &text, Fn &&fn) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    fn(text.substr(at, end - at));
    at = end + 1;
  }
}

// The comment of a statement whose value moves into a later one, `dest`
// the comment above that one: what still says something. Its lines that
// `dest` already has go (IssueEarly.cpp gave an early load's `# Grad of:`
// line to the statement it came from), and so does the note that the value
// was loaded early, which it no longer is.
std::string moved_comment(const std::string &comment, const std::string &dest) {
  if (comment.empty()) return comment;  // (most folded temporaries have none: no line to split)
  std::set<std::string> there;
  for_each_line(dest, [&](std::string line) { there.insert(std::move(line)); });
  std::string out;
  for_each_line(comment, [&](const std::string &line) {
    if (there.count(line) || line.rfind("(Loaded early:", 0) == 0) return;
    out += (out.empty() ? "" : "\n") + line;
  });
  return out;
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
  Folder(Function &fn, const std::set<std::string> &keep, const std::set<std::string> &index_values)
      : keep_(keep.begin(), keep.end()), index_values_(index_values), root_(fn.body) {
    for (const Param &p : fn.params) {
      keep_.insert(p.name);
      params_.insert(p.name);
    }
    count_assignments(fn.body, assigned_);
    count_name_reads(fn.body, reads_);
    NameCounts paired;
    count_paired_definitions(fn.body, paired);
    for (const auto &kv : paired)
      if (kv.second == assigned_[kv.first] && kv.second == reads_[kv.first]) paired_.insert(kv.first);
  }

  void block(StmtList &b, int depth) {
    if (&b == &root_)
      for (size_t j = 0; j < b.size();) {
        if (take_name_of_copied(b, j)) continue;
        ++j;
      }
    for (StmtPtr &s : b) {
      if (auto *f = dyn_cast<For>(s.get())) name_loop_variable(*f);
      for (StmtList *nested : nested_blocks(*s)) block(*nested, depth + 1);
    }
    for (size_t j = 0; j < b.size();) {
      if (rename(b, j)) continue;
      ++j;
    }
    fold_all(b, depth);
    if (merge_accumulations(b, depth)) fold_all(b, depth);
    if (spell_out_index_arithmetic(b, depth)) fold_all(b, depth);
    // What is still named twice for one value (the replay's names next to
    // the adjoint's) is merged after the folding, which writes a value used
    // once in place, as a person would, rather than naming it.
    if (merge_duplicates(b)) fold_all(b, depth);
  }

 private:
  // `x = t` in the function's body, t a name of the user's (not a
  // parameter) read only here and x a generated one mentioned nowhere before
  // this statement: x is renamed t, everywhere, and the copy goes (a loop
  // carries `accumulator_2 = accumulator`: it carries `accumulator`). t's
  // value is read nowhere after the copy, so that x's assignments may reuse
  // the name. Whether it did.
  bool take_name_of_copied(StmtList &b, size_t j) {
    auto *copy = dyn_cast<Assign>(b[j].get());
    if (!copy || copy->targets.size() != 1) return false;
    auto *x = dyn_cast<Name>(copy->targets[0].get());
    auto *t = dyn_cast<Name>(copy->value.get());
    if (!x || !t || keep_.count(x->id) || !keep_.count(t->id) || params_.count(t->id) || reads_[t->id] != 1 ||
        assigned_[t->id] != 1)  // (a later assignment of t would overwrite x's value)
      return false;
    for (size_t i = 0; i < j; ++i)
      if (assignments_of(*b[i], x->id) || reads_of(*b[i], x->id)) return false;
    const std::string from = x->id, to = t->id;
    if (j + 1 < b.size()) b[j + 1]->leading_comment = comment_lines(b[j]->leading_comment, b[j + 1]->leading_comment);
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(j));
    rename_everywhere(b, from, to);
    reads_[to] = reads_[from];
    assigned_[to] += assigned_[from] - 1;
    reads_.erase(from);
    assigned_.erase(from);
    if (paired_.erase(from)) paired_.insert(to);
    return true;
  }

  // Every read and assignment of `from` in `b` (at any depth) becomes `to`.
  static void rename_everywhere(StmtList &b, const std::string &from, const std::string &to) {
    rename_reads(b, from, to);
    std::function<void(StmtList &)> targets = [&](StmtList &block) {
      for (StmtPtr &s : block) {
        auto rename = [&](ExprPtr &e) {
          rewrite_expr(e, [&](ExprPtr &n) {
            if (auto *name = dyn_cast<Name>(n.get()); name && name->id == from) name->id = to;
          });
        };
        if (auto *a = dyn_cast<Assign>(s.get()))
          for (ExprPtr &target : a->targets) rename(target);
        if (auto *a = dyn_cast<AnnAssign>(s.get())) rename(a->target);
        if (auto *f = dyn_cast<For>(s.get())) rename(f->target);
        for (StmtList *nested : nested_blocks(*s)) targets(*nested);
      }
    };
    targets(b);
  }

  // A temporary of integer or boolean index arithmetic (`row * stride`,
  // `offs_m[:, None] * stride_qm`, `offs_n < N`) that later statements of its
  // block read several times is written out at each read, as a person writes
  // `X + row * stride + cols` in a load and again in its gradient's store
  // (Triton's common-subexpression elimination computes it once). Only a
  // short one (kMaxIndexNodes), where every line stays within
  // kMaxLineColumns. Whether any was.
  static constexpr int kMaxIndexNodes = 16;
  bool spell_out_index_arithmetic(StmtList &b, int depth) {
    bool spelled = false;
    for (size_t i = 0; i < b.size(); ++i) {
      auto *a = dyn_cast<Assign>(b[i].get());
      auto *target = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
      if (!target) continue;
      const std::string t = target->id;
      if (keep_.count(t) || !index_values_.count(t) || assigned_[t] < 1) continue;
      if (!is_pure(*a->value) || reads_memory(*a->value)) continue;
      int nodes = 0;
      visit_expr(*a->value, [&](const Expr &) { ++nodes; });
      if (nodes > kMaxIndexNodes) continue;
      // Every read of this assignment: in the own expressions of later
      // statements of this block, up to the next assignment of t; a name
      // assigned several times (once per replayed loop) must have no reads
      // but those of its assignments (below).
      std::vector<size_t> uses;
      int found = 0;
      if (!local_reads(b, i, t, uses, found) || found < 1 || (assigned_[t] == 1 && found < 2)) continue;
      if (assigned_[t] > 1 && local_reads_everywhere(root_, t) != reads_[t]) continue;
      if (assigned_[t] == 1 && found != reads_[t]) continue;
      if (!movable(b, i, uses.back() + 1, *a->value)) continue;
      std::vector<StmtPtr> spelled_out;
      for (size_t k : uses) {
        StmtPtr candidate = clone(*b[k]);
        for (ExprPtr *e : own_expressions(*candidate))
          rewrite_expr(*e, [&](ExprPtr &x) {
            if (auto *n = dyn_cast<Name>(x.get()); n && n->id == t) x = clone(*a->value);
          });
        if (static_cast<size_t>(4 * depth) + printed_width(*candidate) > kMaxLineColumns) break;
        candidate->leading_comment = b[k]->leading_comment;
        spelled_out.push_back(std::move(candidate));
      }
      if (spelled_out.size() != uses.size()) continue;
      for (size_t u = 0; u < uses.size(); ++u) b[uses[u]] = std::move(spelled_out[u]);
      // Its operands are read once more for each read of it after the first.
      visit_expr(*a->value, [&](const Expr &x) {
        if (auto *n = dyn_cast<Name>(&x)) reads_[n->id] += found - 1;
      });
      reads_[t] -= found;
      --assigned_[t];
      if (i + 1 < b.size()) b[i + 1]->leading_comment = comment_lines(b[i]->leading_comment, b[i + 1]->leading_comment);
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
      --i;
      spelled = true;
    }
    return spelled;
  }

  // The reads of the assignment of `t` at b[i]: the statements after it in
  // b that read t in their own expressions (`uses`, `found` reads in all),
  // up to one that assigns t again. False where one reads it in a block it
  // holds, or a later statement assigns t only inside a block it holds.
  static bool local_reads(StmtList &b, size_t i, const std::string &t, std::vector<size_t> &uses, int &found) {
    for (size_t k = i + 1; k < b.size(); ++k) {
      if (!b[k]) continue;
      int here = 0;
      for (ExprPtr *e : own_expressions(*b[k]))
        visit_expr(**e, [&](const Expr &x) {
          if (auto *n = dyn_cast<Name>(&x); n && n->id == t) ++here;
        });
      for (StmtList *inner : nested_blocks(*b[k]))
        if (mentions(*inner, t)) return false;
      if (auto *a = dyn_cast<AugAssign>(b[k].get()))
        if (auto *n = dyn_cast<Name>(a->target.get()); n && n->id == t) return false;
      if (here) uses.push_back(k);
      found += here;
      if (assignments_of(*b[k], t)) return true;
    }
    return true;
  }

  // The reads of t that follow its plain assignments, each in its block
  // (local_reads), over the whole body; -1 where one cannot be followed.
  static int local_reads_everywhere(StmtList &b, const std::string &t) {
    int total = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      if (!b[i]) continue;
      for (StmtList *nested : nested_blocks(*b[i])) {
        const int inner = local_reads_everywhere(*nested, t);
        if (inner < 0) return -1;
        total += inner;
      }
      auto *a = dyn_cast<Assign>(b[i].get());
      auto *n = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
      if (!n || n->id != t) continue;
      std::vector<size_t> uses;
      int found = 0;
      if (!local_reads(b, i, t, uses, found)) return -1;
      total += found;
    }
    return total;
  }

  // `for v in ...:` whose body begins `row = v`, v and row read nowhere
  // else and assigned nowhere else, row a name of the user's: `for row in
  // ...:` (the backward's loop over the forward's programs, whose program id
  // the user named).
  void name_loop_variable(For &f) {
    auto *v = dyn_cast<Name>(f.target.get());
    auto *copy = f.body.empty() ? nullptr : dyn_cast<Assign>(f.body[0].get());
    auto *row = copy && copy->targets.size() == 1 ? dyn_cast<Name>(copy->targets[0].get()) : nullptr;
    auto *from = copy ? dyn_cast<Name>(copy->value.get()) : nullptr;
    if (!v || !row || !from || from->id != v->id || row->id == v->id) return;
    if (assigned_[v->id] != 1 || assigned_[row->id] != 1 || keep_.count(v->id) || !keep_.count(row->id)) return;
    NameCounts inside;
    count_name_reads(f.body, inside);
    if (inside[v->id] != reads_[v->id] || inside[row->id] != reads_[row->id]) return;
    const std::string name = row->id, old = v->id;
    if (f.body.size() > 1)
      f.body[1]->leading_comment = comment_lines(f.body[0]->leading_comment, f.body[1]->leading_comment);
    f.body.erase(f.body.begin());
    v->id = name;
    rename_reads(f.body, old, name);
    reads_[name] += reads_[old] - 1;
    reads_.erase(old);
    assigned_.erase(old);
  }

  // `v = a` and then, as the next statement that mentions v, `v op= c`: one
  // statement `v = a op c`, the same operation on the same values (`bx = p`,
  // `bx += q` is `bx = p + q`; a chain `bx = p`, `bx += q`, `bx += r` is
  // `bx = p + q + r`, the additions in their order), where a can move down
  // to it as a fold would move it and c does not read v. `v = a; v += a`
  // becomes `v = a * 2` (an adjoint through `x * x`): a + a is exactly a * 2
  // in floating point, and a is computed once. Whether anything merged.
  bool merge_accumulations(StmtList &b, int depth) {
    bool merged = false;
    for (size_t i = 0; i < b.size(); ++i) {
      auto *a = dyn_cast<Assign>(b[i].get());
      auto *v = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
      if (!v || !is_pure(*a->value, true)) continue;
      size_t k = i + 1;
      for (; k < b.size(); ++k)
        if (reads_of(*b[k], v->id) || assignments_of(*b[k], v->id)) break;
      if (k == b.size()) continue;
      auto *acc = dyn_cast<AugAssign>(b[k].get());
      auto *target = acc ? dyn_cast<Name>(acc->target.get()) : nullptr;
      if (!target || target->id != v->id) continue;
      if (acc->op != BinaryOpKind::Add && acc->op != BinaryOpKind::Sub && acc->op != BinaryOpKind::Mul &&
          acc->op != BinaryOpKind::Div)
        continue;
      bool reads_v = false;
      visit_expr(*acc->value, [&](const Expr &x) {
        if (auto *n = dyn_cast<Name>(&x); n && n->id == v->id) reads_v = true;
      });
      if (reads_v || !movable(b, i, k, *a->value)) continue;
      const bool twice = acc->op == BinaryOpKind::Add && equal(*a->value, *acc->value) && is_pure(*a->value);
      ExprPtr value = twice ? std::make_unique<BinOp>(BinaryOpKind::Mul, clone(*a->value),
                                                      std::make_unique<IntLit>(2, "2"), a->value->span)
                            : std::make_unique<BinOp>(acc->op, clone(*a->value), clone(*acc->value), acc->span);
      ExprList targets;
      targets.push_back(std::make_unique<Name>(v->id, v->span));
      auto merged_stmt = std::make_unique<Assign>(std::move(targets), std::move(value), acc->span);
      if (static_cast<size_t>(4 * depth) + printed_width(*merged_stmt) > kMaxLineColumns) continue;
      merged_stmt->leading_comment = acc->leading_comment;
      b[k] = std::move(merged_stmt);
      if (i + 1 < b.size())
        b[i + 1]->leading_comment =
            comment_lines(moved_comment(b[i]->leading_comment, b[k]->leading_comment), b[i + 1]->leading_comment);
      --assigned_[v->id];
      --reads_[v->id];  // (the accumulation's target)
      if (twice)        // (a is read once where it was read twice)
        visit_expr(*a->value, [&](const Expr &x) {
          if (auto *n = dyn_cast<Name>(&x)) --reads_[n->id];
        });
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
      --i;  // the merged statement may merge again, with the next accumulation
      merged = true;
    }
    return merged;
  }

  // Whether `value`, computed at b[i], has the same value at b[j]: no
  // statement in between assigns a name it reads, and none writes memory if
  // it loads.
  bool movable(StmtList &b, size_t i, size_t j, const Expr &value) {
    std::set<std::string> operands;
    visit_expr(value, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x)) operands.insert(n->id);
    });
    const bool loads = reads_memory(value);
    for (size_t k = i + 1; k < j; ++k) {
      if (!b[k]) continue;
      if (loads && writes_memory(*b[k])) return false;
      NameCounts changed;
      stmt_assignments(*b[k], changed);
      for (const std::string &op : operands)
        if (changed.count(op)) return false;
    }
    return true;
  }

  // A name assigned several times (a replayed loop's `a_ptrs_3 = a_ptrs_2 +
  // step` in the forward's loop and again in the backward's) is still a
  // temporary used once per value where each of its assignments is a plain
  // `t = e` whose next mention in its block is one read in the expressions
  // of one statement, and it has no other reads: then every read sees the
  // one assignment it follows, and every assignment is read once. Counts,
  // for each name, its assignments that are followed so.
  static void count_paired_definitions(StmtList &b, NameCounts &out) {
    for (size_t i = 0; i < b.size(); ++i) {
      for (StmtList *nested : nested_blocks(*b[i])) count_paired_definitions(*nested, out);
      auto *a = dyn_cast<Assign>(b[i].get());
      auto *t = a && a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
      if (t && next_mention_reads_once(b, i, t->id) < b.size()) ++out[t->id];
    }
  }

  // The statement after b[i] that first mentions `t` if its own expressions
  // read `t` exactly once and nothing nested in it mentions `t`; else b.size().
  static size_t next_mention_reads_once(StmtList &b, size_t i, const std::string &t) {
    for (size_t k = i + 1; k < b.size(); ++k) {
      if (!b[k]) continue;  // a hole of the folding
      int own = 0;
      for (ExprPtr *e : own_expressions(*b[k]))
        visit_expr(**e, [&](const Expr &x) {
          if (auto *n = dyn_cast<Name>(&x); n && n->id == t) ++own;
        });
      const int all = reads_of(*b[k], t);
      bool nested = false;
      for (StmtList *inner : nested_blocks(*b[k])) nested = nested || mentions(*inner, t);
      if (auto *a = dyn_cast<AugAssign>(b[k].get()))
        if (auto *n = dyn_cast<Name>(a->target.get()); n && n->id == t) return b.size();
      if (own == 0 && all == 0) {
        if (assignments_of(*b[k], t)) return b.size();
        continue;
      }
      return own == 1 && all == 1 && !nested ? k : b.size();
    }
    return b.size();
  }

  // Whether `t` is a temporary that one read uses: assigned once and read
  // once, or assigned several times, each assignment read once (above).
  bool used_once(const std::string &t) {
    if (keep_.count(t)) return false;
    if (assigned_[t] == 1 && reads_[t] == 1) return true;
    return paired_.count(t) && assigned_[t] == reads_[t];
  }

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
          if (auto *n = dyn_cast<Name>(&x)) use_at.try_emplace(n->id, k);  // (no node made for a name seen)
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
      if (assignments_of(*b[i], x->id) || reads_of(*b[i], x->id)) return false;
    }
    return false;
  }

  // `t = e` at b[i] read once, in a block nested in a later statement of b
  // (`tl.store(dW_row + cols, dW_sum, mask=mask)` in the last iteration of
  // the loop over the forward's programs): e moves there where it is cheap
  // index or pointer arithmetic (no loads, at most kMaxIndexNodes nodes)
  // whose operands are assigned once, so that it has the same value there;
  // Triton hoists what a loop does not change. Whether it did.
  bool fold_into_nested(StmtList &b, size_t i, int depth, std::string &hole_comment) {
    auto *a = cast<Assign>(b[i].get());
    const std::string t = cast<Name>(a->targets[0].get())->id;
    if (!is_pure(*a->value) || reads_memory(*a->value)) return false;
    int nodes = 0;
    bool fixed = true;
    visit_expr(*a->value, [&](const Expr &x) {
      ++nodes;
      if (auto *n = dyn_cast<Name>(&x); n && assigned_[n->id] > 1) fixed = false;
    });
    if (nodes > kMaxIndexNodes || !fixed) return false;
    // The statement that reads t: the first after b[i] that mentions it, at any depth.
    for (size_t k = i + 1; k < b.size(); ++k) {
      if (!b[k]) continue;
      if (!reads_of(*b[k], t)) continue;
      StmtPtr *use = nullptr;
      int use_depth = depth;
      std::function<void(StmtList &, int)> find = [&](StmtList &inner, int d) {
        for (StmtPtr &st : inner) {
          for (ExprPtr *e : own_expressions(*st))
            visit_expr(**e, [&](const Expr &x) {
              if (auto *n = dyn_cast<Name>(&x); n && n->id == t && !use) {
                use = &st;
                use_depth = d;
              }
            });
          for (StmtList *nested : nested_blocks(*st)) find(*nested, d + 1);
        }
      };
      for (StmtList *nested : nested_blocks(*b[k])) find(*nested, depth + 1);
      if (!use) return false;  // (read by b[k] itself: fold() decides)
      StmtPtr candidate = clone(**use);
      for (ExprPtr *e : own_expressions(*candidate))
        rewrite_expr(*e, [&](ExprPtr &x) {
          if (auto *n = dyn_cast<Name>(x.get()); n && n->id == t) x = clone(*a->value);
        });
      if (static_cast<size_t>(4 * use_depth) + printed_width(*candidate) > kMaxLineColumns) return false;
      candidate->leading_comment = (*use)->leading_comment;
      *use = std::move(candidate);
      hole_comment = b[i]->leading_comment;
      b[i].reset();
      reads_.erase(t);
      --assigned_[t];
      return true;
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
    if (!used_once(t) || !is_pure(*a->value, true)) return false;
    size_t j;
    if (assigned_[t] == 1) {
      auto use = use_at.find(t);
      if (use == use_at.end() || use->second <= i) return fold_into_nested(b, i, depth, hole_comment);
      j = use->second;
    } else {
      j = next_mention_reads_once(b, i, t);  // (the read that follows this assignment)
      if (j == b.size()) return false;
    }
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
    hole_comment = moved_comment(b[i]->leading_comment, b[j]->leading_comment);
    b[i].reset();
    --reads_[t];
    --assigned_[t];
    return true;
  }

  std::unordered_set<std::string> keep_;  // (looked up for every statement: hashed, as the counts)
  const std::set<std::string> &index_values_;  // names of integer and boolean values
  NameCounts assigned_, reads_;
  std::set<std::string> params_;
  std::set<std::string> paired_;  // names assigned several times, each assignment read once (used_once)
  StmtList &root_;                              // the function's body
};

}  // namespace

void fold_single_use_temporaries(Function &fn, const std::set<std::string> &keep,
                                 const std::set<std::string> &index_values) {
  Folder(fn, keep, index_values).block(fn.body, 1);
}

}  // namespace tgrad::ad
