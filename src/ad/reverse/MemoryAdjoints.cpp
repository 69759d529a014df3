// Memory adjoints: the gradient pointer that mirrors each pointer, the
// upstream gradients of stores, and where the gradient of each load is
// written (as src/ad/reverse/MemorySchedule.h decides).
#include "src/ad/reverse/Engine.h"
#include "tgrad/ast/Equal.h"
#include "src/ad/reverse/MemorySchedule.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {

std::optional<ExprList> Engine::register_tile_dims(const MemoryOp &op) const {
  const SType *t = type_of_name(op.value);
  if (!t || !t->is_tensor()) return std::nullopt;
  ExprList dims;
  for (const sema::Dim &dim : t->shape) {
    if (dim.value) dims.push_back(int_lit(*dim.value));
    else if (!dim.symbol.empty() && dim.symbol.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos)
      dims.push_back(name(dim.symbol));
    else
      return std::nullopt;
  }
  return dims;
}

void Engine::register_partial(const MemoryOp &op, const std::string &bx, const std::string &comment) {
  std::optional<ExprList> dims = register_tile_dims(op);
  if (!dims) fail(op.call->span, "internal error: no register tile for the partial sum of '" + op.value + "'");
  // Sum in float32: take the gradient before its cast to the load's dtype.
  ExprPtr grad = name(bx);
  for (size_t k = out_->size(); k-- > 0;) {
    auto *a = dyn_cast<Assign>((*out_)[k].get());
    if (!a || assigned_name(*a) != bx) continue;
    auto *c = dyn_cast<Call>(a->value.get());
    auto *attr = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
    // Only the cast back to the loaded value's dtype (`g.to(x.dtype)`, the cast rule's): bx may be an alias of
    // another value's adjoint, cast to that value's dtype (an fp16 store's upstream gradient widened to the fp32
    // value stored), which this sum must not skip. (And a generic backward's representatives differ in whether
    // such a cast's operand is float32: the choice would make them differ.)
    auto *target = c && c->args.size() == 1 ? dyn_cast<Attribute>(c->args[0].get()) : nullptr;
    auto *target_of = target && target->attr == "dtype" ? dyn_cast<Name>(target->value.get()) : nullptr;
    if (attr && attr->attr == "to" && isa<Name>(attr->value.get()) && target_of && target_of->id == op.value) {
      const SType *from = nullptr;  // the receiver is an adjoint: its primal's type
      for (const auto &[primal, adjoint] : adjoint_)
        if (adjoint == cast<Name>(attr->value.get())->id) from = type_of_name(primal);
      if (from && from->is_tensor() && from->elem.dtype == sema::DType::FP32) grad = clone(*attr->value);
    }
    break;
  }
  if (cast<Name>(grad.get())->id == bx) grad = call("tl.cast", list(std::move(grad), dotted_name("tl.float32")));
  std::string acc = names_.fresh(gradient_buffer_.at(op.base) + "_sum");
  StmtPtr add = std::make_unique<AugAssign>(name(acc), BinaryOpKind::Add, std::move(grad));
  add->leading_comment = comment;
  emit_stmt(std::move(add));
  std::vector<Keyword> init_kws;
  init_kws.push_back({"dtype", {}, dotted_name("tl.float32")});
  register_partials_.push_back({acc, call("tl.zeros", list(std::make_unique<List>(std::move(*dims))), std::move(init_kws)),
                                emit::print_expr(*dual(op.pointer)), op.mask});
}

ExprPtr Engine::dual(const std::string &pointer) {
  auto it = dual_name_.find(pointer);
  if (it != dual_name_.end()) return name(it->second);
  auto row = partial_row_.find(pointer);
  if (row != partial_row_.end()) return name(row->second);
  for (const Param &p : anf_.fn->params)
    if (p.name == pointer) return name(gradient_buffer_.at(pointer));
  auto defs = defs_of_.find(pointer);
  if (defs == defs_of_.end()) fail({}, "internal error: no definition of the pointer '" + pointer + "'");
  std::string d = names_.fresh("d" + pointer);
  dual_name_[pointer] = d;
  for (const Assign *a : defs->second) {
    ExprPtr value = clone(*a->value);
    mirror_pointers(value);
    dual_defs_[a] = assign(d, std::move(value));
  }
  return name(d);
}

void Engine::mirror_pointers(ExprPtr &e) {
  if (auto *n = dyn_cast<Name>(e.get())) {
    const SType *t = type_of_name(n->id);
    if (t && t->is_tensor() && t->elem.is_pointer) e = dual(n->id);
    return;
  }
  if (auto *b = dyn_cast<BinOp>(e.get())) {
    mirror_pointers(b->lhs);
    mirror_pointers(b->rhs);
  } else if (auto *c = dyn_cast<Call>(e.get())) {
    if (auto *attr = dyn_cast<Attribute>(c->func.get())) mirror_pointers(attr->value);
    for (ExprPtr &a : c->args) mirror_pointers(a);
    for (Keyword &k : c->keywords) mirror_pointers(k.value);
  } else if (auto *s = dyn_cast<Subscript>(e.get())) {
    mirror_pointers(s->value);
  } else if (auto *u = dyn_cast<UnaryOp>(e.get())) {
    mirror_pointers(u->operand);
  } else if (auto *w = dyn_cast<Tuple>(e.get())) {
    for (ExprPtr &x : w->elts) mirror_pointers(x);
  }
}

StmtPtr Engine::store_where_apart(const std::string &input, const std::string &kernel,
                                  std::vector<std::pair<ExprPtr, ExprPtr>> &&layout, StmtPtr store, StmtPtr add,
                                  const std::function<std::string(const std::string &flag)> &comment,
                                  std::vector<Backward::LayoutAssumption> &assumptions, bool zeros_anyway) {
  // One flag per input, kernel and box: the loads of a rotary kernel's two halves share theirs.
  Backward::LayoutAssumption *assumed = nullptr;
  for (Backward::LayoutAssumption &a : assumptions) {
    bool same = a.input == input && a.kernel == kernel && a.extent_stride.size() == layout.size();
    for (size_t k = 0; same && k < layout.size(); ++k)
      same = ast::equal(*a.extent_stride[k].first, *layout[k].first) &&
             ast::equal(*a.extent_stride[k].second, *layout[k].second);
    if (same) assumed = &a;
  }
  if (!assumed) {
    assumptions.push_back({input, kernel, names_.fresh(input + "_disjoint"), {}});
    assumed = &assumptions.back();
    for (auto &[extent, stride] : layout) assumed->extent_stride.emplace_back(std::move(extent), std::move(stride));
  }
  assumed->zeros_anyway |= zeros_anyway;
  const std::string flag = assumed->flag;
  StmtList then_store, else_add;
  then_store.push_back(std::move(store));
  else_add.push_back(std::move(add));
  auto branch = std::make_unique<If>(name(flag), std::move(then_store), std::move(else_add));
  branch->leading_comment = comment(flag);
  return branch;
}

void Engine::consume_upstream(const MemoryOp &op) {
  begin_block(anf_.origin_of(op.stmt));
  const bool takes = useful_.count(op.value) > 0;
  auto kws = [&] {
    std::vector<Keyword> k;
    if (!op.mask.empty()) k.push_back({"mask", {}, name(op.mask)});
    return k;
  };
  auto zero = [] { return std::make_unique<FloatLit>(0.0, "0.0"); };
  ExprPtr taken;
  std::string comment;
  const bool atomically = consume_atomically_.count(&op) > 0;
  if (final_read_bases_.count(op.base)) {
    // The reads back after this store added their gradients to the buffer, perhaps from other threads.
    StmtPtr barrier = std::make_unique<ExprStmt>(call("tl.debug_barrier", {}));
    barrier->leading_comment = "After a barrier: the gradients of the loads that read this store back are added";
    emit_stmt(std::move(barrier));
  }
  if (auto racy = racy_axes_.find(&op); racy != racy_axes_.end())
    for (const auto &[axis, how] : racy->second) {
      // (Where the conditions around the store read the axis, a launch may have more programs along it, of which
      // one gets here: nothing to assert; the warning says so.)
      if (how == RacyCheck::None) continue;
      // The programs along this axis store values of their own here: the output, and so its upstream gradient, is
      // one program's, which is right only where one program runs along the axis (KernelPlan warns). The launch
      // protocol checks this assertion before it launches (src/driver/BackwardJson.cpp: host_assumptions).
      ExprList one;
      one.push_back(int_lit(1));
      ExprPtr single = std::make_unique<Compare>(call("tl.num_programs", list(int_lit(axis))),
                                                 std::vector<CompareOpKind>{CompareOpKind::Eq}, std::move(one));
      StmtPtr check = std::make_unique<ExprStmt>(call(
          "tl.device_assert",
          list(std::move(single),
               // ("tgrad: " marks an assertion the launch protocol checks before the launch, src/driver/BackwardJson.cpp:
               // under an if, a launch that skips the store needs no such check.)
               std::make_unique<StrLit>(std::string(how == RacyCheck::AtLaunch ? "tgrad: " : "tgrad, where this runs: ") +
                                        "programs along axis " + std::to_string(axis) + " store their own values at "
                                        "the same addresses of " + op.base + ": launch one along that axis", ""))));
      check->leading_comment = "Programs along axis " + std::to_string(axis) + " store their own values here, one of "
                               "which stays: right for one program along it";
      emit_stmt(std::move(check));
    }
  if (atomically) {
    comment = "Taken by one program (an atomic exchange leaves 0.0): the forward's programs all store here";
    taken = call("tl.atomic_xchg", list(dual(op.pointer), zero()), kws());
  } else {
    // One exchange, not a load and a store of 0.0: Triton may give the store
    // of a constant another layout than the load (measured on the H100: the
    // zero of one thread landed before another thread's load of that
    // address, and the gradient there was lost), so each element's read and
    // write must be one operation of one thread. Relaxed: only this
    // program's later accesses read it, after the barrier below.
    comment = "Taken (an exchange leaves 0.0 for the values this store overwrote)";
    std::vector<Keyword> xchg_kws = kws();
    xchg_kws.push_back({"sem", {}, std::make_unique<StrLit>("relaxed", "")});
    taken = call("tl.atomic_xchg", list(dual(op.pointer), zero()), std::move(xchg_kws));
  }
  // A masked-off lane of an atomic returns no defined value (Triton leaves it to the hardware: garbage or NaN,
  // which a tl.sum or tl.dot over the taken tile carries into the lanes that count): 0.0 there, selected.
  if (takes && !op.mask.empty()) taken = call("tl.where", list(name(op.mask), std::move(taken), zero()));
  // The buffer is a float32 copy of the upstream gradient; the adjoint
  // takes the stored value's type where the backward is typed.
  const SType *vt = takes ? type_of_name(op.value) : nullptr;
  if (takes && !generic() && vt && is_float_tensor(vt) && vt->elem.dtype != sema::DType::FP32)
    taken = cast_to(std::move(taken), dotted_name(std::string("tl.") + sema::tl_name(vt->elem.dtype)));
  std::string g;
  if (takes) {
    g = names_.fresh("b" + op.value);
    StmtPtr st = assign(g, std::move(taken));
    st->leading_comment = comment;
    emit_stmt(std::move(st));
  } else if (atomically) {  // (nothing taken: only the zeros, below)
    StmtPtr st = std::make_unique<ExprStmt>(std::move(taken));
    st->leading_comment = comment;
    emit_stmt(std::move(st));
  }
  if (!atomically) {
    if (!takes) {
      StmtPtr clear = std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), zero()), kws()));
      clear->leading_comment = "0.0 left for the values this store overwrote";
      emit_stmt(std::move(clear));
    }
    // Another thread of this program may read these addresses next.
    emit_stmt(std::make_unique<ExprStmt>(call("tl.debug_barrier", {})));
  }
  if (takes) contribute(op.value, name(g), "store", op.pointer, op.call->span);
}

void Engine::load_adjoint(const MemoryOp &op, const AccessAnalysis &access, std::vector<std::string> &explanations) {
  const std::string &bx = adjoint_.at(op.value);
  int line = op.call->span.begin.line;
  if (!op.other.empty() && is_active(op.other)) {
    // Masked-off lanes took `other`: they carry its gradient. Selects, never multiplies.
    contribute(op.other, call("tl.where", [&] {
                 ExprList l;
                 l.push_back(name(op.mask));
                 l.push_back(std::make_unique<FloatLit>(0.0, "0.0"));
                 l.push_back(name(bx));
                 return l;
               }()),
               "where", op.value, op.call->span);
  }
  if (!gradient_buffer_.count(op.base)) return;  // `other` only
  LoadFacts facts;
  auto disjoint = disjoint_loads_.find(op.base);
  std::optional<AccessDecision> together;
  if (disjoint != disjoint_loads_.end())
    together = access.classify_layout_union(disjoint->second.first, disjoint->second.second);
  facts.access = together ? std::move(*together) : access.classify_load(op.pointer, op.mask);
  facts.loop_depth = op.loop_depth();
  facts.in_branch = op.in_branch;
  facts.register_tile_fits = register_tile_dims(op).has_value();
  BufferFacts buffer;
  buffer.base = op.base;
  buffer.programs_loopable = partial_bases_.count(op.base) > 0;
  if (auto it = shared_bases_.find(op.base); it != shared_bases_.end()) buffer.shared_reason = it->second;
  buffer.loads = loads_per_base_[op.base];
  buffer.mask_variants = mask_keys_[op.base].size();
  buffer.read_back = final_reads_.count(&op) > 0;
  buffer.in_place = in_place_.count(op.base) > 0 || buffer.read_back;
  buffer.written_before = contributions_[op.base];
  buffer.disjoint_loads = together.has_value();
  WriteDecision d = decide_gradient_write(std::move(facts), buffer);
  // A layout-guarded write is a plain store, or an addition in place (a gradient added more than once: several
  // loads at one offset, or an update in place), which under the flag touches this program's addresses only.
  // Partial sums stay atomic.
  if (!d.access.layout.empty() && (d.how == GradientWrite::RegisterPartialSum || d.how == GradientWrite::PartialSumRow)) {
    d.how = GradientWrite::Atomic;
    d.buffer_starts_at_zero = true;
    d.what = "tl.atomic_add";
    d.comment = "atomic: the gradient is added more than once here (a plain store per program would need the strides "
                "to keep the rows apart, and one store per element)";
    d.access.reason = "it adds to another gradient of '" + op.base + "' (" +
                      (buffer.in_place ? "the buffer is updated in place" : "the buffer is loaded more than once") +
                      "), which a store chosen by the launch's strides cannot (" + d.access.reason + ")";
    d.access.layout.clear();
  }
  if (d.counts_as_written) ++contributions_[op.base];
  if (d.buffer_starts_at_zero) needs_zeros_.insert(op.base);
  auto kws = [&] {
    std::vector<Keyword> k;
    if (!op.mask.empty()) k.push_back({"mask", {}, name(op.mask)});
    return k;
  };
  // Relaxed: the additions commute and nothing in this kernel reads the sums, so they need no ordering (the
  // default, acq_rel, fences every addition: 2 to 2.5x slower for flash attention's dK and dV on an H100).
  auto atomic_addition = [&] {
    std::vector<Keyword> atomic_kws = kws();
    atomic_kws.push_back({"sem", {}, std::make_unique<StrLit>("relaxed", "")});
    return std::make_unique<ExprStmt>(call("tl.atomic_add", list(dual(op.pointer), name(bx)), std::move(atomic_kws)));
  };
  // `tl.store(dp, tl.load(dp) + bx)` after a barrier with `comment` (returned: the caller emits it, perhaps under a
  // layout flag).
  auto addition_in_place = [&](const std::string &comment) -> StmtPtr {
    StmtPtr barrier = std::make_unique<ExprStmt>(call("tl.debug_barrier", {}));
    barrier->leading_comment = comment + " (after a barrier: every thread sees the earlier writes)";
    emit_stmt(std::move(barrier));
    std::vector<Keyword> load_kws = kws();
    if (!op.mask.empty()) load_kws.push_back({"other", {}, std::make_unique<FloatLit>(0.0, "0.0")});
    ExprPtr sum = std::make_unique<BinOp>(BinaryOpKind::Add, call("tl.load", list(dual(op.pointer)), std::move(load_kws)),
                                          name(bx));
    return std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), std::move(sum)), kws()));
  };
  const std::string where = "line " + std::to_string(line) + ": the gradient of the load through '" + op.base + "' is ";
  switch (d.how) {
    case GradientWrite::RegisterPartialSum:
      register_partial(op, bx, d.comment);
      explanations.push_back(where +
                             "summed in registers over this program's share of the forward's programs, stored to "
                             "its row of a partial-sum buffer, and a reduction kernel sums the rows (deterministic, "
                             "no atomics): " + d.access.reason);
      return;
    case GradientWrite::PartialSumRow:
      emit_stmt(addition_in_place(d.comment));
      explanations.push_back(where +
                             "added to this program's row of a partial-sum buffer, which a reduction kernel sums "
                             "(deterministic, no atomics): " + d.access.reason);
      return;
    case GradientWrite::Atomic: {
      StmtPtr st = atomic_addition();
      st->leading_comment = d.comment;
      emit_stmt(std::move(st));
      atomic_gradients_.push_back({op.base, op.call->span, d.access.reason});
      break;
    }
    case GradientWrite::PlainStore:
      if (d.access.kind == AccessDecision::Kind::InjectiveAssuming && d.access.assumption)
        emit_stmt(std::make_unique<ExprStmt>(call(
            "tl.device_assert",
            list(std::move(d.access.assumption), std::make_unique<StrLit>(d.access.assumption_message, "")))));
      if (!d.access.layout.empty()) {
        // Whether a box of strides keeps its cells apart only the launch tells (an expanded view, stride 0, does
        // not): the launcher passes the flag, and the store falls back to adding atomically into zeros.
        needs_zeros_.insert(op.base);
        // (Under a runtime if, a store may not run: its elements keep the buffer's zeros whatever the flag.)
        emit_stmt(store_where_apart(
            op.base, "", std::move(d.access.layout),
            std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), name(bx)), kws())), atomic_addition(),
            [](const std::string &flag) {
              return "One program and lane per address where the strides keep the rows apart (" + flag +
                     ", from the launcher); else (an expanded view) the rows' gradients add";
            },
            layout_assumptions_, /*zeros_anyway=*/d.buffer_starts_at_zero));
      } else if (d.how == GradientWrite::PlainStore) {
        emit_stmt(std::make_unique<ExprStmt>(call("tl.store", list(dual(op.pointer), name(bx)), kws())));
      } else {
        emit_stmt(addition_in_place(d.comment));
      }
      break;
    case GradientWrite::AddToEarlier:
      if (!d.access.layout.empty()) {
        // Under the flag, each address is this program's: the gradient adds in place, after a barrier (another
        // thread of the program may have written it); else atomically. The buffer starts at zero either way (or
        // holds the upstream gradient, in place), since the additions need what is there.
        needs_zeros_.insert(op.base);
        StmtPtr in_place = addition_in_place(d.comment);
        emit_stmt(store_where_apart(
            op.base, "", std::move(d.access.layout), std::move(in_place), atomic_addition(),
            [](const std::string &flag) {
              return "One program and lane per address where the strides keep the rows apart (" + flag +
                     ", from the launcher): added in place; else (an expanded view) added atomically";
            },
            layout_assumptions_, /*zeros_anyway=*/true));
        break;
      }
      if (d.access.kind == AccessDecision::Kind::InjectiveAssuming && d.access.assumption)
        emit_stmt(std::make_unique<ExprStmt>(call(
            "tl.device_assert",
            list(std::move(d.access.assumption), std::make_unique<StrLit>(d.access.assumption_message, "")))));
      emit_stmt(addition_in_place(d.comment));
      break;
  }
  explanations.push_back(where + "a " + d.what + ": " + d.access.reason);
}

}  // namespace tgrad::ad::reverse
