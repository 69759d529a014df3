#include "src/ad/SoftmaxStatistics.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/LoopInversion.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Equal.h"

namespace tgrad::ad {
namespace {

using namespace ast;
using reverse::assign;
using reverse::binary;
using reverse::call;
using reverse::cast_to;
using reverse::dotted_name;
using reverse::list;
using reverse::name;

constexpr double kLn2 = 0.6931471805599453;

// `x[:, None]`: the name x, or "".
std::string column_of(const Expr &e) {
  auto *s = dyn_cast<Subscript>(&e);
  const Name *n = s && reverse::broadcast_axis(*s) == 1 ? as_name(s->value.get()) : nullptr;
  return n ? n->id : "";
}

ExprPtr column(const std::string &x) { return reverse::broadcast(name(x), true); }

ExprPtr number(double v) { return std::make_unique<FloatLit>(v, ""); }

// 2 for an exp2 or log2, 1 for exp or log (natural), 0 otherwise.
int exp_base(const std::string &f) {
  if (f == "tl.exp2" || f == "math.exp2") return 2;
  if (f == "tl.exp" || f == "math.exp") return 1;
  return 0;
}
int log_base(const std::string &f) {
  if (f == "tl.log2" || f == "math.log2") return 2;
  if (f == "tl.log" || f == "math.log") return 1;
  return 0;
}

std::optional<double> literal(const Expr *e) {
  if (auto *f = e ? dyn_cast<FloatLit>(e) : nullptr) return f->value;
  if (auto *i = e ? dyn_cast<IntLit>(e) : nullptr) return static_cast<double>(i->value);
  return std::nullopt;
}

// `float("inf")`, `float("-inf")` (sign -1), `-float("inf")`, a float literal's infinity: its sign, or 0.
int infinity_sign(const Expr &e) {
  if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg) return -infinity_sign(*u->operand);
  if (auto *f = dyn_cast<FloatLit>(&e)) return std::isinf(f->value) ? (f->value > 0 ? 1 : -1) : 0;
  auto *c = dyn_cast<Call>(&e);
  auto *fn = c ? dyn_cast<Name>(c->func.get()) : nullptr;
  auto *text = c && c->args.size() == 1 ? dyn_cast<StrLit>(c->args[0].get()) : nullptr;
  if (!fn || fn->id != "float" || !text) return 0;
  if (text->value == "inf" || text->value == "+inf") return 1;
  if (text->value == "-inf") return -1;
  return 0;
}

// One loop's online softmax: the names of its parts in A-normal form (SoftmaxStatistics.h).
struct LoopMatch {
  For *loop = nullptr;
  std::string m_name, m_init, mij, mcol, d, dm, alpha, scores, alpha_col;
  Assign *mij_def = nullptr;
  std::vector<std::string> chain;  // the end-of-body copies from m_ij to m
  int base = 0;                    // 2: exp2 and log2; 1: exp and log
  std::string l_name, l_init, l_updated, l_scaled;
  ExprPtr l_term;
  bool has_acc = false;
  std::string acc_name, acc_init, acc_updated, acc_scaled;
  ExprPtr acc_term;
};

class Rewriter {
 public:
  Rewriter(AnfFunction &anf, const SoftmaxStatisticsContext &context, NameAllocator &names)
      : anf_(anf), context_(context), names_(names) {
    index(anf_.fn->body);
  }

  // Why an online softmax that was found keeps its taped backward ("" where none was found).
  const std::string &declined() const { return declined_; }
  // Where declined() is about tl.constexpr values not given: the loop (else a default span).
  const SourceSpan &flags_at() const { return flags_at_; }
  // And the tl.constexpr parameters those ifs read.
  const std::vector<std::string> &flags() const { return flags_; }

  std::optional<SoftmaxStatistics> run() {
    StmtList &body = anf_.fn->body;
    for (size_t k = 0; k < body.size(); ++k) {
      auto *f = dyn_cast<For>(body[k].get());
      if (!f || !anf_.carried.count(f)) continue;
      if (std::optional<SoftmaxStatistics> r = try_loop(k, *f)) return r;
    }
    if (declined_.empty()) declined_ = running_max_under_flags();
    return std::nullopt;
  }

 private:
  AnfFunction &anf_;
  const SoftmaxStatisticsContext &context_;
  NameAllocator &names_;
  std::map<std::string, int> assignments_;
  std::map<std::string, Assign *> definition_;
  std::string declined_;
  SourceSpan flags_at_;
  std::vector<std::string> flags_;

  void index(StmtList &block) {
    for (StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get())) {
        const std::string &n = cast<Name>(a->targets[0].get())->id;
        ++assignments_[n];
        definition_[n] = a;
      } else if (auto *f = dyn_cast<For>(s.get())) {
        if (auto *v = dyn_cast<Name>(f->target.get())) assignments_[v->id] += 2;  // the loop variable
      } else if (!isa<If>(s.get()) && !isa<While>(s.get())) {
        std::map<std::string, int> n;
        stmt_assignments(*s, n);
        for (const auto &kv : n) assignments_[kv.first] += 2;  // assigned by something other than one `x = ...`
      }
      if (auto *f = dyn_cast<For>(s.get())) index(f->body);
      if (auto *i = dyn_cast<If>(s.get())) {
        index(i->body);
        index(i->orelse);
      }
      if (auto *w = dyn_cast<While>(s.get())) index(w->body);
    }
  }

  // The one assignment of `n` in the function, or null.
  Assign *def(const std::string &n) const {
    auto it = assignments_.find(n);
    return it != assignments_.end() && it->second == 1 ? definition_.at(n) : nullptr;
  }
  std::string builtin(const Expr *e) const {
    auto *c = e ? dyn_cast<Call>(e) : nullptr;
    return c ? context_.builtin(*c) : "";
  }
  // The name `n` is defined as `f(x)` with f one of the builtins `ok`: x, or "".
  std::string unary_call_arg(const std::string &n, const std::function<bool(const std::string &)> &ok) const {
    Assign *a = def(n);
    auto *c = a ? dyn_cast<Call>(a->value.get()) : nullptr;
    if (!c || !ok(context_.builtin(*c)) || c->args.size() != 1 || !c->keywords.empty()) return "";
    const Name *x = as_name(c->args[0].get());
    return x ? x->id : "";
  }

  // Whether `n` (through copies) is a tile of -inf: `tl.zeros(...) - float("inf")`,
  // `tl.zeros(...) + float("-inf")`, `tl.full(shape, float("-inf"), dtype)`.
  bool minus_infinity(std::string n) const {
    for (int hops = 0; hops < 16; ++hops) {
      Assign *a = def(n);
      if (!a) return false;
      if (const Name *copy = as_name(a->value.get())) {
        n = copy->id;
        continue;
      }
      if (auto *c = dyn_cast<Call>(a->value.get()); c && context_.builtin(*c) == "tl.full") {
        const Expr *v = call_argument(*c, 1, "value");
        return v && infinity_sign(*v) < 0;
      }
      auto *b = dyn_cast<BinOp>(a->value.get());
      if (!b || (b->op != BinaryOpKind::Sub && b->op != BinaryOpKind::Add)) return false;
      const int sign = infinity_sign(*b->rhs) * (b->op == BinaryOpKind::Sub ? -1 : 1);
      const Name *z = as_name(b->lhs.get());
      Assign *zd = z ? def(z->id) : nullptr;
      auto *zeros = zd ? dyn_cast<Call>(zd->value.get()) : nullptr;
      return sign < 0 && zeros && context_.builtin(*zeros) == "tl.zeros";
    }
    return false;
  }

  // The top-level statement of `block` that assigns `n`, as an index, or npos.
  static size_t position(const StmtList &block, const std::string &n) {
    for (size_t k = 0; k < block.size(); ++k)
      if (assigned_name(*block[k]) == n) return k;
    return std::string::npos;
  }

  // Reads of each name by the statements block[from..].
  static std::map<std::string, int> reads_from(const StmtList &block, size_t from) {
    std::map<std::string, int> out;
    for (size_t k = from; k < block.size(); ++k) {
      std::set<std::string> r;
      deep_reads(*block[k], r);
      for (const std::string &n : r) ++out[n];
    }
    return out;
  }

  // The pointer parameter an address is an offset of, or "".
  std::string base_pointer(std::string n) const {
    for (int hops = 0; hops < 64; ++hops) {
      const sema::SType *t = context_.type_of(n);
      if (!t || !t->is_tensor() || !t->elem.is_pointer) return "";
      Assign *a = def(n);
      if (!a) return assignments_.count(n) ? "" : n;  // never assigned: a parameter
      auto *b = dyn_cast<BinOp>(a->value.get());
      if (auto *copy = as_name(a->value.get())) {
        n = copy->id;
        continue;
      }
      if (!b || (b->op != BinaryOpKind::Add && b->op != BinaryOpKind::Sub)) return "";
      const Name *l = as_name(b->lhs.get()), *r = as_name(b->rhs.get());
      const sema::SType *lt = l ? context_.type_of(l->id) : nullptr;
      if (l && lt && lt->is_tensor() && lt->elem.is_pointer) n = l->id;
      else if (r && b->op == BinaryOpKind::Add) n = r->id;
      else return "";
    }
    return "";
  }

  // The name a chain of copies `x = y` starts from.
  std::string resolve_copy(std::string n) const {
    for (int hops = 0; hops < 16; ++hops) {
      Assign *a = def(n);
      const Name *src = a ? as_name(a->value.get()) : nullptr;
      if (!src) break;
      n = src->id;
    }
    return n;
  }

  // Whether `out_mask` true implies `row_mask` true in the same row
  // (`offs[:, None] < n` and `offs < n`, or `row_mask[:, None]`, possibly
  // among the conjuncts of an `&`).
  bool implies_row(const std::string &out_mask, const std::string &row_mask, int depth = 0) const {
    if (depth > 8) return false;
    Assign *a = def(out_mask);
    if (!a) return false;
    if (auto *b = dyn_cast<BinOp>(a->value.get()); b && b->op == BinaryOpKind::BitAnd) {
      const Name *l = as_name(b->lhs.get()), *r = as_name(b->rhs.get());
      return (l && implies_row(l->id, row_mask, depth + 1)) || (r && implies_row(r->id, row_mask, depth + 1));
    }
    if (column_of(*a->value) == row_mask) return true;
    auto *co = dyn_cast<Compare>(a->value.get());
    Assign *rd = def(row_mask);
    auto *cr = rd ? dyn_cast<Compare>(rd->value.get()) : nullptr;
    if (!co || !cr || co->ops.size() != 1 || cr->ops.size() != 1 || co->ops[0] != cr->ops[0]) return false;
    const Name *bo = as_name(co->comparators[0].get()), *br = as_name(cr->comparators[0].get());
    if (bo && br ? resolve_copy(bo->id) != resolve_copy(br->id) : !ast::equal(*co->comparators[0], *cr->comparators[0]))
      return false;
    const Name *lo = as_name(co->left.get()), *lr = as_name(cr->left.get());
    if (!lo || !lr) return false;
    Assign *col = def(lo->id);
    return col && column_of(*col->value) == lr->id;
  }

  // Moves the top-level definitions after the loop (at `loop`) that the
  // names `needed` depend on to just before it; false (nothing moved) if one
  // cannot move: it loads, is assigned more than once, or reads what the
  // loop assigns.
  bool hoist_before(size_t &loop, const std::vector<std::string> &needed, const std::set<std::string> &loop_assigns) {
    StmtList &body = anf_.fn->body;
    std::set<size_t> move;
    std::vector<std::string> work = needed;
    while (!work.empty()) {
      std::string n = work.back();
      work.pop_back();
      size_t at = position(body, n);
      if (at == std::string::npos || at < loop) continue;  // before the loop, or a parameter
      if (move.count(at)) continue;
      Assign *a = def(n);
      if (!a || a != body[at].get()) return false;
      bool loads = false;
      visit_expr(*a->value, [&](const Expr &e) {
        if (auto *c = dyn_cast<Call>(&e); c && context_.builtin(*c).rfind("tl.load", 0) == 0) loads = true;
      });
      if (loads) return false;
      std::set<std::string> r;
      stmt_reads(*a, r);
      for (const std::string &x : r) {
        if (loop_assigns.count(x)) return false;
        work.push_back(x);
      }
      move.insert(at);
    }
    std::vector<StmtPtr> moved;
    for (auto it = move.rbegin(); it != move.rend(); ++it) {
      moved.insert(moved.begin(), std::move(body[*it]));
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(*it));
    }
    for (StmtPtr &s : moved) {
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(loop), std::move(s));
      ++loop;
    }
    return true;
  }

  void erase_top_level(StmtList &block, const std::set<std::string> &names) {
    for (size_t k = block.size(); k-- > 0;) {
      if (!names.count(assigned_name(*block[k]))) continue;
      anf_.origin.erase(block[k].get());
      reverse::erase_keeping_comment(block, k);
    }
  }

  // One loop's online softmax, its running max `m` (see the header): the names of its parts.
  std::optional<LoopMatch> match_loop(For &f, const LoopCarried &m) {
    std::vector<LoopCarried> &carried = anf_.carried.at(&f);
    std::map<std::string, int> in_loop;
    count_reads(f.body, in_loop);
    auto read_in_loop = [&](const std::string &n) { return in_loop.count(n) ? in_loop.at(n) : 0; };
      const Assign *copy = top_level_assignment(f.body, m.name);
      std::vector<std::string> chain;  // the end-of-body copies from m_ij to m
      const Name *next = copy ? as_name(copy->value.get()) : nullptr;
      std::string mij;
      while (next) {
        // (Copies may go round: `a = b` ... `b = a` swaps two carried values. Such a chain is no running max.)
        if (std::find(chain.begin(), chain.end(), next->id) != chain.end() || chain.size() > 32) return std::nullopt;
        chain.push_back(next->id);
        const Assign *d = top_level_assignment(f.body, next->id);
        if (!d) break;
        if (const Name *n = as_name(d->value.get())) {
          next = n;
          continue;
        }
        mij = next->id;
        break;
      }
      // m_ij is the reference the iteration's exponentials subtract: tl.maximum(m, tl.max(S, 1)) in an FA2
      // forward, tl.maximum(m, tl.max(qk, 1) * qk_scale) in the Triton tutorial's. How it is chosen matters
      // only for overflow: the sums telescope to exp(S_j - m_final) whatever it is.
      Assign *mij_def = def(mij);
      if (mij.empty() || !mij_def || top_level_assignment(f.body, mij) != mij_def) return std::nullopt;
      // In the body: d = S - m_ij[:, None]; p = EXP(d); dm = m - m_ij; alpha = EXP(dm).
      std::string mcol, d, p, dm, alpha, scores;
      int base = 0;
      bool clean = true;
      for (const StmtPtr &s : f.body) {
        auto *a = dyn_cast<Assign>(s.get());
        if (!a) continue;
        const std::string n = assigned_name(*a);
        if (n.empty()) continue;
        if (column_of(*a->value) == mij) mcol = n;
        if (auto *b = dyn_cast<BinOp>(a->value.get()); b && b->op == BinaryOpKind::Sub) {
          if (is_name(b->lhs.get(), m.name) && is_name(b->rhs.get(), mij)) dm = n;
          if (!mcol.empty() && as_name(b->lhs.get()) && is_name(b->rhs.get(), mcol)) {
            d = n;
            scores = as_name(b->lhs.get())->id;
          }
        }
        auto is_exp = [&](const std::string &fn) { return exp_base(fn) != 0; };
        const std::string x = unary_call_arg(n, is_exp);
        if (x.empty()) continue;
        const int b = exp_base(builtin(a->value.get()));
        if (base && b != base) clean = false;
        base = b;
        if (!d.empty() && x == d) p = n;
        if (!dm.empty() && x == dm) alpha = n;
      }
      if (!clean || p.empty() || alpha.empty()) return std::nullopt;

      // The rescaled sums: l (term tl.sum(p, 1)) and acc (term tl.dot(p or p.to(...), v)), scaled by alpha.
      InversionContext ic;
      ic.definition = [this](const std::string &n) -> const Assign * { return def(n); };
      ic.builtin = context_.builtin;
      ic.type_of = context_.type_of;
      ic.active = [](const std::string &) { return true; };
      std::map<std::string, InvertibleUpdate> updates = find_invertible_updates(f, carried, ic);
      const InvertibleUpdate *l = nullptr, *acc = nullptr;
      std::string alpha_col, p_cast;
      for (const auto &[carried_name, u] : updates) {
        if (u.exponential != alpha || u.subtracted || !u.term) continue;
        const Name *term = as_name(u.term.get());
        if (term && u.scale == alpha) {
          Assign *t = def(term->id);
          auto *sum = t ? dyn_cast<Call>(t->value.get()) : nullptr;
          const std::optional<double> sum_axis = sum ? literal(call_argument(*sum, 1, "axis")) : std::nullopt;
          if (sum && context_.builtin(*sum) == "tl.sum" && is_name(call_argument(*sum, 0, "input"), p) && sum_axis &&
              *sum_axis == 1 && sum->args.size() + sum->keywords.size() == 2 && read_in_loop(term->id) == 1)
            l = &u;
          continue;
        }
        // acc: scale alpha[:, None]; term tl.dot(P, v), P = p or p.to(dtype).
        Assign *scale = def(u.scale);
        if (!scale || column_of(*scale->value) != alpha || read_in_loop(u.scale) != 1) continue;
        // (A term that is a call is the update's own `tl.dot(p, v, acc)` without its accumulator: a copy,
        // which has no types; the update's call has.)
        const Expr *dot = u.term.get();
        if (const Name *t = as_name(dot)) {
          Assign *td = def(t->id);
          if (!td || read_in_loop(t->id) != 1) continue;
          dot = td->value.get();
        } else if (Assign *update = def(u.updated)) {
          dot = update->value.get();
        }
        auto *dc = dyn_cast<Call>(dot);
        if (!dc || context_.builtin(*dc) != "tl.dot") continue;
        const Name *lhs = as_name(call_argument(*dc, 0, "input"));
        if (!lhs) continue;
        std::string cast;
        if (lhs->id != p) {
          Assign *c = def(lhs->id);
          auto *to = c ? dyn_cast<Call>(c->value.get()) : nullptr;
          auto *attr = to ? dyn_cast<Attribute>(to->func.get()) : nullptr;
          if (!attr || attr->attr != "to" || !is_name(attr->value.get(), p) || read_in_loop(lhs->id) != 1) continue;
          cast = lhs->id;
        }
        acc = &u;
        alpha_col = u.scale;
        p_cast = cast;
      }
      if (!l) return std::nullopt;
      // Every intermediate is read only where the pattern reads it.
      const int alpha_reads = 1 + (acc ? 1 : 0);
      std::set<std::string> mij_reads;
      stmt_reads(*mij_def, mij_reads);
      if (read_in_loop(m.name) != 1 + static_cast<int>(mij_reads.count(m.name)) || read_in_loop(mij) != 3 ||
          read_in_loop(mcol) != 1 || read_in_loop(d) != 1 || read_in_loop(dm) != 1 || read_in_loop(alpha) != alpha_reads ||
          read_in_loop(p) != 1 + (acc ? 1 : 0))
        return std::nullopt;
      const sema::SType *scores_type = context_.type_of(scores);
      if (!scores_type || scores_type->shape.size() != 2) return std::nullopt;
      for (size_t k = 0; k + 1 < chain.size(); ++k)  // the copies between m_ij and m, each read by the next
        if (read_in_loop(chain[k]) != 1) clean = false;
      if (!clean) return std::nullopt;


    LoopMatch r;
    r.loop = &f;
    r.m_name = m.name;
    r.m_init = m.init;
    r.mij = mij;
    r.mij_def = mij_def;
    r.chain = chain;
    r.mcol = mcol;
    r.d = d;
    r.dm = dm;
    r.alpha = alpha;
    r.scores = scores;
    r.base = base;
    r.l_name = l->carried;
    r.l_updated = l->updated;
    r.l_scaled = l->scaled;
    r.l_term = clone(*l->term);
    for (const LoopCarried &c : carried) {
      if (c.name == l->carried) r.l_init = c.init;
      if (acc && c.name == acc->carried) r.acc_init = c.init;
    }
    if (acc) {
      r.has_acc = true;
      r.acc_name = acc->carried;
      r.acc_updated = acc->updated;
      r.acc_scaled = acc->scaled;
      r.acc_term = clone(*acc->term);
      r.alpha_col = alpha_col;
    }
    if (r.l_init.empty() || (acc && r.acc_init.empty())) return std::nullopt;
    return r;
  }

  // Names a copy chain `y = x` among body[from, to) carries `x` into, x included; nullopt where some other
  // statement after body[from - 1] reads one of them (the value goes elsewhere than the next loop's entry).
  std::optional<std::set<std::string>> copies_between(const std::string &x, size_t from, size_t to) const {
    const StmtList &body = anf_.fn->body;
    std::set<std::string> names = {x};
    for (size_t k = from; k < to; ++k) {
      auto *a = dyn_cast<Assign>(body[k].get());
      const Name *src = a ? as_name(a->value.get()) : nullptr;
      const std::string y = a ? assigned_name(*a) : "";
      if (src && names.count(src->id) && !y.empty() && def(y) == a) names.insert(y);
    }
    for (size_t k = from; k < body.size(); ++k) {
      std::set<std::string> r;
      deep_reads(*body[k], r);
      if (std::none_of(r.begin(), r.end(), [&](const std::string &n) { return names.count(n) > 0; })) continue;
      auto *a = dyn_cast<Assign>(body[k].get());
      if (k >= to || !a || !as_name(a->value.get())) return std::nullopt;
    }
    return names;
  }

  static size_t index_of(const StmtList &block, const Stmt *s) {
    for (size_t k = 0; k < block.size(); ++k)
      if (block[k].get() == s) return k;
    return std::string::npos;
  }

  // Rewrites one loop of the chain: p against the statistic, the sums without rescaling, no running max.
  void rewrite_loop(LoopMatch &L, const std::string &stat_col) {
    For &f = *L.loop;
    def(L.d)->value = binary(BinaryOpKind::Sub, name(L.scores), name(stat_col));
    def(L.l_updated)->value = binary(BinaryOpKind::Add, name(L.l_name), std::move(L.l_term));
    if (L.has_acc) {
      Assign *u = def(L.acc_updated);
      if (auto *dc = dyn_cast<Call>(u->value.get()); dc && context_.builtin(*dc) == "tl.dot") {
        for (size_t k = 0; k < dc->args.size(); ++k)
          if (k == 2) dc->args[k] = name(L.acc_name);
        for (Keyword &kw : dc->keywords)
          if (kw.name == "acc") kw.value = name(L.acc_name);
      } else {
        u->value = binary(BinaryOpKind::Add, name(L.acc_name), std::move(L.acc_term));
      }
    }
    std::set<std::string> gone = {L.mij, L.mcol, L.dm, L.alpha};
    for (const std::string &c : L.chain) gone.insert(c);
    gone.insert(L.m_name);
    if (L.l_scaled != L.l_updated) gone.insert(L.l_scaled);
    if (L.has_acc) {
      gone.insert(L.alpha_col);
      if (L.acc_scaled != L.acc_updated) gone.insert(L.acc_scaled);
    }
    // What only m_ij read (the row max and its scaling) goes too.
    std::set<std::string> m_inputs;
    stmt_reads(*L.mij_def, m_inputs);
    erase_top_level(f.body, gone);
    for (bool removed = true; removed;) {
      removed = false;
      std::map<std::string, int> reads_now;
      count_reads(anf_.fn->body, reads_now);
      for (const std::string &n : std::set<std::string>(m_inputs)) {
        Assign *a = def(n);
        if (!a || reads_now.count(n) || top_level_assignment(f.body, n) != a) continue;
        stmt_reads(*a, m_inputs);
        m_inputs.erase(n);
        erase_top_level(f.body, {n});
        removed = true;
      }
    }
    std::vector<LoopCarried> &carried = anf_.carried.at(&f);
    for (size_t k = 0; k < carried.size(); ++k)
      if (carried[k].name == L.m_name) {
        carried.erase(carried.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
  }

  // The parameters `e` reads, through the definitions of the names it reads.
  void parameters_read(const Expr &e, std::set<std::string> &out, int depth = 0) const {
    std::set<std::string> names;
    reads(e, names);
    for (const std::string &n : names) {
      if (std::any_of(anf_.fn->params.begin(), anf_.fn->params.end(), [&](const Param &p) { return p.name == n; })) {
        out.insert(n);
      } else if (auto d = definition_.find(n); d != definition_.end() && depth < 16) {
        parameters_read(*d->second->value, out, depth + 1);
      }
    }
  }

  bool compile_time(const If &i) const {
    const sema::SType *t = nullptr;
    if (auto *n = as_name(i.cond.get())) t = context_.type_of(n->id);
    return t ? !t->is_tensor() : !isa<Name>(i.cond.get());
  }

  // Where a loop with a running max (`m = tl.maximum(...)`) sits under, or holds, ifs whose conditions Triton
  // decides when it compiles (tl.constexpr parameters without values: the Triton tutorial's `if STAGE & 1:`
  // around its loop and `if STAGE == 2:` inside it), the matcher above, which reads top-level loops as
  // straight-line code, cannot see it; with the values given the ifs fold away. Says so, naming the
  // parameters, or "".
  std::string running_max_under_flags() {
    std::set<std::string> flags;
    int line = 0;
    std::function<void(const StmtList &, std::set<std::string>)> walk = [&](const StmtList &block,
                                                                            std::set<std::string> around) {
      for (const StmtPtr &s : block) {
        if (auto *i = dyn_cast<If>(s.get())) {
          std::set<std::string> inner = around;
          if (compile_time(*i)) parameters_read(*i->cond, inner);
          walk(i->body, inner);
          walk(i->orelse, inner);
        } else if (auto *f = dyn_cast<For>(s.get())) {
          std::set<std::string> in_loop = around;
          bool maximum = false;
          std::function<void(const StmtList &)> scan = [&](const StmtList &b) {
            for (const StmtPtr &x : b) {
              if (auto *i = dyn_cast<If>(x.get())) {
                if (compile_time(*i)) parameters_read(*i->cond, in_loop);
                scan(i->body);
                scan(i->orelse);
              } else if (auto *a = dyn_cast<Assign>(x.get()); a && builtin(a->value.get()) == "tl.maximum") {
                maximum = true;
              }
            }
          };
          scan(f->body);
          if (maximum && !in_loop.empty() && line == 0) {
            flags = in_loop;
            line = f->span.begin.line;
            flags_at_ = f->span;
          }
        }
      }
    };
    walk(anf_.fn->body, {});
    if (line == 0) return "";
    flags_.assign(flags.begin(), flags.end());
    std::string list;
    for (const std::string &n : flags) list += (list.empty() ? "" : ", ") + n;
    return "line " + std::to_string(line) + ": the loop's online softmax keeps its taped backward: the loop, or its "
           "running max, is under ifs on tl.constexpr values tgrad was not given (" + list + "); give them with -D, "
           "as the launch uses them, and tgrad differentiates it from the stored row statistic instead (no tape, "
           "no replay of the loop)";
  }

  std::optional<SoftmaxStatistics> try_loop(size_t last_at, For &f) {
    StmtList &body = anf_.fn->body;
    for (const LoopCarried &m : anf_.carried.at(&f)) {
      std::optional<LoopMatch> last = match_loop(f, m);
      if (!last) continue;
      // The loops the running max goes through (the Triton tutorial's causal forward: the blocks left of the
      // diagonal, then the diagonal block), the first starting it at -inf: each later one enters with the
      // values the one before left, by copies read nowhere else.
      std::vector<LoopMatch> loops;
      loops.push_back(std::move(*last));
      std::pair<std::set<std::string>, std::set<std::string>> between_names;  // the copies between them: l's, acc's
      bool chained = true;
      while (chained && !minus_infinity(loops.front().m_init)) {
        chained = false;
        const size_t next_at = index_of(body, loops.front().loop);
        size_t prev_at = next_at;
        while (prev_at-- > 0 && !isa<For>(body[prev_at].get())) {
        }
        if (prev_at == std::string::npos || loops.size() == 4) break;
        auto *prev = cast<For>(body[prev_at].get());
        if (!anf_.carried.count(prev)) break;
        const LoopMatch &next = loops.front();
        auto into = [&](const std::string &from, const std::string &init) {
          std::optional<std::set<std::string>> c = copies_between(from, prev_at + 1, next_at);
          return c && c->count(init) ? c : std::nullopt;
        };
        for (const LoopCarried &pm : anf_.carried.at(prev)) {
          std::optional<LoopMatch> before = match_loop(*prev, pm);
          if (!before || before->has_acc != next.has_acc) continue;
          auto ms = into(before->m_name, next.m_init), ls = into(before->l_name, next.l_init);
          auto as = next.has_acc ? into(before->acc_name, next.acc_init) : std::optional<std::set<std::string>>(std::set<std::string>{});
          if (!ms || !ls || !as) continue;
          between_names.first.insert(ls->begin(), ls->end());
          between_names.second.insert(as->begin(), as->end());
          loops.insert(loops.begin(), std::move(*before));
          chained = true;
          break;
        }
      }
      if (!chained && !minus_infinity(loops.front().m_init)) continue;
      const LoopMatch &L = loops.back();

      // After the loop: lg = LOG(l); ml = m + lg; [lse = ml * K]; tl.store(PM, lse, mask=LM);
      // lcol = l[:, None]; out = acc / lcol; [oc = out.to(...)]; tl.store(PO, oc, mask=OM).
      // (Through copies `l_i_3 = l_i` a helper's return leaves after the loop.)
      std::map<std::string, std::string> alias;  // a copy after the loop -> the carried value it copies
      std::map<std::string, std::vector<std::string>> copies;  // a carried value -> its copies
      for (size_t k = last_at + 1; k < body.size(); ++k) {
        auto *a = dyn_cast<Assign>(body[k].get());
        const std::string n = a ? assigned_name(*a) : "";
        const Name *src = a ? as_name(a->value.get()) : nullptr;
        if (n.empty() || !src || !def(n)) continue;
        const std::string root = alias.count(src->id) ? alias.at(src->id) : src->id;
        if (root != L.m_name && root != L.l_name && !(L.has_acc && root == L.acc_name)) continue;
        alias[n] = root;
        copies[root].push_back(n);
      }
      auto is_class = [&](const Expr *e, const std::string &root) {
        const Name *x = as_name(e);
        return x && (x->id == root || (alias.count(x->id) && alias.at(x->id) == root));
      };
      std::map<std::string, int> after = reads_from(body, last_at + 1);
      auto read_after = [&](const std::string &n) { return after.count(n) ? after.at(n) : 0; };
      // Reads of a carried value and its copies, less the copies' own.
      auto read_class_after = [&](const std::string &root) {
        int r = read_after(root);
        for (const std::string &c : copies[root]) r += read_after(c) - 1;
        return r;
      };
      std::string lg, ml, lse, lcol, out, out_cast;
      double scale_k = 1.0;
      for (size_t k = last_at + 1; k < body.size(); ++k) {
        auto *a = dyn_cast<Assign>(body[k].get());
        const std::string n = a ? assigned_name(*a) : "";
        if (n.empty()) continue;
        const std::string lf = builtin(a->value.get());
        if (log_base(lf) == L.base && !unary_call_arg(n, [](const std::string &) { return true; }).empty() &&
            is_class(cast<Call>(a->value.get())->args[0].get(), L.l_name))
          lg = n;
        if (auto *b = dyn_cast<BinOp>(a->value.get())) {
          if (b->op == BinaryOpKind::Add && !lg.empty() &&
              ((is_class(b->lhs.get(), L.m_name) && is_name(b->rhs.get(), lg)) ||
               (is_name(b->lhs.get(), lg) && is_class(b->rhs.get(), L.m_name))))
            ml = n;
          if (b->op == BinaryOpKind::Mul && !ml.empty()) {
            const std::optional<double> kl = literal(b->lhs.get()), kr = literal(b->rhs.get());
            if ((is_name(b->lhs.get(), ml) && kr) || (is_name(b->rhs.get(), ml) && kl)) {
              lse = n;
              scale_k = kr ? *kr : *kl;
            }
          }
          if (L.has_acc && b->op == BinaryOpKind::Div && is_class(b->lhs.get(), L.acc_name) && !lcol.empty() &&
              is_name(b->rhs.get(), lcol))
            out = n;
        }
        if (L.has_acc && !column_of(*a->value).empty() && is_class(cast<Subscript>(a->value.get())->value.get(), L.l_name))
          lcol = n;
        if (!out.empty()) {
          auto *to = dyn_cast<Call>(a->value.get());
          auto *attr = to ? dyn_cast<Attribute>(to->func.get()) : nullptr;
          if (attr && attr->attr == "to" && is_name(attr->value.get(), out)) out_cast = n;
        }
      }
      if (lse.empty()) lse = ml;
      const std::string here = "line " + std::to_string(f.span.begin.line) + ": the loop's online softmax keeps its taped backward: ";
      if (ml.empty() || scale_k == 0.0 || (L.has_acc && out.empty())) {
        declined_ = here + (ml.empty() ? std::string("the kernel does not store its row statistic (m + log2(l)), "
                                                     "which the backward would read instead of a tape (store it, as "
                                                     "FA2 forwards store M)")
                                       : std::string("after the loop its accumulator is not divided by the sum"));
        continue;
      }
      // The stores of lse and of the output.
      auto find_store = [&](const std::string &value) -> Call * {
        for (size_t k = last_at + 1; k < body.size(); ++k) {
          auto *es = dyn_cast<ExprStmt>(body[k].get());
          auto *c = es ? dyn_cast<Call>(es->value.get()) : nullptr;
          if (c && context_.builtin(*c) == "tl.store" && is_name(call_argument(*c, 1, "value"), value)) return c;
        }
        return nullptr;
      };
      Call *lse_store = find_store(lse);
      const std::string out_stored = out_cast.empty() ? out : out_cast;
      Call *out_store = L.has_acc ? find_store(out_stored) : nullptr;
      if (!lse_store || (L.has_acc && !out_store)) {
        declined_ = here + (!lse_store ? std::string("the kernel does not store its row statistic (m + log2(l)), which "
                                                     "the backward would read instead of a tape (store it, as FA2 "
                                                     "forwards store M)")
                                       : std::string("the kernel does not store its normalized output"));
        continue;
      }
      const int l_reads_after = 1 + (L.has_acc ? 1 : 0);
      if (read_class_after(L.m_name) != 1 || read_class_after(L.l_name) != l_reads_after || read_after(lg) != 1 ||
          read_after(ml) != 1 || read_after(lse) != 1)
        continue;
      if (L.has_acc && (read_class_after(L.acc_name) != 1 || read_after(lcol) != 1 || read_after(out) != 1 ||
                  (!out_cast.empty() && read_after(out_cast) != 1)))
        continue;
      const Name *pm = as_name(call_argument(*lse_store, 0, "pointer"));
      const Expr *lm_expr = call_argument(*lse_store, 2, "mask");
      const Name *lm = as_name(lm_expr);
      const Name *po = out_store ? as_name(call_argument(*out_store, 0, "pointer")) : nullptr;
      const Expr *om_expr = out_store ? call_argument(*out_store, 2, "mask") : nullptr;
      const Name *om = as_name(om_expr);
      if (!pm || (lm_expr && !lm) || (L.has_acc && (!po || (om_expr && !om)))) continue;
      // Every row whose output is stored has its statistic stored.
      if (L.has_acc && lm && !(om && implies_row(om->id, lm->id))) {
        declined_ = here + "tgrad cannot tell that every row whose output is stored has its statistic stored (their "
                           "masks differ)";
        continue;
      }
      const std::string stat_base = base_pointer(pm->id);
      const std::string out_base = po ? base_pointer(po->id) : "";
      const sema::SType *stat_ptr = stat_base.empty() ? nullptr : context_.type_of(stat_base);
      if (stat_base.empty() || (L.has_acc && out_base.empty()) || !stat_ptr) continue;
      // The statistic is read back exactly only from a float32 buffer (the backward asserts it where the
      // type is generic: its other representatives then give no backward, and the torch module serves
      // float32 statistics only, as for a norm's saved Mean).
      if (stat_ptr->elem.dtype != sema::DType::FP32 && !context_.generic(stat_base)) {
        declined_ = here + "its row statistic goes to '" + stat_base + "', typed " + stat_ptr->str() +
                    ": read back, a rounded statistic would make the gradient inexact (--arg " + stat_base + "=*fp32)";
        continue;
      }
      const sema::SType *init_l = context_.type_of(L.l_name);
      if (!init_l || init_l->shape.size() != 1) continue;

      // The addresses and masks, computed before the loop.
      std::set<std::string> loop_assigns;  // what the loops, and the copies between them, assign
      {
        const size_t first = index_of(body, loops.front().loop);
        for (size_t k = first; k <= last_at; ++k) {
          std::map<std::string, int> a;
          stmt_assignments(*body[k], a);
          for (const auto &kv : a) loop_assigns.insert(kv.first);
        }
        for (const LoopMatch &M : loops)
          for (const LoopCarried &c : anf_.carried.at(M.loop)) loop_assigns.insert(c.name);
      }
      std::vector<std::string> needed = {pm->id};
      if (lm) needed.push_back(lm->id);
      if (po) needed.push_back(po->id);
      if (om) needed.push_back(om->id);
      // Names copied so the loads stay valid whatever the rewrite removes.
      const std::string pm_id = pm->id, lm_id = lm ? lm->id : "", po_id = po ? po->id : "", om_id = om ? om->id : "";
      size_t first_at = index_of(body, loops.front().loop);
      if (!hoist_before(first_at, needed, loop_assigns)) continue;
      // ---- The rewrite (nothing can fail from here on).
      SoftmaxStatistics result;
      const std::string stat = names_.fresh("row_stat"), stat_col = names_.fresh("row_stat_col");
      std::vector<StmtPtr> before;
      // Placeholders of the right types, defined by the read-backs in the backward.
      before.push_back(assign(stat, binary(BinaryOpKind::Mul, name(loops.front().l_init), number(0.0))));
      before.back()->leading_comment =
          "The softmax's row statistic and output, read back from what the forward stored (tgrad, "
          "src/ad/SoftmaxStatistics.h).";
      std::string saved_out;
      if (L.has_acc) {
        saved_out = names_.fresh("stored_out");
        before.push_back(assign(saved_out, binary(BinaryOpKind::Mul, name(loops.front().acc_init), number(0.0))));
      }
      before.push_back(assign(stat_col, column(stat)));
      for (StmtPtr &s : before) {
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(first_at), std::move(s));
        ++first_at;
      }
      {
        std::vector<Keyword> kws;
        if (lm) {
          kws.push_back(Keyword{"mask", {}, name(lm_id)});
          ExprList inf_arg;
          inf_arg.push_back(std::make_unique<StrLit>("inf", ""));
          // Rows the forward did not store get +inf: their probabilities are 0, never inf. (Triton takes
          // `other` only with a mask.)
          kws.push_back(
              Keyword{"other", {}, std::make_unique<Call>(name("float"), std::move(inf_arg), std::vector<Keyword>{})});
        }
        ExprPtr load = cast_to(call("tl.load", list(name(pm_id)), std::move(kws)), dotted_name("tl.float32"));
        if (scale_k != 1.0) load = binary(BinaryOpKind::Mul, std::move(load), number(1.0 / scale_k));
        result.read_back.push_back({stat, std::move(load), stat_base, true});
      }
      if (L.has_acc) {
        std::vector<Keyword> kws;
        if (om) {
          kws.push_back(Keyword{"mask", {}, name(om_id)});
          kws.push_back(Keyword{"other", {}, number(0.0)});
        }
        ExprPtr load = cast_to(call("tl.load", list(name(po_id)), std::move(kws)), dotted_name("tl.float32"));
        result.read_back.push_back({saved_out, std::move(load), out_base, false});
      }

      // The sums enter the first loop at 0 (its running max starts at -inf: the forward's first rescaling
      // drops their initial values); a later loop of the chain takes the sums the one before left.
      for (const std::string &c : {loops.front().l_name, loops.front().acc_name}) {
        if (c.empty()) continue;
        for (size_t k = first_at; k-- > 0;)
          if (assigned_name(*body[k]) == c) {
            auto *entry = cast<Assign>(body[k].get());
            entry->value = binary(BinaryOpKind::Mul, std::move(entry->value), number(0.0));
            break;
          }
      }
      for (LoopMatch &M : loops) rewrite_loop(M, stat_col);
      const std::string m_name = L.m_name, l_name = L.l_name, acc_name = L.acc_name;
      const int base = L.base;
      const bool acc = L.has_acc;
      const size_t loop_at = index_of(body, L.loop);

      // After the loop: out = acc - stored_out * (l - 1)[:, None]; lg = (l - 1) / ln b; ml = c + lg.
      const std::string l_last = copies[l_name].empty() ? l_name : copies[l_name].back();
      const std::string l_minus_1 = names_.fresh(l_last + "_minus_one");
      // (After the loop, or after l's last copy; positions moved with the hoisting and the placeholders.)
      const size_t l_ready = copies[l_name].empty() ? loop_at : position(body, l_last);
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(l_ready + 1),
                  assign(l_minus_1, binary(BinaryOpKind::Sub, name(l_last), number(1.0))));
      def(lg)->value = base == 2 ? binary(BinaryOpKind::Mul, name(l_minus_1), number(1.0 / kLn2)) : name(l_minus_1);
      {
        auto *b = cast<BinOp>(def(ml)->value.get());
        if (is_class(b->lhs.get(), m_name)) b->lhs = name(stat);
        else b->rhs = name(stat);
      }
      if (acc) {
        const std::string col = names_.fresh(l_minus_1 + "_col"), correction = names_.fresh("out_correction");
        const size_t at = position(body, out);
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(at),
                    assign(correction, binary(BinaryOpKind::Mul, name(saved_out), name(col))));
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(at), assign(col, column(l_minus_1)));
        auto *division = cast<BinOp>(def(out)->value.get());
        division->op = BinaryOpKind::Sub;
        division->rhs = name(correction);
        result.witnesses[col] = stat_col;
        result.witnesses[correction] = saved_out;
      }
      for (const std::string &n : {l_name, l_minus_1, lg, ml, lse}) result.witnesses[n] = stat;
      for (const std::string &n : copies[l_name]) result.witnesses[n] = stat;
      if (acc) {
        result.witnesses[lcol] = stat_col;
        for (const std::string &n : {acc_name, out}) result.witnesses[n] = saved_out;
        for (const std::string &n : copies[acc_name]) result.witnesses[n] = saved_out;
      }
      for (const std::string &n : between_names.first) result.witnesses[n] = stat;
      for (const std::string &n : between_names.second) result.witnesses[n] = saved_out;
      std::vector<int> at_lines;  // (a helper's loop inlined twice is one line)
      for (const LoopMatch &M : loops)
        if (std::find(at_lines.begin(), at_lines.end(), M.loop->span.begin.line) == at_lines.end())
          at_lines.push_back(M.loop->span.begin.line);
      std::string lines;
      for (size_t k = 0; k < at_lines.size(); ++k)
        lines += (k == 0 ? "" : k + 1 == at_lines.size() ? " and " : ", ") + std::to_string(at_lines[k]);
      result.explanation =
          std::string(at_lines.size() > 1 ? "lines " + lines + ": " : "line " + lines + ": ") +
          (loops.size() > 1 ? "the " + std::to_string(loops.size()) +
                                  " loops' online softmax (one running max through them, in order) is"
                            : std::string("the loop's online softmax is")) +
          " differentiated from its row statistic, read back from what the forward "
          "stores through '" + stat_base + "'" +
          (acc ? " (and its output, read back from '" + out_base +
                     "' as stored, rounded to its dtype, as a hand-written FA2 backward reads it)"
               : std::string()) +
          ": its running max needs no tape, the loop is not replayed, and its iterations are independent";
      return result;
    }
    return std::nullopt;
  }
};

}  // namespace

std::optional<SoftmaxStatistics> read_softmax_statistics(AnfFunction &anf, const SoftmaxStatisticsContext &context,
                                                         NameAllocator &names, std::string *declined,
                                                         SourceSpan *flags_at, std::vector<std::string> *flags) {
  Rewriter r(anf, context, names);
  std::optional<SoftmaxStatistics> result = r.run();
  if (declined && !result) *declined = r.declined();
  if (flags_at && !result) *flags_at = r.flags_at();
  if (flags && !result) *flags = r.flags();
  return result;
}

}  // namespace tgrad::ad
