// A kernel's plan: its memory operations, which values are active and
// useful, what the forward saves, and how partial sums are laid out.
#include <sstream>

#include "src/ad/IssueEarly.h"
#include "src/ad/Redundancy.h"
#include "src/ad/StoredValueForwarding.h"
#include "src/ad/reverse/Engine.h"
#include "src/ad/reverse/GroupedOrder.h"
#include "src/ad/reverse/LongestFirst.h"
#include "src/ad/reverse/OwnerComputes.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/parse/Parser.h"

namespace tgrad::ad::reverse {

bool Engine::exclusive(const MemoryOp &a, const MemoryOp &b) {
  for (size_t k = 0; k < a.branches.size() && k < b.branches.size(); ++k) {
    if (a.branches[k].first != b.branches[k].first) return false;
    if (a.branches[k].second != b.branches[k].second) return true;
  }
  return false;
}

std::string Engine::name_or_empty(const Expr *e) {
  auto *n = e ? dyn_cast<Name>(e) : nullptr;
  return n ? n->id : "";
}

void Engine::collect(const StmtList &block, const AccessAnalysis &access, bool in_branch) {
  for (size_t k = 0; k < block.size(); ++k) {
    const Stmt &s = *block[k];
    if (auto *f = dyn_cast<For>(&s)) {
      for (const LoopCarried &c : anf_.carried.at(f))
        for (size_t j = k; j-- > 0;)
          if (assigned_name(*block[j]) == c.name) {
            init_copy_[f].push_back(block[j].get());
            break;
          }
      loop_path_.push_back(f);
      collect(f->body, access, in_branch);
      loop_path_.pop_back();
      continue;
    }
    if (auto *i = dyn_cast<If>(&s)) {
      branch_path_.push_back({i, true});
      collect(i->body, access, true);
      branch_path_.back().second = false;
      collect(i->orelse, access, true);
      branch_path_.pop_back();
      continue;
    }
    const Call *c = nullptr;
    std::string target = assigned_name(s);
    if (!target.empty()) defs_of_[target].push_back(cast<Assign>(&s));
    bool store = false;
    if (auto *a = dyn_cast<Assign>(&s)) {
      c = dyn_cast<Call>(a->value.get());
    } else if (auto *e = dyn_cast<ExprStmt>(&s)) {
      c = dyn_cast<Call>(e->value.get());
      store = true;
    }
    if (!c) continue;
    const SType *f = anf_types_.type_of(c->func.get());
    std::string fname = f && f->kind == SType::Kind::Builtin ? f->s : "";
    const bool atomic = fname.rfind("tl.atomic_", 0) == 0;
    if (atomic && !store) {
      // `old = tl.atomic_add(...)`: what it returns depends on the order of programs.
      if (!kernel_reads_) block_reads(anf_.fn->body, kernel_reads_.emplace());
      if (kernel_reads_->count(target))
        fail(c->span, "the value " + fname + " returns (the contents before this program's update) depends on the "
                      "order of programs, so it has no gradient; tgrad differentiates atomics whose result is unused");
      store = true;
    }
    if (!atomic && fname != "tl.load" && fname != "tl.store") continue;
    if (!atomic && store != (fname == "tl.store")) continue;
    MemoryOp op;
    op.atomic = atomic ? fname : "";
    op.stmt = &s;
    op.in_branch = in_branch;
    op.branches = branch_path_;
    op.loops = loop_path_;
    op.store = store;
    op.pointer = name_or_empty(call_argument(*c, 0, "pointer"));
    op.call = c;
    if (op.pointer.empty()) fail(c->span, "the pointer of a " + fname + " must be a pointer value");
    op.base = access.base_of(op.pointer);
    if (op.base.empty()) {
      const SType *pt = type_of_name(op.pointer);
      if (!pt || pt->kind == SType::Kind::Unknown)
        fail(c->span, "tgrad cannot differentiate this " + fname + ": its pointer comes from an operation tgrad does not "
                      "type yet (a builtin such as tl.cat, or a block pointer tgrad did not lower); write the address "
                      "as pointer arithmetic with a mask");
      fail(c->span, "tgrad cannot trace this pointer back to a pointer parameter");
    }
    op.value = store ? name_or_empty(call_argument(*c, 1, "value")) : target;
    op.mask = name_or_empty(call_argument(*c, store ? 2 : 1, "mask"));
    if (mask_is_none(op.mask)) op.mask.clear();  // (`mask_c = None` under a tl.constexpr flag: no mask here)
    if (!store) op.other = name_or_empty(call_argument(*c, 2, "other"));
    if (call_argument(*c, 3, "boundary_check"))
      fail(c->span, "block pointers (boundary_check) are not supported by whole-kernel reverse mode yet");
    memory_.push_back(op);
  }
}

const Engine::MemoryOp *Engine::memory_op(const Stmt *s) const {
  for (const MemoryOp &m : memory_)
    if (m.stmt == s) return &m;
  return nullptr;
}

void Engine::propagate_activity(const StmtList &block, const std::set<std::string> &wrt, bool &changed) {
  for (const StmtPtr &sp : block) {
    if (auto *f = dyn_cast<For>(sp.get())) {
      propagate_activity(f->body, wrt, changed);
      continue;
    }
    if (auto *i = dyn_cast<If>(sp.get())) {
      propagate_activity(i->body, wrt, changed);
      propagate_activity(i->orelse, wrt, changed);
      continue;
    }
    auto *a = dyn_cast<Assign>(sp.get());
    if (!a) continue;
    const std::string t = assigned_name(*a);
    if (t.empty() || active_.count(t)) continue;
    std::string operand;
    if (const MemoryOp *load = memory_op(sp.get())) {
      if (wrt.count(load->base)) operand = load->base;
      else if (!load->other.empty() && active_.count(load->other)) operand = load->other;
      // Reading back what an active store wrote: the value carries that store's dependence.
      if (operand.empty() && final_reads_.count(load))
        for (const MemoryOp &st : memory_)
          if (st.store && st.base == load->base && std::less<const MemoryOp *>()(&st, load) && active_.count(st.value))
            operand = load->base;
    } else {
      operand = first_active(*a->value, active_);
    }
    if (operand.empty()) continue;
    if (!carries_gradient(type_of_name(t))) {
      // A value nothing reads carries nothing back: the merge of an if's
      // branches where a name becomes another value in one of them and is
      // dead after the if (`if HAS_BIAS: bias = tl.load(bias + o) ...`,
      // where the pointer parameter and the loaded tile share a name).
      if (!kernel_reads_) block_reads(anf_.fn->body, kernel_reads_.emplace());
      if (!kernel_reads_->count(t)) continue;
      check_dependence_kept(t, *a->value, operand);
      continue;
    }
    active_.insert(t);
    changed = true;
  }
}

void Engine::propagate_usefulness(const StmtList &block, bool &changed) {
  for (size_t k = block.size(); k-- > 0;) {
    const Stmt *s = block[k].get();
    if (auto *f = dyn_cast<For>(s)) {
      propagate_usefulness(f->body, changed);
      continue;
    }
    if (auto *i = dyn_cast<If>(s)) {
      propagate_usefulness(i->body, changed);
      propagate_usefulness(i->orelse, changed);
      continue;
    }
    auto *a = dyn_cast<Assign>(s);
    if (!a || !useful_.count(assigned_name(*a))) continue;
    if (const MemoryOp *load = memory_op(s)) {
      // A load's masked-off lanes take `other`: a useful load makes its
      // `other` useful (mamba's causal conv loads x with
      // other=initial_states, which its gradient reaches only so).
      if (!load->store && !load->other.empty() && active_.count(load->other) && useful_.insert(load->other).second)
        changed = true;
      continue;
    }
    std::set<std::string> in;
    reads(*a->value, in);
    for (const std::string &n : in)
      if (active_.count(n) && useful_.insert(n).second) changed = true;
  }
}

std::set<std::string> Engine::reached_by_loads_of(const std::string &base) {
  std::set<std::string> reached;
  for (const MemoryOp &m : memory_)
    if (!m.store && m.base == base && !m.value.empty()) reached.insert(m.value);
  std::vector<const StmtList *> blocks;
  collect_blocks(anf_.fn->body, blocks);
  for (bool changed = true; changed;) {
    changed = false;
    for (const StmtList *block : blocks)
      for (const StmtPtr &sp : *block) {
        const std::string t = assigned_name(*sp);
        if (t.empty() || reached.count(t)) continue;
        std::set<std::string> in;
        reads(*cast<Assign>(sp.get())->value, in);
        for (const std::string &n : in)
          if (reached.count(n)) {
            reached.insert(t);
            changed = true;
            break;
          }
      }
  }
  return reached;
}

void Engine::refuse_untraced_pointer(const std::string &w) {
  std::set<std::string> derived{w};
  std::function<void(const StmtList &)> walk = [&](const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (auto *i = dyn_cast<If>(s.get())) {
        walk(i->body);
        walk(i->orelse);
        continue;
      }
      if (auto *f = dyn_cast<For>(s.get())) {
        walk(f->body);
        continue;
      }
      const std::string target = assigned_name(*s);
      if (target.empty()) continue;
      std::set<std::string> in;
      stmt_reads(*s, in);
      bool from_w = false;
      for (const std::string &n : in) from_w |= derived.count(n) > 0;
      if (!from_w) continue;
      const SType *t = type_of_name(target);
      if (t && t->is_tensor() && t->elem.is_pointer) {
        derived.insert(target);
      } else if (!t || !is_known(*t)) {
        const Stmt *origin = anf_.origin_of(s.get());
        fail(origin ? origin->span : s->span,
             "'" + w + "' reaches this expression, which tgrad does not type, so it cannot see what is loaded "
             "through it; its gradient would be lost. Load through '" + w + "' with tl.load (or a block pointer)");
      }
    }
  };
  walk(anf_.fn->body);
}

bool Engine::only_added_atomically(const std::string &base) const {
  for (const MemoryOp &m : memory_)
    if (m.base == base && !(m.store && m.atomic == "tl.atomic_add")) return false;
  return true;
}

void Engine::audit_zero_gradients(Backward &result,
                                  const std::map<std::string, std::vector<const MemoryOp *>> &store_of,
                                  const std::set<std::string> &no_grad) {
  for (const std::string &w : request_.wrt) {
    const std::set<std::string> reached = reached_by_loads_of(w);
    std::vector<std::string> differentiated, without_gradient, declared_no_grad;
    for (const Param &p : fn_->params) {
      auto it = store_of.find(p.name);
      if (it == store_of.end()) continue;
      bool reaches = false, differentiates = false;
      for (const MemoryOp *m : it->second) {
        std::set<std::string> in;
        stmt_reads(*m->stmt, in);
        for (const std::string &n : in) reaches |= reached.count(n) > 0;
        differentiates |= useful_.count(m->value) && reached.count(m->value);
      }
      if (!reaches) continue;
      if (no_grad.count(p.name)) declared_no_grad.push_back(p.name);
      else if (differentiates) differentiated.push_back(p.name);
      else without_gradient.push_back(p.name);
    }
    auto list = [](const std::vector<std::string> &v) {
      std::string out;
      for (const std::string &x : v) out += (out.empty() ? "'" : ", '") + x + "'";
      return out;
    };
    bool read = false;
    for (const MemoryOp &m : memory_) read |= !m.store && m.base == w && useful_.count(m.value);
    if (in_place_.count(w) && only_added_atomically(w)) {
      result.explanations.push_back("'" + w + "': the kernel only adds to it, so its gradient is the upstream "
                                    "gradient of what it holds after the kernel, unchanged");
      continue;
    }
    if (read) {
      result.explanations.push_back("'" + w + "': what it loads reaches the stores to " +
                                    (differentiated.empty() ? list(without_gradient) : list(differentiated)));
      continue;
    }
    if (!without_gradient.empty())
      fail(param_span(w), "what '" + fn_->name + "' loads through '" + w + "' reaches the stores to " +
                              list(without_gradient) + " only through operations without a gradient (comparisons, "
                              "integer conversions, argmax, masks or addresses), so its gradient is zero; remove '" +
                              w + "' from --wrt if that is what you expect");
    refuse_untraced_pointer(w);
    const std::string why = declared_no_grad.empty()
                                ? "no store of '" + fn_->name + "' depends on what it loads through '" + w + "'"
                                : "what it loads reaches only the outputs " + list(declared_no_grad) +
                                      ", which --no-grad says take no gradient";
    diags_.warning(param_span(w), why + ": its gradient is zero");
    result.zero_gradients.push_back({w, why});
    // The backward never writes this gradient: its buffer must hold zeros.
    needs_zeros_.insert(w);
    result.explanations.push_back("'" + w + "': its gradient is zero: " + why);
  }
}

std::optional<Backward> Engine::build_kernel() {
  const StmtList &body = anf_.fn->body;
  AccessAnalysis access(*anf_.fn, name_types_);
  const std::set<std::string> wrt(request_.wrt.begin(), request_.wrt.end());
  collect(body, access);

  std::map<std::string, std::set<AccessDecision::Kind>> kinds;
  for (const MemoryOp &m : memory_)
    if (!m.store) {
      ++loads_per_base_[m.base];
      AccessDecision d = access.classify_load(m.pointer, m.mask);
      offset_keys_[m.base].insert(d.offset_key);
      mask_keys_[m.base].insert(d.mask_key);
      kinds[m.base].insert(d.kind);
    }
  // Partial sums for inputs that every program loads alike (see Backward::PartialSum),
  // where the programs differ only by tl.program_id(0): the backward can then loop over them.
  const bool one_axis = programs_differ_only_by_axis_0(body);
  for (const std::string &w : request_.wrt) {
    auto k = kinds.find(w);
    if (one_axis && k != kinds.end() && k->second == std::set<AccessDecision::Kind>{AccessDecision::Kind::Broadcast})
      partial_bases_.insert(w);
    // Not loaded at all here, but loaded alike by every program under
    // another value of a flag: its rows stay zero (see partial_sums_for).
    const bool forced = std::find(request_.partial_sums_for.begin(), request_.partial_sums_for.end(), w) !=
                        request_.partial_sums_for.end();
    const bool accessed = std::any_of(memory_.begin(), memory_.end(), [&](const MemoryOp &m) { return m.base == w; });
    if (one_axis && forced && !accessed) partial_bases_.insert(w);
  }
  for (const auto &[base, ks] : kinds)
    if (ks.count(AccessDecision::Kind::Shared) || (ks.count(AccessDecision::Kind::Broadcast) && !partial_bases_.count(base)))
      shared_bases_[base] = "another load through '" + base + "' may share addresses with other programs";
  // Loads of one buffer at offsets not proven equal (`X + o` and `X + o + 1`):
  // one program's addresses may be another's, so their gradients meet.
  // Unless they are shifted copies of one offset that together give each address one program, lane and load (a
  // rotary kernel's halves): then each load's gradient is stored on its own.
  for (const auto &[base, keys] : offset_keys_) {
    if (keys.size() <= 1 || partial_bases_.count(base) || shared_bases_.count(base)) continue;
    std::vector<std::string> pointers;
    std::set<std::string> masks;
    // All at the top level, or all in one loop (whose blocks the union's box takes as an index).
    std::optional<std::vector<const For *>> loops;
    bool one_place = true;
    for (const MemoryOp &m : memory_)
      if (!m.store && m.base == base) {
        pointers.push_back(m.pointer);
        masks.insert(m.mask);
        if (!loops) loops = m.loops;
        one_place &= *loops == m.loops && m.loop_depth() <= 1;
      }
    if (one_place && masks.size() == 1 && access.classify_layout_union(pointers, *masks.begin())) {
      disjoint_loads_[base] = {pointers, *masks.begin()};
      continue;
    }
    shared_bases_[base] = "the loads through '" + base + "' have offsets not proven equal: one program's "
                          "addresses may be another's";
  }
  find_final_reads(access);
  // 2. Activity: loads through a --wrt pointer start it.
  for (bool changed = true; changed;) {
    changed = false;
    propagate_activity(body, wrt, changed);
  }
  // Outputs: stores of active values; they get a gradient buffer each.
  std::vector<std::string> outputs;
  // Several stores through one pointer are fine where at most one runs in
  // any program (the branches of a runtime if, an early return's two paths):
  // each takes the upstream gradient at its own addresses.
  std::map<std::string, std::vector<const MemoryOp *>> store_of;
  std::map<std::string, std::string> overwrites;  // outputs stored to by two stores that may both run -> why
  for (const MemoryOp &m : memory_) {
    if (!m.store) continue;
    // Atomics other than additions (max, min, exchange, compare-and-swap,
    // bitwise): the result depends on the order of programs or has no
    // derivative. Without a gradient through them (flags, counters) they
    // are side effects the backward does not replay.
    if (!m.atomic.empty() && m.atomic != "tl.atomic_add") {
      // Any operand: tl.atomic_cas(pointer, cmp, val) stores val.
      std::set<std::string> operands;
      for (size_t k = 1; k < m.call->args.size(); ++k) reads(*m.call->args[k], operands);
      for (const Keyword &kw : m.call->keywords) reads(*kw.value, operands);
      for (const std::string &o : operands)
        if (active_.count(o))
          fail(m.call->span, m.atomic + " of a value that depends on --wrt inputs cannot be differentiated: which "
                             "program's value wins depends on their order; only tl.atomic_add accumulates");
    }
    for (const MemoryOp *other : store_of[m.base]) {
      if (exclusive(*other, m)) continue;
      // A constant written first, outside loops (`tl.store(Y + o, 0.0)`,
      // then the result): whatever the later store overwrites or not,
      // the earlier value carries no gradient, and the later one's
      // gradient is the upstream gradient at its addresses, as the last
      // writer's always is.
      if (other->atomic.empty() && m.atomic.empty() && other->loop_depth() == 0 && !active_.count(other->value)) continue;
      if (m.atomic == "tl.atomic_add" && other->atomic == "tl.atomic_add") continue;  // additions commute
      if (!m.atomic.empty() || !other->atomic.empty())
        fail(m.call->span, "'" + m.base + "' is both stored to and updated atomically in this kernel; which value "
                           "it ends with depends on the order of programs");
      // Two plain stores that may both run: the later one overwrites the
      // earlier where their addresses meet, so the backward consumes the
      // upstream gradient (consumed_, below).
      overwrites[m.base] = "'" + m.base + "' is stored to more than once (lines " +
                            std::to_string(other->call->span.begin.line) + " and " +
                            std::to_string(m.call->span.begin.line) + ")";
    }
    store_of[m.base].push_back(&m);
  }
  // A load through a buffer the kernel also stores a value with a gradient
  // to may read that value back (a running sum kept in memory): activity
  // does not follow values through memory, so such a load must be shown to
  // read only the contents from before the kernel, like an update in place,
  // or the gradient through it would be lost without a word.
  auto stores_active = [&](const std::vector<const MemoryOp *> &stores) {
    for (const MemoryOp *st : stores)
      if (active_.count(st->value)) return true;
    return false;
  };
  for (const MemoryOp &m : memory_)
    if (!m.store && store_of.count(m.base) &&
        (wrt.count(m.base) || active_.count(m.value) || stores_active(store_of.at(m.base))))
      check_in_place(m, store_of.at(m.base), access, wrt.count(m.base) > 0);
  const std::set<std::string> no_grad(request_.no_grad.begin(), request_.no_grad.end());
  for (const std::string &n : request_.no_grad)
    if (!store_of.count(n))
      fail(param_span(n), "--no-grad " + n + ": '" + fn_->name + "' does not store through '" + n +
                              "'; --no-grad names outputs (pointers the kernel stores to)");
  for (const Param &p : fn_->params) {
    auto it = store_of.find(p.name);
    if (it == store_of.end() || no_grad.count(p.name)) continue;
    bool active = false;
    for (const MemoryOp *m : it->second) active |= active_.count(m->value) > 0;
    if (active) outputs.push_back(p.name);
  }
  for (const std::string &o : outputs)
    for (const MemoryOp *m : store_of[o])
      if (active_.count(m->value)) useful_.insert(m->value);
  for (bool changed = true; changed;) {
    changed = false;
    propagate_usefulness(body, changed);
  }
  stabilizers_ = find_stabilizers(body, active_);

  // Outputs whose addresses the forward may write more than once: several
  // stores, a store repeated by a loop at addresses that do not move with
  // it, or addresses every program writes. Only the last value written
  // reaches the output, so only its store may take the upstream gradient:
  // each store's adjoint, in reverse order, takes the upstream gradient at
  // its addresses and leaves zeros there for the earlier ones (consumes
  // it). The backward then writes that buffer: it takes a float32 copy.
  // The program axes a name's value depends on (through its definitions, loads' addresses and loop ranges; -1 for
  // an axis not written as a literal), to tell a store every program makes with one value from one whose value
  // differs between the programs that share its addresses. One walk in program order (A-normal form: a value's
  // operands are defined before it), each loop's body again until what it carries settles; made where first asked.
  std::optional<std::map<std::string, std::set<int>>> axes_of;
  auto program_axes_of = [&](const std::string &n) -> std::set<int> {
    if (!axes_of) {
      axes_of.emplace();
      std::map<std::string, std::set<int>> &axes = *axes_of;
      bool changed = false;
      auto assign = [&](const Expr &target, const Expr &value) {
        std::set<int> from;
        visit_expr(value, [&](const Expr &e) {
          if (const int axis = program_axis_of(e); axis >= -1) from.insert(axis);
          if (auto *name = dyn_cast<Name>(&e))
            if (auto it = axes.find(name->id); it != axes.end()) from.insert(it->second.begin(), it->second.end());
        });
        std::set<std::string> targets;
        reads(target, targets);
        for (const std::string &t : targets)
          for (int axis : from) changed |= axes[t].insert(axis).second;
      };
      std::function<void(const StmtList &)> walk = [&](const StmtList &block) {
        for (const StmtPtr &st : block) {
          if (auto *a = dyn_cast<Assign>(st.get()))
            for (const ExprPtr &t : a->targets) assign(*t, *a->value);
          if (auto *a = dyn_cast<AugAssign>(st.get())) assign(*a->target, *a->value);
          if (auto *i = dyn_cast<If>(st.get())) {
            walk(i->body);
            walk(i->orelse);
          }
          auto loop_body = [&](const StmtList &inner) {
            const bool before = changed;
            bool any = false;
            do {
              changed = false;
              walk(inner);
              any |= changed;
            } while (changed);
            changed = before || any;  // (what changed here, an enclosing loop's walk must see)
          };
          if (auto *f = dyn_cast<For>(st.get())) {
            assign(*f->target, *f->iter);
            loop_body(f->body);
          }
          if (auto *w = dyn_cast<While>(st.get())) loop_body(w->body);
        }
      };
      walk(body);
    }
    auto it = axes_of->find(n);
    return it == axes_of->end() ? std::set<int>{} : it->second;
  };
  auto writes_apart_per_iteration = [&](const MemoryOp &m) {
    auto *var = dyn_cast<Name>(m.loops.front()->target.get());
    // The loop's index the minor one (`rows[:, None] * N + ns[None, :]`, ns walking column blocks under `ns < N`),
    // or the major one (`ts[:, None] * D + d[None, :]`, ts = c * BT + lanes: the iteration c owns the address block
    // [c * BT * D, (c + 1) * BT * D)).
    if (!var || !(access.iterations_write_apart(m.pointer, m.mask, var->id) ||
                  access.iterations_own_blocks(m.pointer, m.pointer, var->id, m.mask, m.mask)))
      return false;
    stores_apart_.emplace_back(
        m.base, "line " + std::to_string(m.call->span.begin.line) + ": each iteration of the loop over '" + var->id +
                    "' stores to addresses of '" + m.base + "' no other iteration stores to (its index walks the "
                    "loop's blocks, the other terms bounded apart by the mask or the lanes): the store's upstream "
                    "gradient is a plain load");
    return true;
  };
  for (const std::string &o : outputs) {
    if (consumed_.count(o)) continue;  // updated in place
    std::string why = overwrites.count(o) ? overwrites.at(o) : "";
    for (const MemoryOp *m : store_of[o]) {
      if (!m->atomic.empty()) {  // additions commute (mixed with stores: refused above)
        why.clear();
        break;
      }
      AccessDecision d = access.classify(m->pointer, m->mask);
      if (d.programs_share) {
        // Programs that store different values at one address (each its own program's value): which lands last,
        // and so what the output holds, the GPU does not fix, and one program takes the upstream gradient. Right
        // where one program runs along each such axis (the launches of fla's token shift in decoding, of a kernel
        // written for a grid of one): a warning says so, located, rather than a refusal of kernels launched so.
        std::set<int> value_axes = program_axes_of(m->value), address_axes = program_axes_of(m->pointer);
        if (!m->mask.empty())
          for (int a : program_axes_of(m->mask)) address_axes.insert(a);
        // The axes the runtime conditions around the store read (an early return, `if g_t >= eos: return` in fla's
        // token shift): along those, a launch may have several programs of which one gets to the store.
        std::set<int> guard_axes;
        for (const auto &[branch, taken] : m->branches) {
          std::set<std::string> read;
          reads(*branch->cond, read);
          for (const std::string &r : read)
            for (int a : program_axes_of(r)) guard_axes.insert(a);
          visit_expr(*branch->cond, [&](const Expr &e) {
            if (const int a = program_axis_of(e); a >= -1) guard_axes.insert(a);
          });
        }
        std::string racing;
        bool unknown_axis = false, guarded = false;
        for (int a : value_axes)
          if (!address_axes.count(a) || a < 0) {
            racing += (racing.empty() ? "" : ", ") + (a < 0 ? std::string("a program id tgrad cannot tell")
                                                             : "tl.program_id(" + std::to_string(a) + ")");
            const bool by_guard = guard_axes.count(a) > 0 || guard_axes.count(-1) > 0;
            if (a >= 0)
              racy_axes_[m][a] = by_guard             ? RacyCheck::None
                                 : m->branches.empty() ? RacyCheck::AtLaunch
                                                       : RacyCheck::OnDevice;
            unknown_axis |= a < 0;
            guarded |= a >= 0 && by_guard;
          }
        // The backward asserts one program along each such axis (consume_upstream), which the launch protocol
        // checks before it launches (a launch with more is refused rather than given a wrong gradient) where the
        // store is under no if: under one, only the launches that take it need one program (a tl.constexpr flag
        // may skip the store), and the device assertion checks those (in Triton's debug mode). Along an axis the
        // conditions around the store read, a launch may have more programs, of which one gets to the store (fla's
        // token shift in decoding): only the warning says what the backward assumes.
        if (!racing.empty())
          diags_.warning(m->call->span,
                         "programs store values that depend on " + racing + " to the same addresses of '" + o +
                             "' (" + d.reason + "): the output holds whichever store lands last, which the GPU does "
                             "not fix, and the backward gives the upstream gradient to one program's value: it is "
                             "right only for a launch with one program along that axis" +
                             (unknown_axis ? std::string(" (of those that get to the store), which tgrad cannot check")
                              : guarded    ? std::string(" that gets to the store, which the conditions before it "
                                                         "decide and tgrad cannot check")
                              : m->branches.empty() ? std::string(", and its launch refuses more")
                                                    : std::string(", which the backward asserts (Triton's debug mode)")) +
                             "; for more, store each program's value at addresses of its own");
        consume_atomically_.insert(m);
        if (why.empty()) why = "line " + std::to_string(m->call->span.begin.line) + ": " + d.reason;
      } else if (why.empty() &&
                 (m->loop_depth() > 1 ||
                  (m->loop_depth() == 1 && !d.walks_loop &&
                   // A tile whose column blocks the loop walks (`Y + rows[:, None] * N + ns[None, :]` under
                   // `ns[None, :] < N`): each iteration writes addresses of its own, proven with the mask.
                   !writes_apart_per_iteration(*m)))) {
        why = "line " + std::to_string(m->call->span.begin.line) + ": the store is repeated by a loop at addresses "
              "that do not move with it";
      }
    }
    if (!why.empty()) consumed_[o] = why;
  }

  // An input in --wrt that the kernel only adds to atomically (also what it loaded, added to and stored back:
  // src/ad/MemoryAccumulators.h): its contents before the kernel reach its contents after unchanged, so its
  // gradient is the upstream gradient itself. One buffer holds both, as for an update in place, and the backward
  // only reads it (the atomic additions' adjoints).
  for (const std::string &o : outputs) {
    if (!wrt.count(o) || in_place_.count(o) || !only_added_atomically(o)) continue;
    in_place_.insert(o);
    partial_bases_.erase(o);
  }

  // 3. Gradient buffers: inputs in --wrt order, then outputs in parameter order.
  Backward result;
  for (const std::string &w : request_.wrt) {
    gradient_buffer_[w] = names_.fresh("d" + w);
    result.gradient_buffers.push_back({w, gradient_buffer_[w]});
  }
  result.input_gradients = request_.wrt.size();
  for (const std::string &o : outputs) {
    if (in_place_.count(o)) continue;  // its one buffer is among the inputs'
    if (gradient_buffer_.count(o)) {
      // In --wrt, stored to, and not an update in place: the kernel never
      // reads it (fla's `dq2`, beside a `dq` it does read); its gradient as
      // an input would be zero and its upstream gradient needs a buffer.
      const MemoryOp *store = nullptr;
      bool loaded = false;
      for (const MemoryOp &m : memory_) {
        if (m.store && m.base == o && !store) store = &m;
        loaded |= !m.store && m.base == o;
      }
      fail(store ? store->call->span : fn_->name_span,
           loaded ? "'" + o + "' is in --wrt and this kernel stores to it, but what it loads through it carries "
                    "no gradient, so it is not an update in place: leave it out of --wrt; the backward takes the "
                    "gradient of what is stored there as an upstream gradient"
                  : "'" + o + "' is in --wrt but this kernel only writes through it (it loads nothing through it): "
                    "it has no gradient as an input. Leave it out of --wrt; the backward takes the gradient of what "
                    "is stored there as an upstream gradient");
    }
    gradient_buffer_[o] = names_.fresh("d" + o);
    result.gradient_buffers.push_back({o, gradient_buffer_[o]});
  }
  result.in_place.assign(in_place_.begin(), in_place_.end());
  audit_zero_gradients(result, store_of, no_grad);
  for (const KeptAccumulator &k : atomic_updates_)
    result.explanations.push_back("line " + std::to_string(k.line) + ": the kernel loads '" + k.pointer +
                                  "', adds to what it loaded and stores the sum back, every access to that buffer "
                                  "so; differentiated as tl.atomic_add (what is added gets the upstream gradient "
                                  "there, the contents before the kernel get it unchanged)");
  for (const KeptAccumulator &k : kept_accumulators_)
    result.explanations.push_back("line " + std::to_string(k.line) + ": the loop loads '" + k.pointer +
                                  "' after storing it in an earlier iteration, an accumulator kept in memory; the "
                                  "backward differentiates it as the loop-carried value '" + k.value +
                                  "', loaded once before the loop (the stores stay)");
  for (const auto &[o, e] : stores_apart_)
    if (!consumed_.count(o)) result.explanations.push_back(e);
  for (const auto &[o, why] : consumed_) {
    result.consumed_upstream.push_back({o, why});
    result.explanations.push_back("'" + o + "': the forward may write an address more than once (" + why +
                                  "): each store's gradient takes the upstream gradient at its addresses in reverse "
                                  "order and leaves zeros for the values it overwrote; d" + o +
                                  " is a float32 copy of the upstream gradient, which the backward overwrites");
  }

  // Partial sums: a scratch buffer, its row length and this program's row.
  std::map<std::string, std::string> row_of;
  for (const std::string &w : request_.wrt) {
    if (!partial_bases_.count(w)) continue;
    Backward::PartialSum p{w, gradient_buffer_[w], names_.fresh(gradient_buffer_[w] + "_partial"), names_.fresh(w + "_numel")};
    row_of[w] = names_.fresh(gradient_buffer_[w] + "_row");
    partial_row_[w] = row_of[w];
    result.partial_sums.push_back(p);
  }

  // 4. The sweep, in reverse; then the primal replay (stores removed,
  // gradient pointers alongside the pointers they mirror) goes first.
  for (const std::string &m : stabilizers_) {
    const Stmt *origin = defs_of_.count(m) ? anf_.origin_of(defs_of_.at(m).front()) : nullptr;
    result.explanations.push_back((origin ? "line " + std::to_string(origin->span.begin.line) + ": " : std::string()) +
                                  "'" + m + "' = tl.max(...) only stabilizes: what the kernel stores does not change "
                                  "when it moves, so its gradient is zero and is not computed");
  }
  if (!read_back_explanation_.empty()) result.explanations.push_back(read_back_explanation_);
  for (const std::string &e : epilogue_explanations_) result.explanations.push_back(e);
  for (const std::string &e : forwarding_explanations_) result.explanations.push_back(e);
  result.notes = notes_;
  result.softmax_taped_under = softmax_taped_under_;
  result.softmax_taped = softmax_taped_under_.empty() ? 0 : 1;
  out_ = &sweep_;
  sweep_block(body, access, result.explanations);
  if (!result.partial_sums.empty()) result.num_programs_param = names_.fresh("num_programs");
  result.tapes = tapes_;
  result.layout_assumptions = layout_assumptions_;  // (their flags are parameters)
  std::unique_ptr<Function> bwd = backward_shell(result.parameters_after_forward());
  replay_block(body, bwd->body);
  for (StmtPtr &st : sweep_) bwd->body.push_back(std::move(st));
  read_dtypes_from_pointers(bwd->body);
  if (!result.partial_sums.empty()) loop_over_forward_programs(*bwd, result, row_of);
  for (const std::string &w : request_.wrt)
    if (needs_zeros_.count(w) && !in_place_.count(w))  // (an in-place buffer holds the upstream gradient)
      result.zero_initialized.push_back(w);
  read_types_from_loop_inputs(bwd->body);
  if (!read_back_witnesses_.empty()) {
    // `x.shape` / `x.dtype` of a value the read-back made unnecessary: its placeholder's.
    rewrite_exprs(bwd->body, [&](ExprPtr &e) {
      auto *a = dyn_cast<Attribute>(e.get());
      auto *n = a && (a->attr == "shape" || a->attr == "dtype") ? dyn_cast<Name>(a->value.get()) : nullptr;
      if (auto it = n ? read_back_witnesses_.find(n->id) : read_back_witnesses_.end(); it != read_back_witnesses_.end())
        a->value = name(it->second);
    });
  }
  remove_dead_code(bwd->body);
  drop_unread_tapes(*bwd, result);
  issue_early(bwd->body, upstream_loads_);
  {
    std::set<std::string> read;  // the saved values the backward still reads
    block_reads(bwd->body, read);
    auto save = [&](const std::string &base) {
      if (std::find(result.saved_outputs.begin(), result.saved_outputs.end(), base) == result.saved_outputs.end())
        result.saved_outputs.push_back(base);
    };
    for (const auto &[value, base] : saved_base_)
      if (read.count(value)) save(base);
    for (const std::string &base : final_read_bases_) save(base);  // its loads read what the forward left there
  }

  sema::ParamTypes bwd_types = request_.param_types;
  for (const auto &g : result.gradient_buffers)
    bwd_types[g.second] = consumed_.count(g.first) ? SType::tensor({sema::DType::FP32, true}, {})
                                                    : request_.param_types.at(g.first);
  if (!result.partial_sums.empty()) {
    const SType i32 = SType::tensor({sema::DType::Int32, false}, {});
    for (const auto &p : result.partial_sums) {
      bwd_types[p.scratch] = SType::tensor({sema::DType::FP32, true}, {});
      bwd_types[p.numel] = i32;
    }
    bwd_types[result.num_programs_param] = i32;
    result.reduce_kernel = add_reduce_kernel(bwd->name + "_reduce");
  }
  for (const Backward::Tape &t : result.tapes) {
    bwd_types[t.scratch] = SType::tensor({t.dtype, true}, {});
    bwd_types[t.trips_param] = SType::tensor({sema::DType::Int32, false}, {});
  }
  bwd_types_ = bwd_types;
  if (request_.owner_computes && result.partial_sums.empty() && result.tapes.empty() && result.in_place.empty() &&
      result.consumed_upstream.empty())
    gather_by_owner(*bwd, bwd_types, result, access);
  // What owner-computes kernels took over is added once per element and owner.
  for (const Backward::AtomicGradient &a : atomic_gradients_)
    if (std::none_of(result.owner_kernels.begin(), result.owner_kernels.end(),
                     [&](const Backward::OwnerKernel &k) {
                       return std::find(k.inputs.begin(), k.inputs.end(), a.input) != k.inputs.end();
                     }))
      result.atomic_gradients.push_back(a);
  finish(std::move(bwd), bwd_types_, /*cast_returned_adjoints=*/false, result);  // (the readability pass's types)
  return result;
}

void Engine::gather_by_owner(Function &bwd, const sema::ParamTypes &bwd_types, Backward &result,
                             const AccessAnalysis &access) {
  // Nothing to gather without atomics: spare the module copy the new kernels are typed in.
  if (names_accessed_by(bwd.body, "tl.atomic_add").empty()) return;
  NameAllocator function_names;
  for (const auto &f : module_.functions) function_names.reserve(f->name);
  for (const auto &f : extra_functions_)
    if (f) function_names.reserve(f->name);
  function_names.reserve(bwd.name);
  std::unique_ptr<Module> context = checking_module();
  // One loop's atomics per call, the last loop's first; again while a call gathers something and atomics
  // remain (the two stages of a causal forward each add to dK and dV).
  while (true) {
    OwnerComputesResult owners =
        gather_gradients_by_owner(bwd, result.gradient_buffers, *context, bwd_types, sources_, names_, function_names,
                                  request_.deterministic, result.saved_tiles);
    for (const std::string &e : owners.explanations)
      if (std::find(result.explanations.begin(), result.explanations.end(), e) == result.explanations.end())
        result.explanations.push_back(e);
    result.owner_kernels.insert(result.owner_kernels.end(), owners.launches.begin(), owners.launches.end());
    result.backward_kernel_writes = owners.backward_kernel_writes;
    if (owners.prologue) {
      result.prologue_kernel = owners.prologue->name;
      result.saved_tiles = owners.saved;
      owner_functions_.push_back(std::move(owners.prologue));  // emitted before the owners, as it runs
    }
    const bool gathered = !owners.kernels.empty();
    for (auto &k : owners.kernels) owner_functions_.push_back(std::move(k));
    if (!gathered || names_accessed_by(bwd.body, "tl.atomic_add").empty()) break;
  }
  store_owner_flushes(bwd, result, access);
  fold_prologue(bwd, result, access);
  for (Backward::OwnerKernel &k : result.owner_kernels)
    for (auto &f : owner_functions_)
      if (f && f->name == k.name && launch_longest_first(*f, k))
        result.explanations.push_back(
            "'" + k.name + "' is launched with the axes of its grid swapped (" + k.name + "[(grid 1, grid 0)]): its "
            "programs' work falls with their block (its loop over the forward's programs starts at its own block), "
            "so that every block's longest programs start first (src/ad/reverse/LongestFirst.h)");
}

bool Engine::read_back_softmax_statistics() {
  SoftmaxStatisticsContext context;
  context.builtin = [this](const Call &c) -> std::string {
    const SType *t = anf_types_.type_of(c.func.get());
    return t && t->kind == SType::Kind::Builtin ? t->s : "";
  };
  context.type_of = [this](const std::string &n) { return type_of_name(n); };
  context.generic = [this](const std::string &p) { return request_.generic_params.count(p) > 0; };
  NameAllocator names;
  names.reserve_all(module_, *anf_.fn);
  std::string declined;
  SourceSpan flags_at;
  std::vector<std::string> flags;
  std::optional<SoftmaxStatistics> r = read_softmax_statistics(anf_, context, names, &declined, &flags_at, &flags);
  if (!r) {
    read_back_explanation_ = declined;  // (for --explain: why the taped backward stays)
    // Worth saying without --explain: the user has the values, and the difference is a tape and a replay.
    if (flags_at.begin.line > 0) {
      const size_t colon = declined.find(": ");
      notes_.push_back({flags_at, colon == std::string::npos ? declined : declined.substr(colon + 2)});
      softmax_taped_under_ = flags;  // differentiate() may specialize on them itself
    }
    return false;
  }
  for (SoftmaxStatistics::ReadBack &b : r->read_back) {
    saved_base_[b.value] = b.base;  // the caller passes the buffer as the forward left it
    read_back_.push_back(std::move(b));
  }
  read_back_explanation_ = r->explanation;
  read_back_witnesses_ = r->witnesses;
  return true;
}

bool Engine::forward_stored_values() {
  AccessAnalysis access(*anf_.fn, name_types_);
  NameAllocator names;
  names.reserve_all(module_, *anf_.fn);
  for (const auto &kv : name_types_) names.reserve(kv.first);
  std::vector<ForwardedLoad> done = ad::forward_stored_values(anf_, anf_types_, name_types_, access, names);
  for (const ForwardedLoad &f : done)
    forwarding_explanations_.push_back(
        "the load of '" + f.base + "' at line " + std::to_string(f.load_line) + " reads back what the store at line " +
        std::to_string(f.store_line) + " wrote in the same program" +
        (f.recomputed ? " (in the iteration of the earlier loop with the same index): the stored value is computed "
                        "again before the load"
                      : "") +
        (f.one_lane ? " (the one lane whose offset equals the address it reads, picked from the stored row)" : "") +
        ", so it takes that value, rounded to the buffer's type (src/ad/StoredValueForwarding.h)");
  return !done.empty();
}

bool Engine::read_back_epilogues() {
  EpilogueContext context;
  context.builtin = [this](const Call &c) -> std::string {
    const SType *t = anf_types_.type_of(c.func.get());
    return t && t->kind == SType::Kind::Builtin ? t->s : "";
  };
  context.type_of = [this](const std::string &n) { return type_of_name(n); };
  context.helper = [this](const Call &c) -> const Function * {
    auto *f = dyn_cast<Name>(c.func.get());
    return f ? module_.find_function(f->id) : nullptr;
  };
  AccessAnalysis access(*anf_.fn, name_types_);
  context.base_of = [&access](const std::string &p) { return access.base_of(p); };
  context.shared_addresses = [&access](const std::string &pointer, const std::string &mask,
                                       bool &proven) -> std::string {
    AccessDecision d = access.classify(pointer, mask);
    proven = d.kind == AccessDecision::Kind::Injective && !d.programs_share;
    return d.programs_share ? d.reason : "";
  };
  context.generic_types = !request_.generic_params.empty();
  NameAllocator names;
  names.reserve_all(module_, *anf_.fn);
  EpilogueReadBacks r = read_epilogues_from_outputs(anf_, context, names);
  epilogue_explanations_ = std::move(r.explanations);
  for (SoftmaxStatistics::ReadBack &b : r.read_back) {
    saved_base_[b.value] = b.base;  // the caller passes the buffer as the forward left it
    read_back_.push_back(std::move(b));
  }
  for (const auto &[value, placeholder] : r.witnesses) read_back_witnesses_[value] = placeholder;
  return !r.read_back.empty();
}

bool Engine::find_saved_values() {
  StmtList &body = anf_.fn->body;
  if (!programs_differ_only_by_axis_0(body)) return false;
  std::map<std::string, int> assigned;
  count_assignments(body, assigned);
  std::map<std::string, int> read_count;
  count_reads(body, read_count);
  auto position = [&](const std::string &n) -> size_t {
    if (assigned[n] != 1) return body.size();
    for (size_t k = 0; k < body.size(); ++k)
      if (assigned_name(*body[k]) == n) return k;
    return body.size();
  };
  auto value_of = [&](size_t k) -> Expr & { return *cast<Assign>(body[k].get())->value; };
  bool changed = false;
  for (size_t k = 0; k < body.size(); ++k) {
    auto *es = dyn_cast<ExprStmt>(body[k].get());
    auto *c = es ? dyn_cast<Call>(es->value.get()) : nullptr;
    if (!c || emit::print_expr(*c->func) != "tl.store" || c->args.size() != 2 || !c->keywords.empty()) continue;
    auto *p = dyn_cast<Name>(c->args[0].get());
    auto *v = dyn_cast<Name>(c->args[1].get());
    if (!p || !v) continue;
    const size_t pk = position(p->id), vk = position(v->id);
    if (pk == body.size() || vk == body.size()) continue;
    // p = P + off, P a pointer parameter, off the program id along axis 0.
    auto *add = dyn_cast<BinOp>(&value_of(pk));
    if (!add || add->op != BinaryOpKind::Add) continue;
    auto *base = dyn_cast<Name>(add->lhs.get());
    auto *off = dyn_cast<Name>(add->rhs.get());
    auto pt = base ? request_.param_types.find(base->id) : request_.param_types.end();
    if (!off || pt == request_.param_types.end() || !pt->second.is_tensor() || !pt->second.elem.is_pointer) continue;
    std::string at = off->id;
    size_t ok = position(at);
    bool is_pid = false;
    while (ok < body.size()) {
      if (auto *n = dyn_cast<Name>(&value_of(ok))) {
        ok = position(at = n->id);
        continue;
      }
      auto *call = dyn_cast<Call>(&value_of(ok));
      auto *axis = call && call->args.size() == 1 ? dyn_cast<IntLit>(call->args[0].get()) : nullptr;
      is_pid = call && emit::print_expr(*call->func) == "tl.program_id" && axis && axis->value == 0;
      break;
    }
    if (!is_pid || position(off->id) > vk) continue;
    const SType *vt = type_of_name(v->id);
    // Generic: the pointer's dtype is a representative, so the backward
    // asserts the one it relies on when Triton compiles it.
    const bool generic_pointer = request_.generic_params.count(base->id) > 0;
    if (!vt || !vt->is_tensor() || !vt->shape.empty() || vt->elem.is_pointer || !sema::is_float(vt->elem.dtype) ||
        (vt->elem.dtype != pt->second.elem.dtype && !generic_pointer))
      continue;
    if (generic_pointer) saved_dtype_[v->id] = sema::tl_name(vt->elem.dtype);
    saved_[v->id] = p->id;
    saved_base_[v->id] = base->id;
    if (pk > vk) {  // the pointer first: the value's load reads it
      StmtPtr moved = std::move(body[pk]);
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(pk));
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(vk), std::move(moved));
      changed = true;
    }
    // 1 / tl.sqrt(u), the square root read nowhere else: tl.math.rsqrt(u).
    const size_t vk2 = position(v->id);
    auto *div = dyn_cast<BinOp>(&value_of(vk2));
    auto *one_i = div ? dyn_cast<IntLit>(div->lhs.get()) : nullptr;
    auto *one_f = div ? dyn_cast<FloatLit>(div->lhs.get()) : nullptr;
    auto *t = div && div->op == BinaryOpKind::Div ? dyn_cast<Name>(div->rhs.get()) : nullptr;
    if (!t || !((one_i && one_i->value == 1) || (one_f && one_f->value == 1.0)) || read_count[t->id] != 1) continue;
    const size_t tk = position(t->id);
    auto *sq = tk < body.size() ? dyn_cast<Call>(&value_of(tk)) : nullptr;
    if (!sq || emit::print_expr(*sq->func) != "tl.sqrt" || sq->args.size() != 1 || !isa<Name>(sq->args[0].get())) continue;
    cast<Assign>(body[vk2].get())->value = call("tl.math.rsqrt", list(clone(*sq->args[0])));
    body.erase(body.begin() + static_cast<std::ptrdiff_t>(tk));
    --k;  // the square root stood before this store: the next statement is now at k
    changed = true;
  }
  return changed;
}

std::set<std::string> Engine::pointer_params(const std::vector<std::string> &more) const {
  std::set<std::string> out(more.begin(), more.end());
  for (const auto &[param, type] : request_.param_types)
    if (type.is_tensor() && type.elem.is_pointer) out.insert(param);
  return out;
}

void Engine::dispatch_by_row_length(Backward &result, std::optional<Backward> one, const sema::ParamTypes &one_types,
                                    const SinglePassVersion &version, const std::string &why_not) {
  const std::string where = "line " + std::to_string(fn_->span.begin.line) + ": ";
  const std::string loops = "the " + std::to_string(version.loops) + " loops over " + version.range;
  if (!one) {
    result.explanations.push_back(where + loops + " have no one-pass version: " + why_not);
    return;
  }
  auto same_sums = [](const Backward &a, const Backward &b) {
    if (a.partial_sums.size() != b.partial_sums.size() || a.num_programs_param != b.num_programs_param) return false;
    for (size_t k = 0; k < a.partial_sums.size(); ++k) {
      const auto &x = a.partial_sums[k], &y = b.partial_sums[k];
      if (x.input != y.input || x.gradient != y.gradient || x.scratch != y.scratch || x.numel != y.numel) return false;
    }
    return true;
  };
  if (one->gradient_buffers != result.gradient_buffers || !same_sums(result, *one)) {
    result.explanations.push_back(where + loops + " have a one-pass version, but its backward needs other gradient "
                                  "or partial-sum buffers; the looped backward serves every row length");
    return;
  }
  auto take = [](Backward &b) {
    Function *f = nullptr;
    for (auto &g : b.module->functions)
      if (g->name == b.backward_name) f = g.get();
    return f;
  };
  Function *looped = take(result), *single = take(*one);
  NameAllocator fn_names;
  for (const auto &f : module_.functions) fn_names.reserve(f->name);
  for (const auto &f : result.module->functions) fn_names.reserve(f->name);
  for (const auto &f : one->module->functions) fn_names.reserve(f->name);
  looped->name = fn_names.fresh(result.backward_name + "_loops");
  single->name = fn_names.fresh(result.backward_name + "_one_pass");

  // The dispatcher: the looped backward's parameters, then any the one-pass one adds.
  auto dispatcher = std::make_unique<Function>();
  dispatcher->name = result.backward_name;
  dispatcher->span = fn_->span;
  dispatcher->decorators.push_back({DecoratorKind::Jit, "triton.jit", "triton.jit", {}});
  sema::ParamTypes types = bwd_types_;
  for (const Param &p : looped->params)
    dispatcher->params.push_back({p.name, {}, p.annotation ? clone(*p.annotation) : nullptr, nullptr});
  for (const Param &p : single->params) {
    bool have = false;
    for (const Param &q : dispatcher->params) have |= q.name == p.name;
    if (have) continue;
    dispatcher->params.push_back({p.name, {}, p.annotation ? clone(*p.annotation) : nullptr, nullptr});
    if (one_types.count(p.name)) types[p.name] = one_types.at(p.name);
  }
  auto call_of = [&](const Function &f) {
    ExprList args;
    for (const Param &p : f.params) args.push_back(name(p.name));
    return std::make_unique<ExprStmt>(std::make_unique<Call>(name(f.name), std::move(args), std::vector<Keyword>{}));
  };
  StmtList then_branch, else_branch;
  then_branch.push_back(call_of(*single));
  else_branch.push_back(call_of(*looped));
  auto branch = std::make_unique<If>(clone(*version.condition), std::move(then_branch), std::move(else_branch));
  branch->leading_comment = "Each of " + loops + " runs once when " + emit::print_expr(*version.condition) +
                            ": then the one-pass backward, which keeps the row in registers; else the looped one.";
  dispatcher->body.push_back(std::move(branch));

  auto out = std::make_unique<Module>();
  for (Backward *b : {&result, &*one}) {
    for (const Import &imp : b->module->imports) {
      bool have = false;
      for (const Import &i : out->imports)
        have |= i.is_from == imp.is_from && i.module == imp.module && i.names == imp.names;
      if (!have) out->imports.push_back(imp);
    }
    for (const Constant &c : b->module->constants) {
      bool have = false;
      for (const Constant &d : out->constants) have |= d.name == c.name;
      if (!have) out->constants.push_back({c.name, c.span, clone(*c.stmt)});
    }
    for (auto &f : b->module->functions) {
      bool have = false;
      for (const auto &g : out->functions) have |= g->name == f->name;
      if (!have) out->functions.push_back(std::move(f));
    }
  }
  // The dispatcher is checked like every backward (a failure is tgrad's bug).
  DiagEngine check(sources_);
  std::unique_ptr<Module> context = checking_module();
  for (const auto &f : out->functions) context->functions.push_back(clone(*f));
  if (!sema::analyze(*context, *dispatcher, types, check)) {
    std::ostringstream msg;
    check.print_all(msg);
    fail(fn_->name_span, "internal error: the dispatching backward of '" + fn_->name +
                             "' failed semantic analysis (please report):\n" + msg.str() + emit::print_function(*dispatcher));
  }
  out->functions.push_back(std::move(dispatcher));

  result.add_buffer_needs(*one);
  for (const Backward::Tape &t : one->tapes) result.tapes.push_back(t);
  result.explanations.push_back(where + "each of " + loops + " runs once when " + emit::print_expr(*version.condition) +
                                ": the backward then calls " + single->name + ", whose decisions follow (else " +
                                looped->name + ", as above)");
  for (const std::string &e : one->explanations) result.explanations.push_back("one pass: " + e);
  result.source = header() + emit::print_module(*out);
  result.module = std::move(out);
}

void Engine::read_dtypes_from_pointers(StmtList &body) {
  rewrite_exprs(body, [&](ExprPtr &e) {
    auto *attr = dyn_cast<Attribute>(e.get());
    auto *v = attr && attr->attr == "dtype" ? dyn_cast<Name>(attr->value.get()) : nullptr;
    if (!v) return;
    const MemoryOp *load = nullptr;
    for (const MemoryOp &m : memory_)
      if (!m.store && m.value == v->id) load = &m;
    const SType *t = load ? type_of_name(v->id) : nullptr;
    if (!t || !t->is_tensor() || t->elem.is_pointer) return;
    e = std::make_unique<Attribute>(std::make_unique<Attribute>(name(load->pointer), "dtype"), "element_ty");
  });
}

bool Engine::programs_differ_only_by_axis_0(const StmtList &block) const {
  bool ok = true;
  std::function<void(const Expr &)> visit = [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e)) {
      const SType *f = anf_types_.type_of(c->func.get());
      std::string fname = f && f->kind == SType::Kind::Builtin ? f->s : "";
      // tl.num_programs(0) is the same in every program (the backward's loop
      // over forward programs passes the forward's count in its place).
      if (fname == "tl.program_id" || fname == "tl.num_programs") {
        const Expr *axis = call_argument(*c, 0, "axis");
        auto *lit = axis ? dyn_cast<IntLit>(axis) : nullptr;
        if (!lit || lit->value != 0) ok = false;
      }
      for (const ExprPtr &a : c->args) visit(*a);
      for (const Keyword &k : c->keywords) visit(*k.value);
      visit(*c->func);
    } else if (auto *b = dyn_cast<BinOp>(&e)) {
      visit(*b->lhs);
      visit(*b->rhs);
    } else if (auto *a = dyn_cast<Attribute>(&e)) {
      visit(*a->value);
    }
  };
  std::function<void(const StmtList &)> walk = [&](const StmtList &b) {
    for (const StmtPtr &st : b) {
      if (auto *a = dyn_cast<Assign>(st.get())) visit(*a->value);
      if (auto *x = dyn_cast<ExprStmt>(st.get())) visit(*x->value);
      if (auto *f = dyn_cast<For>(st.get())) walk(f->body);
      if (auto *i = dyn_cast<If>(st.get())) {
        walk(i->body);
        walk(i->orelse);
      }
    }
  };
  walk(block);
  return ok;
}

void Engine::loop_over_forward_programs(Function &bwd, const Backward &result, const std::map<std::string, std::string> &row_of) {
  std::string pid = names_.fresh("forward_pid");
  auto axis_zero = [](const Call &c) {
    const Expr *axis = c.args.empty() ? nullptr : c.args[0].get();
    for (const Keyword &k : c.keywords)
      if (k.name == "axis") axis = k.value.get();
    return axis && isa<IntLit>(axis) && cast<IntLit>(axis)->value == 0;
  };
  rewrite_exprs(bwd.body, [&](ExprPtr &e) {
    auto *c = dyn_cast<Call>(e.get());
    if (!c || !axis_zero(*c)) return;
    const std::string callee = emit::print_expr(*c->func);
    if (callee == "tl.program_id") e = name(pid);
    else if (callee == "tl.num_programs") e = name(result.num_programs_param);
  });
  cast_loop_variable_portably(bwd.body, pid);
  StmtList prelude;
  for (const auto &p : result.partial_sums) {
    StmtPtr row = assign(row_of.at(p.input), std::make_unique<BinOp>(BinaryOpKind::Add, name(p.scratch),
                                                                    std::make_unique<BinOp>(BinaryOpKind::Mul, call("tl.program_id", list(int_lit(0))),
                                                                                            name(p.numel))));
    if (prelude.empty())
      row->leading_comment = "This program's rows of the partial sums: every program loads the same addresses of " +
                             p.input + "; the reduction kernel sums the rows";
    prelude.push_back(std::move(row));
    // The row starts at zero: the caller need not clear the scratch buffer.
    std::string start = names_.fresh("zero_start"), offs = names_.fresh("zero_offsets");
    StmtList zero_body;
    zero_body.push_back(assign(offs, std::make_unique<BinOp>(BinaryOpKind::Add, name(start),
                                                             call("tl.arange", list(int_lit(0), int_lit(1024))))));
    std::vector<Keyword> zkw;
    zkw.push_back({"dtype", {}, dotted_name("tl.float32")});
    std::vector<Keyword> skw;
    ExprList bound;
    bound.push_back(name(p.numel));
    skw.push_back({"mask", {}, std::make_unique<Compare>(name(offs), std::vector<CompareOpKind>{CompareOpKind::Lt}, std::move(bound))});
    zero_body.push_back(std::make_unique<ExprStmt>(call(
        "tl.store", list(std::make_unique<BinOp>(BinaryOpKind::Add, name(row_of.at(p.input)), name(offs)),
                         call("tl.zeros", list(std::make_unique<List>(list(int_lit(1024)))), std::move(zkw))),
        std::move(skw))));
    ExprList zb;
    zb.push_back(int_lit(0));
    zb.push_back(name(p.numel));
    zb.push_back(int_lit(1024));
    prelude.push_back(std::make_unique<For>(name(start), call("range", std::move(zb)), std::move(zero_body)));
  }
  prelude.push_back(std::make_unique<ExprStmt>(call("tl.debug_barrier", {})));
  ExprList bounds;
  bounds.push_back(call("tl.program_id", list(int_lit(0))));
  bounds.push_back(name(result.num_programs_param));
  bounds.push_back(call("tl.num_programs", list(int_lit(0))));
  for (RegisterPartial &r : register_partials_) prelude.push_back(assign(r.acc, std::move(r.init)));
  if (!register_partials_.empty()) {
    // The last of this program's iterations stores the sums.
    ExprList rhs;
    rhs.push_back(name(result.num_programs_param));
    auto last = std::make_unique<Compare>(
        std::make_unique<BinOp>(BinaryOpKind::Add, name(pid), call("tl.num_programs", list(int_lit(0)))),
        std::vector<CompareOpKind>{CompareOpKind::GtE}, std::move(rhs));
    auto store_sums = std::make_unique<If>(std::move(last), StmtList{}, StmtList{});
    for (const RegisterPartial &r : register_partials_) {
      std::vector<Keyword> kws;
      if (!r.mask.empty()) kws.push_back({"mask", {}, name(r.mask)});
      store_sums->body.push_back(std::make_unique<ExprStmt>(call("tl.store", list(name(r.pointer), name(r.acc)), std::move(kws))));
    }
    store_sums->leading_comment = "This program's last iteration: its partial sums go to its rows.";
    bwd.body.push_back(std::move(store_sums));
  }
  // What does not depend on the forward's program (the weights' loads) runs once, before the loop.
  std::vector<std::string> buffers;
  for (const auto &g : result.gradient_buffers) buffers.push_back(g.second);
  for (const auto &p : result.partial_sums) buffers.push_back(p.scratch);
  for (const Backward::Tape &t : result.tapes) buffers.push_back(t.scratch);
  const size_t before_hoisted = prelude.size();
  const Purity purity(std::vector<const StmtList *>{&prelude, &bwd.body}, pointer_params(buffers));
  if (hoist_loop_invariants(bwd.body, prelude, purity, pid) > 0)
  {
    std::string &c = prelude[before_hoisted]->leading_comment;
    c = "The same for every forward program: computed once." + (c.empty() ? "" : "\n" + c);
  }
  auto loop = std::make_unique<For>(name(pid), call("range", std::move(bounds)), std::move(bwd.body));
  loop->leading_comment = "Each program of the backward's grid takes every G-th program of the forward's.";
  bwd.body = std::move(prelude);
  bwd.body.push_back(std::move(loop));
}

void Engine::add_support_function(const std::string &definition, const std::string &comment) {
  const std::string text = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef " + definition;
  SourceManager sources;
  int id = sources.add_file("<support function>", text);
  DiagEngine diags(sources);
  std::unique_ptr<Module> m = parse::parse_module(sources, id, diags);
  if (!m || diags.has_errors() || m->functions.empty())
    fail(fn_->name_span, "internal error: a function tgrad writes does not parse:\n" + text);
  m->functions[0]->body[0]->leading_comment = comment;
  extra_functions_.push_back(std::move(m->functions[0]));
}

std::string Engine::add_reduce_kernel(const std::string &wanted) {
  NameAllocator fn_names;
  for (const auto &f : module_.functions) fn_names.reserve(f->name);
  fn_names.reserve(fn_->name + "_bwd");
  std::string kernel = fn_names.fresh(wanted);
  add_support_function(kernel +
                           "(partial, gradient, numel, rows, BLOCK: tl.constexpr, ROWS: tl.constexpr):\n"
                           "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                           "    mask = offsets < numel\n"
                           "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
                           "    for first in range(0, rows, ROWS):\n"
                           "        r = first + tl.arange(0, ROWS)\n"
                           "        tile_mask = (r[:, None] < rows) & mask[None, :]\n"
                           "        tile = tl.load(partial + r[:, None] * numel + offsets[None, :], mask=tile_mask, other=0.0)\n"
                           "        total += tl.sum(tile, axis=0)\n"
                           "    tl.store(gradient + offsets, total.to(gradient.dtype.element_ty), mask=mask)\n",
                       "Writes the sum of the rows of a [rows, numel] float32 partial-sum buffer to a gradient buffer.");
  return kernel;
}

}  // namespace tgrad::ad::reverse
