// What owner-computes kernels write once the backward is planned (after src/ad/reverse/OwnerComputes.h gathered
// them): a gradient one owner alone writes is flushed with a plain store where the strides keep the owners' rows
// apart (a layout flag chooses, Backward::LayoutAssumption), and the row statistics a prologue kernel would save
// once per forward program are saved by the backward kernel itself at the rows of an output the forward stores
// (Backward::SavedTile::like), so that no prologue runs.
#include <algorithm>
#include <functional>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/Engine.h"
#include "src/ad/reverse/GroupedOrder.h"
#include "src/ad/reverse/OwnerComputes.h"
#include "src/ad/reverse/PrologueSaves.h"
#include "src/ad/reverse/ZeroLanes.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {

void Engine::fold_prologue(Function &bwd, Backward &result, const AccessAnalysis &access) {
  if (result.prologue_kernel.empty() || !result.backward_kernel_writes || result.saved_tiles.empty()) return;
  auto prologue = std::find_if(owner_functions_.begin(), owner_functions_.end(), [&](const std::unique_ptr<Function> &f) {
    return f && f->name == result.prologue_kernel;
  });
  if (prologue == owner_functions_.end()) return;
  std::map<std::string, const Expr *> defs;  // the backward kernel's (A-normal form: each value named once)
  std::map<std::string, size_t> top_index;   // where a top-level statement assigns it
  each_assignment(bwd.body, [&](const std::string &n, const Expr &v) { defs.emplace(n, &v); });
  for (size_t k = 0; k < bwd.body.size(); ++k) {
    std::set<std::string> assigned;
    if (auto *a = dyn_cast<Assign>(bwd.body[k].get()))
      for (const ExprPtr &t : a->targets)
        if (auto *n = dyn_cast<Name>(t.get())) assigned.insert(n->id);
    if (auto *a = dyn_cast<AugAssign>(bwd.body[k].get()))
      if (auto *n = dyn_cast<Name>(a->target.get())) assigned.insert(n->id);
    for (const std::string &n : assigned) top_index[n] = k;
  }
  // The offsets of a pointer from its base parameter, as the names added along its chain in the backward kernel.
  std::function<bool(const std::string &, const std::string &, std::vector<std::string> &, int)> offsets_from =
      [&](const std::string &p, const std::string &base, std::vector<std::string> &out, int depth) {
        if (p == base) return true;
        auto d = defs.find(p);
        auto *b = d == defs.end() ? nullptr : dyn_cast<BinOp>(d->second);
        if (depth > 32 || !b || b->op != BinaryOpKind::Add) return false;
        auto *l = dyn_cast<Name>(b->lhs.get());
        auto *r = dyn_cast<Name>(b->rhs.get());
        if (!l || !r) return false;
        std::vector<std::string> tried = out;
        tried.push_back(r->id);
        if (offsets_from(l->id, base, tried, depth + 1)) { out = tried; return true; }
        tried = out;
        tried.push_back(l->id);
        if (offsets_from(r->id, base, tried, depth + 1)) { out = tried; return true; }
        return false;
      };
  struct Plan {
    Backward::SavedTile *tile;
    std::string base, mask;
    std::vector<std::string> offsets;
    size_t after = 0;  // the top-level statement after which the backward kernel has everything
  };
  std::vector<Plan> plans;
  for (Backward::SavedTile &t : result.saved_tiles) {
    if (t.tile_shape.size() != 1 || !top_index.count(t.value) || !t.like.empty()) return;
    std::optional<Plan> found;
    for (const MemoryOp &m : memory_) {
      // A store of the forward, once per program, of a tile of the statistic's shape, each row one program's.
      if (!m.store || !m.atomic.empty() || !m.loops.empty() || m.in_branch || m.mask.empty()) continue;
      const SType *pt = type_of_name(m.pointer);
      if (!pt || !pt->is_tensor() || pt->shape.size() != 1 || pt->shape[0].str() != t.tile_shape[0]) continue;
      if (access.classify(m.pointer, m.mask).kind != AccessDecision::Kind::Injective) continue;
      Plan p{&t, m.base, m.mask, {}, top_index[t.value]};
      if (!offsets_from(m.pointer, m.base, p.offsets, 0) || !top_index.count(m.mask)) continue;
      bool defined = true;
      for (const std::string &o : p.offsets) {
        defined &= defs.count(o) == 0 || top_index.count(o) > 0;  // (a parameter, or computed before the loops)
        if (top_index.count(o)) p.after = std::max(p.after, top_index[o]);
      }
      p.after = std::max(p.after, top_index[m.mask]);
      if (defined) found = p;
      break;
    }
    if (!found) return;
    plans.push_back(*found);
  }
  // The owners read each at the same offsets, which they compute in the loop over the forward's programs.
  auto address = [](const Plan &p) { return offset_address(p.tile->scratch, p.offsets); };
  for (auto &f : owner_functions_) {
    if (!f || f->name == result.prologue_kernel) continue;
    std::set<std::string> owner_names;
    each_assignment(f->body, [&](const std::string &n, const Expr &) { owner_names.insert(n); });
    for (const Plan &p : plans) {
      bool reads = false;
      for (const Param &q : f->params) reads |= q.name == p.tile->scratch;
      if (!reads) continue;
      for (const std::string &o : p.offsets)
        if (defs.count(o) && !owner_names.count(o)) return;
      if (!owner_names.count(p.mask)) return;
    }
  }
  for (auto &f : owner_functions_) {
    if (!f || f->name == result.prologue_kernel) continue;
    for (const Plan &p : plans)
      rewrite_exprs(f->body, [&](ExprPtr &e) {
        auto *c = dyn_cast<Call>(e.get());
        if (!c || callee(*c) != "tl.load" || c->args.empty()) return;
        std::set<std::string> read;
        reads(*c->args[0], read);
        if (!read.count(p.tile->scratch)) return;
        std::vector<Keyword> kws;
        kws.push_back({"mask", {}, name(p.mask)});
        kws.push_back({"other", {}, std::make_unique<FloatLit>(0.0, "0.0")});
        e = call("tl.load", list(address(p)), std::move(kws));
      });
  }
  // The backward kernel saves them, in order, each after what it reads.
  std::sort(plans.begin(), plans.end(), [](const Plan &a, const Plan &b) { return a.after > b.after; });
  for (const Plan &p : plans) {
    std::vector<Keyword> kws;
    kws.push_back({"mask", {}, name(p.mask)});
    StmtPtr save = std::make_unique<ExprStmt>(call("tl.store", list(address(p), name(p.tile->value)), std::move(kws)));
    save->leading_comment = "Saved for the owner-computes kernels at the rows of '" + p.base +
                            "': each owner reads it instead of computing it again for every program it sums over";
    bwd.body.insert(bwd.body.begin() + static_cast<std::ptrdiff_t>(p.after + 1), std::move(save));
    bwd.params.push_back({p.tile->scratch, {}, nullptr, nullptr});
    p.tile->like = p.base;
    p.tile->by_backward_kernel = true;
  }
  owner_functions_.erase(prologue);
  result.prologue_kernel.clear();
}

void Engine::store_owner_flushes(Function &bwd, Backward &result, const AccessAnalysis &access) {
  // Gradients the backward kernel still touches, or more than one owner writes (the two stages of a causal
  // forward each add to dK): their owners keep adding.
  std::set<std::string> main_reads;
  if (result.backward_kernel_writes) block_reads(bwd.body, main_reads);
  std::map<std::string, int> writers;
  for (const Backward::OwnerKernel &k : result.owner_kernels)
    for (const std::string &g : k.gradients) ++writers[g];
  for (Backward::OwnerKernel &k : result.owner_kernels) {
    auto fn = std::find_if(owner_functions_.begin(), owner_functions_.end(),
                           [&](const std::unique_ptr<Function> &f) { return f && f->name == k.name; });
    if (fn == owner_functions_.end()) continue;
    std::multimap<std::string, const Expr *> defs;
    collect_defs((*fn)->body, defs);
    // Owners of a forward in grouped program order (a 1-D grid read as the 2-D grid it enumerates,
    // GroupedOrder.h) take pid_m and pid_n as program ids: their addresses are the forward's read so.
    std::unique_ptr<Function> grid_2d;
    std::optional<AccessAnalysis> grid_2d_access;
    if (!k.grid_sizes.empty()) {
      grid_2d = clone(*anf_.fn);
      if (!read_grouped_order_as_2d(grid_2d->body, grid_2d->body.size())) continue;
      grid_2d_access.emplace(*grid_2d, name_types_);
    }
    const AccessAnalysis &addresses = grid_2d_access ? *grid_2d_access : access;
    const Function &forward = grid_2d ? *grid_2d : *anf_.fn;
    size_t plain = 0;  // gradients flushed with a plain store, whatever the launch's strides
    for (size_t i = 0; i < k.gradients.size(); ++i) {
      const std::string &g = k.gradients[i], &input = k.inputs[i];
      if (writers[g] != 1 || main_reads.count(g)) continue;
      // The forward's one load of the input, in the loop whose iterations the owners' programs are.
      const MemoryOp *load = nullptr;
      bool one = true;
      for (const MemoryOp &m : memory_)
        if (m.base == input) {
          one &= !m.store && !load && m.loops.size() == 1 && m.loops[0]->span.begin.line == k.loop_line &&
                 m.loops[0]->span.begin.column == k.loop_column;
          load = &m;
        }
      auto *var = one && load ? dyn_cast<Name>(load->loops[0]->target.get()) : nullptr;
      if (!var) continue;
      // Its flush: the top-level tl.atomic_add through a pointer based on g.
      StmtPtr *flush = nullptr;
      for (StmtPtr &s : (*fn)->body) {
        auto *x = dyn_cast<ExprStmt>(s.get());
        auto *c = x ? dyn_cast<Call>(x->value.get()) : nullptr;
        auto *p = c && callee(*c) == "tl.atomic_add" && c->args.size() >= 2 ? dyn_cast<Name>(c->args[0].get()) : nullptr;
        if (p && gradient_bases(p->id, defs, {g}).count(g)) {
          flush = &s;
          break;
        }
      }
      if (!flush) continue;
      auto *c = cast<Call>(cast<ExprStmt>(flush->get())->value.get());
      std::optional<AccessDecision> d =
          addresses.classify_owner_layout(load->pointer, load->mask, k.summed_axis, var->id);
      // Where the offset wraps around (`offs_cm % M`), the lanes past the bound may add nothing: left out of the
      // flush, the rest are each one owner's (ZeroLanes.h).
      std::optional<ZeroBound> zero_outside;
      if (!d)
        if (auto *tile = dyn_cast<Name>(c->args[1].get()))
          if ((zero_outside = zero_outside_bound(**fn, tile->id)) &&
              same_top_level_value(**fn, forward, zero_outside->index))
            d = addresses.classify_owner_layout(load->pointer, load->mask, k.summed_axis, var->id,
                                                {{zero_outside->index, zero_outside->bound}});
      if (!d) continue;
      // The launch knows the 1-D grid only: a box whose extent is a count of the 2-D grid's programs is not its.
      if (grid_2d) {
        bool counts_programs = false;
        for (const auto &[extent, stride] : d->layout)
          for (const Expr *e : {extent.get(), stride.get()})
            visit_expr(*e, [&](const Expr &x) {
              if (auto *call = dyn_cast<Call>(&x); call && callee(*call) == "tl.num_programs") counts_programs = true;
            });
        if (counts_programs) continue;
      }
      const bool needs_flag = !d->layout.empty();
      std::string flag;
      StmtPtr &s = *flush;
      std::vector<Keyword> kws;
      for (const Keyword &kw : c->keywords)
        if (kw.name == "mask") kws.push_back({kw.name, kw.name_span, clone(*kw.value)});
      if (zero_outside) {
        ExprPtr within = name(zero_outside->predicate);
        if (kws.empty())
          kws.push_back({"mask", {}, std::move(within)});
        else
          kws[0].value = std::make_unique<BinOp>(BinaryOpKind::BitAnd, std::move(kws[0].value), std::move(within));
      }
      ExprList args;
      args.push_back(clone(*c->args[0]));
      args.push_back(clone(*c->args[1]));
      StmtPtr store = std::make_unique<ExprStmt>(call("tl.store", std::move(args), std::move(kws)));
      s->leading_comment.clear();
      if (!needs_flag) {
        s = std::move(store);
        s->leading_comment = "One store per element and owner: no other owner writes these addresses";
        result.zero_initialized.erase(
            std::remove(result.zero_initialized.begin(), result.zero_initialized.end(), input),
            result.zero_initialized.end());
      } else {
        // Apart only for the launch's strides (an expanded view is not): the launcher's flag chooses.
        s = store_where_apart(input, k.name, std::move(d->layout), std::move(store), std::move(s),
                              [](const std::string &flag) {
                                return "One store per element and owner where the strides keep the owners' rows "
                                       "apart (" + flag + ", from the launcher); else (an expanded view) one "
                                       "addition each";
                              },
                              result.layout_assumptions);
        flag = cast<Name>(cast<If>(s.get())->cond.get())->id;  // (the flag store_where_apart tests)
        // Every kernel takes the flag (they share the backward's parameters).
        for (auto &f : owner_functions_)
          if (f) f->params.push_back({flag, {}, nullptr, nullptr});
        bwd.params.push_back({flag, {}, nullptr, nullptr});
      }
      result.explanations.push_back(
          "'" + input + "': " + k.name + " stores each gradient tile once, a plain store" +
          (needs_flag ? " where " + flag + " (else one atomic addition)" : "") + ": " + d->reason +
          (zero_outside ? std::string("; the ") + (zero_outside->axis == 0 ? "rows" : "columns") + " past " +
                              zero_outside->index + " < " + zero_outside->bound +
                              " add nothing (their upstream gradient is loaded as 0 there) and are left out, so " +
                              zero_outside->index + " % " + zero_outside->bound + " is " + zero_outside->index
                        : std::string()));
      plain += !needs_flag;
    }
    k.plain_store = plain > 0 && plain == k.gradients.size();
  }
}

}  // namespace tgrad::ad::reverse
