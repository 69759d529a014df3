// How loops are reversed: additive accumulators and inverted updates
// without tapes, other carried values replayed or taped per iteration.
#include "src/ad/LoopInversion.h"
#include "src/ad/reverse/Engine.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {

void Engine::sweep_loop(const For &f, const AccessAnalysis &access, std::vector<std::string> &explanations) {
  std::map<std::string, int> read_count;
  count_reads(f.body, read_count);
  std::vector<std::string> additive_here;
  bool general = false;  // a carried value that is neither additive nor inactive: the loop runs in reverse
  for (const LoopCarried &c : anf_.carried.at(&f)) {
    if (!active_.count(c.name) || !useful_.count(c.name)) continue;
    const Assign *copy = top_level_assignment(f.body, c.name);
    auto *u = copy ? dyn_cast<Name>(copy->value.get()) : nullptr;
    const Assign *update = u ? top_level_assignment(f.body, u->id) : nullptr;
    bool additive = false;
    if (update && read_count[c.name] == 1 && read_count[u->id] == 1) {
      auto is_carried = [&](const Expr *e) { return e && isa<Name>(e) && cast<Name>(e)->id == c.name; };
      if (auto *b = dyn_cast<BinOp>(update->value.get())) {
        additive = (b->op == BinaryOpKind::Add && (is_carried(b->lhs.get()) != is_carried(b->rhs.get()))) ||
                   (b->op == BinaryOpKind::Sub && is_carried(b->lhs.get()) && !is_carried(b->rhs.get()));
      } else if (auto *cl = dyn_cast<Call>(update->value.get())) {
        const SType *ft = anf_types_.type_of(cl->func.get());
        additive = ft && ft->kind == SType::Kind::Builtin && ft->s == "tl.dot" && is_carried(call_argument(*cl, 2, "acc")) &&
                   !is_carried(call_argument(*cl, 0, "input")) && !is_carried(call_argument(*cl, 1, "other"));
      }
    }
    if (!additive) {
      general = true;
      continue;
    }
    additive_update_[u->id] = c.name;
    carried_update_copy_.insert(copy);
    frozen_.insert(c.name);
    additive_here.push_back(c.name);
  }
  if (general) {
    sweep_taped_loop(f, access, explanations, std::set<std::string>(additive_here.begin(), additive_here.end()));
    for (const std::string &c : additive_here) frozen_.erase(c);
    return;
  }
  begin_block(anf_.origin_of(&f));
  prepare_outer_adjoints(f.body);

  StmtList adjoint = sweep_nested(f.body, access, explanations);
  for (const std::string &c : additive_here) frozen_.erase(c);

  // Carried values start each replay from their incoming values.
  auto it = init_copy_.find(&f);
  if (it != init_copy_.end())
    for (const Stmt *s : it->second) replay_stmt(*s, *out_);
  // The iteration's primal values, its adjoints, then the carried values
  // move on to the next iteration (pointers advance after their use).
  std::set<std::string> carried_names;
  for (const LoopCarried &c : anf_.carried.at(&f)) carried_names.insert(c.name);
  auto loop = std::make_unique<For>(clone(*f.target), clone(*f.iter), StmtList{}, f.span);
  std::vector<const Stmt *> moves;
  for (const StmtPtr &s : f.body)
    if (carried_names.count(assigned_name(*s))) moves.push_back(s.get());
    else replay_stmt(*s, loop->body);
  for (StmtPtr &s : adjoint) loop->body.push_back(std::move(s));
  for (const Stmt *s : moves) replay_stmt(*s, loop->body);
  emit_stmt(std::move(loop));
}

void Engine::drop_unread_tapes(Function &bwd, Backward &result) {
  std::set<std::string> scratches;
  for (const Backward::Tape &t : result.tapes) scratches.insert(t.scratch);
  if (scratches.empty()) return;
  const std::set<std::string> read = names_accessed_by(bwd.body, "tl.load");
  std::set<std::string> unread;
  for (const std::string &t : scratches)
    if (!read.count(t)) unread.insert(t);
  if (unread.empty()) return;
  erase_tape_writes(bwd.body, unread);
  for (std::string &e : result.explanations)
    for (const std::string &t : unread) {
      const size_t at = e.find("' is taped to '" + t + "'");
      if (at != std::string::npos) e = e.substr(0, at) + "' needs no tape: no adjoint of the reversed loop reads it";
    }
  std::vector<Backward::Tape> kept;
  for (const Backward::Tape &t : result.tapes)
    if (!unread.count(t.scratch)) kept.push_back(t);
  std::set<std::string> untaped_trips;  // bounds of loops left with no tape
  for (const Backward::Tape &t : result.tapes)
    if (std::none_of(kept.begin(), kept.end(), [&](const Backward::Tape &k) { return k.trips_param == t.trips_param; }))
      untaped_trips.insert(t.trips_param);
  result.tapes = std::move(kept);
  bwd.params.erase(std::remove_if(bwd.params.begin(), bwd.params.end(),
                                  [&](const Param &p) { return unread.count(p.name) || untaped_trips.count(p.name); }),
                   bwd.params.end());
  remove_dead_code(bwd.body);
  retitle_untaped_loops(bwd.body, untaped_trips);
}

void Engine::retitle_untaped_loops(StmtList &block, const std::set<std::string> &untaped_trips) {
  auto is_barrier = [&](size_t k) {
    auto *e = k < block.size() ? dyn_cast<ExprStmt>(block[k].get()) : nullptr;
    return e && emit::print_expr(*e->value) == "tl.debug_barrier()";
  };
  for (size_t k = block.size(); k-- > 0;) {
    Stmt &s = *block[k];
    if (s.leading_comment == kTapeRowComment) s.leading_comment = kTripCountComment;
    auto *f = dyn_cast<For>(&s);
    if (f && !f->body.empty()) {
      for (const std::string &trips : untaped_trips) {
        std::string &c = f->body[0]->leading_comment;
        if (c != taped_reversal_comment(trips)) continue;
        c = kReversalComment;
        // The barriers around the reversed loop ordered the tapes' writes and reads.
        if (is_barrier(k + 1)) block.erase(block.begin() + static_cast<long>(k + 1));
        if (k > 0 && is_barrier(k - 1)) {
          block.erase(block.begin() + static_cast<long>(k - 1));
          --k;
          f = dyn_cast<For>(block[k].get());
        }
        break;
      }
    }
    if (f) retitle_untaped_loops(f->body, untaped_trips);
    if (auto *i = dyn_cast<If>(block[k].get())) {
      retitle_untaped_loops(i->body, untaped_trips);
      retitle_untaped_loops(i->orelse, untaped_trips);
    }
  }
}

std::optional<std::string> Engine::induction_step(const For &f, const LoopCarried &c) {
  std::map<std::string, int> assigned;
  stmt_assignments(f, assigned);  // the loop variable too: `p += i * B` steps by a changing amount
  const Assign *copy = top_level_assignment(f.body, c.name);
  auto *next = copy ? dyn_cast<Name>(copy->value.get()) : nullptr;
  if (!next || assigned[c.name] != 1 || assigned[next->id] != 1) return std::nullopt;
  const Assign *update = top_level_assignment(f.body, next->id);
  auto *sum = update ? dyn_cast<BinOp>(update->value.get()) : nullptr;
  if (!sum || (sum->op != BinaryOpKind::Add && sum->op != BinaryOpKind::Sub)) return std::nullopt;
  auto *self = dyn_cast<Name>(sum->lhs.get());
  if (!self || self->id != c.name) return std::nullopt;
  const SType *t = type_of_name(c.name);
  const bool integer_or_pointer = t && (t->kind == SType::Kind::Int ||
                                        (t->is_tensor() && (t->elem.is_pointer || !sema::is_float(t->elem.dtype))));
  if (!integer_or_pointer) return std::nullopt;
  std::optional<ExprPtr> delta = loop_invariant(*sum->rhs, f.body, assigned, 0);
  if (!delta) return std::nullopt;
  const bool compound = isa<BinOp>(delta->get()) || isa<UnaryOp>(delta->get());
  const std::string text = emit::print_expr(**delta);
  if (sum->op == BinaryOpKind::Sub) return "-" + (compound ? "(" + text + ")" : text);
  return compound ? "(" + text + ")" : text;
}

std::optional<ExprPtr> Engine::loop_invariant(const Expr &e, const StmtList &body, std::map<std::string, int> &assigned,
                                              int depth) {
  if (depth > 16) return std::nullopt;
  if (isa<IntLit>(&e)) return clone(e);
  if (auto *n = dyn_cast<Name>(&e)) {
    if (!assigned.count(n->id)) return clone(e);
    const Assign *def = assigned[n->id] == 1 ? top_level_assignment(body, n->id) : nullptr;
    if (!def) return std::nullopt;
    return loop_invariant(*def->value, body, assigned, depth + 1);
  }
  if (auto *b = dyn_cast<BinOp>(&e)) {
    if (b->op != BinaryOpKind::Add && b->op != BinaryOpKind::Sub && b->op != BinaryOpKind::Mul) return std::nullopt;
    std::optional<ExprPtr> l = loop_invariant(*b->lhs, body, assigned, depth + 1);
    if (!l) return std::nullopt;
    std::optional<ExprPtr> r = loop_invariant(*b->rhs, body, assigned, depth + 1);
    if (!r) return std::nullopt;
    return ExprPtr(std::make_unique<BinOp>(b->op, std::move(*l), std::move(*r)));
  }
  // (`not REVERSE` too: the condition of fla's `(-1 if not REVERSE else 1)`.)
  if (auto *u = dyn_cast<UnaryOp>(&e); u && (u->op == UnaryOpKind::Neg || u->op == UnaryOpKind::Not)) {
    std::optional<ExprPtr> x = loop_invariant(*u->operand, body, assigned, depth + 1);
    if (!x) return std::nullopt;
    return ExprPtr(std::make_unique<UnaryOp>(u->op, std::move(*x)));
  }
  // `(-1 if REVERSE else 1)` on a tl.constexpr (fla's recurrent kernels): known when Triton compiles.
  if (auto *i = dyn_cast<IfExp>(&e)) {
    const SType *c = anf_types_.type_of(i->cond.get());
    if (!c || c->is_tensor()) return std::nullopt;
    std::optional<ExprPtr> cond = loop_invariant(*i->cond, body, assigned, depth + 1);
    std::optional<ExprPtr> a = cond ? loop_invariant(*i->then_value, body, assigned, depth + 1) : std::nullopt;
    std::optional<ExprPtr> b = a ? loop_invariant(*i->else_value, body, assigned, depth + 1) : std::nullopt;
    if (!b) return std::nullopt;
    return ExprPtr(std::make_unique<IfExp>(std::move(*cond), std::move(*a), std::move(*b)));
  }
  if (isa<BoolLit>(&e)) return clone(e);
  return std::nullopt;
}

bool Engine::counts_programs(const Expr &e, int depth, std::vector<std::string> &factors) const {
  if (depth > 8) return false;
  if (auto *n = dyn_cast<Name>(&e)) {
    auto it = defs_of_.find(n->id);
    return it != defs_of_.end() && it->second.size() == 1 &&
           counts_programs(*it->second[0]->value, depth + 1, factors);
  }
  if (auto *c = dyn_cast<Call>(&e)) {
    if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && attr->attr == "to")
      return counts_programs(*attr->value, depth + 1, factors);
    return emit::print_expr(*c->func) == "tl.num_programs";
  }
  if (auto *b = dyn_cast<BinOp>(&e); b && b->op == BinaryOpKind::Mul) {
    auto positive = [&](const Expr &x) {
      if (isa<IntLit>(&x)) return cast<IntLit>(&x)->value > 0;
      const SType *t = anf_types_.type_of(&x);
      if (!t || t->kind != SType::Kind::Int) return false;  // a number known when Triton compiles
      if (t->known) return t->n > 0;
      factors.push_back(emit::print_expr(x));
      return true;
    };
    return (counts_programs(*b->lhs, depth + 1, factors) &&
            (positive(*b->rhs) || counts_programs(*b->rhs, depth + 1, factors))) ||
           (positive(*b->lhs) && counts_programs(*b->rhs, depth + 1, factors));
  }
  return false;
}

void Engine::sweep_taped_loop(const For &f, const AccessAnalysis &access, std::vector<std::string> &explanations,
                              const std::set<std::string> &additive) {
  const Stmt *origin = anf_.origin_of(&f);
  const SourceSpan where = origin ? origin->span : f.span;
  auto *range = dyn_cast<Call>(f.iter.get());
  if (!range || range->args.empty() || range->args.size() > 3)
    fail(where, "tgrad reverses this loop by taping its carried values and needs range(start, stop, step) bounds");
  TapedLoop L;
  std::vector<std::string> b;
  // Bounds go into the trip count and the iteration's index as text
  // (`stop - start`): a compound one needs its parentheses there
  // (`range(16 + 2, n)` counts n - (16 + 2) iterations).
  for (const ExprPtr &a : range->args) b.push_back(emit::print_operand(*a));
  L.start = b.size() == 1 ? "0" : b[0];
  L.stop = b.size() == 1 ? b[0] : b[1];
  L.step = b.size() == 3 ? b[2] : "1";
  if (b.size() == 3) {
    const SType *t = anf_types_.type_of(range->args[2].get());
    const bool known = t && t->kind == SType::Kind::Int && t->known;
    if (known && t->n == 0) fail(where, "range() step must not be zero");
    L.negative_step = known && t->n < 0;  // a loop that counts down (a backward recurrence over chunks)
    // A grid-stride loop (`range(pid, n, tl.num_programs(0))`) steps by a
    // count of programs: known at launch, and positive.
    const bool programs = counts_programs(*range->args[2], 0, L.positive_factors);
    if (!programs) L.positive_factors.clear();
    if (!known && !programs && !(t && t->kind == SType::Kind::Int))
      fail(where, "tgrad reverses this loop by taping its carried values and needs its step known before the "
                  "kernel runs (a literal, a tl.constexpr or tl.num_programs), to count its iterations");
    L.assert_step = !known && !programs;
  }
  std::map<std::string, int> read_count;
  count_reads(f.body, read_count);
  InversionContext context;
  context.definition = [this](const std::string &n) -> const Assign * {
    auto it = defs_of_.find(n);
    return it != defs_of_.end() && it->second.size() == 1 ? it->second[0] : nullptr;
  };
  context.builtin = [this](const Call &c) -> std::string {
    const SType *t = anf_types_.type_of(c.func.get());
    return t && t->kind == SType::Kind::Builtin ? t->s : "";
  };
  context.type_of = [this](const std::string &n) { return type_of_name(n); };
  context.active = [this](const std::string &n) { return active_.count(n) > 0; };
  std::map<std::string, InvertibleUpdate> inverted = find_invertible_updates(f, anf_.carried.at(&f), context);
  const std::string carried_prefix = "line " + std::to_string(where.begin.line) + ": the loop's carried '";
  // Carried values stepped by a loop-invariant amount, and the step.
  std::vector<std::pair<LoopCarried, std::string>> inductions;
  std::vector<std::string> copies_of;  // carried values whose end-of-body copies carry an adjoint
  for (const LoopCarried &c : anf_.carried.at(&f)) {
    if (additive.count(c.name)) continue;
    if (active_.count(c.name) && useful_.count(c.name)) copies_of.push_back(c.name);
    if (read_count[c.name] == 0) {
      inverted.erase(c.name);
      continue;  // each iteration overwrites it: nothing to restore
    }
    if (auto inv = inverted.find(c.name); inv != inverted.end() && inv->second.unneeded) {
      explanations.push_back(carried_prefix + user_name(c.name) +
                             "' needs neither a tape nor an inversion: its update is linear in it with a coefficient (" +
                             user_name(inv->second.scale) + ") that carries no gradient, so the backward never reads it");
      continue;
    }
    if (auto inv = inverted.find(c.name); inv != inverted.end()) {
      explanations.push_back(carried_prefix + user_name(c.name) +
                             "' is recovered in the reversed loop by inverting its update (" + user_name(c.name) + " = (" + user_name(c.name) + "' - ...) / " +
                             user_name(inv->second.scale) + ", " + user_name(inv->second.exponential) +
                             " an exponential), not taped");
      continue;
    }
    if (std::optional<std::string> step = induction_step(f, c)) {
      explanations.push_back(carried_prefix + user_name(c.name) + "' steps by " + *step +
                             " each iteration: the reversed loop computes it from the iteration number, not a tape");
      inductions.push_back({c, *step});
      continue;
    }
    const SType *t = type_of_name(c.name);
    // None stays None in every iteration (`b_dg = ... if USE_GATE else
    // None`, updated only under `if USE_GATE:`): nothing to restore.
    if (t && t->kind == SType::Kind::None) continue;
    // Integers carried beside the floats (an argmax index, a column offset
    // reassigned in the body) go to a tape of their own type; pointers do not.
    const bool integer = t && t->is_tensor() && !t->elem.is_pointer && !sema::is_float(t->elem.dtype);
    if (!is_float_tensor(t) && !integer)
      fail(where, "this loop carries '" + user_name(c.name) + "' (" + (t ? t->str() : std::string("?")) +
                      ") besides values tgrad must tape to reverse the loop; tgrad tapes numbers only, not "
                      "pointers: compute '" + user_name(c.name) + "' from the loop variable instead");
    TapedValue v;
    v.carried = c.name;
    v.scratch = names_.fresh(user_name(c.name) + "_tape");
    Backward::Tape tape;
    tape.scratch = v.scratch;
    tape.value = user_name(c.name);
    // Each dimension a number, a tl.constexpr parameter or a product of
    // those (`BK * BK`, fla's based attention); the protocol sizes the
    // tape by the factors.
    std::vector<std::string> dims, factors;
    for (const sema::Dim &d : t->shape) {
      const std::string text = d.str();
      std::vector<std::string> parts;
      bool ok = !text.empty();
      for (size_t at = 0; ok && at <= text.size();) {
        size_t star = text.find('*', at);
        if (star == std::string::npos) star = text.size();
        std::string part = text.substr(at, star - at);
        part.erase(0, part.find_first_not_of(' '));
        part.erase(part.find_last_not_of(' ') + 1);
        bool identifier = !part.empty() && (std::isalpha(static_cast<unsigned char>(part[0])) || part[0] == '_');
        for (char ch : part) identifier &= std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
        const bool number = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
        ok = identifier || number;
        parts.push_back(part);
        at = star + 1;
      }
      if (!d.value && !ok)
        fail(where, "tgrad cannot size the tape of '" + tape.value + "': its shape " + sema::shape_str(t->shape) +
                        " has a dimension that is neither a number nor a product of tl.constexpr parameters");
      dims.push_back(text);
      if (d.value) factors.push_back(text);
      else factors.insert(factors.end(), parts.begin(), parts.end());
    }
    if (dims.size() > 2)
      fail(where, "tgrad tapes values of up to two dimensions; '" + tape.value + "' has " + std::to_string(dims.size()));
    tape.tile_shape = factors;
    v.numel = dims.empty() ? "1" : dims.size() == 1 ? dims[0] : dims[0] + " * " + dims[1];
    const std::string row_length = dims.size() == 2 && dims[1].find('*') != std::string::npos ? "(" + dims[1] + ")"
                                   : dims.size() == 2                                          ? dims[1]
                                                                                               : "";
    v.offsets = dims.empty()      ? "0"
                : dims.size() == 1 ? "tl.arange(0, " + dims[0] + ")"
                                   : "tl.arange(0, " + dims[0] + ")[:, None] * " + row_length + " + tl.arange(0, " +
                                         dims[1] + ")[None, :]";
    if (integer) {
      using sema::DType;
      const DType e = t->elem.dtype;
      const DType stored = e == DType::Int1                            ? DType::Int8
                           : e == DType::Int64 || e == DType::UInt64 ? DType::Int64
                                                                      : DType::Int32;
      tape.dtype = stored;
      v.integer = true;
      if (e != stored) v.cast = std::string(".to(tl.") + sema::tl_name(e) + ")";
    } else if (t->elem.dtype != sema::DType::FP32) {
      v.cast = std::string(".to(tl.") + sema::tl_name(t->elem.dtype) + ")";
    }
    tape.loop_line = where.begin.line;
    tape.loop_column = where.begin.column;
    auto *user_for = origin ? dyn_cast<For>(origin) : nullptr;
    tape.loop_range = emit::print_expr(user_for ? *user_for->iter : *f.iter);
    explanations.push_back(carried_prefix + tape.value + "' is taped to '" + v.scratch +
                           "' (tgrad inverts only updates c * s + t whose s is an exponential; others lose the "
                           "incoming value)");
    L.values.push_back(v);
    tapes_.push_back(tape);
  }
  L.trips_param = names_.fresh("tape_trips");
  for (size_t k = tapes_.size() - L.values.size(); k < tapes_.size(); ++k) tapes_[k].trips_param = L.trips_param;
  L.row = names_.fresh("tape_row");
  L.trips = names_.fresh("trips");
  L.forward_index = names_.fresh("iteration");
  L.reverse_index = names_.fresh("iteration");
  L.rev = names_.fresh("reversed");

  begin_block(origin);
  prepare_outer_adjoints(f.body);
  for (const std::string &c : copies_of) {
    own_adjoint_variable(c);
    if (const Assign *copy = top_level_assignment(f.body, c)) taped_update_copy_[copy] = c;
  }

  StmtList adjoint = sweep_nested(f.body, access, explanations);

  // The reversed loop: the iteration's incoming values from the tape, its
  // primal values, its adjoints.
  const std::string var = emit::print_expr(*f.target);
  if (!L.values.empty()) {
    StmtList barrier = parse_statements("tl.debug_barrier()");
    barrier[0]->leading_comment = "The forward replay above wrote this program's tapes; the reversed loop reads them.";
    emit_stmt(std::move(barrier[0]));
  }
  // (range(0, n) and range(start, n) read as a person writes them: no `0 +`, no `* 1`)
  const std::string scaled = L.step == "1" ? L.reverse_index : L.reverse_index + " * " + L.step;
  std::string head = L.reverse_index + " = " + L.trips + " - 1 - " + L.rev + "\n" + var + " = " +
                     (L.start == "0" ? scaled : L.start + " + " + scaled) + "\n";
  for (const TapedValue &v : L.values) {
    // A generic backward casts a float back to the type the value has before the loop, whatever the
    // representative (a literal dtype would differ between them).
    const std::string cast = !v.integer && generic() ? ".to(" + v.carried + ".dtype)" : v.cast;
    head += v.carried + " = tl.load(" + tape_address(L, v, L.reverse_index) + ", mask=" + L.reverse_index + " < " +
            L.trips_param + ", other=" + (v.integer ? "0" : "float('nan')") + ")" + cast + "\n";
  }
  // An induction variable from the iteration number; a pointer's gradient mirror steps with it.
  for (const auto &[c, step] : inductions) {
    head += c.name + " = " + c.init + " + " + L.reverse_index + " * (" + step + ")\n";
    auto dual = dual_name_.find(c.name), dual_init = dual_name_.find(c.init);
    if (dual != dual_name_.end() && dual_init == dual_name_.end())
      fail(where, "internal error: the gradient pointer of the loop's carried '" + user_name(c.name) +
                      "' has no value at the loop's entry (please report)");
    if (dual != dual_name_.end())
      head += dual->second + " = " + dual_init->second + " + " + L.reverse_index + " * (" + step + ")\n";
  }
  // An inverted value holds the iteration's outgoing value when it starts
  // (the forward replay's final value in the last iteration).
  for (const auto &[c, u] : inverted)
    if (!u.unneeded) head += u.updated + " = " + c + "\n";
  StmtList body = parse_statements(head);
  body[0]->leading_comment =
      L.values.empty() ? std::string(kReversalComment) : taped_reversal_comment(L.trips_param);
  std::set<std::string> skipped;  // the carried copies, and the inverted updates (their results are known)
  for (const LoopCarried &c : anf_.carried.at(&f)) skipped.insert(c.name);
  for (const auto &[c, u] : inverted) skipped.insert({u.scaled, u.updated});
  for (const StmtPtr &s : f.body)
    if (!skipped.count(assigned_name(*s))) replay_stmt(*s, body);
  if (std::any_of(inverted.begin(), inverted.end(), [](const auto &i) { return !i.second.unneeded; })) {
    std::string code;
    for (const auto &[c, u] : inverted) {
      if (u.unneeded) continue;
      const SType *t = type_of_name(c);
      std::string cast = t && t->elem.dtype != sema::DType::FP32
                             ? std::string(".to(tl.") + sema::tl_name(t->elem.dtype) + ")"
                             : std::string();
      code += inversion_code(u, names_.fresh(user_name(c) + "_quotient"), cast);
    }
    StmtList recover = parse_statements(code);
    recover[0]->leading_comment =
        "The incoming values, recovered by inverting the forward's updates; 0 where the exponential scale is 0 or "
        "subnormal (or the quotient overflows): there the incoming value does not reach the result.";
    for (StmtPtr &s : recover) body.push_back(std::move(s));
  }
  for (StmtPtr &s : adjoint) body.push_back(std::move(s));
  ExprList bounds;
  bounds.push_back(int_lit(0));
  bounds.push_back(name(L.trips));
  emit_stmt(std::make_unique<For>(name(L.rev), call("range", std::move(bounds)), std::move(body), f.span));
  // A later replay of this loop (in an outer loop) must not overwrite the tapes while they are read.
  if (!L.values.empty()) emit_stmt(std::move(parse_statements("tl.debug_barrier()")[0]));
  taped_loops_[&f] = std::move(L);
}

void Engine::replay_taped_loop(const For &f, const TapedLoop &L, StmtList &dst) {
  // Without tapes (every carried value inverted) only the trip count is needed.
  const bool taped = !L.values.empty();
  std::string head = taped ? L.row + " = tl.program_id(0).to(tl.int64) + tl.num_programs(0) * (tl.program_id(1) + "
                                     "tl.num_programs(1) * tl.program_id(2))\n"
                           : std::string();
  if (L.negative_step)
    head += L.trips + " = (" + L.start + " - " + L.stop + " - (" + L.step + ") - 1) // (-(" + L.step + "))\n";
  else if (L.step == "1")  // (range(start, stop): stop - start trips, as a reader writes it)
    head += L.trips + " = " + (L.start == "0" ? L.stop : L.stop + " - (" + L.start + ")") + "\n";
  else
    head += L.trips + " = (" + L.stop + " - " + L.start + " + " + L.step + " - 1) // " + L.step + "\n";
  if (L.assert_step) head += "tl.static_assert(" + L.step + " > 0)\n";
  for (const std::string &f : L.positive_factors) head += "tl.static_assert(" + f + " > 0)\n";
  StmtList pre = parse_statements(head);
  pre[0]->leading_comment = taped ? kTapeRowComment : kTripCountComment;
  for (StmtPtr &s : pre) dst.push_back(std::move(s));
  StmtList body;
  if (taped) {
    std::string var = emit::print_expr(*f.target);
    std::string text = L.forward_index + " = (" + var + " - " + L.start + ") // " + L.step + "\n";
    for (const TapedValue &v : L.values)
      text += "tl.store(" + tape_address(L, v, L.forward_index) + ", " + v.carried + ", mask=" + L.forward_index +
              " < " + L.trips_param + ")\n";
    body = parse_statements(text);
    body[0]->leading_comment = "The iteration's incoming values, for the reversed loop.";
  }
  replay_block(f.body, body);
  dst.push_back(std::make_unique<For>(clone(*f.target), clone(*f.iter), std::move(body), f.span));
}

}  // namespace tgrad::ad::reverse
