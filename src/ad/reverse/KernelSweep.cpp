// A kernel's reverse sweep over blocks and runtime ifs, and the replay of
// forward statements the backward needs.
#include <sstream>

#include "src/ad/reverse/Engine.h"
#include "tgrad/parse/Parser.h"

namespace tgrad::ad::reverse {

void Engine::sweep_block(const StmtList &block, const AccessAnalysis &access, std::vector<std::string> &explanations) {
  for (size_t k = block.size(); k-- > 0;) {
    const Stmt *s = block[k].get();
    if (auto *f = dyn_cast<For>(s)) {
      sweep_loop(*f, access, explanations);
      continue;
    }
    if (auto *i = dyn_cast<If>(s)) {
      sweep_if(*i, access, explanations);
      continue;
    }
    const MemoryOp *op = memory_op(s);
    if (op && op->store && consumed_.count(op->base) && gradient_buffer_.count(op->base)) {
      consume_upstream(*op);
      continue;
    }
    if (op && op->store) {
      if (!useful_.count(op->value) || !gradient_buffer_.count(op->base)) continue;  // (--no-grad outputs: none)
      begin_block(anf_.origin_of(s));
      // The adjoint of a store: the upstream gradient, loaded under the store's mask.
      std::vector<Keyword> kws;
      if (!op->mask.empty()) {  // Triton takes `other` only with a mask
        kws.push_back({"mask", {}, name(op->mask)});
        kws.push_back({"other", {}, std::make_unique<FloatLit>(0.0, "0.0")});
      }
      ExprPtr upstream = call("tl.load", list(dual(op->pointer)), std::move(kws));
      // Generic: the buffer's dtype is a representative, and may not be
      // the value's; upstream gradients are taken in float32, the type
      // half-precision adjoints accumulate in (a no-op for float32 data).
      if (generic() && is_float_tensor(type_of_name(op->value)))
        upstream = cast_to(std::move(upstream), dotted_name("tl.float32"));
      // Nothing in the backward writes d<base> when the forward never
      // loads <base>: then the load may be issued early (issue_early), as
      // a statement of its own.
      auto loads = loads_per_base_.find(op->base);
      const bool read_only = loads == loads_per_base_.end() || loads->second == 0;
      if (read_only && adjoint_.count(op->value) && !drops_contributions(op->value)) {
        std::string g = names_.fresh("b" + op->value);  // a later contribution: `bx += g`
        StmtPtr load = assign(g, std::move(upstream));
        upstream_loads_.insert(load.get());
        emit_stmt(std::move(load));
        upstream = name(g);
      }
      const size_t emitted = out_->size();
      contribute(op->value, std::move(upstream), "store", op->pointer, op->call->span);
      if (read_only && out_->size() == emitted + 1)  // the first contribution: `bx = tl.load(...)`
        if (auto *a = dyn_cast<Assign>(out_->back().get()); a && isa<Call>(a->value.get()))
          upstream_loads_.insert(a);
      continue;
    }
    auto *a = dyn_cast<Assign>(s);
    if (!a) continue;
    const std::string t = assigned_name(*a);
    if (t.empty() || !useful_.count(t) || !active_.count(t)) continue;
    if (carried_update_copy_.count(s)) continue;  // additive accumulator: its adjoint is loop-invariant
    if (auto c = taped_update_copy_.find(s); c != taped_update_copy_.end()) {
      // `acc_2 = acc_3` at the end of a reversed loop's body: the carried
      // adjoint is the adjoint of this iteration's result, acc_3; it starts
      // again from zero for the reads of the incoming value.
      const std::string bc = adjoint_.at(c->second);
      begin_block(anf_.origin_of(s));
      if (auto *u = dyn_cast<Name>(a->value.get()); u && active_.count(u->id)) {
        std::string bu = names_.fresh("b" + u->id);
        emit_stmt(assign(bu, name(bc)));
        adjoint_[u->id] = bu;
      }
      emit_stmt(assign(bc, call("tl.zeros_like", list(name(bc)))));
      continue;
    }
    auto additive = additive_update_.find(t);
    if (additive != additive_update_.end()) {
      // acc_3 = acc_2 + t: the iteration's result has the loop-invariant adjoint of acc_2.
      auto b = adjoint_.find(additive->second);
      if (b == adjoint_.end()) continue;
      adjoint_[t] = b->second;
      aliased_.insert(t);
    }
    if (!adjoint_.count(t)) continue;  // no gradient reaches it
    begin_block(anf_.origin_of(s));
    if (op) {
      load_adjoint(*op, access, explanations);
      continue;
    }
    differentiate_stmt(t, *a->value, active_);
  }
}

void Engine::prepare_outer_adjoints(const StmtList &block) {
  std::map<std::string, int> defined;
  count_assignments(block, defined);
  std::set<std::string> read;
  block_reads(block, read);
  for (const std::string &x : read) {
    if (defined.count(x) || !active_.count(x) || !useful_.count(x) || frozen_.count(x)) continue;
    const SType *t = type_of_name(x);
    if (!is_float_tensor(t)) {
      if (carries_gradient(t))
        fail({}, "the tuple '" + x + "' is used inside a loop or a runtime if; tgrad cannot accumulate its adjoint "
                 "there (unpack it before the loop)");
      continue;
    }
    own_adjoint_variable(x);
  }
}

StmtList Engine::parse_statements(const std::string &code) {
  std::string text = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _statements():\n";
  std::istringstream lines(code);
  for (std::string line; std::getline(lines, line);) text += "    " + line + "\n";
  SourceManager sources;
  int id = sources.add_file("<generated statements>", text);
  DiagEngine diags(sources);
  std::unique_ptr<Module> m = parse::parse_module(sources, id, diags);
  if (!m || diags.has_errors() || m->functions.empty())
    fail(fn_->name_span, "internal error: generated statements do not parse:\n" + code);
  return std::move(m->functions[0]->body);
}

std::string Engine::user_name(const std::string &anf_name) const {
  size_t u = anf_name.rfind('_');
  if (u == std::string::npos || u + 1 == anf_name.size()) return anf_name;
  for (size_t k = u + 1; k < anf_name.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(anf_name[k]))) return anf_name;
  return anf_name.substr(0, u);
}

StmtList Engine::sweep_nested(const StmtList &block, const AccessAnalysis &access, std::vector<std::string> &explanations) {
  StmtList adjoint;
  StmtList *outer = out_;
  const Stmt *saved_block = current_block_;
  out_ = &adjoint;
  current_block_ = nullptr;
  sweep_block(block, access, explanations);
  out_ = outer;
  current_block_ = saved_block;
  return adjoint;
}

void Engine::sweep_if(const If &i, const AccessAnalysis &access, std::vector<std::string> &explanations) {
  begin_block(anf_.origin_of(&i));
  prepare_outer_adjoints(i.body);
  prepare_outer_adjoints(i.orelse);
  auto node = std::make_unique<If>(clone(*i.cond), StmtList{}, StmtList{}, i.span);
  node->guards_early_return = i.guards_early_return;
  for (auto [from, to] : {std::pair<const StmtList *, StmtList *>{&i.body, &node->body}, {&i.orelse, &node->orelse}}) {
    StmtList adjoint = sweep_nested(*from, access, explanations);
    replay_block(*from, *to);
    for (StmtPtr &s : adjoint) to->push_back(std::move(s));
  }
  if (node->body.empty() && node->orelse.empty()) return;
  if (node->body.empty()) node->body.push_back(std::make_unique<Pass>());
  emit_stmt(std::move(node));
}

void Engine::replay_stmt(const Stmt &s, StmtList &dst) {
  if (isa<Return>(&s)) return;
  if (const MemoryOp *m = memory_op(&s); m && m->store) return;
  if (auto *f = dyn_cast<For>(&s)) {
    if (auto t = taped_loops_.find(f); t != taped_loops_.end()) {
      replay_taped_loop(*f, t->second, dst);
      return;
    }
    auto loop = std::make_unique<For>(clone(*f->target), clone(*f->iter), StmtList{}, f->span);
    replay_block(f->body, loop->body);
    dst.push_back(std::move(loop));
    return;
  }
  if (auto *i = dyn_cast<If>(&s)) {
    auto node = std::make_unique<If>(clone(*i->cond), StmtList{}, StmtList{}, i->span);
    node->guards_early_return = i->guards_early_return;
    replay_block(i->body, node->body);
    replay_block(i->orelse, node->orelse);
    if (node->body.empty()) node->body.push_back(std::make_unique<Pass>());
    dst.push_back(std::move(node));
    return;
  }
  for (const SoftmaxStatistics::ReadBack &b : read_back_) {
    if (b.value != assigned_name(s)) continue;
    // Read back from what the forward stored (read_back_softmax_statistics).
    if (b.exact && request_.generic_params.count(b.base))
      dst.push_back(buffer_dtype_assertion(b.base, "float32",
                                           "tgrad: the backward reads the softmax's row statistic back from " + b.base +
                                               ", which must be a float32 buffer (with --arg " + b.base +
                                               "=*fp16 or *bf16 tgrad writes a backward that does not read it)"));
    StmtPtr load = assign(b.value, clone(*b.load), s.span);
    load->leading_comment = b.exact ? "Stored by the forward: read back, not computed again."
                                    : "Stored by the forward (rounded to its dtype): read back, not computed again.";
    dst.push_back(std::move(load));
    return;
  }
  if (auto it = saved_.find(assigned_name(s)); it != saved_.end()) {
    // Saved by the forward (find_saved_values): loaded, not computed again.
    StmtPtr load = assign(it->first, call("tl.load", list(name(it->second))), s.span);
    load->leading_comment = "Saved by the forward: read, not computed again.";
    if (auto d = saved_dtype_.find(it->first); d != saved_dtype_.end()) {
      // (The cast is a no-op where the assertion holds; it keeps the
      // value's type whatever representative the pointer had.)
      auto *a = cast<Assign>(load.get());
      a->value = cast_to(std::move(a->value), dotted_name(std::string("tl.") + d->second));
      // The value is read back exactly only from a buffer of its own dtype.
      const std::string base = saved_base_.at(it->first);
      StmtPtr check = buffer_dtype_assertion(base, d->second, read_back_assertion_message(it->first, base, d->second));
      check->leading_comment = load->leading_comment;
      load->leading_comment.clear();
      dst.push_back(std::move(check));
    }
    dst.push_back(std::move(load));
    return;
  }
  dst.push_back(clone(s));
  auto d = dual_defs_.find(&s);
  if (d != dual_defs_.end()) dst.push_back(clone(*d->second));
}

}  // namespace tgrad::ad::reverse
