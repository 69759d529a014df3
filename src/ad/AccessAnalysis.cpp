#include "src/ad/AccessAnalysis.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <optional>
#include <set>

#include "src/ad/AccessText.h"
#include "src/ad/AnfWalk.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::ad {

using namespace ast;
using namespace access_text;

namespace {
std::string text_of(const Expr &e) {
  if (auto *i = dyn_cast<IntLit>(&e)) return std::to_string(i->value);
  if (auto *n = dyn_cast<Name>(&e)) return n->id;
  return "?";
}
}  // namespace

void AccessAnalysis::collect(const StmtList &block) {
  for (const StmtPtr &s : block) {
    const Expr *target = nullptr, *value = nullptr;
    if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1) {
      target = a->targets[0].get();
      value = a->value.get();
    } else if (auto *an = dyn_cast<AnnAssign>(s.get()); an && an->value) {
      target = an->target.get();  // `WIDTH: tl.constexpr = 2 * HALF`, kept whole by ANF
      value = an->value.get();
    }
    if (value) {
      if (auto *n = dyn_cast<Name>(target)) {
        if (!defs_.emplace(n->id, value).second) redefined_.insert(n->id);
        all_defs_.emplace(n->id, value);
        if (loop_depth_ > 0) in_loops_.insert(n->id);
      }
    } else if (auto *f = dyn_cast<For>(s.get())) {
      auto *var = dyn_cast<Name>(f->target.get());
      auto *range = dyn_cast<Call>(f->iter.get());
      if (var && range && !range->args.empty()) {
        Loop l{"0", text_of(*range->args[0]), "1"};
        if (range->args.size() >= 2) l = {text_of(*range->args[0]), text_of(*range->args[1]), "1"};
        if (range->args.size() == 3) l.step = text_of(*range->args[2]);
        loops_[var->id] = l;
      }
      ++loop_depth_;
      collect(f->body);
      --loop_depth_;
    } else if (auto *i = dyn_cast<If>(s.get())) {
      collect(i->body);
      collect(i->orelse);
    }
  }
}

namespace {

// `x[:, None]` -> 0, `x[None, :]` -> 1: the axis of a 2-D tile a 1-D tile's values vary along; -1 otherwise.
int broadcast_tile_axis(const Subscript &s) {
  if (s.indices.size() != 2) return -1;
  auto whole = [](const Expr &e) {
    auto *sl = dyn_cast<Slice>(&e);
    return sl && !sl->lower && !sl->upper && !sl->step;
  };
  if (whole(*s.indices[0]) && isa<NoneLit>(s.indices[1].get())) return 0;
  if (isa<NoneLit>(s.indices[0].get()) && whole(*s.indices[1])) return 1;
  return -1;
}

std::string builtin_of(const Expr &func) {
  // tl.program_id / tl.arange as written (the ANF keeps the callee's spelling).
  if (auto *a = dyn_cast<Attribute>(&func)) {
    std::string base;
    if (auto *n = dyn_cast<Name>(a->value.get())) base = n->id;
    return base + "." + a->attr;
  }
  return "";
}

// The axis of a tl.program_id call (-1 for an axis not written as a literal);
// nullopt for any other call.
std::optional<int> program_id_axis(const Call &c) {
  if (builtin_of(*c.func) != "tl.program_id") return std::nullopt;
  const Expr *axis = c.args.size() == 1 ? c.args[0].get()
                     : c.args.empty() && c.keywords.size() == 1 ? c.keywords[0].value.get()
                                                                : nullptr;
  auto *literal = axis ? dyn_cast<IntLit>(axis) : nullptr;
  return literal ? static_cast<int>(literal->value) : -1;
}

// `tl.multiple_of(x, 16)`, `tl.max_contiguous(x, BK)`, `tl.max_constancy(x, 4)`:
// hints to Triton's compiler about x's values, which they return unchanged.
// The name of x, or null for any other expression.
const Name *hinted_value(const Expr &e) {
  auto *c = dyn_cast<Call>(&e);
  if (!c || c->args.empty()) return nullptr;
  if (!sema::is_compiler_hint(builtin_of(*c->func))) return nullptr;
  return dyn_cast<Name>(c->args[0].get());
}

}  // namespace

AccessAnalysis::AccessAnalysis(const Function &anf_kernel, const std::map<std::string, sema::SType> &name_types)
    : fn_(anf_kernel), types_(name_types) {
  collect(fn_.body);
  // The program axes the kernel tells apart.
  visit_exprs(fn_.body, [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e))
      if (std::optional<int> axis = program_id_axis(*c)) program_axes_.insert(*axis);
  });
}


std::optional<int> AccessAnalysis::grid_stride_axis(const Loop &loop) const {
  auto axis_of = [&](const std::string &n, const char *builtin) -> std::optional<int> {
    if (redefined_.count(n) || loops_.count(n)) return std::nullopt;
    auto it = defs_.find(n);
    auto *c = it == defs_.end() ? nullptr : dyn_cast<Call>(it->second);
    if (!c || builtin_of(*c->func) != builtin || c->args.size() != 1) return std::nullopt;
    auto *literal = dyn_cast<IntLit>(c->args[0].get());
    if (!literal) return std::nullopt;
    return static_cast<int>(literal->value);
  };
  std::optional<int> start = axis_of(loop.lo, "tl.program_id"), step = axis_of(loop.step, "tl.num_programs");
  if (!start || !step || *start != *step) return std::nullopt;
  return start;
}

bool AccessAnalysis::is_zero(const Expr &e) const {
  if (auto *i = dyn_cast<IntLit>(&e)) return i->value == 0;
  auto *n = dyn_cast<Name>(&e);
  if (!n || redefined_.count(n->id) || loops_.count(n->id)) return false;
  auto it = defs_.find(n->id);
  return it != defs_.end() && is_zero(*it->second);
}

// A scalar whose value comes from parameters and literals through arithmetic only (no program id, no loop
// variable, no load): the same in every program, lane and iteration.
bool AccessAnalysis::from_parameters_only(const std::string &name, int depth) const {
  if (depth > 16 || loops_.count(name) || redefined_.count(name) || in_loops_.count(name)) return false;
  auto t = types_.find(name);
  if (t != types_.end() && !t->second.shape.empty()) return false;
  auto it = defs_.find(name);
  if (it == defs_.end())  // a parameter: a number (a tl.constexpr's type may be its value), not a pointer
    return t == types_.end() || !(t->second.is_tensor() && t->second.elem.is_pointer);
  std::function<bool(const Expr &)> pure = [&](const Expr &e) {
    if (isa<IntLit>(&e)) return true;
    if (auto *n = dyn_cast<Name>(&e)) return from_parameters_only(n->id, depth + 1);
    if (auto *b = dyn_cast<BinOp>(&e)) return pure(*b->lhs) && pure(*b->rhs);
    return false;
  };
  return pure(*it->second);
}

bool AccessAnalysis::never_negative(const Affine &form) const {
  if (!form.valid || form.shifted || form.grid_stride || !form.loops.empty() || !form.radix.empty()) return false;
  const std::set<std::string> constexprs = constexpr_params(fn_);
  auto positive = [&](const std::string &coefficient) {
    for (const std::string &factor : coefficient_factors(coefficient)) {
      std::optional<long long> v = integer_text(factor);
      if (v ? *v <= 0 : !constexprs.count(factor)) return false;
    }
    return true;
  };
  for (const auto &[axis, coefficient] : form.pid)
    if (!positive(coefficient)) return false;
  for (const Term &t : form.lanes)
    if (!positive(t.coefficient)) return false;
  return true;
}

AccessAnalysis::Affine AccessAnalysis::affine(const std::string &name) const {
  Affine none;  // a value the same in every program and lane (a scalar argument, a constant)
  Affine bad;
  bad.valid = false;
  auto loop = loops_.find(name);
  if (loop != loops_.end()) {
    Affine a;
    // `for row in range(tl.program_id(0), n_rows, tl.num_programs(0))`: a
    // grid-stride loop (the Triton tutorial's softmax) gives each row to
    // exactly one program, in one of its iterations, so the row tells the
    // programs apart as a program id would: it stands for one here (the
    // backward runs the same loop on the same grid). Anything else about the
    // iterations (which rows one program visits) stays unknown, which the
    // analyses below treat as every iteration touching the same addresses.
    if (std::optional<int> axis = grid_stride_axis(loop->second)) {
      a.pid[*axis] = "1";
      a.grid_stride = true;
      a.grid_stride_var = name;
      return a;
    }
    a.loops.push_back({name, "1"});
    return a;
  }
  if (redefined_.count(name)) {  // a loop-carried value: its iterations are not analysed, but for an induction
    if (std::optional<Affine> ind = general_ ? integer_induction(name) : std::nullopt) return *ind;
    return bad;
  }
  auto it = defs_.find(name);
  if (it == defs_.end()) return none;  // a parameter
  const Expr &v = *it->second;
  switch (v.kind) {
    case NodeKind::Name: return affine(cast<Name>(&v)->id);
    case NodeKind::IntLit: return none;
    case NodeKind::Subscript: {  // x[:, None]: the same values, another shape
      auto *s = cast<Subscript>(&v);
      auto *n = dyn_cast<Name>(s->value.get());
      if (!n) return bad;
      Affine a = affine(n->id);
      if (general_ && a.valid && !a.lanes.empty()) {
        // Which axis of the 2-D tile the 1-D tile's lanes now vary along.
        const int axis = broadcast_tile_axis(*s);
        auto t = types_.find(n->id);
        if (axis < 0 || t == types_.end() || t->second.shape.size() != 1) return bad;
        for (Term &lane : a.lanes) lane.tile_axis = axis;
      }
      return a;
    }
    case NodeKind::Call: {
      if (const Name *hinted = hinted_value(v)) return affine(hinted->id);
      auto *c = cast<Call>(&v);
      std::string f = builtin_of(*c->func);
      if (std::optional<int> axis = program_id_axis(*c); axis && *axis >= 0) {
        Affine a;
        a.pid[*axis] = "1";
        return a;
      }
      if (f == "tl.arange") {
        Affine a;
        Term t{"1", 0, "", false, emit::print_expr(v)};
        auto ty = types_.find(name);
        if (ty != types_.end() && ty->second.is_tensor() && ty->second.shape.size() == 1) {
          const sema::Dim &d = ty->second.shape[0];
          if (d.value) t.extent = *d.value;
          else t.extent_symbol = dimension_text(d.symbol).value_or(d.symbol);  // "2 * HALF" as "2*HALF"
        }
        if (c->args.size() == 2)
          if (auto *start = dyn_cast<IntLit>(c->args[0].get()); !start || start->value != 0) return bad;
        // tl.arange(0, 1) is the offset 0 (a descriptor's block [1, BLOCK] at [row, 0] lowers to it).
        if (t.extent == 1) return none;
        a.lanes.push_back(t);
        return a;
      }
      // x.to(tl.int64): a cast keeps the form.
      if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && attr->attr == "to")
        if (auto *n = dyn_cast<Name>(attr->value.get())) return affine(n->id);
      return bad;
    }
    case NodeKind::BinOp: {
      auto *b = cast<BinOp>(&v);
      auto operand = [&](const Expr &e) -> Affine {
        if (auto *n = dyn_cast<Name>(&e)) {
          Affine a = affine(n->id);
          // A number computed from parameters only (`half = HEAD_DIM // 2`): the same in every program and lane.
          if (!a.valid && b->op == BinaryOpKind::Add && from_parameters_only(n->id)) return none;
          return a;
        }
        if (isa<IntLit>(&e)) return none;
        // `(2 * HALF)`, `(D // 2)` written inline: a number the same everywhere, where its names are parameters.
        if (std::optional<std::string> t = scalar_text(e)) {
          std::set<std::string> names;
          reads(e, names);
          if (std::all_of(names.begin(), names.end(), [&](const std::string &n) { return from_parameters_only(n); }))
            return none;
        }
        return bad;
      };
      Affine l = operand(*b->lhs), r = operand(*b->rhs);
      if (!l.valid || !r.valid) return bad;
      auto uniform = [](const Affine &a) {
        return a.pid.empty() && a.lanes.empty() && a.loops.empty() && a.radix.empty();
      };
      // `i % B` where the flush keeps only lanes with i < B (in_bounds_), i a block of programs or lanes: i.
      if (b->op == BinaryOpKind::Mod && !in_bounds_.empty()) {
        auto *i = dyn_cast<Name>(b->lhs.get());
        std::optional<std::string> divisor = scalar_text(*b->rhs);
        if (i && divisor && in_bounds_.count({i->id, *divisor}) && never_negative(l)) return l;
      }
      // Layout analysis: `pid // D` and `pid % D` of a program id and a number the same everywhere.
      if (general_ && (b->op == BinaryOpKind::FloorDiv || b->op == BinaryOpKind::Mod)) {
        std::optional<std::string> divisor = scalar_text(*b->rhs);
        const bool pure_pid = l.pid.size() == 1 && l.pid.begin()->second == "1" && l.lanes.empty() &&
                              l.loops.empty() && l.radix.empty() && !l.shifted && !l.grid_stride;
        if (!pure_pid || !uniform(r) || !divisor) return bad;
        Affine out;
        out.radix.push_back({l.pid.begin()->first, resolve_copy(*divisor), b->op == BinaryOpKind::Mod, "1"});
        return out;
      }
      if (b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Sub) {
        if (b->op == BinaryOpKind::Sub && !uniform(r)) return bad;  // subtracting lanes: not analysed
        Affine out = l;
        out.grid_stride = l.grid_stride || r.grid_stride;
        out.grid_stride_var = l.grid_stride ? l.grid_stride_var : r.grid_stride_var;
        // Adding zero (`cols = start + tl.arange(...)` with `start = 0`, a loop run once) shifts nothing.
        out.shifted = l.shifted || r.shifted || (uniform(l) && !is_zero(*b->lhs)) || (uniform(r) && !is_zero(*b->rhs));
        out.shift_names = l.shift_names;
        out.shift_names.insert(out.shift_names.end(), r.shift_names.begin(), r.shift_names.end());
        for (const auto &[side, form] : {std::pair<const Expr *, const Affine *>{b->lhs.get(), &l}, {b->rhs.get(), &r}})
          if (uniform(*form) && !is_zero(*side)) {
            std::optional<std::string> t = scalar_text(*side);
            out.shift_names.push_back(b->op == BinaryOpKind::Add && t ? resolve_copy(*t) : "?");
          }
        for (const auto &kv : r.pid) {
          if (out.pid.count(kv.first)) return bad;  // pid * a + pid * b: not analysed
          out.pid[kv.first] = kv.second;
        }
        out.lanes.insert(out.lanes.end(), r.lanes.begin(), r.lanes.end());
        out.loops.insert(out.loops.end(), r.loops.begin(), r.loops.end());
        out.radix.insert(out.radix.end(), r.radix.begin(), r.radix.end());
        return out;
      }
      if (b->op == BinaryOpKind::Mul) {
        const bool lu = uniform(l), ru = uniform(r);
        if (lu && ru) return none;
        const Affine &varying = lu ? r : l;
        const Expr &factor = lu ? *b->lhs : *b->rhs;
        std::optional<std::string> k = scalar_text(factor);
        if (k) k = resolve_copy(*k);
        if (!k || (lu == ru)) return bad;
        Affine out = varying;
        if (out.shifted) out.shift_names = {"?"};  // k * (v + s): not tracked
        // (Layout analysis multiplies coefficients: `(pid * B + lanes) * stride`; the others take one factor.)
        auto scale = [&](std::string &coefficient) {
          if (general_) coefficient = multiply_coefficients(coefficient, *k);
          else if (coefficient != "1") return false;
          else coefficient = *k;
          return true;
        };
        for (auto &kv : out.pid)
          if (!scale(kv.second)) return bad;
        for (Term &t : out.lanes)
          if (!scale(t.coefficient)) return bad;
        for (LoopTerm &t : out.loops)
          if (!scale(t.coefficient)) return bad;
        for (RadixTerm &t : out.radix)
          if (!scale(t.coefficient)) return bad;
        return out;
      }
      return bad;
    }
    default: return bad;
  }
}

std::string AccessAnalysis::base_of(const std::string &pointer) const {
  std::set<std::string> bases, visiting;
  std::function<void(const std::string &)> walk = [&](const std::string &p) {
    for (const Param &param : fn_.params)
      if (param.name == p) {
        bases.insert(p);
        return;
      }
    if (!visiting.insert(p).second) return;  // around a loop: the other definitions decide
    auto range = all_defs_.equal_range(p);
    if (range.first == range.second) bases.insert("");
    for (auto it = range.first; it != range.second; ++it) {
      const Expr &v = *it->second;
      if (auto *n = dyn_cast<Name>(&v)) {
        walk(n->id);
        continue;
      }
      if (const Name *hinted = hinted_value(v)) {
        walk(hinted->id);
        continue;
      }
      // `w_base[None, :]`: the same pointers in another shape (mamba's causal conv).
      if (auto *s = dyn_cast<Subscript>(&v))
        if (auto *n = dyn_cast<Name>(s->value.get())) {
          walk(n->id);
          continue;
        }
      std::string found;
      if (auto *b = dyn_cast<BinOp>(&v); b && (b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Sub))
        for (const Expr *side : {b->lhs.get(), b->rhs.get()})
          if (auto *n = dyn_cast<Name>(side)) {
            auto ty = types_.find(n->id);
            if (ty != types_.end() && ty->second.is_tensor() && ty->second.elem.is_pointer) found = n->id;
          }
      if (found.empty()) bases.insert("");
      else walk(found);
    }
  };
  walk(pointer);
  // One base on every path, or none known.
  return bases.size() == 1 ? *bases.begin() : "";
}

AccessAnalysis::Offset AccessAnalysis::offset_of(const std::string &pointer, bool one_program) const {
  Offset out;
  // The non-pointer operands along the chain from the base.
  std::string at = pointer;
  while (true) {
    if (redefined_.count(at)) {
      if (std::optional<Induction> ind = general_ ? induction(at) : std::nullopt) {
        out.form.loops.push_back(ind->term);
        at = ind->start;
        continue;
      }
      out.why = "the pointer is advanced by a loop or chosen by an if: its addresses are not analysed";
      return out;
    }
    auto it = defs_.find(at);
    if (it == defs_.end()) break;  // reached the base parameter
    const Expr &v = *it->second;
      if (auto *n = dyn_cast<Name>(&v)) {
      at = n->id;
      continue;
    }
    if (const Name *hinted = hinted_value(v)) {
      at = hinted->id;
      continue;
    }
    auto *b = dyn_cast<BinOp>(&v);
    if (!b || b->op != BinaryOpKind::Add) {
      out.why = "the pointer is not a base plus offsets";
      return out;
    }
    const Name *ptr_side = nullptr;
    const Expr *off_side = nullptr;
    for (auto [p, o] : {std::pair<const Expr *, const Expr *>{b->lhs.get(), b->rhs.get()}, {b->rhs.get(), b->lhs.get()}}) {
      auto *n = dyn_cast<Name>(p);
      auto ty = n ? types_.find(n->id) : types_.end();
      if (n && ty != types_.end() && ty->second.is_tensor() && ty->second.elem.is_pointer) {
        ptr_side = n;
        off_side = o;
        break;
      }
    }
    if (!ptr_side) {
      out.why = "the pointer's origin is not traced";
      return out;
    }
    // Within one program, a scalar computed before any loop is a constant,
    // whatever it is computed from (`(pid // seq_len) * stride`).
    if (one_program && isa<Name>(off_side)) {
      const std::string &n = cast<Name>(off_side)->id;
      auto ty = types_.find(n);
      if (ty != types_.end() && ty->second.shape.empty() && !in_loops_.count(n) && !redefined_.count(n)) {
        out.uniform_parts.push_back(n);
        at = ptr_side->id;
        continue;
      }
    }
    Affine o = isa<Name>(off_side) ? affine(cast<Name>(off_side)->id) : Affine();
    // The part the same in every program and lane is not in the affine form:
    // the key names it (an SSA name or a literal), or, where a shift is
    // buried inside the form, makes the key this pointer's own.
    if (o.valid && o.pid.empty() && o.lanes.empty() && o.loops.empty())
      out.uniform_parts.push_back(isa<Name>(off_side)              ? cast<Name>(off_side)->id
                                  : scalar_text(*off_side).has_value() ? *scalar_text(*off_side)  // "HEAD_DIM//2"
                                                                       : emit::print_expr(*off_side));
    else if (o.shifted)
      out.untracked_shift = true;
    if (!o.valid) {
      out.why = "the offset is not affine in the program ids and tl.arange lanes";
      return out;
    }
    for (const auto &kv : o.pid) {
      if (out.form.pid.count(kv.first)) {
        out.why = "a program id appears twice in the offset";
        return out;
      }
      out.form.pid[kv.first] = kv.second;
    }
    if (o.grid_stride) out.form.grid_stride_var = o.grid_stride_var;
    out.form.grid_stride |= o.grid_stride;
    out.form.lanes.insert(out.form.lanes.end(), o.lanes.begin(), o.lanes.end());
    out.form.loops.insert(out.form.loops.end(), o.loops.begin(), o.loops.end());
    out.form.radix.insert(out.form.radix.end(), o.radix.begin(), o.radix.end());
    at = ptr_side->id;
  }
  return out;
}

std::optional<std::string> AccessAnalysis::product_of_parameters(const std::string &name, int depth) const {
  if (depth > 8 || redefined_.count(name) || loops_.count(name)) return std::nullopt;
  auto it = defs_.find(name);
  if (it == defs_.end()) {
    auto t = types_.find(name);
    const bool parameter = std::any_of(fn_.params.begin(), fn_.params.end(), [&](const Param &p) { return p.name == name; });
    if (!parameter || (t != types_.end() && (!t->second.shape.empty() || t->second.elem.is_pointer))) return std::nullopt;
    return name;
  }
  auto *b = dyn_cast<BinOp>(it->second);
  if (!b || b->op != BinaryOpKind::Mul) return std::nullopt;
  auto factor = [&](const Expr &e) -> std::optional<std::string> {
    if (auto *i = dyn_cast<IntLit>(&e)) return std::to_string(i->value);
    if (auto *n = dyn_cast<Name>(&e)) return product_of_parameters(n->id, depth + 1);
    return std::nullopt;
  };
  std::optional<std::string> l = factor(*b->lhs), r = factor(*b->rhs);
  if (!l || !r) return std::nullopt;
  return multiply_coefficients(*l, *r);
}

std::optional<AccessAnalysis::Advanced> AccessAnalysis::advanced_by_loop(const std::string &x) const {
  auto range = all_defs_.equal_range(x);
  if (std::distance(range.first, range.second) != 2) return std::nullopt;
  // `x = start` at the top level, then a top-level `for v in range(...)` whose body assigns x once.
  const Assign *init = nullptr, *update = nullptr;
  const For *loop = nullptr;
  size_t update_at = 0;
  for (const StmtPtr &s : fn_.body) {
    if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && is_name(a->targets[0].get(), x)) {
      if (init || loop) return std::nullopt;
      init = a;
    }
    auto *f = dyn_cast<For>(s.get());
    if (!f || !init) continue;
    for (size_t k = 0; k < f->body.size(); ++k)
      if (auto *a = dyn_cast<Assign>(f->body[k].get()); a && a->targets.size() == 1 && is_name(a->targets[0].get(), x)) {
        if (loop) return std::nullopt;
        loop = f;
        update = a;
        update_at = k;
      }
  }
  auto *start = init ? dyn_cast<Name>(init->value.get()) : nullptr;
  auto *var = loop ? dyn_cast<Name>(loop->target.get()) : nullptr;
  auto l = var ? loops_.find(var->id) : loops_.end();
  if (!start || l == loops_.end()) return std::nullopt;
  // The update is the iteration's last read or write of x; x is read nowhere else (after the loop it would be
  // the start plus the trips' steps, before it the start).
  std::set<std::string> read_after, read_elsewhere;
  for (size_t k = update_at + 1; k < loop->body.size(); ++k) deep_reads(*loop->body[k], read_after);
  for (const StmtPtr &s : fn_.body)
    if (s.get() != static_cast<const Stmt *>(loop)) deep_reads(*s, read_elsewhere);
  if (read_after.count(x) || read_elsewhere.count(x)) return std::nullopt;
  // The advance: `x = x + step`, or `x = next` with `next = x + step`.
  const BinOp *advance = dyn_cast<BinOp>(update->value.get());
  if (auto *n = dyn_cast<Name>(update->value.get()))
    if (auto d = defs_.find(n->id); d != defs_.end() && !redefined_.count(n->id)) advance = dyn_cast<BinOp>(d->second);
  if (!advance || advance->op != BinaryOpKind::Add) return std::nullopt;
  const Expr *step = is_name(advance->lhs.get(), x) ? advance->rhs.get() : is_name(advance->rhs.get(), x) ? advance->lhs.get() : nullptr;
  if (!step) return std::nullopt;
  return Advanced{start->id, var->id, &l->second, step, isa<Name>(update->value.get())};
}

std::optional<AccessAnalysis::Induction> AccessAnalysis::induction(const std::string &p) const {
  // `p = start`, then `for v in range(0, n):` whose iteration ends with `p = next`, `next = p + step`.
  std::optional<Advanced> a = advanced_by_loop(p);
  if (!a || !a->through_name || a->loop->lo != "0" || a->loop->step != "1") return std::nullopt;
  std::optional<std::string> amount;
  if (auto *i = dyn_cast<IntLit>(a->step)) amount = std::to_string(i->value);
  else if (auto *n = dyn_cast<Name>(a->step)) amount = product_of_parameters(n->id);
  if (!amount) return std::nullopt;
  return Induction{a->start, LoopTerm{a->var, *amount}};
}

std::optional<AccessAnalysis::Affine> AccessAnalysis::integer_induction(const std::string &x) const {
  std::optional<Advanced> a = advanced_by_loop(x);
  if (!a || grid_stride_axis(*a->loop) || redefined_.count(a->start)) return std::nullopt;
  if (is_zero(*a->step)) return affine(a->start);  // never advanced: its start
  std::optional<std::string> amount = scalar_text(*a->step);
  if (!amount || value_of(resolve_copy(*amount)) != value_of(resolve_copy(a->loop->step))) return std::nullopt;
  // start - lo: 0 where both are the same value or both zero; r where start = r + lo.
  const std::string lo = resolve_copy(a->loop->lo);
  std::optional<std::string> rest;  // "" for none
  if (resolve_copy(a->start) == lo) rest = "";
  else if (auto d = defs_.find(a->start); d != defs_.end())
    if (auto *b = dyn_cast<BinOp>(d->second); b && b->op == BinaryOpKind::Add) {
      auto *p = dyn_cast<Name>(b->lhs.get());
      auto *q = dyn_cast<Name>(b->rhs.get());
      if (p && q && resolve_copy(q->id) == lo) rest = p->id;
      else if (p && q && resolve_copy(p->id) == lo) rest = q->id;
    }
  if (!rest && lo == "0") rest = a->start;  // from 0: x = start + v
  if (!rest) return std::nullopt;
  Affine out;
  if (!rest->empty()) {
    out = affine(*rest);
    if (!out.valid) return std::nullopt;
    const std::string shift = resolve_copy(*rest);
    if (out.pid.empty() && out.lanes.empty() && out.loops.empty() && out.radix.empty() && shift != "0") {
      out.shifted = true;
      out.shift_names.push_back(shift);
    }
  }
  out.loops.push_back({a->var, "1"});
  return out;
}

bool AccessAnalysis::iterations_touch_their_own(const std::string &a, const std::string &b,
                                                const std::string &loop_var, const std::string &mask_a,
                                                const std::string &mask_b) const {
  Offset x = offset_of(a, true), y = offset_of(b, true);
  if (!x.why.empty() || !y.why.empty()) return false;
  if (masked_halves_own_iterations(x, y, loop_var, mask_a, mask_b)) return true;
  if (x.untracked_shift || y.untracked_shift) return false;
  // Every non-literal uniform part the same; the literals summed.
  auto split = [](const std::vector<std::string> &parts, std::multiset<std::string> &names, int64_t &constant) {
    for (const std::string &p : parts) {
      if (std::optional<long long> v = integer_text(p)) constant += *v;
      else names.insert(p);
    }
  };
  std::multiset<std::string> xn, yn;
  int64_t xc = 0, yc = 0;
  split(x.uniform_parts, xn, xc);
  split(y.uniform_parts, yn, yc);
  if (xn != yn || x.form.pid != y.form.pid) return false;
  // One tl.arange tile each, the same, with one loop term over loop_var.
  const Affine &f = x.form, &g = y.form;
  if (f.lanes.size() != 1 || g.lanes.size() != 1 || f.loops.size() != 1 || g.loops.size() != 1) return false;
  const Term &lx = f.lanes[0], &ly = g.lanes[0];
  if (lx.source != ly.source || lx.extent != ly.extent || lx.extent_symbol != ly.extent_symbol ||
      value_of(lx.coefficient) != value_of(ly.coefficient))
    return false;
  if (f.loops[0].var != loop_var || g.loops[0].var != loop_var ||
      value_of(f.loops[0].coefficient) != value_of(g.loops[0].coefficient))
    return false;
  // The pointer tiles vary along that one tile only (no broadcast rows).
  for (const std::string &p : {a, b}) {
    auto t = types_.find(p);
    if (t == types_.end()) return false;
    size_t varying = 0;
    for (const sema::Dim &dim : t->second.shape) varying += !(dim.value && *dim.value == 1);
    if (varying > 1) return false;
  }
  // k * (v + lanes), v stepping by the tile's extent; or v * B + lanes (k = 1).
  const std::string k = value_of(lx.coefficient);
  Affine scaled = f;
  scaled.lanes[0].coefficient = "1";
  if (k != "1") {
    if (value_of(f.loops[0].coefficient) != k) return false;
    scaled.loops[0].coefficient = "1";
  }
  if (!merge_loop_blocks(scaled)) return false;
  const int64_t shift = xc > yc ? xc - yc : yc - xc;
  if (shift == 0) return true;
  const std::optional<long long> kv = integer_text(k);
  return kv && *kv > shift;
}

std::vector<const Compare *> AccessAnalysis::mask_conjuncts(const std::string &mask, std::vector<size_t> *ranks) const {
  std::vector<const Compare *> conjuncts;
  // `rank`: that of the broadcast the conjuncts reached so far lie under (0: none).
  std::function<void(const std::string &, int, size_t)> gather = [&](const std::string &n, int depth, size_t rank) {
    auto m = defs_.find(n);
    if (depth > 16 || m == defs_.end() || redefined_.count(n)) return;
    if (auto *c = dyn_cast<Compare>(m->second)) {
      conjuncts.push_back(c);
      if (ranks) {
        auto t = types_.find(n);
        ranks->push_back(rank ? rank : t == types_.end() ? 0 : t->second.shape.size());
      }
    }
    if (auto *b = dyn_cast<BinOp>(m->second); b && b->op == BinaryOpKind::BitAnd)
      for (const Expr *side : {b->lhs.get(), b->rhs.get()})
        if (auto *x = dyn_cast<Name>(side)) gather(x->id, depth + 1, rank);
    // `m[:, None]` of `m = ts < T`: the same conditions, broadcast, bound the same values; with new axes only after
    // m's own (full slices, then Nones) each of m's axes keeps its position, as the users of the conjuncts assume.
    if (auto *sub = dyn_cast<Subscript>(m->second)) {
      auto *x = dyn_cast<Name>(sub->value.get());
      bool trailing = x != nullptr, seen_none = false;
      for (const ExprPtr &i : sub->indices) {
        auto *slice = dyn_cast<Slice>(i.get());
        const bool full = slice && !slice->lower && !slice->upper && !slice->step;
        if (isa<NoneLit>(i.get())) seen_none = true;
        else if (!full || seen_none) trailing = false;
      }
      if (trailing) gather(x->id, depth + 1, rank ? rank : sub->indices.size());
    }
  };
  if (!mask.empty()) gather(mask, 0, 0);
  return conjuncts;
}

std::optional<std::string> AccessAnalysis::lane_bound(const std::string &mask, const Term &lane) const {
  for (const Compare *cmp : mask_conjuncts(mask)) {
    if (cmp->ops.size() != 1 || cmp->ops[0] != CompareOpKind::Lt) continue;
    auto *lhs = dyn_cast<Name>(cmp->left.get());
    Affine lanes = lhs ? affine(lhs->id) : Affine();
    std::optional<std::string> bound = scalar_text(*cmp->comparators[0]);
    if (lanes.valid && lanes.pid.empty() && lanes.loops.empty() && lanes.lanes.size() == 1 && !lanes.shifted &&
        lanes.lanes[0].coefficient == "1" && lanes.lanes[0].source == lane.source && bound)
      return resolve_copy(*bound);
  }
  return std::nullopt;
}

// iterations_touch_their_own's second form: v * C + lanes and v * C + S + lanes, the lanes masked by lanes < E.
// An iteration's addresses lie in [v * C, v * C + C) when E <= C and S + E <= C, so two iterations' never meet.
// Proven for numbers, and for E = S = C // 2 (a head's two halves): 2 * (C // 2) <= C for C >= 0 (a tl.constexpr
// head size, or a count of elements: negative, the kernel addresses nothing).
bool AccessAnalysis::masked_halves_own_iterations(const Offset &x, const Offset &y, const std::string &loop_var,
                                                  const std::string &mask_x, const std::string &mask_y) const {
  const Affine &f = x.form, &g = y.form;
  if (mask_x.empty() || mask_y.empty() || f.pid != g.pid || f.lanes.size() != 1 || g.lanes.size() != 1 ||
      f.loops.size() != 1 || g.loops.size() != 1)
    return false;
  const Term &lx = f.lanes[0], &ly = g.lanes[0];
  if (lx.source != ly.source || lx.coefficient != "1" || ly.coefficient != "1" || f.loops[0].var != loop_var ||
      g.loops[0].var != loop_var || value_of(f.loops[0].coefficient) != value_of(g.loops[0].coefficient))
    return false;
  // The uniform parts (beside the pointer's and inside its offset): the same, but for one name S more on one side.
  std::multiset<std::string> xs(x.uniform_parts.begin(), x.uniform_parts.end()),
      ys(y.uniform_parts.begin(), y.uniform_parts.end());
  xs.insert(f.shift_names.begin(), f.shift_names.end());
  ys.insert(g.shift_names.begin(), g.shift_names.end());
  if (xs.count("?") || ys.count("?") || f.shifted != !f.shift_names.empty() || g.shifted != !g.shift_names.empty())
    return false;
  std::vector<std::string> only_x, only_y;
  std::set_difference(xs.begin(), xs.end(), ys.begin(), ys.end(), std::back_inserter(only_x));
  std::set_difference(ys.begin(), ys.end(), xs.begin(), xs.end(), std::back_inserter(only_y));
  if (only_x.size() + only_y.size() > 1) return false;
  const std::string shift = only_x.empty() ? (only_y.empty() ? "0" : only_y[0]) : only_x[0];
  std::optional<std::string> ex = lane_bound(mask_x, lx), ey = lane_bound(mask_y, ly);
  if (!ex || !ey || value_of(*ex) != value_of(*ey)) return false;
  const std::string c = value_of(f.loops[0].coefficient), e = value_of(*ex), s = value_of(resolve_copy(shift));
  if (auto cn = integer_text(c), en = integer_text(e), sn = integer_text(s); cn && en && sn)
    return *en <= *cn && *sn + *en <= *cn;
  // E = C // 2, and S = 0 or S = E.
  const bool half = e == c + " // 2" || e == "(" + c + ") // 2";
  return half && (s == "0" || s == e);
}

AccessDecision AccessAnalysis::classify(const std::string &pointer, const std::string &mask) const {
  AccessDecision d;
  Offset chain = offset_of(pointer, false);
  if (!chain.why.empty()) {
    d.reason = chain.why;
    return d;
  }
  Affine offset = std::move(chain.form);
  std::vector<std::string> uniform_parts = std::move(chain.uniform_parts);
  const bool untracked_shift = chain.untracked_shift;
  d.offset_key = key(offset);
  std::sort(uniform_parts.begin(), uniform_parts.end());
  for (const std::string &u : uniform_parts) d.offset_key += "+" + u;
  if (untracked_shift) d.offset_key += "+shift@" + pointer;
  d.mask_key = mask.empty() ? "" : "mask " + mask;
  // A tile with more varying dimensions than tl.arange terms repeats
  // addresses across lanes (x[None, :] broadcast over rows): only atomics add those up.
  auto ptr_type = types_.find(pointer);
  size_t varying = 0;
  if (ptr_type != types_.end())
    for (const sema::Dim &dim : ptr_type->second.shape) varying += !(dim.value && *dim.value == 1);
  if (ptr_type == types_.end() || varying > offset.lanes.size()) {
    d.reason = "the pointer tile repeats offsets across lanes (a broadcast): lanes share addresses";
    return d;
  }
  // How --explain names the program term: a grid-stride loop's variable stands for the program id.
  const std::string program_term = offset.grid_stride ? "the grid-stride loop's variable" : "program_id";
  if (offset.grid_stride) d.grid_stride_var = offset.grid_stride_var;
  if (offset.pid.empty()) {
    d.programs_share = true;
    d.reason = "the offset has no program id: every program reads these addresses";
    // Within the program, distinct lanes (and loop blocks) read distinct addresses: one lane term of coefficient 1,
    // or two in mixed radix (`r[:, None] * K + r[None, :]`, r = tl.arange(0, K): a [K, K] tile, row-major), the
    // outer one's coefficient at least the inner one's extent.
    auto lanes_apart = [&](const std::vector<Term> &lanes) {
      if (lanes.size() <= 1) return lanes.empty() || lanes[0].coefficient == "1";
      if (lanes.size() != 2) return false;
      for (int inner = 0; inner < 2; ++inner) {
        const Term &in = lanes[inner], &out = lanes[1 - inner];
        if (in.coefficient != "1" || in.walks_loop || out.walks_loop) continue;
        const std::string extent = in.extent ? std::to_string(in.extent) : in.extent_symbol;
        const std::string c = value_of(out.coefficient), e = value_of(extent);
        if (extent.empty() || c.empty()) continue;
        const std::optional<long long> cn = integer_text(c), en = integer_text(e);
        if (c == e || (cn && en && *cn >= *en)) return true;
      }
      return false;
    };
    if (merge_loop_blocks(offset) && lanes_apart(offset.lanes)) d.kind = AccessDecision::Kind::Broadcast;
    return d;
  }
  // Programs that differ along an axis the offset does not depend on read
  // the same addresses (a bias loaded by every row of a 2-D grid): their
  // gradients must be added, not stored.
  for (int axis : program_axes_)
    if (!offset.pid.count(axis)) {
      d.programs_share = axis >= 0;
      d.reason = axis < 0 ? std::string("the kernel reads a program id of an axis tgrad cannot tell")
                          : "programs that differ only in tl.program_id(" + std::to_string(axis) +
                                ") read the same addresses (the offset does not depend on it)";
      return d;
    }
  if (!merge_loop_blocks(offset)) {
    d.reason = "the offset moves with a loop variable in a way that is not analysed";
    return d;
  }
  // One scalar per program (`L + row`): distinct programs, distinct
  // addresses, when the coefficient is a nonzero integer (a stride given at
  // run time may be 0, a broadcast).
  if (offset.pid.size() == 1 && offset.lanes.empty()) {
    const std::string &c = offset.pid.begin()->second;
    const std::string v = value_of(c);
    const size_t digits = v.rfind('-', 0) == 0 ? 1 : 0;  // a known negative constexpr is nonzero too
    if (v.size() > digits && std::isdigit(static_cast<unsigned char>(v[digits])) && v != "0") {
      d.kind = AccessDecision::Kind::Injective;
      d.walks_loop = offset.grid_stride;
      d.reason = "offset = " + program_term + " * " + c + ": one address per program";
      return d;
    }
  }
  // A 2-D grid of row programs and column blocks (`row * stride + pid1 * BLOCK
  // + tl.arange(0, BLOCK)`): the column programs and the lanes together are
  // one unbounded tile of columns, and the rows are as in a 1-D grid.
  int column_axis = -1;
  if (offset.pid.size() == 2 && offset.lanes.size() == 1) {
    std::vector<int> axes;
    for (const auto &kv : offset.pid) axes.push_back(kv.first);
    for (int axis : axes)
      if (column_axis < 0 && merge_program_blocks(offset, axis)) column_axis = axis;
  }
  if (offset.pid.size() != 1 || offset.lanes.size() != 1) {
    d.reason = "offsets over several program axes or several tl.arange tiles are not analysed yet";
    return d;
  }
  const std::string &coefficient = offset.pid.begin()->second;
  const Term &lane = offset.lanes[0];
  if (lane.coefficient != "1") {
    d.reason = "the tl.arange lanes are strided";
    return d;
  }
  const std::string extent = lane.extent ? std::to_string(lane.extent) : lane.extent_symbol;
  // A grid-stride loop's variable in the program term: each iteration has rows of its own too.
  d.walks_loop = lane.walks_loop || offset.grid_stride;
  if (lane.walks_loop) d.walked_loop_var = lane.walked_var;
  if (!extent.empty() && !lane.walks_loop && !lane.walks_programs && value_of(coefficient) == value_of(extent)) {
    d.kind = AccessDecision::Kind::Injective;
    d.reason = "offset = " + program_term + " * " + coefficient + " + tl.arange(0, " + extent +
               "): each address belongs to one program and lane";
    return d;
  }
  // Rows: program_id * stride + cols, masked by cols < n. Injective when
  // stride >= n (rows do not overlap); the kernel's launcher guarantees it for
  // contiguous rows, and tl.device_assert checks it in debug runs.
  // The mask's conjuncts (`(i0 >= 0) & (i0 < n0) & (i1 < n1)`, as a lowered
  // block pointer or descriptor masks): each only removes lanes, so one that
  // bounds the offset's lanes is enough.
  for (const Compare *cmp : mask_conjuncts(mask)) {
    if (cmp->ops.size() == 1 && cmp->ops[0] == CompareOpKind::Lt) {
      auto *lhs = dyn_cast<Name>(cmp->left.get());
      Affine lanes = lhs ? affine(lhs->id) : Affine();
      if (column_axis >= 0 && lanes.valid && !merge_program_blocks(lanes, column_axis)) lanes.valid = false;
      std::optional<std::string> bound = scalar_text(*cmp->comparators[0]);
      if (bound) bound = resolve_copy(*bound);
      // The mask must bound the very lanes of the offset (the same tl.arange, the same loop variable).
      if (lanes.valid && merge_loop_blocks(lanes) && lanes.pid.empty() && lanes.lanes.size() == 1 &&
          lanes.lanes[0].coefficient == "1" && lanes.lanes[0].source == lane.source && !lanes.shifted && bound) {
        d.mask_key = "lanes < " + *bound;
        if (value_of(coefficient) == value_of(*bound)) {
          // Rows as long as the mask's bound: nothing to assume.
          d.kind = AccessDecision::Kind::Injective;
          d.reason = "offset = " + program_term + " * " + coefficient + " + lanes masked by lanes < " + *bound +
                     ": each address belongs to one program and lane";
          return d;
        }
        d.kind = AccessDecision::Kind::InjectiveAssuming;
        d.reason = "offset = " + program_term + " * " + coefficient + " + lanes masked by lanes < " + *bound +
                   ": programs own disjoint rows when " + coefficient + " >= " + *bound;
        auto operand = [](const std::string &text) -> ExprPtr { return text_expr(text); };
        ExprList rhs;
        rhs.push_back(operand(*bound));
        d.assumption = std::make_unique<Compare>(operand(coefficient), std::vector<CompareOpKind>{CompareOpKind::GtE},
                                                 std::move(rhs));
        d.assumption_message = "tgrad: rows overlap (" + coefficient + " < " + *bound + "): the gradient stores would race; pass rows that do not overlap (a contiguous tensor)";
        return d;
      }
    }
  }
  d.reason = "programs may share addresses (offset = " + program_term + " * " + coefficient + " + lanes)";
  return d;
}

}  // namespace tgrad::ad

namespace tgrad::ad {

// `v + tl.arange(0, B)` with v the variable of `range(lo, hi, B)`: the loop
// walks disjoint blocks of B, so the pair is one unbounded tile of lanes.
// False if a loop term is left that cannot be merged.
bool AccessAnalysis::merge_loop_blocks(Affine &a) const {
  if (a.loops.empty()) return true;
  if (a.loops.size() != 1 || a.lanes.size() != 1 || a.lanes[0].coefficient != "1") return false;
  const Term &lane = a.lanes[0];
  const std::string extent = lane.extent ? std::to_string(lane.extent) : lane.extent_symbol;
  auto loop = loops_.find(a.loops[0].var);
  if (extent.empty() || loop == loops_.end()) return false;
  // Blocks of their own per iteration: `v + tl.arange(0, B)` with v stepping
  // by B, or `v * B + tl.arange(0, B)` with v stepping by 1 (either way).
  const std::string step = value_of(loop->second.step), coefficient = value_of(a.loops[0].coefficient);
  const bool by_block = coefficient == "1" && step == value_of(extent);
  const bool by_one = coefficient == value_of(extent) && (step == "1" || step == "-1");
  if (!by_block && !by_one) return false;
  a.lanes[0].walks_loop = true;
  a.lanes[0].walked_var = a.loops[0].var;
  a.lanes[0].source += " + " + a.loops[0].var;
  a.loops.clear();
  return true;
}

// `pid * B + tl.arange(0, B)` with pid the program id along `axis`: the
// programs along it and the lanes walk disjoint blocks of B, one unbounded
// tile of lanes. False (and `a` unchanged) where the form is not that.
bool AccessAnalysis::merge_program_blocks(Affine &a, int axis) const {
  auto p = a.pid.find(axis);
  if (p == a.pid.end() || a.lanes.size() != 1 || a.lanes[0].coefficient != "1" || a.lanes[0].walks_loop ||
      a.lanes[0].walks_programs)
    return false;
  Term &lane = a.lanes[0];
  const std::string extent = lane.extent ? std::to_string(lane.extent) : lane.extent_symbol;
  if (extent.empty() || value_of(p->second) != value_of(extent)) return false;
  lane.walks_programs = true;
  lane.source += " + program_id(" + std::to_string(axis) + ")";
  a.pid.erase(p);
  return true;
}

// A local that only copies another name or a literal (a lowered descriptor's
// `x_desc_stride1 = 1`, `x_desc_shape1 = n_cols`) is what it copies.
std::string AccessAnalysis::resolve_copy(const std::string &text) const {
  std::string at = text;
  for (int depth = 0; depth < 16 && !redefined_.count(at); ++depth) {
    auto d = defs_.find(at);
    if (d == defs_.end()) break;
    if (auto *literal = dyn_cast<IntLit>(d->second)) return std::to_string(literal->value);
    auto *n = dyn_cast<Name>(d->second);
    if (!n) break;
    at = n->id;
  }
  return at;
}

// A constexpr with a known value (given with -D) compares by its value.
std::string AccessAnalysis::value_of(const std::string &text) const {
  auto it = types_.find(text);
  if (it != types_.end() && it->second.kind == sema::SType::Kind::Int && it->second.known)
    return std::to_string(it->second.n);
  // A local constexpr (`WIDTH: tl.constexpr = 2 * HALF`) compares by its expression, as sema writes shapes.
  if (it != types_.end() && it->second.kind == sema::SType::Kind::Int && !it->second.sym.empty())
    return it->second.sym;
  return text;
}

std::string AccessAnalysis::key(const Affine &a) const {
  std::string k;
  for (const auto &kv : a.pid) k += "pid" + std::to_string(kv.first) + "*" + kv.second + "+";
  for (const RadixTerm &t : a.radix)
    k += "pid" + std::to_string(t.axis) + (t.remainder ? "%" : "//") + t.divisor + "*" + t.coefficient + "+";
  for (const Term &t : a.lanes)
    k += "arange(" + (t.extent ? std::to_string(t.extent) : t.extent_symbol) + ")*" + t.coefficient + "+";
  for (const LoopTerm &t : a.loops) {
    auto loop = loops_.find(t.var);
    k += "range(" + (loop == loops_.end() ? t.var : loop->second.lo + "," + loop->second.hi + "," + loop->second.step) +
         ")*" + t.coefficient + "+";
  }
  return k;
}

}  // namespace tgrad::ad
