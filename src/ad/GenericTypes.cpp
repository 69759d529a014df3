#include "src/ad/GenericTypes.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "src/ad/AnfWalk.h"
#include "src/ad/Specialize.h"
#include "src/ad/SpecializationFlags.h"
#include "src/lower/InlineCalls.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::ad {

using namespace ast;
using sema::DType;
using sema::SType;

namespace {

// ------------------------------------------------------------ roles

bool is_access_call(const std::string &callee) {
  return callee == "tl.load" || callee == "tl.store" || callee.rfind("tl.atomic_", 0) == 0;
}

// Calls whose result is (an advanced or annotated copy of) their first
// argument's pointer.
bool passes_pointer_through(const std::string &callee) {
  return sema::is_compiler_hint(callee) || callee == "tl.make_block_ptr" || callee == "tl.advance" || callee == "tl.make_tensor_descriptor" ||
         callee == "tl.broadcast_to" || callee == "tl.reshape" || callee == "tl.expand_dims";
}

// Whether the code converts to `name` or makes tensors of it: `x.to(name)`,
// `dtype=name`, `tl.zeros(shape, name)`, `tl.full(shape, value, name)`.
bool used_as_dtype(const StmtList &body, const std::string &name) {
  bool used = false;
  auto is_name = [&](const Expr *e) { return e && isa<Name>(e) && cast<Name>(e)->id == name; };
  visit_exprs(body, [&](const Expr &e) {
    auto *c = dyn_cast<Call>(&e);
    if (!c) return;
    for (const Keyword &k : c->keywords) used |= k.name == "dtype" && is_name(k.value.get());
    if (auto *a = dyn_cast<Attribute>(c->func.get()); a && a->attr == "to" && !c->args.empty())
      used |= is_name(c->args[0].get());
    const std::string callee = emit::print_expr(*c->func);
    if (callee == "tl.zeros" && c->args.size() > 1) used |= is_name(c->args[1].get());
    if (callee == "tl.full" && c->args.size() > 2) used |= is_name(c->args[2].get());
  });
  return used;
}

class RoleFinder {
 public:
  RoleFinder(const Module &module, std::set<const Function *> &visiting, const sema::ParamTypes *known = nullptr)
      : module_(module), visiting_(visiting), known_(known) {}

  std::vector<ParamRole> run(const Function &fn) {
    for (const Param &p : fn.params) flow_.roots[p.name] = {p.name};
    walk(fn.body);
    // TEMPORARY (TGRAD_CHECK_FIXPOINTS): the walk without the loops' memo, compared.
    static const bool check = std::getenv("TGRAD_CHECK_FIXPOINTS") != nullptr;
    if (check && memo_) {
      RoleFinder plain(module_, visiting_, known_);
      plain.memo_ = false;
      for (const Param &p : fn.params) plain.flow_.roots[p.name] = {p.name};
      plain.walk(fn.body);
      if (!(plain.flow_ == flow_) || plain.pointers_ != pointers_ || plain.integer_pointers_ != integer_pointers_ ||
          plain.accesses_ != accesses_ || plain.returned_ != returned_ || plain.int_literals_ != int_literals_) {
        std::cerr << "TGRAD_CHECK_FIXPOINTS: roles of " << fn.name << " differ\n";
        std::abort();
      }
    }
    std::set<std::string> read;
    taken_reads(fn.body, read);
    std::vector<ParamRole> roles;
    bool any_pointer = false;
    for (size_t k = 0; k < fn.params.size(); ++k) any_pointer |= pointers_.count(fn.params[k].name) > 0;
    for (size_t k = 0; k < fn.params.size(); ++k) {
      const std::string &n = fn.params[k].name;
      if (fn.is_constexpr_param(k)) roles.push_back(used_as_dtype(fn.body, n) ? ParamRole::DTypeConstexpr : ParamRole::Constexpr);
      else if (integer_pointers_.count(n)) roles.push_back(ParamRole::IntegerPointer);
      else if (pointers_.count(n)) roles.push_back(ParamRole::FloatPointer);
      else if (!read.count(n)) roles.push_back(ParamRole::Unused);
      else roles.push_back(any_pointer ? ParamRole::Scalar : ParamRole::Tile);
    }
    return roles;
  }

  // After run(): how the function accesses memory through each parameter.
  unsigned accesses(const std::string &param) const {
    auto it = accesses_.find(param);
    return it == accesses_.end() ? 0u : it->second;
  }

  // Which branch each if of `block` takes with the known values ('1', '0',
  // or '?' for both), at any depth, in the walk's order: all a walk reads of
  // the known values (helpers are walked without them).
  std::string branches_taken(const StmtList &block) const {
    std::string out;
    for (const StmtPtr &st : block) {
      if (auto *i = dyn_cast<If>(st.get())) {
        const std::optional<bool> taken = known_condition(*i->cond);
        out += taken ? (*taken ? '1' : '0') : '?';
        out += branches_taken(i->body);
        out += branches_taken(i->orelse);
      } else if (auto *f = dyn_cast<For>(st.get())) {
        out += branches_taken(f->body);
      } else if (auto *w = dyn_cast<While>(st.get())) {
        out += branches_taken(w->body);
      }
    }
    return out;
  }

 private:
  // The parameters an address expression derives from.
  // The callee as Triton names it: `tl.make_tensor_descriptor` also where an
  // import binds a bare name to it (`from triton.language import
  // make_tensor_descriptor`, or a library's compatibility alias).
  std::string callee_of(const Call &c) const {
    const std::string written = emit::print_expr(*c.func);
    if (!isa<Name>(c.func.get())) return written;
    return sema::tl_function_bound_to(module_, written).value_or(written);
  }

  std::set<std::string> address_roots(const Expr &e) const {
    if (auto *n = dyn_cast<Name>(&e)) {
      auto it = flow_.roots.find(n->id);
      return it == flow_.roots.end() ? std::set<std::string>{} : it->second;
    }
    if (auto *b = dyn_cast<BinOp>(&e)) {
      // Triton code writes the pointer first (`X + offs`, `p - stride`): an
      // offset derived from a parameter (`row + ROW_OFFSET`) is not one.
      if (b->op == BinaryOpKind::Sub) return address_roots(*b->lhs);
      if (b->op != BinaryOpKind::Add) return {};
      std::set<std::string> r = address_roots(*b->lhs);
      return r.empty() ? address_roots(*b->rhs) : r;
    }
    if (auto *s = dyn_cast<Subscript>(&e)) return address_roots(*s->value);
    if (auto *i = dyn_cast<IfExp>(&e)) {
      std::set<std::string> r = address_roots(*i->then_value);
      for (const std::string &x : address_roots(*i->else_value)) r.insert(x);
      return r;
    }
    if (auto *c = dyn_cast<Call>(&e)) {
      if (auto *a = dyn_cast<Attribute>(c->func.get()); a && a->attr == "to") return address_roots(*a->value);
      const std::string callee = callee_of(*c);
      if (callee == "tl.where" && c->args.size() == 3) {
        std::set<std::string> r = address_roots(*c->args[1]);
        for (const std::string &x : address_roots(*c->args[2])) r.insert(x);
        return r;
      }
      if (passes_pointer_through(callee)) {
        const Expr *first = call_argument(*c, 0, callee == "tl.make_block_ptr" || callee == "tl.make_tensor_descriptor"
                                                     ? "base"
                                                     : "input");
        if (!first) first = call_argument(*c, 0, "pointer");
        if (first) return address_roots(*first);
      }
      // A jit helper that returns an address made from its arguments
      // (`base = _row_base(X, row, N)`, `p = _block_ptr(base, ...)`): the
      // roots of the arguments its returns derive from.
      if (const Function *g = module_.find_function(callee)) {
        std::set<std::string> r;
        const std::set<std::string> &through = returned_roots(*g);
        for (size_t k = 0; k < g->params.size(); ++k)
          if (through.count(g->params[k].name))
            if (const Expr *a = call_argument(*c, k, g->params[k].name))
              for (const std::string &x : address_roots(*a)) r.insert(x);
        return r;
      }
    }
    return {};
  }

  // The parameters of jit function `g` that an address it returns derives from.
  const std::set<std::string> &returned_roots(const Function &g) const {
    static const std::set<std::string> none;
    if (auto it = returns_cache_.find(&g); it != returns_cache_.end()) return it->second;
    if (visiting_.count(&g)) return none;  // recursion: Triton rejects it anyway
    visiting_.insert(&g);
    RoleFinder finder(module_, visiting_);
    finder.run(g);
    visiting_.erase(&g);
    return returns_cache_[&g] = finder.returned_;
  }

  // The pointer parameters whose loaded values `e` derives from.
  std::set<std::string> loaded_from(const Expr &e) const {
    std::set<std::string> out;
    std::set<std::string> names;
    reads(e, names);
    for (const std::string &n : names)
      if (auto it = flow_.loaded.find(n); it != flow_.loaded.end()) out.insert(it->second.begin(), it->second.end());
    visit_expr(e, [&](const Expr &x) {
      auto *c = dyn_cast<Call>(&x);
      if (c && emit::print_expr(*c->func) == "tl.load")
        if (const Expr *p = call_argument(*c, 0, "pointer"))
          for (const std::string &r : address_roots(*p)) out.insert(r);
    });
    return out;
  }

  void note_address(const Expr &address, unsigned kinds) {
    for (const std::string &r : address_roots(address)) {
      pointers_.insert(r);
      accesses_[r] |= kinds;
    }
    // What a load gave, used in an address: that load reads indices.
    for (const std::string &r : loaded_from(address)) integer_pointers_.insert(r);
  }

  // Every call in an expression: accesses, and the module's jit functions.
  void visit_calls(const Expr &e) {
    visit_expr(e, [&](const Expr &x) {
      if (auto *c = dyn_cast<Call>(&x)) visit_call(*c);
      // Bit operations take integers: a loaded value they take directly
      // (or through sums and other bit operations) came from integers
      // (packed weights unpacked with `(w >> 2) & 3`).
      // So does floor division: Triton refuses `//` on floats ("unexpected type fp32"), and tl.cdiv is one.
      if (auto *b = dyn_cast<BinOp>(&x); b && (is_bitwise(b->op) || b->op == BinaryOpKind::FloorDiv))
        for (const Expr *operand : {b->lhs.get(), b->rhs.get()})
          for (const std::string &r : summed_loads(*operand)) integer_pointers_.insert(r);
      if (auto *c = dyn_cast<Call>(&x); c && callee_of(*c) == "tl.cdiv")
        for (const ExprPtr &operand : c->args)
          for (const std::string &r : summed_loads(*operand)) integer_pointers_.insert(r);
      if (auto *u = dyn_cast<UnaryOp>(&x); u && u->op == UnaryOpKind::Invert)
        for (const std::string &r : summed_loads(*u->operand)) integer_pointers_.insert(r);
    });
  }

  static bool is_bitwise(BinaryOpKind op) {
    return op == BinaryOpKind::BitAnd || op == BinaryOpKind::BitOr || op == BinaryOpKind::BitXor ||
           op == BinaryOpKind::LShift || op == BinaryOpKind::RShift;
  }

  void visit_call(const Call &c) {
    const std::string callee = callee_of(c);
    // A random draw's seed and counters are integers: what a load gave them came from indices.
    if (sema::is_random_draw(callee)) {
      for (const ExprPtr &a : c.args)
        for (const std::string &r : loaded_from(*a)) integer_pointers_.insert(r);
      for (const Keyword &k : c.keywords)
        for (const std::string &r : loaded_from(*k.value)) integer_pointers_.insert(r);
    }
    // A product accumulated in integers (`tl.dot(a, b, out_dtype=tl.int32)`, an int8 matmul): its operands are
    // integers, and so is what their loads read.
    if (callee == "tl.dot")
      if (const Expr *out = call_argument(c, 3, "out_dtype"); out && is_tl_dtype(out))
        if (const std::string t = cast<Attribute>(out)->attr; t.find("int") != std::string::npos)
          for (size_t k = 0; k < 2 && k < c.args.size(); ++k)
            for (const std::string &r : loaded_from(*c.args[k])) integer_pointers_.insert(r);
    // tl.gather's index (also `x.gather(index, axis)`; a name bound to tl.gather is callee_of's "tl.gather"):
    // integers.
    const bool method = isa<Attribute>(c.func.get()) && cast<Attribute>(c.func.get())->attr == "gather" &&
                        callee != "tl.gather";
    if (callee == "tl.gather" || method)
      if (const Expr *index = call_argument(c, method ? 0 : 1, "index"))
        for (const std::string &r : loaded_from(*index)) integer_pointers_.insert(r);
    if (is_access_call(callee)) {
      if (const Expr *p = call_argument(c, 0, "pointer")) note_address(*p, access_kind(callee.substr(3)));
    } else if (auto *a = dyn_cast<Attribute>(c.func.get());
               a && (a->attr == "load" || a->attr == "store" || a->attr.rfind("atomic_", 0) == 0)) {
      note_address(*a->value, access_kind(a->attr));  // a tensor descriptor's method
    } else if (const Function *g = module_.find_function(callee); g && !visiting_.count(g)) {
      visiting_.insert(g);
      RoleFinder finder(module_, visiting_);
      std::vector<ParamRole> inner = finder.run(*g);
      visiting_.erase(g);
      auto is_pointer = [&](size_t k) {
        return inner[k] == ParamRole::FloatPointer || inner[k] == ParamRole::IntegerPointer;
      };
      for (size_t k = 0; k < c.args.size() && k < inner.size(); ++k)
        if (is_pointer(k)) note_address(*c.args[k], finder.accesses(g->params[k].name));
      for (const Keyword &kw : c.keywords)
        for (size_t k = 0; k < g->params.size(); ++k)
          if (g->params[k].name == kw.name && is_pointer(k)) note_address(*kw.value, finder.accesses(kw.name));
    }
  }

  // The pointers `e` is exactly a load through: `tl.load(P + ...)`, or a
  // name bound to one.
  std::set<std::string> loaded_directly(const Expr &e) const {
    if (auto *n = dyn_cast<Name>(&e)) {
      auto it = flow_.direct_loads.find(n->id);
      return it == flow_.direct_loads.end() ? std::set<std::string>{} : it->second;
    }
    auto *c = dyn_cast<Call>(&e);
    if (!c || emit::print_expr(*c->func) != "tl.load") return {};
    const Expr *p = call_argument(*c, 0, "pointer");
    return p ? address_roots(*p) : std::set<std::string>{};
  }

  static bool is_additive(BinaryOpKind op) {
    return op == BinaryOpKind::Add || op == BinaryOpKind::Sub || op == BinaryOpKind::Mul;
  }

  // The pointers whose loaded values `e` keeps the type of: a load (or a
  // name bound to one), their sums, products and differences, and their
  // reductions (and bit operations, which take integers). A comparison or
  // a cast makes a value of another type and ends the chain (`tl.sum(x > 0)`
  // counts floats as integers).
  std::set<std::string> summed_loads(const Expr &e) const {
    if (auto *b = dyn_cast<BinOp>(&e)) {
      if (!is_additive(b->op) && !is_bitwise(b->op)) return {};
      std::set<std::string> r = summed_loads(*b->lhs);
      for (const std::string &x : summed_loads(*b->rhs)) r.insert(x);
      return r;
    }
    if (auto *c = dyn_cast<Call>(&e)) {
      const std::string callee = emit::print_expr(*c->func);
      if ((callee == "tl.sum" || callee == "tl.cumsum" || callee == "tl.max" || callee == "tl.min") && !c->args.empty())
        return summed_loads(*c->args[0]);
    }
    return loaded_directly(e);
  }

  void bind(const Expr &target, const Expr &value) {
    if (auto *n = dyn_cast<Name>(&target)) {
      // Both read the name's old value (`bias = tl.load(bias + offs)`) before it is replaced.
      std::set<std::string> roots = address_roots(value), loaded = loaded_from(value);
      flow_.roots[n->id] = std::move(roots);
      flow_.loaded[n->id] = std::move(loaded);
      // `seq_idx = 0` before a loop that sets `seq_idx = tl.load(P + ...)`:
      // the 0 made it an int32 tensor, which Triton requires the loop to
      // keep, so P holds integers (mamba's sequence indices).
      if (loop_depth_ > 0 && int_literals_.count(n->id))
        for (const std::string &r : loaded_directly(value)) integer_pointers_.insert(r);
      if (isa<IntLit>(&value) && loop_depth_ == 0) int_literals_.insert(n->id);
      std::set<std::string> direct = loaded_directly(value);
      if (direct.empty()) flow_.direct_loads.erase(n->id);
      else flow_.direct_loads[n->id] = direct;
      return;
    }
    auto *tt = dyn_cast<Tuple>(&target);
    if (!tt) return;
    auto *tv = dyn_cast<Tuple>(&value);
    for (size_t k = 0; k < tt->elts.size(); ++k) {
      if (tv && k < tv->elts.size()) bind(*tt->elts[k], *tv->elts[k]);
      else if (auto *n = dyn_cast<Name>(tt->elts[k].get())) {
        std::set<std::string> loaded = loaded_from(value);
        flow_.roots.erase(n->id);
        flow_.direct_loads.erase(n->id);
        flow_.loaded[n->id] = std::move(loaded);
      }
    }
  }

  void walk(const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get())) {
        visit_calls(*a->value);
        for (const ExprPtr &t : a->targets) bind(*t, *a->value);
      } else if (auto *a = dyn_cast<AugAssign>(s.get())) {
        visit_calls(*a->value);
        // `p += stride`: the target stays what it was; the step is an offset.
        if (auto *n = dyn_cast<Name>(a->target.get())) {
          for (const std::string &r : loaded_from(*a->value)) flow_.loaded[n->id].insert(r);
          if (a->op == BinaryOpKind::FloorDiv)  // `idx //= tl.load(shape + d)`: both sides integers
            for (const Expr *operand : {a->target.get(), a->value.get()})
              for (const std::string &r : summed_loads(*operand)) integer_pointers_.insert(r);
          // `total = 0` before a loop that adds `tl.sum(tl.load(P + ...))`:
          // the 0 made it an int32, which Triton requires the loop to keep,
          // so what is added is an integer and P holds integers (Liger's
          // routing prefix sums).
          if (loop_depth_ > 0 && int_literals_.count(n->id) && is_additive(a->op))
            for (const std::string &r : summed_loads(*a->value)) integer_pointers_.insert(r);
        }
      } else if (auto *a = dyn_cast<AnnAssign>(s.get())) {
        if (a->value) {
          visit_calls(*a->value);
          bind(*a->target, *a->value);
        }
      } else if (auto *e = dyn_cast<ExprStmt>(s.get())) {
        visit_calls(*e->value);
      } else if (auto *r = dyn_cast<Return>(s.get())) {
        if (r->value) {
          visit_calls(*r->value);
          for (const std::string &x : address_roots(*r->value)) returned_.insert(x);
        }
      } else if (auto *i = dyn_cast<If>(s.get())) {
        visit_calls(*i->cond);
        // A flag with a value (one specialization) keeps one branch, as Triton does.
        std::optional<bool> taken = known_condition(*i->cond);
        if (taken) {
          walk(*taken ? i->body : i->orelse);
          continue;
        }
        // Only the names the branches assign can differ between them and
        // from the state before: the rest of the state is neither copied
        // nor joined (copying all of it at every if cost more than the walk).
        if (!memo_) {  // TEMPORARY (TGRAD_CHECK_FIXPOINTS): as it was
          const FlowState full = flow_;
          walk(i->body);
          FlowState after = std::move(flow_);
          flow_ = full;
          walk(i->orelse);
          flow_.join(after);
          continue;
        }
        const Names &assigned = names_of(*i).assigned;
        const FlowState before = flow_.slice(assigned);
        walk(i->body);
        const FlowState after_body = flow_.slice(assigned);
        flow_.restore(before, assigned);
        walk(i->orelse);
        flow_.join(after_body);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        visit_calls(*f->iter);
        // A loop's bounds are integers: a load they derive from reads integers
        // (paged attention's `for i in range(0, tl.load(context_lens + b))`).
        if (auto *c = dyn_cast<Call>(f->iter.get()))
          for (const ExprPtr &bound : c->args)
            for (const std::string &r : loaded_from(*bound)) integer_pointers_.insert(r);
        walk_loop_body(f->body);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        visit_calls(*w->cond);
        walk_loop_body(w->body);
      }
    }
  }

  // A loop's body, twice: the second time its start sees what the first
  // iteration left (a name assigned late in the body and read early). After
  // the loop a name holds what it held before it or after any iteration.
  //
  // Where the first walk changed nothing (the state it leaves, joined with
  // the one before, is that one: a loop met again from a state that already
  // holds what its iterations assign), the second would walk from the same
  // state and find the same: it is skipped. Nested loops otherwise cost two
  // walks per level, 2^depth walks of the innermost body (fla's five-deep
  // NPU kernels took minutes).
  //
  // Where the second walk does change the state, a loop inside walks from two
  // states, and its loops from four. A walk reads the state only at the names
  // the body reads or assigns (and the integer literals), and changes it only
  // at those it assigns: a loop met again with the same state there leaves
  // what it left then. What a walk adds besides (the pointers, their
  // accesses, the integer pointers, the returned roots) only grows and was
  // added then, so the walk is skipped.
  void walk_loop_body(const StmtList &body) {
    if (!memo_) {  // TEMPORARY (TGRAD_CHECK_FIXPOINTS): as it was
      ++loop_depth_;
      const FlowState full = flow_;
      walk(body);
      flow_.join(full);
      if (!(flow_ == full)) {
        walk(body);
        flow_.join(full);
      }
      --loop_depth_;
      return;
    }
    const BlockNames &names = names_of(body);
    std::vector<LoopVisit> &visits = loop_visits_[&body];
    for (const LoopVisit &v : visits)
      if (flow_.same_on(v.before, names.touched) && v.int_literals == int_literals_) {
        flow_.restore(v.after, names.assigned);
        return;
      }
    const FlowState met = flow_.slice(names.touched);
    ++loop_depth_;
    const FlowState before = flow_.slice(names.assigned);
    walk(body);
    flow_.join(before);
    if (!flow_.same_on(before, names.assigned)) {
      walk(body);
      flow_.join(before);
    }
    --loop_depth_;
    visits.push_back({met, flow_.slice(names.assigned), int_literals_});
  }

  // The names a block (or an if's branches) assigns at any depth, and those
  // it reads or assigns: where a walk may change the state, and where it reads it.
  using Names = std::vector<std::string>;
  struct BlockNames {
    Names assigned, touched;
  };
  const BlockNames &names_of(const StmtList &block) { return names_of(body_names_[&block], {&block}); }
  const BlockNames &names_of(const If &i) { return names_of(if_names_[&i], {&i.body, &i.orelse}); }
  static const BlockNames &names_of(std::optional<BlockNames> &cached, std::initializer_list<const StmtList *> blocks) {
    if (cached) return *cached;
    std::map<std::string, int> assigned;
    std::set<std::string> touched;
    for (const StmtList *b : blocks) {
      count_assignments(*b, assigned);
      block_reads(*b, touched);
    }
    BlockNames out;
    for (const auto &kv : assigned) {
      out.assigned.push_back(kv.first);
      touched.insert(kv.first);
    }
    out.touched.assign(touched.begin(), touched.end());
    return *(cached = std::move(out));
  }

  // Names read by the branches a specialization keeps (all, without known values).
  void taken_reads(const StmtList &block, std::set<std::string> &out) const {
    for (const StmtPtr &st : block) {
      if (auto *i = dyn_cast<If>(st.get())) {
        reads(*i->cond, out);
        std::optional<bool> taken = known_condition(*i->cond);
        if (!taken || *taken) taken_reads(i->body, out);
        if (!taken || !*taken) taken_reads(i->orelse, out);
        continue;
      }
      stmt_reads(*st, out);
      if (auto *f = dyn_cast<For>(st.get())) {
        reads(*f->iter, out);
        taken_reads(f->body, out);
      } else if (auto *w = dyn_cast<While>(st.get())) {
        reads(*w->cond, out);
        taken_reads(w->body, out);
      }
    }
  }

  // The value of an if's condition on tl.constexpr parameters with known
  // values (`FLAG`, `not FLAG`, `MODE == 'x'`, `X is None`, and/or), or none.
  std::optional<bool> known_condition(const Expr &e) const {
    if (!known_) return std::nullopt;
    auto value_of = [&](const Expr &x) -> std::optional<SType> {
      if (auto *n = dyn_cast<Name>(&x)) {
        auto it = known_->find(n->id);
        if (it == known_->end()) return std::nullopt;
        const SType &t = it->second;
        if (t.kind == SType::Kind::None || ((t.kind == SType::Kind::Bool || t.kind == SType::Kind::Int ||
                                             t.kind == SType::Kind::Str) && t.known))
          return t;
        return std::nullopt;
      }
      if (auto *b = dyn_cast<BoolLit>(&x)) return SType::of_bool(b->value);
      if (auto *i = dyn_cast<IntLit>(&x)) return SType::of_int(static_cast<long long>(i->value));
      if (auto *t = dyn_cast<StrLit>(&x)) return SType::of_str(t->value);
      if (isa<NoneLit>(&x)) return SType::none();
      return std::nullopt;
    };
    if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Not) {
      std::optional<bool> x = known_condition(*u->operand);
      return x ? std::optional<bool>(!*x) : std::nullopt;
    }
    if (auto *b = dyn_cast<BoolOp>(&e)) {
      const bool is_and = b->op == BoolOpKind::And;
      bool all_known = true;
      for (const ExprPtr &v : b->values) {
        std::optional<bool> x = known_condition(*v);
        if (x && *x != is_and) return !is_and;  // a false operand of `and`, a true one of `or`
        all_known &= x.has_value();
      }
      return all_known ? std::optional<bool>(is_and) : std::nullopt;
    }
    if (auto *c = dyn_cast<Compare>(&e); c && c->ops.size() == 1) {
      std::optional<SType> l = value_of(*c->left), r = value_of(*c->comparators[0]);
      if (!l || !r) return std::nullopt;
      auto same = [&]() -> std::optional<bool> {
        if (l->kind == SType::Kind::None || r->kind == SType::Kind::None) return l->kind == r->kind;
        if (l->kind == SType::Kind::Str || r->kind == SType::Kind::Str)
          return l->kind == r->kind && l->s == r->s;
        auto number = [](const SType &t) { return t.kind == SType::Kind::Bool ? (t.b ? 1LL : 0LL) : t.n; };
        return number(*l) == number(*r);
      };
      std::optional<bool> eq = same();
      switch (c->ops[0]) {
        case CompareOpKind::Eq:
        case CompareOpKind::Is: return eq;
        case CompareOpKind::NotEq:
        case CompareOpKind::IsNot: return eq ? std::optional<bool>(!*eq) : std::nullopt;
        default: return std::nullopt;
      }
    }
    std::optional<SType> v = value_of(e);
    if (v && !isa<Name>(&e)) return std::nullopt;  // a literal condition: left to sema
    if (!v) return std::nullopt;
    return v->kind == SType::Kind::None ? false : sema::known_truth(*v);
  }

  static unsigned access_kind(const std::string &method) {
    if (method == "load") return kLoad;
    if (method == "store") return kStore;
    return kAtomic;
  }

  const Module &module_;
  std::set<const Function *> &visiting_;
  const sema::ParamTypes *known_;  // tl.constexpr parameters with values (one specialization), or null
  std::map<std::string, unsigned> accesses_;             // parameter -> PointerAccess bits
  // What each name holds at the point the walk has reached. An assignment
  // replaces it (`ptr = s_ptr + o` ... `ptr = z_ptr + o` are two pointers;
  // `bias = tl.load(bias + o)` makes `bias` a loaded value from then on); an
  // if's branches and a loop's iterations are joined, so that a name keeps
  // every value it may hold there.
  struct FlowState {
    std::map<std::string, std::set<std::string>> roots;         // name -> parameters its address derives from
    std::map<std::string, std::set<std::string>> loaded;        // name -> pointers whose loaded values it derives from
    std::map<std::string, std::set<std::string>> direct_loads;  // name -> the pointers it is exactly a load through

    void join(const FlowState &other) {
      auto join_map = [](std::map<std::string, std::set<std::string>> &into,
                         const std::map<std::string, std::set<std::string>> &from) {
        for (const auto &[name, set] : from) into[name].insert(set.begin(), set.end());
      };
      join_map(roots, other.roots);
      join_map(loaded, other.loaded);
      join_map(direct_loads, other.direct_loads);
    }
    bool operator==(const FlowState &other) const {
      return roots == other.roots && loaded == other.loaded && direct_loads == other.direct_loads;
    }

    // The entries of `names` (a name without one has none in the slice either).
    FlowState slice(const std::vector<std::string> &names) const {
      FlowState out;
      auto copy = [&](const std::map<std::string, std::set<std::string>> &from,
                      std::map<std::string, std::set<std::string>> &into) {
        for (const std::string &n : names)
          if (auto it = from.find(n); it != from.end()) into.emplace_hint(into.end(), *it);
      };
      copy(roots, out.roots);
      copy(loaded, out.loaded);
      copy(direct_loads, out.direct_loads);
      return out;
    }
    // The entries of `names` made those of `part`, a slice at them (absent where it has none).
    void restore(const FlowState &part, const std::vector<std::string> &names) {
      auto put = [&](const std::map<std::string, std::set<std::string>> &from,
                     std::map<std::string, std::set<std::string>> &into) {
        for (const std::string &n : names) {
          auto it = from.find(n);
          if (it == from.end()) into.erase(n);
          else into[n] = it->second;
        }
      };
      put(part.roots, roots);
      put(part.loaded, loaded);
      put(part.direct_loads, direct_loads);
    }
    // Whether the entries of `names` are those of `part`, a slice at them.
    bool same_on(const FlowState &part, const std::vector<std::string> &names) const {
      auto same = [&](const std::map<std::string, std::set<std::string>> &mine,
                      const std::map<std::string, std::set<std::string>> &theirs) {
        for (const std::string &n : names) {
          auto a = mine.find(n), b = theirs.find(n);
          if ((a == mine.end()) != (b == theirs.end())) return false;
          if (a != mine.end() && a->second != b->second) return false;
        }
        return true;
      };
      return same(roots, part.roots) && same(loaded, part.loaded) && same(direct_loads, part.direct_loads);
    }
  };
  FlowState flow_;
  std::set<std::string> int_literals_;  // names given an integer literal outside loops
  // Each loop body's walks: the state met (at the names it reads or
  // assigns) and the state left (at those it assigns) (walk_loop_body).
  struct LoopVisit {
    FlowState before, after;
    std::set<std::string> int_literals;
  };
  bool memo_ = true;  // TEMPORARY (TGRAD_CHECK_FIXPOINTS): false walks as before
  std::map<const StmtList *, std::vector<LoopVisit>> loop_visits_;
  std::map<const StmtList *, std::optional<BlockNames>> body_names_;  // names_of, per loop body
  std::map<const If *, std::optional<BlockNames>> if_names_;          // and per if
  int loop_depth_ = 0;
  std::set<std::string> pointers_, integer_pointers_;
  std::set<std::string> returned_;  // the roots of the addresses the function returns
  mutable std::map<const Function *, std::set<std::string>> returns_cache_;
};

// ------------------------------------------------------------ trials

SType pointer_to(DType d, bool not_none = false) {
  SType t = SType::tensor(sema::ElemType{d, true}, {});
  t.not_none = not_none;
  return t;
}
SType scalar_of(DType d) { return SType::tensor(sema::ElemType{d, false}, {}); }

// The names the code needs to be floats, where Triton refuses an int32: the operand of a math function that takes
// floats only (`tl.log(gamma)`), or a conditional expression's branch computed from one name with integers where the
// other branch is a float literal (`2 * scale if scale >= 1.0 else 2.0`: an int32 and a float do not merge). Callers
// pass a Python float there: such a runtime scalar's representative is fp32 first (int32 is still tried, and the
// forward refuses it as Triton does). One walk of the body, for every parameter.
std::set<std::string> float_scalars(const Module &module, const Function &fn) {
  // The one name `e` computes with integer literals, + - * and negation (int32 where that name is), or "".
  std::function<bool(const Expr &, std::string &)> integral = [&](const Expr &e, std::string &name) -> bool {
    if (auto *n = dyn_cast<Name>(&e)) {
      if (!name.empty() && name != n->id) return false;
      name = n->id;
      return true;
    }
    if (isa<IntLit>(&e)) return true;
    if (auto *u = dyn_cast<UnaryOp>(&e)) return u->op == UnaryOpKind::Neg && integral(*u->operand, name);
    if (auto *b = dyn_cast<BinOp>(&e))
      return (b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Sub || b->op == BinaryOpKind::Mul) &&
             integral(*b->lhs, name) && integral(*b->rhs, name);
    return false;
  };
  auto of_name = [&](const Expr &e) {
    std::string name;
    return integral(e, name) ? name : std::string();
  };
  auto float_literal = [](const Expr &e) {
    if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg) return isa<FloatLit>(u->operand.get());
    return isa<FloatLit>(&e);
  };
  auto float_only_math = [&](const Call &c) {
    std::string f;
    if (auto *a = dyn_cast<Attribute>(c.func.get())) {
      f = a->attr;
    } else if (auto *n = dyn_cast<Name>(c.func.get())) {
      const sema::ImportedName imported = sema::resolve_import(module, n->id);
      if (!imported.known_module || module.find_function(n->id)) return false;
      f = imported.member.empty() ? n->id : imported.member;
    }
    return sema::is_math_function(f) && f != "abs" && !sema::is_math_classification(f);
  };
  std::set<std::string> floats;
  visit_exprs(fn.body, [&](const Expr &e) {
    if (auto *c = dyn_cast<Call>(&e); c && float_only_math(*c))
      for (const ExprPtr &a : c->args) floats.insert(of_name(*a));
    if (auto *i = dyn_cast<IfExp>(&e)) {
      if (float_literal(*i->else_value)) floats.insert(of_name(*i->then_value));
      if (float_literal(*i->then_value)) floats.insert(of_name(*i->else_value));
    }
  });
  floats.erase("");
  return floats;
}

// A scalar's first representative: fp32 where its default is a float, or where the code needs a float (`floats`,
// float_scalars of its function).
DType first_scalar_dtype(const Param &p, const std::set<std::string> &floats) {
  return (p.default_value && isa<FloatLit>(p.default_value.get())) || floats.count(p.name) ? DType::FP32
                                                                                            : DType::Int32;
}

// One differentiation with representative types; its diagnostics kept aside.
struct Trial {
  sema::ParamTypes types;
  std::optional<Backward> backward;
  std::vector<Diagnostic> diagnostics;
  // Whether the forward itself types with `types`; false means Triton would refuse that launch too (where a
  // backward was written, the forward typed).
  bool forward_types = true;
};

// The first line where two backwards' sources differ, as "`a` against `b`".
std::string first_difference(const Backward &a, const Backward &b) {
  std::istringstream x(a.source), y(b.source);
  std::string lx, ly;
  while (true) {
    bool gx = static_cast<bool>(std::getline(x, lx)), gy = static_cast<bool>(std::getline(y, ly));
    if (!gx && !gy) return "the launch protocol (gradient buffers, scratch or tapes)";
    if (!gx || !gy || lx != ly) {
      auto trim = [](std::string s) {
        size_t k = s.find_first_not_of(' ');
        return k == std::string::npos ? std::string("(end)") : s.substr(k);
      };
      return "`" + trim(gx ? lx : "") + "` against `" + trim(gy ? ly : "") + "`";
    }
  }
}

// Representative types for the parameters `given` leaves open, by role (defined below).
sema::ParamTypes representative_of(const Function &fn, const std::vector<ParamRole> &roles,
                                   const sema::ParamTypes &given, DType float_type,
                                   const std::set<std::string> &floats);

class GenericDifferentiation {
 public:
  // `not_none`: parameters without a type known to be tensors (an optional pointer's tensor specialization): each
  // trial's pointer types for them are marked not None.
  GenericDifferentiation(const Module &module, const SourceManager &sources, const BackwardRequest &request,
                         DiagEngine &diags, const Function &fn, std::set<std::string> not_none = {})
      : module_(module), sources_(sources), request_(request), diags_(diags), fn_(fn), not_none_(std::move(not_none)),
        float_scalars_(float_scalars(module, fn)) {}

  std::optional<Backward> run() {
    // Every parameter typed: no representative to choose, and the roles below would decide nothing. Nor do
    // they where the others are tl.constexpr: their roles (a constexpr, or a dtype one) leave no pointer,
    // scalar or tile to try types for, and the kernel is differentiated as typed below.
    // A tl.constexpr whose default is a dtype (unsloth's `acc_dtype: tl.constexpr = tl.float32`) without a value
    // is one, though: each value is tried as for any dtype given as a tl.constexpr.
    bool all_typed = true;
    for (size_t k = 0; k < fn_.params.size(); ++k)
      all_typed &= request_.param_types.count(pname(k)) > 0 ||
                   (fn_.is_constexpr_param(k) && !is_tl_dtype(fn_.params[k].default_value.get()));
    if (all_typed) return differentiate_typed(module_, sources_, request_, diags_);
    std::vector<ParamRole> &roles = roles_ = param_roles(module_, fn_, request_.param_types);
    // A --wrt pointer this specialization does not load (`if HAS_WEIGHT:
    // b_x = tl.load(x + ...)` with HAS_WEIGHT false) is still the pointer the
    // other specializations load through: its gradient here is zero, not an
    // error about a scalar.
    for (size_t k = 0; k < fn_.params.size(); ++k)
      if ((roles[k] == ParamRole::Scalar || roles[k] == ParamRole::Unused) &&
          request_.pointers_in_some_specialization.count(pname(k)))
        roles[k] = ParamRole::FloatPointer;
    for (size_t k = 0; k < fn_.params.size(); ++k) {
      const Param &p = fn_.params[k];
      if (request_.param_types.count(p.name)) continue;
      switch (roles[k]) {
        case ParamRole::Constexpr:
        case ParamRole::Unused: break;
        case ParamRole::DTypeConstexpr: dtype_params_.push_back(k); break;
        case ParamRole::FloatPointer: float_pointers_.push_back(k); break;
        case ParamRole::IntegerPointer: integer_pointers_.push_back(k); break;
        case ParamRole::Scalar: scalars_.push_back(k); break;
        case ParamRole::Tile: tiles_.push_back(k); break;
      }
    }
    if (float_pointers_.empty() && integer_pointers_.empty() && scalars_.empty() && tiles_.empty() &&
        dtype_params_.empty())
      return differentiate_typed(module_, sources_, request_, diags_);
    for (size_t k : scalars_)
      if (std::find(request_.wrt.begin(), request_.wrt.end(), pname(k)) != request_.wrt.end()) {
        diags_.error(fn_.params[k].span, "'" + pname(k) + "' is a runtime scalar, as far as tgrad can tell (no address "
                                             "of a load or store in '" + fn_.name + "' starts from it): differentiate a "
                                             "kernel with respect to the pointers it loads through, or give its type: "
                                             "--arg " + pname(k) + "=*fp32");
        return std::nullopt;
      }
    for (size_t k : integer_pointers_)
      if (std::find(request_.wrt.begin(), request_.wrt.end(), pname(k)) != request_.wrt.end()) {
        diags_.error(fn_.params[k].span, "'" + pname(k) + "' points to integers, as far as tgrad can tell (what '" +
                                             fn_.name + "' loads through it is used as an integer: in an address, as a random seed or a gather index, in a bit "
                                             "operation or a floor division, as an operand of a tl.dot accumulated in integers, or as the "
                                             "value of a loop-carried integer): it carries no "
                                             "gradient. Leave it out of --wrt, or give its type: --arg " + pname(k) +
                                             "=*fp32");
        return std::nullopt;
      }
    return tiles_.empty() ? run_kernel() : run_tile_function();
  }

 private:
  const std::string &pname(size_t k) const { return fn_.params[k].name; }


  Trial attempt(const sema::ParamTypes &given) const {
    sema::ParamTypes types = given;
    for (const std::string &n : not_none_)
      if (auto it = types.find(n); it != types.end() && it->second.is_tensor()) it->second.not_none = true;
    Trial t;
    t.types = types;
    BackwardRequest r = request_;
    r.param_types = types;
    for (size_t k : float_pointers_) r.generic_params.insert(pname(k));
    for (size_t k : integer_pointers_) r.generic_params.insert(pname(k));
    for (size_t k : scalars_) r.generic_params.insert(pname(k));
    for (size_t k : tiles_) r.generic_params.insert(pname(k));
    r.generic_shapes = !tiles_.empty();
    DiagEngine quiet(sources_);
    t.backward = differentiate_typed(module_, sources_, r, quiet);
    t.diagnostics = quiet.diagnostics();
    if (!t.backward) {
      DiagEngine forward(sources_);
      t.forward_types = sema::analyze(module_, fn_, types, forward).has_value();
    }
    if (const char *debug = std::getenv("TGRAD_DEBUG_TRIALS")) {
      quiet.print_all(std::cerr);
      // TGRAD_DEBUG_TRIALS=source: each trial's backward as well, after its types (which two differ, and where).
      if (std::string(debug) == "source" && t.backward) {
        std::string line = "# trial:";
        for (const auto &[n, type] : types) line += " " + n + "=" + type.str();
        std::cerr << line << "\n" << t.backward->source << "\n";
      }
    }
    return t;
  }

  // The trials for several type assignments, in their order. They are
  // independent (each differentiates the const module with its own
  // diagnostics), so they run on threads: a tile function of two tiles takes
  // eleven trials, and a long one (unrolled static_range loops) seconds each.
  std::vector<Trial> attempt_all(const std::vector<sema::ParamTypes> &types) const {
    std::vector<Trial> trials(types.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t k; (k = next++) < types.size();) trials[k] = attempt(types[k]);
    };
    const size_t threads = std::min<size_t>(types.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t k = 1; k < threads; ++k) pool.emplace_back(work);
    work();
    for (std::thread &t : pool) t.join();
    return trials;
  }

  DType scalar_first(size_t k) const { return first_scalar_dtype(fn_.params[k], float_scalars_); }

  // Keeps `t` when its backward equals the representative's; a located
  // error naming `param` when it differs.
  bool compare(const Trial &t, size_t param, const std::string &what) {
    if (!t.backward) {  // the forward rejects this type: so would Triton
      if (!t.forward_types) record(rejected_, pname(param), shown(t.types.at(pname(param))));
      return true;
    }
    if (same_backward(*base_->backward, *t.backward)) {
      record(pname(param), shown(t.types.at(pname(param))));
      return true;
    }
    diags_.error(fn_.params[param].span,
                 "the backward of '" + fn_.name + "' depends on " + what + " of '" + pname(param) + "': with " +
                     pname(param) + "=" + base_->types.at(pname(param)).str() + " and " + pname(param) + "=" +
                     t.types.at(pname(param)).str() + " it differs (" + first_difference(*base_->backward, *t.backward) +
                     "); give its type: --arg " + pname(param) + "=TYPE");
    return false;
  }

  // A type as the Generic line shows it: a dtype as the kernel names it.
  static std::string shown(const SType &t) {
    return t.kind == SType::Kind::DType ? std::string("tl.") + sema::tl_name(t.dtype) : t.str();
  }

  void record(const std::string &param, const std::string &type) { record(checked_, param, type); }
  static void record(std::vector<std::pair<std::string, std::vector<std::string>>> &into, const std::string &param,
                     const std::string &type) {
    for (auto &[p, types] : into)
      if (p == param) {
        if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
        return;
      }
    into.push_back({param, {type}});
  }

  // A uniform float type the forward accepts but whose backward tgrad could not write, and that no float32
  // statistic pointer served either: the backward is written without it, and the module refuses a launch with
  // it. Said here, with the reason, rather than first at that launch.
  void warn_unserved(const std::vector<Trial> &uniform) {
    for (const Trial &t : uniform) {
      if (t.backward || !t.forward_types || float_pointers_.empty()) continue;
      const std::string type = t.types.at(pname(float_pointers_.front())).str();
      bool served = false;
      for (const auto &[param, types] : checked_)
        if (param == pname(float_pointers_.front()))
          served = std::find(types.begin(), types.end(), type) != types.end();
      if (served) continue;
      std::string why;
      for (const Diagnostic &d : t.diagnostics)
        if (d.severity == Severity::Error) {
          why = (d.span.valid() ? "line " + std::to_string(d.span.begin.line) + ": " : std::string()) + d.message;
          break;
        }
      std::string all;
      for (size_t k : float_pointers_) all += (all.empty() ? "" : " ") + std::string("--arg ") + pname(k) + "=" + type;
      diags_.warning(fn_.name_span, "the backward is written for the other float types only: with every pointer " +
                                        type + " tgrad could not write it" + (why.empty() ? "" : " (" + why + ")") +
                                        "; the module refuses such a launch (" + all + " shows the error)");
    }
  }

  // What tgrad assumed, for the error when no representative differentiates.
  void explain_assumptions(const Trial &t) {
    std::string list;
    for (const auto &[name, type] : t.types)
      if (!request_.param_types.count(name)) list += (list.empty() ? "" : ", ") + name + "=" + type.str();
    for (const Diagnostic &d : t.diagnostics) diags_.report(d);
    diags_.note(fn_.name_span, "tgrad chose these types for the parameters given none: " + list +
                                   "; if one is wrong, give it with --arg NAME=TYPE");
  }

  std::optional<Backward> finish() {
    Backward b = std::move(*base_->backward);
    for (const Diagnostic &d : base_->diagnostics) diags_.report(d);
    // Parameters in the function's order.
    for (const Param &p : fn_.params) {
      for (auto &entry : checked_)
        if (entry.first == p.name) b.generic_types.push_back(entry);
      for (auto &entry : rejected_)
        if (entry.first == p.name) b.forward_rejected_types.push_back(entry);
    }
    b.source = annotate(b);
    return b;
  }

  // The header says what the backward was checked for.
  static std::string annotate(const Backward &b) {
    const size_t at = header_length(b.source);
    return b.source.substr(0, at) + generic_types_line(b.generic_types) + b.source.substr(at);
  }

  sema::ParamTypes with_uniform(DType d) const {
    return representative_of(fn_, roles_, request_.param_types, d, float_scalars_);
  }

  // A kernel's check against its representative `base`: one parameter's type changed.
  struct Check {
    size_t param;
    std::string what;
    bool record_only;  // records the parameter's representative type, tries nothing
  };

  // Each pointer alone with each other float type, then each dtype given as
  // a tl.constexpr (the uniform one, then each other alone), then each scalar
  // with the other kind: the types to try, and in `checks` what each says.
  std::vector<sema::ParamTypes> check_types_for(const sema::ParamTypes &base, std::vector<Check> &checks) const {
    const DType floats[] = {DType::FP32, DType::FP16, DType::BF16};
    std::vector<sema::ParamTypes> check_types;
    for (size_t k : float_pointers_)
      for (DType d : floats) {
        if (d == base.at(pname(k)).elem.dtype) continue;
        sema::ParamTypes types = base;
        types[pname(k)] = pointer_to(d);
        checks.push_back({k, "the element type", false});
        check_types.push_back(std::move(types));
      }
    for (size_t k : dtype_params_) {
      checks.push_back({k, "", true});
      for (DType d : floats) {
        if (d == base.at(pname(k)).dtype) continue;
        sema::ParamTypes types = base;
        types[pname(k)] = SType::of_dtype(d);
        checks.push_back({k, "the value", false});
        check_types.push_back(std::move(types));
      }
    }
    for (size_t k : scalars_) {
      sema::ParamTypes types = base;
      types[pname(k)] = scalar_of(scalar_first(k) == DType::Int32 ? DType::FP32 : DType::Int32);
      checks.push_back({k, "the type", false});
      check_types.push_back(std::move(types));
    }
    return check_types;
  }

  std::optional<Backward> run_kernel() {
    const DType floats[] = {DType::FP32, DType::FP16, DType::BF16};
    // The representative: the first uniform float type the forward accepts.
    std::vector<sema::ParamTypes> uniform_types;
    for (DType d : floats) uniform_types.push_back(with_uniform(d));
    // The checks below vary one parameter of the representative at a time.
    // The representative is almost always the first uniform type (fp32), so
    // the checks for it run in the same batch as the uniform trials (a kernel
    // of three pointers and a scalar: ten trials in five rounds on two cores,
    // where three and then seven took six).
    // They are used only where fp32 is the representative; their verdicts
    // are still taken in the order below, so the outcome is the same.
    std::vector<Check> likely_checks;
    std::vector<sema::ParamTypes> batch = uniform_types, likely_types = check_types_for(uniform_types.front(), likely_checks);
    batch.insert(batch.end(), likely_types.begin(), likely_types.end());
    std::vector<Trial> uniform = attempt_all(batch);
    std::vector<Trial> likely_tried(std::make_move_iterator(uniform.begin() + uniform_types.size()),
                                    std::make_move_iterator(uniform.end()));
    uniform.resize(uniform_types.size());
    for (Trial &t : uniform)
      if (t.backward && !base_) base_ = &t;
    // Where no uniform type serves, one pointer of another float type may:
    // fp16 data with a float32 statistic that the backward reads back
    // exactly (attention's logsumexp M), which asserts its dtype.
    std::vector<Trial> mixed;
    if (!base_ && float_pointers_.size() > 1) {
      std::vector<sema::ParamTypes> mixed_types;
      // (A float32 pointer among fp16, then bf16, data first: the statistic's case.)
      for (DType e : floats)
        for (DType d : floats)
          for (size_t k : float_pointers_) {
            if (e == d) continue;
            sema::ParamTypes types = with_uniform(d);
            types[pname(k)] = pointer_to(e);
            mixed_types.push_back(std::move(types));
          }
      mixed = attempt_all(mixed_types);
      for (Trial &t : mixed)
        if (t.backward && !base_) base_ = &t;
    }
    if (!base_) {
      // The errors of the first representative with which the forward itself
      // types (stay_attention's `tl.dot(q.to(tl.float16), k.T)` is refused
      // with fp32 pointers, as Triton would refuse it: the fp16 trial's error
      // is the one that says what tgrad cannot do yet).
      const Trial *shown = &uniform.front();
      for (const Trial &t : uniform)
        if (t.forward_types) {
          shown = &t;
          break;
        }
      explain_assumptions(*shown);
      return std::nullopt;
    }
    for (size_t k : integer_pointers_) record(pname(k), base_->types.at(pname(k)).str());
    for (size_t k : scalars_) record(pname(k), base_->types.at(pname(k)).str());
    for (size_t k : float_pointers_) record(pname(k), base_->types.at(pname(k)).str());
    // A uniform type the forward accepts but whose backward tgrad could not write (a softmax statistic read
    // back must be float32): that type for the data with one pointer float32 serves, where it gives the same
    // backward (fp16 attention with its float32 logsumexp).
    std::vector<sema::ParamTypes> statistic_types;
    for (const Trial &t : uniform) {
      if (t.backward || !t.forward_types) continue;  // (refused by the forward: so would Triton refuse it)
      for (size_t k : float_pointers_) {
        if (t.types.at(pname(k)).elem.dtype == DType::FP32) continue;
        sema::ParamTypes types = t.types;
        types[pname(k)] = pointer_to(DType::FP32);
        statistic_types.push_back(std::move(types));
      }
    }
    for (const Trial &t : attempt_all(statistic_types))
      if (t.backward && same_backward(*base_->backward, *t.backward))
        for (size_t k : float_pointers_) record(pname(k), t.types.at(pname(k)).str());
    warn_unserved(uniform);
    bool ok = true;
    // Every accepted uniform type, then each pointer alone with each other
    // float type, then each dtype given as a tl.constexpr (the uniform one,
    // then each other alone), then each scalar with the other kind. The
    // trials run together; their verdicts are taken in this order, and the
    // first difference stops the check.
    for (const Trial &t : uniform) {
      if (!t.forward_types)  // the forward rejects it: so would Triton
        for (size_t k : float_pointers_) record(rejected_, pname(k), t.types.at(pname(k)).str());
      if (&t == base_ || !t.backward) continue;
      if (!same_backward(*base_->backward, *t.backward)) {
        size_t first = float_pointers_.front();
        ok &= compare(t, first, "the element type");
      } else {
        for (size_t k : float_pointers_) record(pname(k), t.types.at(pname(k)).str());
      }
    }
    std::vector<Check> checks;
    std::vector<sema::ParamTypes> check_types = check_types_for(base_->types, checks);
    std::vector<Trial> tried;
    if (ok) tried = base_ == &uniform.front() ? std::move(likely_tried) : attempt_all(check_types);
    size_t next_trial = 0;
    for (const Check &c : checks) {
      if (!ok) break;
      if (c.record_only)
        record(pname(c.param), shown(base_->types.at(pname(c.param))));
      else
        ok &= compare(tried[next_trial++], c.param, c.what);
    }
    if (!ok) return std::nullopt;
    return finish();
  }

  std::optional<Backward> run_tile_function() {
    // Ranks 0 to 2 for each tile (all combinations up to four tiles, else
    // the same rank for all), each dimension a symbol; fp32 first.
    const size_t n = tiles_.size();
    std::vector<std::vector<int>> ranks;
    if (n <= 4) {
      std::vector<int> r(n, 0);
      while (true) {
        ranks.push_back(r);
        size_t k = 0;
        while (k < n && ++r[k] == 3) r[k++] = 0;
        if (k == n) break;
      }
    } else {
      for (int r = 0; r < 3; ++r) ranks.push_back(std::vector<int>(n, r));
    }
    auto types_for = [&](const std::vector<int> &r, DType d) {
      sema::ParamTypes types = with_uniform(DType::FP32);
      for (size_t j = 0; j < n; ++j) {
        sema::SymShape shape;
        for (int a = 0; a < r[j]; ++a) shape.push_back(sema::Dim::symbolic(pname(tiles_[j]) + "_" + std::to_string(a)));
        types[pname(tiles_[j])] = SType::tensor(sema::ElemType{d, false}, shape);
      }
      return types;
    };
    const DType others[] = {DType::FP16, DType::BF16};
    // The dtype trials below keep the representative's ranks, almost always
    // the first (every tile a scalar): they run in the same batch as the rank
    // trials, so that no core waits between the two (eleven trials for two
    // tiles), and are used only where those are the representative's ranks.
    std::vector<sema::ParamTypes> batch;
    for (const std::vector<int> &r : ranks) batch.push_back(types_for(r, DType::FP32));
    for (DType d : others) batch.push_back(types_for(ranks.front(), d));
    std::vector<Trial> trials = attempt_all(batch);
    std::vector<Trial> likely_by_dtype(std::make_move_iterator(trials.begin() + ranks.size()),
                                       std::make_move_iterator(trials.end()));
    trials.resize(ranks.size());
    for (size_t k = 0; k < trials.size(); ++k)
      if (trials[k].backward && !base_) {
        base_ = &trials[k];
        base_ranks_ = ranks[k];
      }
    if (!base_) {
      // The all-rank-1 trial's errors say most about the code.
      size_t one = 0;
      for (size_t k = 0; k < ranks.size(); ++k)
        if (std::all_of(ranks[k].begin(), ranks[k].end(), [](int x) { return x == 1; })) one = k;
      explain_assumptions(trials[one]);
      return std::nullopt;
    }
    bool ok = true;
    for (size_t k = 0; k < trials.size() && ok; ++k) {
      const Trial &t = trials[k];
      if (!t.backward) continue;
      size_t differing = tiles_.front();
      for (size_t j = 0; j < n; ++j)
        if (ranks[k][j] != base_ranks_[j]) differing = tiles_[j];
      if (!same_backward(*base_->backward, *t.backward)) {
        ok &= compare(t, differing, "the shape");
        break;
      }
      for (size_t j = 0; j < n; ++j) record(pname(tiles_[j]), t.types.at(pname(tiles_[j])).str());
    }
    std::vector<Trial> by_dtype;
    if (ok)
      by_dtype = base_ranks_ == ranks.front() ? std::move(likely_by_dtype)
                                               : attempt_all({types_for(base_ranks_, others[0]), types_for(base_ranks_, others[1])});
    for (const Trial &t : by_dtype) {
      if (!ok) break;
      if (!t.backward) continue;
      if (!same_backward(*base_->backward, *t.backward)) {
        ok &= compare(t, tiles_.front(), "the element type");
        break;
      }
      for (size_t j = 0; j < n; ++j) record(pname(tiles_[j]), t.types.at(pname(tiles_[j])).str());
    }
    if (!ok) return std::nullopt;
    return finish();
  }

  const Module &module_;
  const SourceManager &sources_;
  const BackwardRequest &request_;
  DiagEngine &diags_;
  const Function &fn_;
  std::vector<ParamRole> roles_;  // each parameter's role, as run() decided it
  std::vector<size_t> float_pointers_, integer_pointers_, scalars_, tiles_, dtype_params_;
  Trial *base_ = nullptr;
  std::vector<int> base_ranks_;
  std::vector<std::pair<std::string, std::vector<std::string>>> checked_;
  std::vector<std::pair<std::string, std::vector<std::string>>> rejected_;  // types the forward itself refuses
  std::set<std::string> not_none_;
  const std::set<std::string> float_scalars_;  // (float_scalars: the scalars whose representative is fp32 first)
};

}  // namespace

// The same backward: the same code and the same launch protocol.
bool same_backward(const Backward &a, const Backward &b) {
  if (!equal(*a.module, *b.module)) return false;
  if (a.gradient_buffers != b.gradient_buffers || a.zero_initialized != b.zero_initialized ||
      a.consumed_upstream != b.consumed_upstream ||
      a.saved_outputs != b.saved_outputs || a.num_programs_param != b.num_programs_param ||
      a.partial_sums.size() != b.partial_sums.size() || a.tapes.size() != b.tapes.size() ||
      a.zero_gradients.size() != b.zero_gradients.size())
    return false;
  for (size_t k = 0; k < a.partial_sums.size(); ++k)
    if (a.partial_sums[k].input != b.partial_sums[k].input || a.partial_sums[k].scratch != b.partial_sums[k].scratch)
      return false;
  for (size_t k = 0; k < a.tapes.size(); ++k)
    if (a.tapes[k].scratch != b.tapes[k].scratch || a.tapes[k].tile_shape != b.tapes[k].tile_shape ||
        a.tapes[k].trips_param != b.tapes[k].trips_param || a.tapes[k].dtype != b.tapes[k].dtype)
      return false;
  for (size_t k = 0; k < a.zero_gradients.size(); ++k)
    if (a.zero_gradients[k].first != b.zero_gradients[k].first) return false;
  return true;
}

size_t header_length(const std::string &source) {
  size_t at = 0;
  while (at < source.size() && source[at] == '#') {
    size_t nl = source.find('\n', at);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return at;
}

std::string generic_types_line(const std::vector<std::pair<std::string, std::vector<std::string>>> &types) {
  std::string note = "# Generic: the same backward for";
  for (size_t k = 0; k < types.size(); ++k) {
    note += k ? "; " : " ";
    note += types[k].first + " =";
    for (size_t j = 0; j < types[k].second.size(); ++j) note += (j ? ", " : " ") + types[k].second[j];
  }
  return note + ".\n";
}

namespace {

// Representative types for the parameters `given` leaves open, by role.
sema::ParamTypes representative_of(const Function &fn, const std::vector<ParamRole> &roles,
                                   const sema::ParamTypes &given, DType float_type,
                                   const std::set<std::string> &floats) {
  sema::ParamTypes types = given;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const Param &p = fn.params[k];
    // (An optional pointer known to be a tensor gets a pointer type, marked not None.)
    const auto given_type = types.find(p.name);
    const bool tensor = given_type != types.end() && is_tensor_pointer_marker(given_type->second);
    if (given_type != types.end() && !tensor) continue;
    if (tensor) types.erase(p.name);
    switch (roles[k]) {
      case ParamRole::FloatPointer: types[p.name] = pointer_to(float_type, tensor); break;
      case ParamRole::IntegerPointer: types[p.name] = pointer_to(DType::Int32, tensor); break;
      case ParamRole::Scalar: types[p.name] = scalar_of(first_scalar_dtype(p, floats)); break;
      case ParamRole::DTypeConstexpr: types[p.name] = SType::of_dtype(float_type); break;
      case ParamRole::Constexpr:
      case ParamRole::Unused:
      case ParamRole::Tile: break;
    }
  }
  return types;
}

}  // namespace

std::vector<ParamRole> param_roles(const Module &module, const Function &fn, const sema::ParamTypes &known,
                                   RoleMemo *memo) {
  if (memo && !memo->serves(module, fn)) memo = nullptr;
  std::set<const Function *> visiting{&fn};
  std::vector<ParamRole> every_branch;
  if (memo && memo->every_branch_) {
    every_branch = *memo->every_branch_;
  } else {
    every_branch = RoleFinder(module, visiting, nullptr).run(fn);
    if (memo) memo->every_branch_ = every_branch;
  }
  if (known.empty()) return every_branch;
  RoleFinder finder(module, visiting, &known);
  std::vector<ParamRole> taken;
  if (memo) {
    const std::string branches = finder.branches_taken(fn.body);
    auto it = memo->taken_.find(branches);
    taken = it != memo->taken_.end() ? it->second : (memo->taken_[branches] = finder.run(fn));
  } else {
    taken = finder.run(fn);
  }
  // TEMPORARY (TGRAD_CHECK_FIXPOINTS): the memo's answers against fresh walks.
  if (memo && std::getenv("TGRAD_CHECK_FIXPOINTS")) {
    std::set<const Function *> v{&fn};
    if (RoleFinder(module, v, nullptr).run(fn) != every_branch || RoleFinder(module, v, &known).run(fn) != taken) {
      std::cerr << "TGRAD_CHECK_FIXPOINTS: memoized roles of " << fn.name << " differ\n";
      std::abort();
    }
  }
  // A parameter the taken branches leave unused keeps the role the others
  // give it: a weight pointer with HAS_WEIGHT=False is still a pointer (its
  // gradient is zero), not a number.
  for (size_t k = 0; k < taken.size(); ++k)
    if (taken[k] == ParamRole::Unused) taken[k] = every_branch[k];
  if (taken == every_branch) return taken;
  // The roles of every branch, where this specialization types with them (a
  // pointer only advanced or tested against None here, `q += off`); the
  // taken branches' only where it does not (fla's seq_offsets: a pointer
  // with one flag value, added to offsets as a number with the other).
  const std::set<std::string> floats = memo ? memo->float_scalars() : float_scalars(module, fn);
  for (DType d : {DType::FP32, DType::FP16, DType::BF16}) {
    SourceManager scratch;
    DiagEngine quiet(scratch);
    if (sema::analyze(module, fn, representative_of(fn, every_branch, known, d, floats), quiet)) return every_branch;
  }
  return taken;
}

std::vector<unsigned> pointer_accesses(const Module &module, const Function &fn) {
  std::set<const Function *> visiting{&fn};
  RoleFinder finder(module, visiting);
  finder.run(fn);
  std::vector<unsigned> out;
  for (const Param &p : fn.params) out.push_back(finder.accesses(p.name));
  return out;
}

sema::ParamTypes uniform_representative(const Module &module, const Function &fn, const sema::ParamTypes &given,
                                        DType float_type, RoleMemo *memo) {
  if (memo && !memo->serves(module, fn)) memo = nullptr;
  return representative_of(fn, param_roles(module, fn, given, memo), given, float_type,
                           memo ? memo->float_scalars() : float_scalars(module, fn));
}

const std::set<std::string> &RoleMemo::float_scalars() const {
  if (!float_scalars_) float_scalars_ = ad::float_scalars(*module_, *fn_);
  return *float_scalars_;
}

std::optional<Backward> differentiate_generic(const Module &user_module, const SourceManager &sources,
                                              const BackwardRequest &request, DiagEngine &diags) {
  // Conditional expressions the flags' values decide (one specialization's)
  // reduced first: A-normal form would name their branches as locals, and
  // Triton needs some of them as constexprs (a block shape chosen by a flag).
  // Optional pointers a specialization knows are tensors (tensor_pointer_marker): without a type here, for the
  // trials to type, and not None.
  BackwardRequest untyped = request;
  std::set<std::string> not_none;
  for (const auto &[name, type] : request.param_types)
    if (is_tensor_pointer_marker(type)) {
      not_none.insert(name);
      untyped.param_types.erase(name);
    }
  std::unique_ptr<Module> folded = lower::fold_decided_conditionals(user_module, untyped.function, untyped.param_types);
  const Module &module = folded ? *folded : user_module;
  const Function *fn = module.find_function(untyped.function);
  if (!fn) return differentiate_typed(module, sources, untyped, diags);
  std::optional<Backward> out = GenericDifferentiation(module, sources, untyped, diags, *fn, not_none).run();
  if (out && folded && !out->forward) out->forward = std::shared_ptr<const Function>(clone(*fn).release());
  return out;
}

}  // namespace tgrad::ad
