// The backward's finishing: imports, called functions, result casts, the
// header comment and the final check by semantic analysis.
#include <sstream>

#include <algorithm>
#include <functional>

#include "src/ad/PointerElementTypes.h"
#include "src/ad/ProvenShapes.h"
#include "src/ad/Readability.h"
#include "src/ad/reverse/DeadCode.h"
#include "src/ad/reverse/DiscardedRows.h"
#include "src/ad/reverse/DotScaling.h"
#include "src/ad/reverse/MaskPeeling.h"
#include "src/ad/reverse/Engine.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"
#include "tgrad/tgrad.h"

namespace tgrad::ad::reverse {

void Engine::finish(std::unique_ptr<Function> bwd, const sema::ParamTypes &bwd_types, bool cast_returned_adjoints,
                    Backward &result) {
  DiagEngine check(sources_);
  std::unique_ptr<Module> context = checking_module();
  std::optional<sema::TypeInfo> bwd_info = sema::analyze(*context, *bwd, bwd_types, check);
  if (!bwd_info) {
    std::ostringstream msg;
    check.print_all(msg);
    fail(fn_->name_span, "internal error: the generated backward of '" + fn_->name +
                             "' failed semantic analysis (please report):\n" + msg.str() + emit::print_function(*bwd));
  }
  // A cast that is a no-op for the representative dtype is not one for
  // the others: a generic backward keeps them all.
  std::vector<ExprPtr> removed_casts;  // (bwd_info names their nodes, and make_readable may read it)
  if (!generic()) remove_noop_casts(bwd->body, *bwd_info, removed_casts);
  if (cast_returned_adjoints) cast_results(*bwd, *bwd_info);

  auto out = std::make_unique<Module>();
  result.backward_name = bwd->name;
  // The names the backward reads, inside loops and ifs too (a long one's
  // largest walk): found once, for the helpers it calls and its imports
  // (hash sets: only looked up, and the order of the functions and imports
  // added is the module's).
  std::unordered_set<std::string> bwd_read;
  block_reads(bwd->body, bwd_read);
  const Function *bwd_fn = bwd.get();
  add_called_functions(bwd_read, *out);
  for (auto &f : extra_functions_) {
    bool dup = false;
    for (const auto &e : out->functions) dup |= e->name == f->name;
    if (!dup) out->functions.push_back(std::move(f));
  }
  for (const auto &owner : owner_functions_) {
    std::unordered_set<std::string> owner_read;
    block_reads(owner->body, owner_read);
    add_called_functions(owner_read, *out);
  }
  // Where owner-computes kernels write every gradient, the backward kernel has nothing left to do.
  if (result.backward_kernel_writes) out->functions.push_back(std::move(bwd));
  for (auto &owner : owner_functions_) out->functions.push_back(std::move(owner));
  owner_functions_.clear();
  // Inside loops and ifs too: a name used only there still needs its import.
  std::unordered_set<std::string> read;
  for (const auto &f : out->functions)
    if (f.get() == bwd_fn) read.insert(bwd_read.begin(), bwd_read.end());
    else block_reads(f->body, read);
  // The module constants any emitted function reads (the user's helpers and their backwards too).
  for (const Constant &c : module_.constants) {
    bool have = false;
    for (const Constant &d : out->constants) have |= d.name == c.name;
    if (!have && read.count(c.name)) out->constants.push_back({c.name, c.span, clone(*c.stmt)});
  }
  add_imports(*out, read);
  // A value kept only for the dtype it was cast to (`stored_out.dtype`) is not computed for it.
  bool bwd_rewritten = false;
  for (auto &f : out->functions)
    if (!module_.find_function(f->name) && read_types_from_casts(f->body) > 0) {
      remove_dead_code(f->body);
      bwd_rewritten |= f.get() == bwd_fn;
    }
  // The readability pass types each function it rewrites with bwd_types_. Where the backward was checked with
  // those very types (a kernel's) and has changed since only by dropping no-op casts (the same types) and
  // casting what it returns (a node that pass reads no type of), the check's types serve it: sema does not
  // run twice over the longest function. (A tile function's bwd_types_ are empty: it types it anew.)
  const bool same_types = &bwd_types == &bwd_types_ && !bwd_rewritten;
  make_readable(*out, result, bwd_fn, same_types ? &*bwd_info : nullptr);
  // A backward loop copies the forward's `tl.range(..., warp_specialize=...)`, a hint the forward's author gave for
  // the forward's loop body (a pipeline of loads and dots). Triton's warp specialization compiles only loops of
  // the shapes it knows, and a backward loop holds other work (the Triton tutorial's attention, launched with
  // warp_specialize=True on an H100, failed to compile its backward: PassManager::run failed). A hint changes no
  // value: the backward's loops go without it.
  for (auto &f : out->functions)
    if (!module_.find_function(f->name))
      rewrite_exprs(f->body, [](ExprPtr &e) {
        if (auto *c = dyn_cast<Call>(e.get()); c && callee_last_part(*c) == "range")
          c->keywords.erase(std::remove_if(c->keywords.begin(), c->keywords.end(),
                                           [](const Keyword &k) { return k.name == "warp_specialize"; }),
                            c->keywords.end());
      });
  peel_masks(*out, result);
  result.source = header() + emit::print_module(*out);
  result.module = std::move(out);
}

namespace {

// Calls `fn` on every assignment of `body`, in ifs and loops too, in program order.
void for_each_assignment(const StmtList &body, const std::function<void(const Assign &)> &fn) {
  for (const StmtPtr &s : body) {
    if (auto *a = dyn_cast<Assign>(s.get())) {
      fn(*a);
    } else if (auto *i = dyn_cast<If>(s.get())) {
      for_each_assignment(i->body, fn);
      for_each_assignment(i->orelse, fn);
    } else if (auto *f = dyn_cast<For>(s.get())) {
      for_each_assignment(f->body, fn);
    } else if (auto *w = dyn_cast<While>(s.get())) {
      for_each_assignment(w->body, fn);
    }
  }
}

// A buffer-dtype assertion for a value read back (read_back_assertion_message) whose read-back dead-code
// removal dropped guards nothing: without it, a generic backward would demand that dtype of a buffer it never
// reads (a kernel storing tl.sum(x) as its output: the sum's adjoint needs no value of it).
void drop_unguarded_read_back_assertions(StmtList &body) {
  std::set<std::string> assigned;
  for_each_assignment(body, [&](const Assign &a) {
    for (const ExprPtr &t : a.targets)
      if (auto *n = dyn_cast<Name>(t.get())) assigned.insert(n->id);
  });
  std::function<void(StmtList &)> drop = [&](StmtList &block) {
    for (size_t k = block.size(); k-- > 0;) {
      if (std::optional<std::string> v = read_back_assertion_value(*block[k]); v && !assigned.count(*v)) {
        erase_keeping_comment(block, k);
      } else if (auto *f = dyn_cast<For>(block[k].get())) {
        drop(f->body);
      } else if (auto *i = dyn_cast<If>(block[k].get())) {
        drop(i->body);
        drop(i->orelse);
      }
    }
  };
  drop(body);
}

// The names assigned values that sema types as integer or boolean tensors
// (not pointers): index arithmetic and masks.
std::set<std::string> integer_values(const StmtList &body, const sema::TypeInfo &info) {
  std::set<std::string> out;
  for_each_assignment(body, [&](const Assign &a) {
    if (a.targets.size() != 1) return;
    if (auto *n = dyn_cast<Name>(a.targets[0].get())) {
      const sema::SType *t = info.type_of(a.value.get());
      if (t && t->is_tensor() && !t->elem.is_pointer && sema::is_integer(t->elem.dtype)) out.insert(n->id);
    }
  });
  return out;
}

// `seeds` and the names assigned from them, directly or through others (twice over the body: a loop's later
// assignment feeds its earlier reads in the next iteration).
std::set<std::string> computed_from(const StmtList &body, std::set<std::string> seeds) {
  for (int pass = 0; pass < 2; ++pass)
    for_each_assignment(body, [&](const Assign &a) {
      std::set<std::string> read;
      reads(*a.value, read);
      if (std::any_of(read.begin(), read.end(), [&](const std::string &n) { return seeds.count(n) > 0; }))
        for (const ExprPtr &t : a.targets) reads(*t, seeds);
    });
  return seeds;
}

}  // namespace

void Engine::make_readable(Module &out, const Backward &result, const Function *checked_fn,
                           const sema::TypeInfo *checked) {
  // The names a reader knows: the user's (in the differentiated function and
  // in the helpers of the module the output keeps as written; not in the
  // file's other kernels, whose names a reader of this backward never saw)
  // and those the launch protocol explains.
  std::set<std::string> keep;
  std::map<std::string, int> user;
  std::set<const Function *> read;  // the differentiated function and the module's functions it calls, at any depth
  // (The function as the user wrote it: fn_ may be a rewrite whose names, `choice`, `x_in_memory_stored`, are tgrad's.)
  const Function *written = module_.find_function(fn_->name);
  std::vector<const Function *> pending = {written ? written : fn_};
  for (const auto &g : out.functions)
    if (const Function *f = module_.find_function(g->name)) pending.push_back(f);
  while (!pending.empty()) {
    const Function *f = pending.back();
    pending.pop_back();
    if (!read.insert(f).second) continue;
    visit_exprs(f->body, [&](const Expr &e) {
      auto *c = dyn_cast<Call>(&e);
      auto *callee = c ? dyn_cast<Name>(c->func.get()) : nullptr;
      if (const Function *g = callee ? module_.find_function(callee->id) : nullptr) pending.push_back(g);
    });
  }
  for (const Function *f : read) {
    count_assignments(f->body, user);
    for (const Param &p : f->params) user[p.name];
  }
  // (Not the adjoints of its values: `bdenom` read once is folded into its use, as a
  // person writes `dx = y * (dy - tl.sum(dy * y))`; one read more than once
  // or too long to fold keeps its name.)
  // The gradients of a tile function's parameters keep their names: its
  // backward returns `bx, by`.
  for (const auto &kv : user) keep.insert(kv.first);
  for (const auto &f : module_.functions)
    for (const Param &p : f->params) keep.insert("b" + p.name);
  for (const Backward::Tape &t : result.tapes) keep.insert(t.value);
  for (const Backward::SavedTile &t : result.saved_tiles) keep.insert(t.value);
  // Shape checks sema proves, and broadcasts of scalars, go first: a value
  // an assertion reads is not one a fold may move (src/ad/ProvenShapes.h).
  std::set<std::string> pointers = pointer_params();
  for (const auto &[param, type] : bwd_types_)  // (a generic backward's: their representative types)
    if (type.is_tensor() && type.elem.is_pointer) pointers.insert(param);
  for (const Backward::SavedTile &t : result.saved_tiles) pointers.insert(t.scratch);
  // Where the functions are typed: the user's module and every emitted function as it is before any is
  // rewritten (cloned, unless the one typed already is all there is to type).
  std::unique_ptr<Module> context;
  for (const auto &f : out.functions)
    if (!module_.find_function(f->name) && !(f.get() == checked_fn && checked)) {
      context = checking_module();
      for (const auto &g : out.functions)
        if (!context->find_function(g->name)) context->functions.push_back(clone(*g));
      break;
    }
  for (auto &f : out.functions) {
    if (module_.find_function(f->name)) continue;  // the user's helpers, as written
    sema::ParamTypes types = bwd_types_;
    for (auto it = types.begin(); it != types.end();)  // (a type for a parameter the function lacks is an error)
      it = std::any_of(f->params.begin(), f->params.end(), [&](const Param &p) { return p.name == it->first; })
               ? std::next(it)
               : types.erase(it);
    std::set<std::string> index_values;
    std::optional<sema::TypeInfo> typed;
    const sema::TypeInfo *info = f.get() == checked_fn ? checked : nullptr;
    if (!info) {
      DiagEngine quiet(sources_);
      typed = sema::analyze(*context, *f, types, quiet);
      if (typed) info = &*typed;
    }
    std::vector<ExprPtr> removed_casts;  // (info names their nodes)
    if (info) {
      index_values = integer_values(f->body, *info);
      // A generic backward's parameters given no type are integers in one representative and floats in another
      // (a scalar `logx`, int32 then fp32): what is computed from them is written out in neither, or the
      // representatives' backwards would differ by the rewrite alone.
      if (generic()) {
        std::set<std::string> untyped;  // the scalars (pointers load floats, or integers, in every representative)
        for (const std::string &n : request_.generic_params)
          if (auto t = bwd_types_.find(n); t != bwd_types_.end() && !(t->second.is_tensor() && t->second.elem.is_pointer))
            untyped.insert(n);
        for (const std::string &n : computed_from(f->body, std::move(untyped))) index_values.erase(n);
      }
      skip_exact_widenings(f->body, *info, names_);
      // A cast that is a no-op for the representative dtype is not one for the others: a generic backward keeps them.
      if (!generic()) remove_noop_casts(f->body, *info, removed_casts);
      const bool dropped = drop_proven_shape_checks(*f, *info);
      if (dropped || !generic()) remove_dead_code(f->body);  // (what only a shape or a dtype read)
    }
    drop_unguarded_read_back_assertions(f->body);
    read_element_types_from_parameters(*f, pointers);
    fold_single_use_temporaries(*f, keep, index_values);
    // What the folds left unread (a pointer sum whose uses took the user's expression back, an adjoint's cast
    // folded into its one use), in a generic backward too, where the removal above does not run.
    remove_dead_code(f->body);
  }
}

void Engine::peel_masks(Module &out, Backward &result) {
  for (auto &kernel : out.functions) {
    if (module_.find_function(kernel->name)) continue;  // the user's helpers, as written
    // The owner-computes kernels too: their masked loops run unpipelined (MaskPeeling.h), without which each
    // copy of an owner's loop, with its four dots, got pipelined buffers of its own and the split ran slower.
    sema::ParamTypes types = bwd_types_;
    for (const Backward::OwnerKernel &o : result.owner_kernels)
      if (o.name == kernel->name && !o.programs_param.empty())
        types[o.programs_param] = SType::tensor({sema::DType::Int32, false}, {});
    for (const Backward::SavedTile &t : result.saved_tiles) types[t.scratch] = SType::tensor({t.dtype, true}, {});
    for (auto it = types.begin(); it != types.end();)  // (a type for a parameter the kernel lacks is an error)
      it = std::any_of(kernel->params.begin(), kernel->params.end(), [&](const Param &p) { return p.name == it->first; })
               ? std::next(it)
               : types.erase(it);
    // Before the split, so that each loop's sum gets one scaling after it and one copy of each rewrite is made.
    if (const int dropped = drop_discarded_row_selections(*kernel, out, types, sources_))
      result.explanations.push_back("'" + kernel->name + "': " + std::to_string(dropped) +
                                    (dropped == 1 ? " tl.where selects" : " tl.where select") +
                                    " only in rows that its writes' masks discard: computed without it "
                                    "(src/ad/reverse/DiscardedRows.h)");
    if (const int scaled = scale_dot_sums_after_loops(*kernel, out, types, sources_))
      result.explanations.push_back("'" + kernel->name + "': " + std::to_string(scaled) +
                                    (scaled == 1 ? " loop's sum of tl.dot products is" : " loops' sums of tl.dot products are") +
                                    " scaled once after the loop, not each operand in every iteration "
                                    "(src/ad/reverse/DotScaling.h)");
    if (const int split = peel_masked_iterations(*kernel, names_, out, types, request_.generic_params, sources_))
      result.explanations.push_back("'" + kernel->name + "': " + std::to_string(split) +
                                    (split == 1 ? " loop computing a tl.dot runs" : " loops computing a tl.dot run") +
                                    " the iterations whose lanes are all within its masks' bounds (a ragged size, "
                                    "a causal diagonal) without the masks, the others with them "
                                    "(src/ad/reverse/MaskPeeling.h)");
  }
}

std::unique_ptr<Module> Engine::checking_module() const {
  auto m = std::make_unique<Module>();
  m->imports = module_.imports;
  add_libdevice_import(*m);
  for (const Constant &c : module_.constants) m->constants.push_back({c.name, c.span, clone(*c.stmt)});
  for (const auto &f : module_.functions) m->functions.push_back(clone(*f));
  for (const auto &f : extra_functions_)
    if (f) m->functions.push_back(clone(*f));  // (finish() moves them into the backward's module)
  return m;
}

void Engine::add_libdevice_import(Module &m) {
  Import lib;
  lib.is_from = true;
  lib.module = "triton.language.extra";
  lib.names = {{"libdevice", ""}};
  m.imports.push_back(lib);
}

void Engine::add_imports(Module &m, const std::unordered_set<std::string> &read) {
  Import triton;
  triton.names = {{"triton", ""}};
  Import tl;
  tl.names = {{"triton.language", "tl"}};
  m.imports.push_back(triton);
  m.imports.push_back(tl);
  std::set<std::string> bound = {"triton", "tl"};
  // The binding of each name read that sema used (resolve_import), as the
  // user wrote it; an alternative from an if/try block stands alone. A
  // `NAME = a.b.c` needs the binding of `a` before it.
  std::function<void(const std::string &)> bind = [&](const std::string &name) {
    if (bound.count(name) || module_.find_function(name)) return;  // a helper: emitted in the file
    sema::ImportedName used = sema::resolve_import(module_, name);
    if (!used.statement) return;
    bound.insert(name);
    Import one = *used.statement;
    if (one.assignment) bind(one.module.substr(0, one.module.find('.')));
    one.names = {used.statement->names[used.entry]};
    one.conditional = false;
    one.followed = false;  // the backward file stands alone: it prints every import it needs
    m.imports.push_back(one);
  };
  for (const Import &imp : module_.imports)
    for (size_t k = 0; k < imp.names.size(); ++k)
      if (read.count(ast::bound_name(imp, k))) bind(ast::bound_name(imp, k));
  if (uses_libdevice_ && !bound.count("libdevice")) add_libdevice_import(m);
}

void Engine::add_called_functions(const std::unordered_set<std::string> &names, Module &out) {
  std::set<const Function *> seen;
  std::function<void(const Function &)> visit = [&](const Function &f) {
    std::unordered_set<std::string> inner;
    block_reads(f.body, inner);
    for (const std::string &n : inner)
      if (const Function *g = module_.find_function(n); g && !seen.count(g)) {
        seen.insert(g);
        visit(*g);
      }
  };
  for (const std::string &n : names)
    if (const Function *g = module_.find_function(n); g && !seen.count(g)) {
      seen.insert(g);
      visit(*g);
    }
  for (const auto &f : module_.functions)
    if (seen.count(f.get())) out.functions.push_back(clone(*f));
}

void Engine::cast_results(Function &bwd, const sema::TypeInfo &info) {
  auto *ret = cast<Return>(bwd.body.back().get());
  ExprList *elts = nullptr;
  ExprList single;
  if (auto *t = dyn_cast<Tuple>(ret->value.get())) elts = &t->elts;
  auto fix = [&](ExprPtr &e, const std::string &param) {
    const SType *have = info.type_of(e.get());
    const SType *want = type_of_name(param);
    if (have && want && have->is_tensor() && want->is_tensor() &&
        (have->elem.dtype != want->elem.dtype || request_.generic_params.count(param))) {
      ExprPtr recv = std::move(e);
      e = cast_to(std::move(recv), std::make_unique<Attribute>(name(param), "dtype"));
    }
  };
  if (elts) {
    for (size_t k = 0; k < elts->size(); ++k) fix((*elts)[k], request_.wrt[k]);
  } else {
    fix(ret->value, request_.wrt[0]);
  }
}

std::string Engine::header() const {
  std::string h = "# Generated by tgrad " + std::string(kVersion) + ": the backward of '" + fn_->name + "'.\n";
  if (!request_.command_line.empty()) h += "#   " + request_.command_line + "\n";
  h += "# Regenerate it with that command rather than editing it.\n";
  return h;
}

SourceSpan Engine::param_span(const std::string &p) const {
  for (const Param &q : fn_->params)
    if (q.name == p) return q.span;
  return fn_->name_span;
}

void Engine::remove_noop_casts(StmtList &body, const sema::TypeInfo &info, std::vector<ExprPtr> &removed) {
  std::function<void(ExprPtr &)> visit = [&](ExprPtr &e) {
    if (auto *c = dyn_cast<Call>(e.get())) {
      for (ExprPtr &a : c->args) visit(a);
      for (Keyword &k : c->keywords) visit(k.value);
      auto *attr = dyn_cast<Attribute>(c->func.get());
      // `x.to(T)`, or `tl.cast(x, T)` (a partial sum's float32 accumulation), where x already has dtype T.
      const bool method = attr && attr->attr == "to" && c->args.size() == 1 && c->keywords.empty();
      const bool function = !method && c->args.size() == 2 && c->keywords.empty() && callee(*c) == "tl.cast";
      if (method || function) {
        ExprPtr &operand = method ? attr->value : c->args[0];
        visit(operand);
        const SType *from = info.type_of(operand.get());
        const SType *to = info.type_of(c->args[method ? 0 : 1].get());
        if (from && to && from->is_tensor() && to->kind == SType::Kind::DType && !to->dtype_is_pointer &&
            from->elem.dtype == to->dtype && !from->elem.is_pointer) {
          ExprPtr receiver = std::move(operand);
          removed.push_back(std::move(e));
          e = std::move(receiver);
        }
      } else {
        visit(c->func);
      }
      return;
    }
    if (auto *b = dyn_cast<BinOp>(e.get())) {
      visit(b->lhs);
      visit(b->rhs);
    } else if (auto *u = dyn_cast<UnaryOp>(e.get())) {
      visit(u->operand);
    } else if (auto *t = dyn_cast<Tuple>(e.get())) {
      for (ExprPtr &x : t->elts) visit(x);
    } else if (auto *a = dyn_cast<Attribute>(e.get())) {
      visit(a->value);
    }
  };
  for (StmtPtr &st : body) {
    if (auto *a = dyn_cast<Assign>(st.get())) visit(a->value);
    if (auto *a = dyn_cast<AugAssign>(st.get())) visit(a->value);
    if (auto *r = dyn_cast<Return>(st.get()); r && r->value) visit(r->value);
    // (Inside loops and ifs too: the loop over the forward's programs.)
    if (auto *i = dyn_cast<If>(st.get())) {
      remove_noop_casts(i->body, info, removed);
      remove_noop_casts(i->orelse, info, removed);
    } else if (auto *f = dyn_cast<For>(st.get())) {
      remove_noop_casts(f->body, info, removed);
    } else if (auto *w = dyn_cast<While>(st.get())) {
      remove_noop_casts(w->body, info, removed);
    }
  }
}

namespace {
// A cast written `.to(tl.float32)` (how it is written: a generic backward's representatives differ in its type
// where it is written `.to(x.dtype)`).
bool written_to_float32(const Call &c) {
  const std::string to = emit::print_expr(*c.args[0]);
  return to == "tl.float32" || to == "tl.fp32";
}
}  // namespace

void Engine::skip_exact_widenings(StmtList &body, const sema::TypeInfo &info, NameAllocator &names) {
  // A tile of floats of at most 32 bits widened to float32, written `.to(tl.float32)`: exactly its value. (Decided by
  // how the cast is written and on tiles, which a generic backward's representatives all give float elements: a
  // cast to `x.dtype` is float32 in one representative and float16 in another, and a scalar parameter may be an
  // integer in one, so deciding by those types made the representatives' backwards differ.)
  auto widened_exactly = [&](const Call &c) -> const Expr * {
    auto *attr = dyn_cast<Attribute>(c.func.get());
    if (!attr || attr->attr != "to" || c.args.size() != 1 || !c.keywords.empty() || !written_to_float32(c))
      return nullptr;
    const SType *from = info.type_of(attr->value.get());
    if (!from || !from->is_tensor() || from->shape.empty() || from->elem.is_pointer ||
        !sema::is_float(from->elem.dtype) || sema::bits(from->elem.dtype) > 32)
      return nullptr;
    return attr->value.get();
  };
  // How many times each name is assigned, in this body or its loops and ifs.
  std::map<std::string, int> assignments;
  count_assignments(body, assignments);
  // The operand of a narrowing cast, `x.to(T)` or `tl.trans(x).to(T)` with T not written tl.float32: only such an x
  // is worth reading before its widening (elsewhere the float32 value is what is used).
  std::set<std::string> narrowed;
  visit_exprs(body, [&](const Expr &e) {
    auto *c = dyn_cast<Call>(&e);
    auto *attr = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
    if (!attr || attr->attr != "to" || c->args.size() != 1 || !c->keywords.empty() || written_to_float32(*c)) return;
    const Expr *operand = attr->value.get();
    if (auto *t = dyn_cast<Call>(operand); t && callee(*t) == "tl.trans" && t->args.size() == 1) operand = t->args[0].get();
    if (auto *n = dyn_cast<Name>(operand)) narrowed.insert(n->id);
  });
  // Through widenings of widenings (a generic load upcast, then the store's cast's adjoint): `y = x.to(f32)`,
  // `z = y.to(f32)`, z narrowed: so is y.
  std::map<std::string, std::string> widened_from;
  each_assignment(body, [&](const std::string &target, const Expr &value) {
    auto *c = dyn_cast<Call>(&value);
    if (const Expr *receiver = c ? widened_exactly(*c) : nullptr)
      if (auto *n = dyn_cast<Name>(receiver)) widened_from[target] = n->id;
  });
  for (std::vector<std::string> work(narrowed.begin(), narrowed.end()); !work.empty();) {
    const std::string n = work.back();
    work.pop_back();
    if (auto w = widened_from.find(n); w != widened_from.end() && narrowed.insert(w->second).second)
      work.push_back(w->second);
  }
  // The load widened in place gets a name: `x_raw = tl.load(...)`, `x = x_raw.to(tl.float32)`.
  std::map<std::string, std::string> narrow;  // widened name -> the name of its value before widening
  std::function<void(StmtList &)> split = [&](StmtList &b) {
    for (size_t k = 0; k < b.size(); ++k) {
      if (auto *f = dyn_cast<For>(b[k].get())) split(f->body);
      if (auto *i = dyn_cast<If>(b[k].get())) {
        split(i->body);
        split(i->orelse);
      }
      auto *a = dyn_cast<Assign>(b[k].get());
      if (!a || a->targets.size() != 1 || !isa<Name>(a->targets[0].get())) continue;
      const std::string &target = cast<Name>(a->targets[0].get())->id;
      auto *c = dyn_cast<Call>(a->value.get());
      const Expr *receiver = c ? widened_exactly(*c) : nullptr;
      if (!receiver || assignments[target] != 1 || !narrowed.count(target)) continue;
      if (auto *n = dyn_cast<Name>(receiver)) {
        if (assignments[n->id] == 1) narrow[target] = narrow.count(n->id) ? narrow[n->id] : n->id;
        continue;
      }
      auto *load = dyn_cast<Call>(receiver);
      if (!load || callee(*load) != "tl.load") continue;
      const std::string raw = names.fresh(target + "_raw");
      auto *attr = cast<Attribute>(c->func.get());
      StmtPtr load_stmt = assign(raw, std::move(attr->value));
      load_stmt->leading_comment = std::move(b[k]->leading_comment);
      b[k]->leading_comment.clear();
      attr->value = name(raw);
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(k), std::move(load_stmt));
      ++k;
      assignments[raw] = 1;
      narrow[target] = raw;
    }
  };
  split(body);
  if (narrow.empty()) return;
  // Each cast of such a name (or of tl.trans of one) reads the value before widening.
  rewrite_exprs(body, [&](ExprPtr &e) {
    auto *c = dyn_cast<Call>(e.get());
    auto *attr = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
    if (!attr || attr->attr != "to" || c->args.size() != 1 || !c->keywords.empty()) return;
    ExprPtr *operand = &attr->value;
    if (auto *t = dyn_cast<Call>(operand->get()); t && callee(*t) == "tl.trans" && t->args.size() == 1 &&
                                                     t->keywords.empty())
      operand = &t->args[0];
    if (auto *n = dyn_cast<Name>(operand->get()))
      if (auto it = narrow.find(n->id); it != narrow.end()) *operand = name(it->second);
  });
}

}  // namespace tgrad::ad::reverse
