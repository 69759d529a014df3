// Reverse mode over A-normal form, the driver: the forward's types, its
// A-normal form and their types, then the tile function's backward (build)
// or the kernel's (src/ad/reverse/KernelPlan.cpp), and differentiate_typed,
// which adds a kernel's one-pass version. The engine's other parts, one
// file per responsibility, are listed in src/ad/reverse/Engine.h.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "src/ad/ConstexprPaths.h"
#include "src/ad/EarlyReturn.h"
#include "src/ad/Redundancy.h"
#include "src/ad/reverse/Engine.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {
namespace reverse {

std::optional<Backward> Engine::run() {
  const Function *fn = forward_ ? forward_ : module_.find_function(request_.function);
  if (!fn) {
    diags_.error({}, "no @triton.jit function '" + request_.function + "' in the file");
    return std::nullopt;
  }
  fn_ = fn;
  for (const auto &kv : request_.param_types)
    kernel_ |= kv.second.is_tensor() && kv.second.elem.is_pointer;
  if (kernel_) {
    // Early returns and `x = a if c else b` become ifs (stepped while loops are counted for loops already:
    // differentiate() rewrites the module, src/ad/WhileLoops.h); then every runtime parameter read needs a type.
    if ((guarded_fn_ = guard_early_returns(*fn))) fn = fn_ = guarded_fn_.get();
    if ((split_fn_ = conditional_assignments_as_ifs(*fn))) fn = fn_ = split_fn_.get();
    if (!report_untyped_parameters(*fn)) return std::nullopt;
  }
  // 1. Types of the forward, then A-normal form, then types of the ANF.
  std::optional<sema::TypeInfo> types = sema::analyze(module_, *fn, request_.param_types, diags_);
  if (!types) return std::nullopt;
  if (kernel_) keep_accumulators_in_registers(fn, types);
  for (const std::string &w : request_.wrt) check_wrt(*fn, w);
  report_constexpr_guarded_definitions(*fn, *types, diags_);
  if (!kernel_ && !request_.no_grad.empty())
    diags_.error(fn->name_span, "--no-grad names outputs a kernel stores to; '" + fn->name +
                                    "' is a tile function, whose outputs are its return values");
  if (diags_.has_errors()) return std::nullopt;
  std::optional<AnfFunction> anf = to_anf(module_, *fn, *types, diags_, kernel_);
  if (!anf) return std::nullopt;
  anf_ = std::move(*anf);
  if (kernel_) {
    std::map<std::string, int> user_assigned;
    count_assignments(fn->body, user_assigned);
    std::set<std::string> user_names;
    for (const auto &kv : user_assigned) user_names.insert(kv.first);
    eliminate_common_subexpressions(anf_, pointer_params(), user_names);
  }
  std::optional<sema::TypeInfo> anf_types = sema::analyze(module_, *anf_.fn, request_.param_types, diags_);
  if (!anf_types) {
    diags_.error(fn->name_span, "internal error: the A-normal form of '" + fn->name + "' failed semantic analysis");
    return std::nullopt;
  }
  anf_types_ = std::move(*anf_types);
  record_name_types();
  if (kernel_ && forward_stored_values()) {
    // New statements: their types before the passes below read them.
    std::optional<sema::TypeInfo> again = sema::analyze(module_, *anf_.fn, request_.param_types, diags_);
    if (!again) {
      diags_.error(fn->name_span, "internal error: the A-normal form of '" + fn->name + "' failed semantic analysis "
                                  "after loads reading back stored values were replaced by those values");
      return std::nullopt;
    }
    anf_types_ = std::move(*again);
    record_name_types();
  }
  bool rewritten = kernel_ && find_saved_values();
  if (kernel_ && read_back_softmax_statistics()) rewritten = true;
  if (kernel_ && read_back_epilogues()) rewritten = true;
  if (rewritten) {
    // Statements moved or rewritten: the types again.
    std::optional<sema::TypeInfo> again = sema::analyze(module_, *anf_.fn, request_.param_types, diags_);
    if (!again) {
      diags_.error(fn->name_span, "internal error: the A-normal form of '" + fn->name + "' failed semantic analysis");
      return std::nullopt;
    }
    anf_types_ = std::move(*again);
    record_name_types();
  }
  if (std::getenv("TGRAD_DEBUG_ANF")) std::cerr << tgrad::emit::print_function(*anf_.fn);
  names_.reserve_all(module_, *anf_.fn);
  for (const auto &kv : name_types_) names_.reserve(kv.first);

  try {
    return kernel_ ? build_kernel() : build();
  } catch (const AdError &e) {
    diags_.error(e.span, e.message);
    return std::nullopt;
  }
}

void Engine::keep_accumulators_in_registers(const Function *&fn, std::optional<sema::TypeInfo> &types) {
  std::vector<KeptAccumulator> kept;
  std::unique_ptr<Function> rewritten = keep_memory_accumulators_in_registers(*fn, *types, kept);
  if (rewritten) {
    DiagEngine scratch(sources_);
    std::optional<sema::TypeInfo> again = sema::analyze(module_, *rewritten, request_.param_types, scratch);
    if (again && !scratch.has_errors()) {
      registers_fn_ = std::move(rewritten);
      fn = fn_ = registers_fn_.get();
      types = std::move(again);
      kept_accumulators_ = std::move(kept);
    }
  }
  // Then the additive updates whose addresses move (src/ad/MemoryAccumulators.h): atomic additions.
  std::vector<KeptAccumulator> added;
  std::unique_ptr<Function> atomic = additive_updates_as_atomic_adds(*fn, *types, added);
  if (!atomic) return;
  DiagEngine scratch(sources_);
  std::optional<sema::TypeInfo> again = sema::analyze(module_, *atomic, request_.param_types, scratch);
  if (!again || scratch.has_errors()) return;
  atomic_fn_ = std::move(atomic);
  fn = fn_ = atomic_fn_.get();
  types = std::move(again);
  atomic_updates_ = std::move(added);
}

void Engine::check_wrt(const Function &fn, const std::string &w) {
  size_t k = 0;
  while (k < fn.params.size() && fn.params[k].name != w) ++k;
  if (k == fn.params.size()) {
    diags_.error(fn.name_span, "'" + fn.name + "' has no parameter '" + w + "' to differentiate with respect to");
    return;
  }
  if (fn.is_constexpr_param(k)) {
    diags_.error(fn.params[k].span, "'" + w + "' is tl.constexpr and carries no gradient; differentiate with respect to a floating-point tile");
    return;
  }
  auto it = request_.param_types.find(w);
  if (it == request_.param_types.end()) {
    diags_.error(fn.params[k].span, "the type of '" + w + "' is needed to differentiate: give --arg " + w + "=DTYPE[d0, ...] (for example fp32[N])");
    return;
  }
  const SType &t = it->second;
  // An optional pointer passed as None (a specialization of src/ad/Specialize.h): nothing is loaded through it,
  // and its gradient is None too.
  if (kernel_ && t.kind == SType::Kind::None) return;
  bool float_pointer = t.is_tensor() && t.elem.is_pointer && sema::is_float(t.elem.dtype);
  if (kernel_ && !float_pointer)
    diags_.error(fn.params[k].span, "'" + w + "' is " + t.str() +
                                        ": differentiate a kernel with respect to pointers to floating-point data");
  else if (!kernel_ && !is_float_tensor(&t))
    diags_.error(fn.params[k].span, "'" + w + "' is " + t.str() + ", not a floating-point value, and carries no gradient");
}

void Engine::record_name_types() {
  for (const auto &kv : request_.param_types) name_types_[kv.first] = kv.second;
  record_name_types(anf_.fn->body);
}

void Engine::record_name_type(const std::string &n, const SType &t) {
  auto it = name_types_.find(n);
  if (it != name_types_.end() && it->second.is_tensor() && !t.is_tensor()) return;
  name_types_[n] = t;
}

void Engine::record_name_types(const StmtList &block) {
  for (const StmtPtr &s : block) {
    if (auto *a = dyn_cast<Assign>(s.get()))
      if (auto *n = dyn_cast<Name>(a->targets[0].get()))
        if (const SType *t = anf_types_.type_of(a->value.get())) record_name_type(n->id, *t);
    if (auto *a = dyn_cast<AnnAssign>(s.get()); a && a->value)  // `WIDTH: tl.constexpr = 2 * HALF`
      if (auto *n = dyn_cast<Name>(a->target.get()))
        if (const SType *t = anf_types_.type_of(a->value.get())) record_name_type(n->id, *t);
    if (auto *f = dyn_cast<For>(s.get())) {
      if (auto *n = dyn_cast<Name>(f->target.get()))
        if (const SType *t = anf_types_.type_of(f->target.get())) name_types_[n->id] = *t;
      record_name_types(f->body);
    }
    if (auto *i = dyn_cast<If>(s.get())) {
      record_name_types(i->body);
      record_name_types(i->orelse);
    }
  }
}

const SType *Engine::type_of_name(const std::string &n) const {
  auto it = name_types_.find(n);
  return it == name_types_.end() ? nullptr : &it->second;
}

std::string Engine::source_text(const SourceSpan &span) const {
  if (span.file_id < 0 || span.begin.line != span.end.line || span.end.column <= span.begin.column) return "";
  const std::string line = sources_.line_text(span.file_id, span.begin.line);
  const size_t from = static_cast<size_t>(span.begin.column - 1), to = static_cast<size_t>(span.end.column - 1);
  if (to > line.size()) return "";
  for (size_t k = 0; k < to; ++k)
    if (static_cast<unsigned char>(line[k]) >= 0x80) return "";  // columns count code points: ASCII only
  return line.substr(from, to - from);
}

bool Engine::holds_tensor(const SType &t) {
  if (t.is_tensor()) return true;
  for (const SType &e : t.elems)
    if (holds_tensor(e)) return true;
  return false;
}

bool Engine::report_untyped_parameters(const Function &fn) {
  std::set<std::string> read;
  block_reads(fn.body, read);
  bool ok = true;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const Param &p = fn.params[k];
    if (fn.is_constexpr_param(k) || request_.param_types.count(p.name) || !read.count(p.name)) continue;
    diags_.error(p.span, "the type of '" + p.name + "' is needed to differentiate '" + fn.name + "': give --arg " +
                             p.name + "=TYPE (a pointer: *fp32, *fp16, *bf16, *i32; a scalar: i32, i64, fp32)");
    ok = false;
  }
  return ok;
}

bool Engine::is_known(const SType &t) {
  if (t.kind == SType::Kind::Unknown) return false;
  for (const SType &e : t.elems)
    if (!is_known(e)) return false;
  return true;
}

std::string Engine::first_active(const Expr &value, const std::set<std::string> &active) {
  std::set<std::string> in;
  reads(value, in);
  for (const std::string &n : in)
    if (active.count(n)) return n;
  return "";
}

std::optional<Backward> Engine::build() {
  const StmtList &body = anf_.fn->body;
  const Return *ret = nullptr;
  for (const StmtPtr &s : body)
    if (auto *r = dyn_cast<Return>(s.get())) ret = r;
  std::vector<std::string> outputs;
  if (auto *t = dyn_cast<Tuple>(ret->value.get())) {
    for (const ExprPtr &e : t->elts) {
      if (!as_name(*e)) fail(e->span, "a returned value known before the kernel runs has no adjoint; return tensors");
      outputs.push_back(as_name(*e)->id);
    }
  } else {
    if (!as_name(*ret->value)) fail(ret->span, "a differentiated function must return a tensor");
    outputs.push_back(as_name(*ret->value)->id);
  }

  // 2. Activity: values that depend on a wrt input (forward) ...
  std::set<std::string> active(request_.wrt.begin(), request_.wrt.end());
  for (const StmtPtr &s : body) {
    auto *a = dyn_cast<Assign>(s.get());
    if (!a) continue;
    const std::string &t = as_name(*a->targets[0])->id;
    const std::string operand = first_active(*a->value, active);
    if (operand.empty()) continue;
    if (carries_gradient(type_of_name(t))) active.insert(t);
    else check_dependence_kept(t, *a->value, operand);
  }
  // ... and that an output depends on (backward).
  std::set<std::string> useful;
  for (const std::string &o : outputs)
    if (active.count(o)) useful.insert(o);
  for (size_t k = body.size(); k-- > 0;) {
    auto *a = dyn_cast<Assign>(body[k].get());
    if (!a || !useful.count(as_name(*a->targets[0])->id)) continue;
    std::set<std::string> in;
    reads(*a->value, in);
    for (const std::string &n : in)
      if (active.count(n)) useful.insert(n);
  }

  stabilizers_ = find_stabilizers(body, active);

  // 3. Adjoint parameters for the outputs.
  std::vector<std::string> out_adjoints;
  for (const std::string &o : outputs) {
    std::string b = names_.fresh("b" + o);
    out_adjoints.push_back(b);
    adjoint_[o] = b;
  }

  // 4. The sweep, in reverse.
  for (size_t k = body.size(); k-- > 0;) {
    auto *a = dyn_cast<Assign>(body[k].get());
    if (!a) continue;
    const std::string &t = as_name(*a->targets[0])->id;
    if (!useful.count(t) || !active.count(t)) continue;
    begin_block(anf_.origin_of(body[k].get()));
    differentiate_stmt(t, *a->value, active);
  }

  // 5. The backward function.
  std::unique_ptr<Function> bwd = backward_shell(out_adjoints);
  for (size_t k = 0; k < body.size(); ++k)
    if (!isa<Return>(body[k].get())) bwd->body.push_back(clone(*body[k]));
  for (StmtPtr &s : sweep_) bwd->body.push_back(std::move(s));

  ExprList results;
  for (const std::string &w : request_.wrt) {
    auto it = adjoint_.find(w);
    if (it == adjoint_.end()) {
      diags_.warning(param_span(w), "no output of '" + fn_->name + "' depends on '" + w + "': its adjoint is zero");
      std::string b = names_.fresh("b" + w);
      StmtPtr z = assign(b, call("tl.zeros_like", list(name(w))));
      z->leading_comment = "'" + w + "' does not reach an output: its adjoint is zero";
      bwd->body.push_back(std::move(z));
      adjoint_[w] = b;
    }
    results.push_back(name(adjoint_[w]));
  }
  ExprPtr ret_value = results.size() == 1 ? std::move(results[0]) : std::make_unique<Tuple>(std::move(results));
  bwd->body.push_back(std::make_unique<Return>(std::move(ret_value)));
  remove_dead_code(bwd->body);

  // 6. Check the backward, and cast adjoints to their inputs' dtypes.
  sema::ParamTypes bwd_types = request_.param_types;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (const SType *t = type_of_name(outputs[k])) bwd_types[out_adjoints[k]] = *t;
  Backward result;
  result.output_adjoints = out_adjoints;
  finish(std::move(bwd), bwd_types, /*cast_returned_adjoints=*/true, result);
  return result;
}

std::unique_ptr<Function> Engine::backward_shell(const std::vector<std::string> &extra_params) const {
  auto bwd = std::make_unique<Function>();
  NameAllocator fn_names;
  for (const auto &f : module_.functions) fn_names.reserve(f->name);
  bwd->name = fn_names.fresh(fn_->name + "_bwd");
  bwd->span = fn_->span;
  bwd->decorators.push_back({DecoratorKind::Jit, "triton.jit", "triton.jit", {}});
  // The forward's defaults stay only where nothing follows them: Python
  // allows no parameter without a default after one with a default, and
  // callers pass the backward every forward argument (the protocol's call).
  const bool keep_defaults = extra_params.empty();
  for (const Param &p : anf_.fn->params)
    bwd->params.push_back({p.name, {}, p.annotation ? clone(*p.annotation) : nullptr,
                           p.default_value && keep_defaults ? clone(*p.default_value) : nullptr});
  for (const std::string &b : extra_params) bwd->params.push_back({b, {}, nullptr, nullptr});
  return bwd;
}

}  // namespace reverse

using namespace ast;
using reverse::Engine;


std::optional<Backward> differentiate_typed(const Module &module, const SourceManager &sources,
                                            const BackwardRequest &request, DiagEngine &diags) {
  Engine general(module, sources, request, diags);
  std::optional<Backward> result = general.run();
  // Owner-computes kernels already launch on grids of their own: no row-length dispatcher over them.
  if (!result || !general.differentiates_a_kernel() || !result->owner_kernels.empty()) return result;
  const Function *fn = module.find_function(request.function);
  std::optional<SinglePassVersion> version = fn ? single_pass_version(*fn) : std::nullopt;
  if (!version) return result;
  // The one-pass version's own diagnostics are not the user's: where it
  // cannot be built, the looped backward serves every row length.
  DiagEngine quiet(sources);
  BackwardRequest one_request = request;
  one_request.owner_computes = false;  // the dispatcher calls one backward function or the other
  Engine one_pass(module, sources, one_request, quiet, version->forward.get());
  std::optional<Backward> single = one_pass.run();
  std::string why_not;
  if (!single) {
    std::ostringstream msg;
    quiet.print_all(msg);
    why_not = msg.str();
  }
  general.dispatch_by_row_length(*result, std::move(single), one_pass.backward_types(), *version, why_not);
  return result;
}

void Backward::add_buffer_needs(const Backward &other) {
  for (const std::string &z : other.zero_initialized)
    if (std::find(zero_initialized.begin(), zero_initialized.end(), z) == zero_initialized.end())
      zero_initialized.push_back(z);
  for (const auto &c : other.consumed_upstream)
    if (std::none_of(consumed_upstream.begin(), consumed_upstream.end(), [&](const auto &o) { return o.first == c.first; }))
      consumed_upstream.push_back(c);
  for (const std::string &o : other.saved_outputs)
    if (std::find(saved_outputs.begin(), saved_outputs.end(), o) == saved_outputs.end()) saved_outputs.push_back(o);
  for (const LayoutAssumption &l : other.layout_assumptions) {
    auto text = [](const LayoutAssumption &x) {
      std::string t = x.input + "|" + x.kernel + "|" + x.flag;
      for (const auto &[e, s] : x.extent_stride) t += "|" + emit::print_expr(*e) + "," + emit::print_expr(*s);
      return t;
    };
    auto same = std::find_if(layout_assumptions.begin(), layout_assumptions.end(),
                             [&](const LayoutAssumption &o) { return text(o) == text(l); });
    if (same == layout_assumptions.end())
      layout_assumptions.push_back(l);
    else
      same->zeros_anyway |= l.zeros_anyway;
  }
  for (const AtomicGradient &a : other.atomic_gradients)
    if (std::none_of(atomic_gradients.begin(), atomic_gradients.end(), [&](const AtomicGradient &o) {
          return o.input == a.input && o.load.begin == a.load.begin && o.load.file_id == a.load.file_id;
        }))
      atomic_gradients.push_back(a);
}

bool Backward::cells_apart(std::vector<std::pair<int64_t, int64_t>> stride_extent) {
  for (auto &[stride, extent] : stride_extent) stride = stride < 0 ? -stride : stride;
  std::sort(stride_extent.begin(), stride_extent.end());
  int64_t reach = 0;
  for (const auto &[stride, extent] : stride_extent) {
    if (extent <= 1) continue;
    if (stride <= reach) return false;
    reach += (extent - 1) * stride;
  }
  return true;
}

std::vector<std::string> Backward::parameters_after_forward() const {
  std::vector<std::string> out;
  for (const auto &g : gradient_buffers) out.push_back(g.second);
  for (const PartialSum &p : partial_sums) out.push_back(p.scratch);
  for (const PartialSum &p : partial_sums) out.push_back(p.numel);
  if (!partial_sums.empty()) out.push_back(num_programs_param);
  for (const Tape &t : tapes) out.push_back(t.scratch);
  for (const Tape &t : tapes)
    if (std::find(out.begin(), out.end(), t.trips_param) == out.end()) out.push_back(t.trips_param);
  for (const LayoutAssumption &l : layout_assumptions)
    if (std::find(out.begin(), out.end(), l.flag) == out.end()) out.push_back(l.flag);
  return out;
}

}  // namespace tgrad::ad
