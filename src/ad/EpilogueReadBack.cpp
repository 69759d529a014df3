#include "src/ad/EpilogueReadBack.h"

#include <algorithm>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"

namespace tgrad::ad {
namespace {

using namespace ast;
using reverse::assign;
using reverse::call;
using reverse::cast_to;
using reverse::list;
using reverse::name;

using reverse::is_zero_literal;

class Rewriter {
 public:
  Rewriter(AnfFunction &anf, const EpilogueContext &context, NameAllocator &names)
      : anf_(anf), context_(context), names_(names) {
    index(anf_.fn->body);
    count_reads(anf_.fn->body, reads_);
  }

  EpilogueReadBacks run() {
    StmtList &body = anf_.fn->body;
    if (!memory_by_base()) return std::move(out_);
    // The values carried out of the top-level loops, each with its loop's position and its initial value.
    for (size_t k = 0; k < body.size(); ++k)
      if (auto *f = dyn_cast<For>(body[k].get()); f && anf_.carried.count(f))
        for (const LoopCarried &c : anf_.carried.at(f)) carried_[c.name] = {k, c.init};
    // The names whose values derive from a top-level loop: what loops assign, then what reads them.
    for (const StmtPtr &st : body) {
      std::set<std::string> r;
      deep_reads(*st, r);
      const bool loop = isa<For>(st.get()) || isa<While>(st.get());
      if (loop || std::any_of(r.begin(), r.end(), [&](const std::string &n) { return from_loops_.count(n) > 0; }))
        stmt_assignments_names(*st, from_loops_);
    }
    for (size_t k = 0; k < body.size(); ++k) {
      auto *es = dyn_cast<ExprStmt>(body[k].get());
      auto *c = es ? dyn_cast<Call>(es->value.get()) : nullptr;
      if (c && context_.builtin(*c) == "tl.store") k = try_store(k, *c);
    }
    return std::move(out_);
  }

 private:
  AnfFunction &anf_;
  const EpilogueContext &context_;
  NameAllocator &names_;
  EpilogueReadBacks out_;
  std::map<std::string, int> assignments_;
  std::map<std::string, Assign *> definition_;
  std::map<std::string, int> reads_;
  std::map<std::string, int> accesses_;  // memory accesses through each pointer parameter
  struct Carried {
    size_t loop_at;
    std::string init;
  };
  std::map<std::string, Carried> carried_;
  std::set<std::string> from_loops_;

  void index(StmtList &block) {
    for (StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get())) {
        const std::string &n = cast<Name>(a->targets[0].get())->id;
        ++assignments_[n];
        definition_[n] = a;
      } else if (auto *f = dyn_cast<For>(s.get())) {
        if (auto *v = dyn_cast<Name>(f->target.get())) assignments_[v->id] += 2;
      } else if (!isa<If>(s.get()) && !isa<While>(s.get())) {
        std::map<std::string, int> n;
        stmt_assignments(*s, n);
        for (const auto &kv : n) assignments_[kv.first] += 2;
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
  int read_count(const std::string &n) const {
    auto it = reads_.find(n);
    return it == reads_.end() ? 0 : it->second;
  }
  static size_t position(const StmtList &block, const std::string &n) {
    for (size_t k = 0; k < block.size(); ++k)
      if (assigned_name(*block[k]) == n) return k;
    return std::string::npos;
  }

  // Counts the memory accesses through each pointer parameter; false where
  // one's buffer is unknown (it might be any: nothing is rewritten).
  bool memory_by_base() {
    bool known = true;
    visit_exprs(anf_.fn->body, [&](const Expr &e) {
      auto *c = dyn_cast<Call>(&e);
      if (!c) return;
      const std::string f = context_.builtin(*c);
      if (f != "tl.load" && f != "tl.store" && f.rfind("tl.atomic_", 0) != 0) {
        // Block pointers and tensor descriptors: accesses the bases below do not see.
        if (f == "tl.make_block_ptr" || f.find("tensor_descriptor") != std::string::npos) known = false;
        return;
      }
      const Name *p = as_name(call_argument(*c, 0, "pointer"));
      const std::string base = p ? context_.base_of(p->id) : "";
      if (base.empty()) known = false;
      else ++accesses_[base];
    });
    return known;
  }

  // The name a chain of copies `x = y` (each assigned once) starts from.
  std::string resolve_copy(std::string n) const {
    for (int hops = 0; hops < 16; ++hops) {
      Assign *a = def(n);
      const Name *src = a ? as_name(a->value.get()) : nullptr;
      if (!src) break;
      n = src->id;
    }
    return n;
  }

  // `tl.zeros(shape, dtype)` / `tl.full(shape, value, dtype)` that `init` (through copies) is, with its dtype
  // given; else null.
  const Call *typed_fill(const std::string &init) const {
    Assign *a = def(resolve_copy(init));
    auto *c = a ? dyn_cast<Call>(a->value.get()) : nullptr;
    if (!c) return nullptr;
    const std::string f = context_.builtin(*c);
    if (f == "tl.zeros" && call_argument(*c, 1, "dtype")) return c;
    if (f == "tl.full" && call_argument(*c, 2, "dtype")) return c;
    return nullptr;
  }

  // `y = e / d` with d = tl.sum(e, A), e = tl.exp(s), s = x - m, m = tl.max(x, A) (A a literal axis, given to both
  // alike; m a scalar: a 1-D row), each of m, s, e, d assigned once at the top level and read only by the next:
  // returns A and sets x; null elsewhere.
  ExprPtr softmax_written_out(const Assign &y_def, std::string &x) {
    auto *div = dyn_cast<BinOp>(y_def.value.get());
    if (!div || div->op != BinaryOpKind::Div) return nullptr;
    const Name *e = as_name(div->lhs.get()), *d = as_name(div->rhs.get());
    Assign *d_def = d ? def(d->id) : nullptr;
    Assign *e_def = e ? def(e->id) : nullptr;
    if (!d_def || !e_def || read_count(d->id) != 1 || read_count(e->id) != 2) return nullptr;
    // The axis of a reduction `f(v, A)` or `f(v, axis=A)` of a name v, with A an integer literal.
    auto reduction = [&](const Expr &value, const std::string &fn, const Name *&v) -> const IntLit * {
      auto *c = dyn_cast<Call>(&value);
      if (!c || context_.builtin(*c) != fn || c->args.empty()) return nullptr;
      v = as_name(c->args[0].get());
      const Expr *axis = c->args.size() == 2 ? c->args[1].get() : nullptr;
      for (const Keyword &kw : c->keywords) {
        if (kw.name != "axis" || axis) return nullptr;
        axis = kw.value.get();
      }
      return c->args.size() <= 2 && axis ? dyn_cast<IntLit>(axis) : nullptr;
    };
    const Name *summed = nullptr;
    const IntLit *axis = reduction(*d_def->value, "tl.sum", summed);
    if (!axis || !summed || summed->id != e->id) return nullptr;
    auto *exp = dyn_cast<Call>(e_def->value.get());
    if (!exp || context_.builtin(*exp) != "tl.exp" || exp->args.size() != 1 || !exp->keywords.empty()) return nullptr;
    const Name *s = as_name(exp->args[0].get());
    Assign *s_def = s ? def(s->id) : nullptr;
    auto *sub = s_def ? dyn_cast<BinOp>(s_def->value.get()) : nullptr;
    if (!sub || sub->op != BinaryOpKind::Sub || read_count(s->id) != 1) return nullptr;
    const Name *xn = as_name(sub->lhs.get()), *m = as_name(sub->rhs.get());
    Assign *m_def = m ? def(m->id) : nullptr;
    if (!xn || !m_def || read_count(m->id) != 1) return nullptr;
    const Name *maxed = nullptr;
    const IntLit *max_axis = reduction(*m_def->value, "tl.max", maxed);
    if (!max_axis || max_axis->value != axis->value || !maxed || maxed->id != xn->id) return nullptr;
    // A row: x is 1-D and m a scalar (a 2-D tile's max would be broadcast through a reshape, not analysed).
    const sema::SType *xt = context_.type_of(xn->id), *mt = context_.type_of(m->id);
    if (!xt || !mt || !xt->is_tensor() || xt->shape.size() != 1 || !mt->shape.empty()) return nullptr;
    x = xn->id;
    return std::make_unique<IntLit>(axis->value, "");
  }

  // `recomputed`: what the backward computes again instead (a softmax written out has no loop to replay).
  void decline(const Stmt &epilogue, const std::string &why,
               const std::string &recomputed = "the forward's loop is replayed for it") {
    const Stmt *origin = anf_.origin_of(&epilogue);
    const std::string e = "line " + std::to_string((origin ? origin : &epilogue)->span.begin.line) +
                          ": the epilogue's derivative is computed from its input, as written (" + recomputed +
                          "), not read from the stored output: " + why;
    if (std::find(out_.explanations.begin(), out_.explanations.end(), e) == out_.explanations.end())
      out_.explanations.push_back(e);
  }

  // Whether a jit helper returns a leaky relu of its one parameter p, `tl.where(p >= 0, p, k * p)` (or `p > 0`,
  // `p * k`), as its only statement: sets how the stored value tells the upper side, and k.
  static bool leaky_relu_helper(const Function &h, CompareOpKind &above, double &slope) {
    if (h.params.size() != 1 || h.body.size() != 1) return false;
    const std::string &p = h.params[0].name;
    auto *ret = dyn_cast<Return>(h.body[0].get());
    auto *where = ret && ret->value ? dyn_cast<Call>(ret->value.get()) : nullptr;
    if (!where || emit::print_expr(*where->func) != "tl.where" || where->args.size() != 3 || !where->keywords.empty())
      return false;
    auto *cmp = dyn_cast<Compare>(where->args[0].get());
    if (!cmp || cmp->ops.size() != 1 || !is_name(cmp->left.get(), p) || !is_zero_literal(*cmp->comparators[0]) ||
        (cmp->ops[0] != CompareOpKind::Gt && cmp->ops[0] != CompareOpKind::GtE))
      return false;
    auto *mul = dyn_cast<BinOp>(where->args[2].get());
    if (!is_name(where->args[1].get(), p) || !mul || mul->op != BinaryOpKind::Mul) return false;
    const FloatLit *k = is_name(mul->rhs.get(), p) ? dyn_cast<FloatLit>(mul->lhs.get())
                        : is_name(mul->lhs.get(), p) ? dyn_cast<FloatLit>(mul->rhs.get())
                                                    : nullptr;
    if (!k || !(k->value >= 0.0) || k->value >= 1.0) return false;
    above = cmp->ops[0];
    slope = k->value;
    return true;
  }

  // Whether an if's condition is decided when Triton compiles: it reads tl.constexpr parameters only.
  bool compile_time(const Expr &cond) const { return reads_only(cond, constexpr_params(*anf_.fn)); }

  // The store at body[k]: rewrites the epilogue whose value it stores; returns the store's new position.
  size_t try_store(size_t k, const Call &store) {
    StmtList &body = anf_.fn->body;
    const Name *pointer = as_name(call_argument(store, 0, "pointer"));
    const Name *value = as_name(call_argument(store, 1, "value"));
    const Expr *mask_expr = call_argument(store, 2, "mask");
    const Name *mask = as_name(mask_expr);
    if (!pointer || !value || (mask_expr && !mask) || call_argument(store, 3, "boundary_check")) return k;
    // c = y.to(T), or y itself.
    std::string y = value->id;
    Assign *cast_def = nullptr;
    if (Assign *d = def(value->id)) {
      auto *to = dyn_cast<Call>(d->value.get());
      auto *attr = to ? dyn_cast<Attribute>(to->func.get()) : nullptr;
      const Name *from = attr ? as_name(attr->value.get()) : nullptr;
      if (from && attr->attr == "to" && to->args.size() == 1 && to->keywords.empty()) {
        cast_def = d;
        y = from->id;
      }
    }
    // y = tl.maximum(x, 0) at the top level, or in one branch of a top-level if on tl.constexpr values
    // (`if ACTIVATION == "relu": m = tl.maximum(x, 0.0); y = m` `else: y = x`), read only by the copy.
    Assign *y_def = def(y);
    If *flag_if = nullptr;
    StmtList *branch = nullptr;
    if (!y_def && assignments_[y] == 2) {
      for (size_t j = 0; j < k && !flag_if; ++j) {
        auto *i = dyn_cast<If>(body[j].get());
        if (!i || !compile_time(*i->cond)) continue;
        for (StmtList *b : {&i->body, &i->orelse}) {
          StmtList *other = b == &i->body ? &i->orelse : &i->body;
          const Assign *copy = top_level_assignment(*b, y);
          const Name *m = copy ? as_name(copy->value.get()) : nullptr;
          Assign *md = m ? def(m->id) : nullptr;
          if (md && top_level_assignment(*b, m->id) == md && read_count(m->id) == 1 && top_level_assignment(*other, y)) {
            flag_if = i;
            branch = b;
            y_def = md;
            break;
          }
        }
      }
    }
    if (y_def && !flag_if) {
      auto *u = dyn_cast<Call>(y_def->value.get());
      const std::string f = u ? context_.builtin(*u) : "";
      const std::string last = f.substr(f.rfind('.') + 1);
      const bool math = f.rfind("tl.", 0) == 0 || f.rfind("math.", 0) == 0 || f.find("libdevice") != std::string::npos;
      if (u && math && (last == "sigmoid" || last == "tanh") && u->args.size() == 1 && u->keywords.empty() &&
          as_name(u->args[0].get()))
        return try_from_output(k, pointer->id, value->id, mask ? mask->id : "", *y_def, cast_def, last,
                               as_name(u->args[0].get())->id, nullptr);
      // y = e / tl.sum(e, A), e = tl.exp(x - tl.max(x, A)): a softmax written out, whose derivative
      // y (by - sum(by y)) needs only y. Read back, it replaces the replay of the max, the exponentials and the sum
      // (tl.softmax's rule, src/ad/adjoints/rules.py).
      std::string x;
      if (ExprPtr axis = softmax_written_out(*y_def, x)) {
        std::vector<Keyword> kws;
        kws.push_back(Keyword{"dim", {}, std::move(axis)});
        return try_from_output(k, pointer->id, value->id, mask ? mask->id : "", *y_def, cast_def, "softmax", x,
                               call("tl.softmax", list(name(x)), std::move(kws)));
      }
    }
    auto *max = y_def ? dyn_cast<Call>(y_def->value.get()) : nullptr;
    if (!max) return k;
    // A relu, tl.maximum(x, 0), or a helper's leaky relu: the kink at 0, and the value below it.
    const Name *x = nullptr;
    ExprPtr below;                                 // what y is where x is below the kink (relu: the 0; leaky: k * x)
    CompareOpKind above = CompareOpKind::Gt;       // how the stored value says x is above it
    std::string what = "relu";
    double slope = 0.0;
    if (context_.builtin(*max) == "tl.maximum" && max->args.size() == 2 && max->keywords.empty()) {
      const int zero_at = is_zero_literal(*max->args[1]) ? 1 : is_zero_literal(*max->args[0]) ? 0 : -1;
      x = zero_at >= 0 ? as_name(max->args[1 - zero_at].get()) : nullptr;
      if (x) below = clone(*max->args[zero_at]);
    } else if (const Function *h = context_.helper ? context_.helper(*max) : nullptr;
               h && max->args.size() == 1 && max->keywords.empty() && as_name(max->args[0].get()) &&
               leaky_relu_helper(*h, above, slope)) {
      x = as_name(max->args[0].get());
      what = "leaky relu";
    }
    if (!x) return k;
    // x: a value carried out of a top-level loop (through copies).
    const std::string carried = resolve_copy(x->id);
    auto loop = carried_.find(carried);
    if (loop == carried_.end()) return k;  // not a loop's result: computing it again costs no replay
    const Stmt &epilogue = *y_def;
    // The top-level statement holding the epilogue (its definition, or the if), which moves down to the store.
    const Stmt *unit = flag_if ? static_cast<const Stmt *>(flag_if) : y_def;
    size_t unit_at = std::string::npos;
    for (size_t j = 0; j < k; ++j)
      if (body[j].get() == unit) unit_at = j;
    const size_t cast_at = cast_def ? position(body, value->id) : unit_at;
    if (unit_at == std::string::npos || cast_at == std::string::npos || (cast_def && body[cast_at].get() != cast_def) ||
        !(unit_at <= cast_at && cast_at < k) || unit_at < loop->second.loop_at) {
      decline(epilogue, "it is not at the kernel's top level, or in an if on tl.constexpr values there, before the store");
      return k;
    }
    if (read_count(value->id) != 1 || (cast_def && read_count(y) != 1)) {
      decline(epilogue, "its value is read by more than the store");
      return k;
    }
    const Call *fill = typed_fill(loop->second.init);
    const sema::SType *xt = context_.type_of(x->id);
    if (!fill || !xt || !xt->is_tensor() || xt->elem.is_pointer || !sema::is_float(xt->elem.dtype)) {
      decline(epilogue, "tgrad cannot write a tile of its input's type (the loop's initial value is not "
                        "tl.zeros or tl.full with a dtype)");
      return k;
    }
    const std::string base = context_.base_of(pointer->id);
    if (base.empty() || accesses_[base] != 1) {
      decline(epilogue, "the kernel accesses '" + (base.empty() ? pointer->id : base) +
                            "' elsewhere too, so what the backward would read there need not be what this store wrote");
      return k;
    }
    bool proven = false;
    if (std::string why = context_.shared_addresses(pointer->id, mask ? mask->id : "", proven); !why.empty()) {
      decline(epilogue, "programs store to the same addresses of '" + base + "' (" + why + ")");
      return k;
    }
    // The epilogue (or its if) and the cast move down to the store: nothing between may assign what they read,
    // or read what the if assigns.
    std::set<std::string> needed, made;
    deep_reads(*unit, needed);
    if (cast_def) stmt_reads(*cast_def, needed);
    if (flag_if) stmt_assignments_names(*flag_if, made);
    for (size_t j = unit_at + 1; j < k; ++j) {
      if (j == cast_at) continue;
      std::map<std::string, int> assigned;
      stmt_assignments(*body[j], assigned);
      for (const auto &kv : assigned)
        if (needed.count(kv.first) || made.count(kv.first)) {
          decline(epilogue, "'" + kv.first + "', which it reads, is assigned again before the store");
          return k;
        }
      std::set<std::string> r;
      deep_reads(*body[j], r);
      for (const std::string &n : r)
        if (made.count(n)) {
          decline(epilogue, "'" + n + "', which the if around it assigns, is read before the store");
          return k;
        }
    }

    // ---- The rewrite (nothing can fail from here on).
    const std::string stored = names_.fresh(value->id + "_stored");
    const std::string positive = names_.fresh(stored + "_positive");
    const std::string stored_type = flag_if ? names_.fresh(stored + "_type") : stored;
    const std::string y_name = y, m_name = assigned_name(*y_def), pointer_name = pointer->id;
    const std::string mask_name = mask ? mask->id : "";
    ExprPtr dtype = clone(*call_argument(*fill, context_.builtin(*fill) == "tl.zeros" ? 1 : 2, "dtype"));
    StmtPtr placeholder = assign(stored, clone(*fill));
    placeholder->leading_comment = "The epilogue's output, read back from what the forward stored through '" + base +
                                   "' (tgrad, src/ad/EpilogueReadBack.h).";
    StmtPtr sign = assign(positive, std::make_unique<Compare>(name(stored), std::vector<CompareOpKind>{above},
                                                              list(std::make_unique<FloatLit>(0.0, ""))));
    // A leaky relu's lower side, k * x, a statement of its own before the epilogue (A-normal form).
    StmtPtr lower;
    if (!below) {
      const std::string scaled = names_.fresh(x->id + "_scaled");
      lower = assign(scaled, reverse::binary(BinaryOpKind::Mul, name(x->id), std::make_unique<FloatLit>(slope, "")));
      below = name(scaled);
    }
    const std::string x_name = x->id;
    ExprList where_args;
    where_args.push_back(name(positive));
    where_args.push_back(name(x_name));
    where_args.push_back(std::move(below));
    y_def->value = std::make_unique<Call>(reverse::dotted_name("tl.where"), std::move(where_args), std::vector<Keyword>{});
    std::vector<StmtPtr> moved;
    if (flag_if) {
      // In the branch, before the epilogue; a tile of its type before the if, for what reads only its type.
      size_t at = 0;
      while (branch->at(at).get() != y_def) ++at;
      if (lower) branch->insert(branch->begin() + static_cast<std::ptrdiff_t>(at), std::move(lower));
      branch->insert(branch->begin() + static_cast<std::ptrdiff_t>(at), std::move(sign));
      branch->insert(branch->begin() + static_cast<std::ptrdiff_t>(at), std::move(placeholder));
      moved.push_back(assign(stored_type, clone(*fill)));
    } else {
      moved.push_back(std::move(placeholder));
      moved.push_back(std::move(sign));
      if (lower) moved.push_back(std::move(lower));
    }
    // Move the epilogue (or its if) and the cast to just before the store.
    std::vector<StmtPtr> taken;
    auto take = [&](size_t j) {
      taken.insert(taken.begin(), std::move(body[j]));
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(j));
      --k;
    };
    if (cast_def) take(cast_at);  // (after the epilogue's: first)
    take(unit_at);
    for (StmtPtr &s : taken) moved.push_back(std::move(s));
    for (StmtPtr &s : moved) {
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(k), std::move(s));
      ++k;
    }

    std::vector<Keyword> kws;
    if (!mask_name.empty()) {
      kws.push_back(Keyword{"mask", {}, name(mask_name)});
      kws.push_back(Keyword{"other", {}, std::make_unique<FloatLit>(0.0, "")});
    }
    ExprPtr load = cast_to(call("tl.load", list(name(pointer_name)), std::move(kws)), std::move(dtype));
    out_.read_back.push_back({stored, std::move(load), base, false});
    out_.witnesses[y_name] = stored_type;
    if (m_name != y_name) out_.witnesses[m_name] = stored;
    const Stmt *origin = anf_.origin_of(&epilogue);
    out_.explanations.push_back(
        "line " + std::to_string((origin ? origin : &epilogue)->span.begin.line) +
        ": the " + what + " epilogue's derivative is read from the output the forward stored through '" + base +
        (what == "relu" ? std::string("': relu'(x) = (stored > 0)")
                        : "': its slope is 1 where stored " + std::string(above == CompareOpKind::Gt ? ">" : ">=") +
                              " 0, else " + emit::print_expr(FloatLit(slope, ""))) +
        ", where x is the loop's result, so the backward does not replay the loop for it (a replay of a float32 "
        "dot, in TF32, may round x to the other side of the kink); "
        "valid because this store is the kernel's only access to '" + base + "' and " +
        (proven ? "no two programs or lanes write one of its addresses (proven)"
                : "it writes each of its addresses once (not proven: its offsets are not analysed; the store's own "
                  "adjoint takes that too)") +
        ", so the backward reads what this store wrote (the protocol passes '" + base +
        "' as the forward left it); exact wherever " + (what == "relu" ? std::string("x") : std::string("k * x")) +
        " does not round to 0 in the dtype of '" + base + "' " +
        (what == "relu"
             ? std::string("(for float16, 0 < x < 2**-25 gives 0 where relu' is 1; at x == 0 it gives 0, torch.relu's "
                           "convention, where tl.maximum's tie gives 1/2)")
             : std::string("(for float16, a negative k * x above -2**-25 is stored as -0.0, which compares >= 0: "
                           "slope 1 there)")));
    return k;
  }

  // y = f(x) (sigmoid, tanh), whose derivative is a function of y, stored by the store at body[k] (through a cast
  // to its own dtype): the replay defines y by reading it back, so the rule's y is the stored value and x is not
  // needed. Only where the buffer holds y exactly (its dtype given, y's); returns the store's new position.
  // `x`: f's argument. `as_call`: for a function written out (a softmax), the call of Triton's that y_def
  // becomes where the read-back is made (the statements it was computed by stay: only the replay stops needing
  // them).
  size_t try_from_output(size_t k, const std::string &pointer, const std::string &value, const std::string &mask,
                         Assign &y_def, Assign *cast_def, const std::string &f, const std::string &x,
                         ExprPtr as_call) {
    StmtList &body = anf_.fn->body;
    const std::string y = assigned_name(y_def);
    const Stmt &epilogue = y_def;
    auto refuse = [&](const std::string &why) {
      if (as_call) decline(epilogue, why, "the softmax's max, exponentials and sum are computed again");
      else decline(epilogue, why);
    };
    // Not from a loop, computing x again costs no replay; a softmax written out replays a max, exponentials and a
    // sum, which the read-back saves whatever x is.
    if (!as_call && !from_loops_.count(x)) return k;
    const size_t y_at = position(body, y);
    const size_t cast_at = cast_def ? position(body, value) : y_at;
    if (y_at == std::string::npos || body[y_at].get() != &y_def || cast_at == std::string::npos ||
        (cast_def && body[cast_at].get() != cast_def) || !(y_at <= cast_at && cast_at < k)) {
      refuse("it is not at the kernel's top level before the store");
      return k;
    }
    if (read_count(value) != 1 || (cast_def && read_count(y) != 1)) {
      refuse("its value is read by more than the store");
      return k;
    }
    const std::string base = context_.base_of(pointer);
    if (base.empty() || accesses_[base] != 1) {
      refuse("the kernel accesses '" + (base.empty() ? pointer : base) +
                            "' elsewhere too, so what the backward would read there need not be what this store wrote");
      return k;
    }
    const sema::SType *yt = context_.type_of(y), *ct = context_.type_of(value), *pt = context_.type_of(base);
    if (!yt || !ct || !pt || !yt->is_tensor() || !sema::is_float(yt->elem.dtype)) return k;
    if (context_.generic_types) {
      refuse(f + "'s derivative is a function of its output, but the buffers' types were not given: "
                            "read back from a buffer narrower than " + sema::tl_name(yt->elem.dtype) +
                            " it would be inexact (give --arg " + base + "=*" + sema::short_name(yt->elem.dtype) + ")");
      return k;
    }
    if (ct->elem.dtype != yt->elem.dtype || pt->elem.dtype != yt->elem.dtype) {
      refuse(f + "'s derivative is a function of its output, but '" + base + "' holds it rounded to " +
                            sema::tl_name(ct->elem.dtype != yt->elem.dtype ? ct->elem.dtype : pt->elem.dtype) +
                            ": read back, the derivative would be inexact");
      return k;
    }
    bool proven = false;
    if (std::string why = context_.shared_addresses(pointer, mask, proven); !why.empty()) {
      refuse("programs store to the same addresses of '" + base + "' (" + why + ")");
      return k;
    }
    std::set<std::string> needed;
    stmt_reads(y_def, needed);
    if (cast_def) stmt_reads(*cast_def, needed);
    if (as_call) needed.insert(x);
    for (size_t j = y_at + 1; j < k; ++j) {
      if (j == cast_at) continue;
      std::map<std::string, int> assigned;
      stmt_assignments(*body[j], assigned);
      for (const auto &kv : assigned)
        if (needed.count(kv.first)) {
          refuse("'" + kv.first + "', which it reads, is assigned again before the store");
          return k;
        }
    }
    // ---- The rewrite: y and its cast move down to the store; the replay defines y by the read-back.
    const bool written_out = as_call != nullptr;
    if (as_call) y_def.value = std::move(as_call);  // (the statements before it are read by nothing now)
    std::vector<StmtPtr> taken;
    auto take = [&](size_t j) {
      taken.insert(taken.begin(), std::move(body[j]));
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(j));
      --k;
    };
    if (cast_def) take(cast_at);
    take(y_at);
    for (StmtPtr &st : taken) {
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(k), std::move(st));
      ++k;
    }
    std::vector<Keyword> kws;
    if (!mask.empty()) {
      kws.push_back(Keyword{"mask", {}, name(mask)});
      kws.push_back(Keyword{"other", {}, std::make_unique<FloatLit>(0.0, "")});
    }
    out_.read_back.push_back({y, call("tl.load", list(name(pointer)), std::move(kws)), base, true});
    const Stmt *origin = anf_.origin_of(&epilogue);
    out_.explanations.push_back(
        "line " + std::to_string((origin ? origin : &epilogue)->span.begin.line) + ": the " + f +
        " epilogue's value is read from the output the forward stored through '" + base + "' (its derivative, " +
        (f == "sigmoid" ? "y (1 - y)" : f == "tanh" ? "1 - y^2" : "y (dy - sum(dy y)), a softmax's") +
        ", needs only y), so the backward does not " +
        (written_out ? std::string("compute its max, exponentials and sum again") : std::string("replay the loop for its input")) +
        "; valid because this store is the "
        "kernel's only access to '" + base + "', which holds y exactly (both " + sema::tl_name(yt->elem.dtype) +
        "), and " +
        (proven ? "no two programs or lanes write one of its addresses (proven)"
                : "it writes each of its addresses once (not proven: its offsets are not analysed; the store's own "
                  "adjoint takes that too)") +
        " (the protocol passes '" + base + "' as the forward left it)");
    return k;
  }

  static void stmt_assignments_names(const Stmt &s, std::set<std::string> &out) {
    std::map<std::string, int> n;
    stmt_assignments(s, n);
    for (const auto &kv : n) out.insert(kv.first);
  }
};

}  // namespace

EpilogueReadBacks read_epilogues_from_outputs(AnfFunction &anf, const EpilogueContext &context, NameAllocator &names) {
  return Rewriter(anf, context, names).run();
}

}  // namespace tgrad::ad
