#include "src/lower/BlockPointers.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/lower/RebindDescriptors.h"
#include "src/lower/Walk.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::lower {

using namespace ast;

namespace {

struct LowerError {
  SourceSpan span;
  std::string message;
};

[[noreturn]] void fail(const SourceSpan &span, const std::string &message) { throw LowerError{span, message}; }

const Expr *argument(const Call &c, size_t position, const char *keyword) {
  if (position < c.args.size()) return c.args[position].get();
  return c.keyword(keyword);
}

// The elements of a tuple or list written in the call (`(M, N)`, `[BM, BN]`).
const ExprList &elements(const Expr *e, const SourceSpan &call, const char *what) {
  if (auto *t = dyn_cast<Tuple>(e)) return t->elts;
  if (auto *l = dyn_cast<List>(e)) return l->elts;
  fail(e ? e->span : call, std::string("tgrad needs the ") + what +
                               " of a block pointer written as a tuple in the call (for example (M, N))");
}

ExprPtr name(const std::string &id, const SourceSpan &s) { return std::make_unique<Name>(id, s); }
ExprPtr binop(BinaryOpKind op, ExprPtr a, ExprPtr b, const SourceSpan &s) {
  return std::make_unique<BinOp>(op, std::move(a), std::move(b), s);
}
StmtPtr assign(const std::string &target, ExprPtr value, const SourceSpan &s) {
  ExprList targets;
  targets.push_back(name(target, s));
  return std::make_unique<Assign>(std::move(targets), std::move(value), s);
}

bool calls_make_block_ptr(const Module &module, const StmtList &block) {
  bool found = false;
  visit_block(block, [&](const Expr &e) {
    found |= is_tl_call(module, &e, "make_block_ptr") || is_tl_call(module, &e, "make_tensor_descriptor");
  });
  return found;
}

// A block pointer variable: the prefix of its parts and its block shape.
struct BlockPointer {
  std::string prefix;
  size_t rank = 0;
  std::vector<std::shared_ptr<const Expr>> block_shape;  // constexpr expressions
  // A tensor descriptor (tl.make_tensor_descriptor): no offsets of its own;
  // each access names the block's corner, and checks every dimension.
  bool descriptor = false;
  std::string padding = "zero";  // what a descriptor's load reads out of bounds
  // Where it was first made: the innermost if around it (null: none) and which branch.
  const Expr *made_under = nullptr;
  bool made_in_else = false;
  // Made in both branches of that if with different block shapes: block_shape
  // holds `A if cond else B` where they differ.
  bool chosen_by_condition = false;
  std::string base() const { return prefix + "_base"; }
  std::string shape(size_t d) const { return prefix + "_shape" + std::to_string(d); }
  std::string stride(size_t d) const { return prefix + "_stride" + std::to_string(d); }
  std::string offset(size_t d) const { return prefix + "_offset" + std::to_string(d); }
  std::string block(size_t d) const { return prefix + "_block" + std::to_string(d); }
  std::string index(size_t d) const { return prefix + "_index" + std::to_string(d); }
  // Parts passed to a helper, in parameter order (the block dims last).
  std::vector<std::string> runtime_parts() const {
    std::vector<std::string> out{base()};
    for (size_t d = 0; d < rank; ++d) out.push_back(shape(d));
    for (size_t d = 0; d < rank; ++d) out.push_back(stride(d));
    for (size_t d = 0; d < rank; ++d) out.push_back(offset(d));
    return out;
  }
};

// A prefix for the parts of `var` that no name of the function uses.
std::string fresh_prefix(const std::string &var, const std::set<std::string> &taken) {
  std::string prefix = var;
  auto clashes = [&](const std::string &p) {
    for (const char *part : {"_base", "_shape0", "_stride0", "_offset0", "_block0", "_index0"})
      if (taken.count(p + part)) return true;
    return false;
  };
  while (clashes(prefix)) prefix += "_bp";
  return prefix;
}

// What the module-level pass needs to know of the helpers' block-pointer
// parameters: per function, per parameter name, its rank.
using ParamBlocks = std::map<std::string, std::map<std::string, size_t>>;

class FunctionLowering {
 public:
  FunctionLowering(const Module &module, const Function &fn, const std::map<std::string, size_t> &params,
                   ParamBlocks &needs)
      : module_(module), fn_(fn), params_(params), needs_(needs) {
    std::set<std::string> taken;
    collect_names(fn.body, taken);
    for (const Param &p : fn.params) taken.insert(p.name);
    taken_ = taken;
    body_ = clone(fn.body);
    rename_rebound_descriptors(module, body_, taken_, original_);
  }

  std::unique_ptr<Function> run() {
    auto out = clone_signature(fn_);
    out->params.clear();
    for (const Param &p : fn_.params) {
      auto it = params_.find(p.name);
      if (it == params_.end()) {
        out->params.push_back({p.name, p.span, p.annotation ? clone(*p.annotation) : nullptr,
                               p.default_value ? clone(*p.default_value) : nullptr});
        continue;
      }
      BlockPointer bp = parameter_block_pointer(fn_, p.name, it->second);
      for (const std::string &part : bp.runtime_parts()) out->params.push_back({part, p.span, nullptr, nullptr});
      for (size_t d = 0; d < bp.rank; ++d) {
        auto constexpr_annotation = std::make_unique<Attribute>(name("tl", p.span), "constexpr", p.span);
        out->params.push_back({bp.block(d), p.span, std::move(constexpr_annotation), nullptr});
      }
      pointers_[p.name] = bp;
    }
    find_block_pointers(body_);
    find_block_pointers(body_);  // names copied from ones assigned later in a loop
    out->body = lower_block(body_);
    return out;
  }

  // The parts of a helper's block-pointer parameter (its prefix made fresh in the helper).
  static BlockPointer parameter_block_pointer(const Function &fn, const std::string &param, size_t rank) {
    std::set<std::string> taken;
    collect_names(fn.body, taken);
    for (const Param &p : fn.params)
      if (p.name != param) taken.insert(p.name);
    BlockPointer bp;
    bp.prefix = fresh_prefix(param, taken);
    bp.rank = rank;
    for (size_t d = 0; d < rank; ++d) bp.block_shape.push_back(std::make_shared<Name>(bp.block(d)));
    return bp;
  }

 private:
  // ------------------------------------------- which names hold block pointers

  const BlockPointer *pointer_of(const Expr *e) const {
    auto *n = dyn_cast<Name>(e);
    if (!n) return nullptr;
    auto it = pointers_.find(n->id);
    return it == pointers_.end() ? nullptr : &it->second;
  }

  // The block pointer an expression evaluates to (shape only), or null.
  std::optional<BlockPointer> value_shape(const Expr &value) const {
    const bool descriptor = is_tl_call(module_, &value, "make_tensor_descriptor");
    if (descriptor || is_tl_call(module_, &value, "make_block_ptr")) {
      auto *c = cast<Call>(&value);
      const ExprList &block = elements(argument(*c, descriptor ? 3 : 4, "block_shape"), c->span, "block_shape");
      BlockPointer bp;
      bp.rank = block.size();
      bp.descriptor = descriptor;
      for (const ExprPtr &b : block) bp.block_shape.push_back(std::shared_ptr<const Expr>(clone(*b).release()));
      if (const Expr *padding = descriptor ? argument(*c, 4, "padding_option") : nullptr) {
        auto *p = dyn_cast<StrLit>(padding);
        if (!p || (p->value != "zero" && p->value != "nan"))
          fail(padding->span, "padding_option of a tensor descriptor must be \"zero\" or \"nan\"");
        bp.padding = p->value;
      }
      return bp;
    }
    if (is_tl_call(module_, &value, "advance")) {
      const Expr *src = argument(*cast<Call>(&value), 0, "base");
      if (const BlockPointer *bp = pointer_of(src)) return *bp;
      return std::nullopt;
    }
    if (const BlockPointer *bp = pointer_of(&value)) return *bp;
    return std::nullopt;
  }

  void note_pointer(const Expr &target, const Expr &value) {
    auto *n = dyn_cast<Name>(&target);
    std::optional<BlockPointer> bp = value_shape(value);
    if (!bp) return;
    if (!n) fail(target.span, "tgrad lowers block pointers assigned to names; assign this one to a name");
    auto it = pointers_.find(n->id);
    if (it != pointers_.end()) {
      if (it->second.rank != bp->rank)
        fail(target.span, "'" + n->id + "' holds block pointers of " + std::to_string(it->second.rank) + " and " +
                              std::to_string(bp->rank) + " dimensions; tgrad needs one rank per name");
      if (it->second.descriptor != bp->descriptor)
        fail(target.span, "'" + n->id + "' holds a block pointer and a tensor descriptor; tgrad needs one kind per name");
      // Each access's tile takes the name's block shape. Two shapes under one
      // name, one in each branch of an if (the Triton tutorial's desc_v,
      // [BLOCK_N, HEAD_DIM] or, with FP8_OUTPUT, [HEAD_DIM, BLOCK_N]; fla's
      // [BK, BV] or, with STATE_V_FIRST, [BV, BK]): the tiles take
      // `BLOCK_N if not FP8_OUTPUT else HEAD_DIM`, which Triton decides when it
      // compiles (the condition is on tl.constexpr values: each specialization
      // keeps one). Anything else would load one with the other's shape.
      BlockPointer &held = it->second;
      bool differ = false;
      for (size_t d = 0; d < bp->rank; ++d)
        differ |= emit::print_expr(*held.block_shape[d]) != emit::print_expr(*bp->block_shape[d]);
      if (!differ || held.chosen_by_condition) return;
      const Expr *cond = conditions_.empty() ? nullptr : conditions_.back();
      if (!cond || cond != held.made_under || branch_is_else_.back() == held.made_in_else) {
        std::string where;
        if (cond) where = " (this one where `" + emit::print_expr(*cond) + "` is " + (branch_is_else_.back() ? "false" : "true") + ")";
        fail(target.span, "'" + user_name(n->id) + "' is given block pointers of block shapes " + shape_text(held) +
                              " and " + shape_text(*bp) + where +
                              "; tgrad lowers one block shape per name, or two chosen by the branches of one if: give "
                              "the tl.constexpr values that choose between them with -D, or use a name for each");
      }
      for (size_t d = 0; d < bp->rank; ++d) {
        const bool held_in_then = !held.made_in_else;
        std::shared_ptr<const Expr> then_shape = held_in_then ? held.block_shape[d] : bp->block_shape[d];
        std::shared_ptr<const Expr> else_shape = held_in_then ? bp->block_shape[d] : held.block_shape[d];
        if (emit::print_expr(*then_shape) == emit::print_expr(*else_shape)) continue;
        held.block_shape[d] = std::make_shared<IfExp>(clone(*cond), clone(*then_shape), clone(*else_shape), cond->span);
      }
      held.chosen_by_condition = true;
      return;
    }
    if (!conditions_.empty()) {
      bp->made_under = conditions_.back();
      bp->made_in_else = branch_is_else_.back();
    }
    bp->prefix = fresh_prefix(n->id, taken_);
    for (const char *part : {"_base", "_shape0", "_stride0", "_offset0", "_block0", "_index0"}) taken_.insert(bp->prefix + part);
    pointers_[n->id] = *bp;
  }

  void find_block_pointers(const StmtList &block) {
    for (const StmtPtr &s : block) {
      if (auto *a = dyn_cast<Assign>(s.get())) {
        for (const ExprPtr &t : a->targets) {
          auto *tt = dyn_cast<Tuple>(t.get());
          auto *tv = dyn_cast<Tuple>(a->value.get());
          if (tt && tv && tt->elts.size() == tv->elts.size()) {
            for (size_t k = 0; k < tt->elts.size(); ++k) note_pointer(*tt->elts[k], *tv->elts[k]);
          } else {
            note_pointer(*t, *a->value);
          }
        }
      }
      // Each block under the if (or loop: a null condition, where the block shape must not vary) around it.
      auto under = [&](const Expr *cond, bool in_else, const StmtList &body) {
        conditions_.push_back(cond);
        branch_is_else_.push_back(in_else);
        find_block_pointers(body);
        conditions_.pop_back();
        branch_is_else_.pop_back();
      };
      if (auto *i = dyn_cast<If>(s.get())) {
        under(i->cond.get(), false, i->body);
        under(i->cond.get(), true, i->orelse);
      }
      if (auto *f = dyn_cast<For>(s.get())) under(nullptr, false, f->body);
      if (auto *w = dyn_cast<While>(s.get())) under(nullptr, false, w->body);
    }
  }

  static std::string shape_text(const BlockPointer &bp) {
    std::string out = "[";
    for (size_t d = 0; d < bp.rank; ++d) out += (d ? ", " : "") + emit::print_expr(*bp.block_shape[d]);
    return out + "]";
  }

  // ------------------------------------------------------------ statements

  StmtList lower_block(const StmtList &block) {
    StmtList out;
    for (const StmtPtr &s : block) lower_stmt(*s, out);
    return out;
  }

  void flush(StmtList &out) {
    for (StmtPtr &p : pending_) out.push_back(std::move(p));
    pending_.clear();
  }

  void lower_stmt(const Stmt &s, StmtList &out) {
    if (auto *a = dyn_cast<Assign>(&s)) {
      if (a->targets.size() == 1) {
        auto *tt = dyn_cast<Tuple>(a->targets[0].get());
        auto *tv = dyn_cast<Tuple>(a->value.get());
        bool any_pointer = false;
        if (tt && tv && tt->elts.size() == tv->elts.size())
          for (size_t k = 0; k < tt->elts.size(); ++k) any_pointer |= value_shape(*tv->elts[k]).has_value();
        if (any_pointer) {
          // p_q, p_k = tl.make_block_ptr(...), tl.make_block_ptr(...): one assignment each, unless a value reads
          // a name assigned before it (Python evaluates the whole right side first).
          std::set<std::string> targets, read;
          for (const ExprPtr &t : tt->elts) collect_names(*t, targets);
          for (const ExprPtr &v : tv->elts) collect_names(*v, read);
          for (const std::string &t : targets)
            if (read.count(t))
              fail(s.span, "tgrad lowers this tuple of block pointers one assignment at a time, but a value reads '" +
                               t + "', which the assignment also sets: write one assignment per line");
          for (size_t k = 0; k < tt->elts.size(); ++k) {
            ExprList one;
            one.push_back(clone(*tt->elts[k]));
            Assign single(std::move(one), clone(*tv->elts[k]), s.span);
            lower_stmt(single, out);
          }
          return;
        }
        if (auto *n = dyn_cast<Name>(a->targets[0].get())) {
          auto it = pointers_.find(n->id);
          if (it != pointers_.end()) {
            assign_pointer(it->second, *a->value, s.span, out);
            return;
          }
        }
      }
    }
    if (auto *a = dyn_cast<AugAssign>(&s); a && pointer_of(a->target.get()))
      fail(s.span, "a block pointer moves with tl.advance(p, offsets), not with +=");

    StmtPtr copy = clone(s);
    lower_exprs_of(*copy);
    if (auto *i = dyn_cast<If>(copy.get())) {
      i->body = lower_block(cast<If>(&s)->body);
      i->orelse = lower_block(cast<If>(&s)->orelse);
    } else if (auto *f = dyn_cast<For>(copy.get())) {
      f->body = lower_block(cast<For>(&s)->body);
    } else if (auto *w = dyn_cast<While>(copy.get())) {
      if (!pending_.empty()) fail(w->cond->span, "tgrad cannot lower a block pointer made in a while condition");
      w->body = lower_block(cast<While>(&s)->body);
    }
    flush(out);
    copy->leading_comment = s.leading_comment;
    out.push_back(std::move(copy));
  }

  // The expressions a statement reads (not its nested blocks), lowered in place.
  void lower_exprs_of(Stmt &s) {
    switch (s.kind) {
      case NodeKind::ExprStmt: lower_expr(cast<ExprStmt>(&s)->value); return;
      case NodeKind::Assign:
        lower_expr(cast<Assign>(&s)->value);
        for (ExprPtr &t : cast<Assign>(&s)->targets) check_no_pointer(*t);
        return;
      case NodeKind::AugAssign: lower_expr(cast<AugAssign>(&s)->value); return;
      case NodeKind::AnnAssign:
        if (cast<AnnAssign>(&s)->value) lower_expr(cast<AnnAssign>(&s)->value);
        return;
      case NodeKind::If: lower_expr(cast<If>(&s)->cond); return;
      case NodeKind::For: lower_expr(cast<For>(&s)->iter); return;
      case NodeKind::While: lower_expr(cast<While>(&s)->cond); return;
      case NodeKind::Return:
        if (cast<Return>(&s)->value) lower_expr(cast<Return>(&s)->value);
        return;
      case NodeKind::Assert: lower_expr(cast<Assert>(&s)->test); return;
      default: return;
    }
  }

  void check_no_pointer(const Expr &target) {
    if (const BlockPointer *bp = pointer_of(&target); bp)
      fail(target.span, "'" + cast<Name>(&target)->id + "' holds a block pointer here and another value elsewhere");
  }

  // `p = <block pointer value>`: the parts of p.
  void assign_pointer(const BlockPointer &bp, const Expr &value, const SourceSpan &span, StmtList &out) {
    // tl.make_block_ptr(base, shape, strides, offsets, block_shape, order) and
    // tl.make_tensor_descriptor(base, shape, strides, block_shape): a descriptor
    // has no offsets of its own.
    const bool descriptor = is_tl_call(module_, &value, "make_tensor_descriptor");
    if (descriptor || is_tl_call(module_, &value, "make_block_ptr")) {
      const std::string maker = descriptor ? "tl.make_tensor_descriptor" : "tl.make_block_ptr";
      auto *c = cast<Call>(&value);
      const Expr *base = argument(*c, 0, "base");
      if (!base) fail(c->span, maker + " needs a base pointer");
      const ExprList &shape = elements(argument(*c, 1, "shape"), c->span, "shape");
      const ExprList &strides = elements(argument(*c, 2, "strides"), c->span, "strides");
      const ExprList *offsets = descriptor ? nullptr : &elements(argument(*c, 3, "offsets"), c->span, "offsets");
      if (shape.size() != bp.rank || strides.size() != bp.rank || (offsets && offsets->size() != bp.rank))
        fail(c->span, maker + (descriptor ? " needs shape, strides and block_shape of one length"
                                          : " needs shape, strides, offsets and block_shape of one length"));
      std::vector<StmtPtr> parts;
      parts.push_back(assign(bp.base(), lowered(*base), span));
      for (size_t d = 0; d < bp.rank; ++d) parts.push_back(assign(bp.shape(d), lowered(*shape[d]), span));
      for (size_t d = 0; d < bp.rank; ++d) parts.push_back(assign(bp.stride(d), lowered(*strides[d]), span));
      if (offsets)
        for (size_t d = 0; d < bp.rank; ++d) parts.push_back(assign(bp.offset(d), lowered(*(*offsets)[d]), span));
      flush(out);
      for (StmtPtr &p : parts) out.push_back(std::move(p));
      return;
    }
    if (is_tl_call(module_, &value, "advance")) {
      auto *c = cast<Call>(&value);
      const BlockPointer *src = pointer_of(argument(*c, 0, "base"));
      const ExprList &deltas = elements(argument(*c, 1, "offsets"), c->span, "offsets");
      if (deltas.size() != bp.rank)
        fail(c->span, "tl.advance needs one offset per dimension of the block pointer (" + std::to_string(bp.rank) + ")");
      std::vector<StmtPtr> parts;
      if (src->prefix != bp.prefix) copy_parts(*src, bp, /*offsets=*/false, span, parts);
      for (size_t d = 0; d < bp.rank; ++d)
        parts.push_back(assign(bp.offset(d), binop(BinaryOpKind::Add, name(src->offset(d), span), lowered(*deltas[d]), span),
                               span));
      flush(out);
      for (StmtPtr &p : parts) out.push_back(std::move(p));
      return;
    }
    if (const BlockPointer *src = pointer_of(&value)) {
      if (src->prefix == bp.prefix) return;
      std::vector<StmtPtr> parts;
      copy_parts(*src, bp, /*offsets=*/!bp.descriptor, span, parts);
      for (StmtPtr &p : parts) out.push_back(std::move(p));
      return;
    }
    fail(value.span, "this assigns to a name that holds a block pointer elsewhere; tgrad needs block pointers in "
                     "names of their own");
  }

  static void copy_parts(const BlockPointer &from, const BlockPointer &to, bool offsets, const SourceSpan &span,
                         std::vector<StmtPtr> &out) {
    out.push_back(assign(to.base(), name(from.base(), span), span));
    for (size_t d = 0; d < to.rank; ++d) out.push_back(assign(to.shape(d), name(from.shape(d), span), span));
    for (size_t d = 0; d < to.rank; ++d) out.push_back(assign(to.stride(d), name(from.stride(d), span), span));
    if (offsets)
      for (size_t d = 0; d < to.rank; ++d) out.push_back(assign(to.offset(d), name(from.offset(d), span), span));
  }

  // ----------------------------------------------------------- expressions

  ExprPtr lowered(const Expr &e) {
    ExprPtr copy = clone(e);
    lower_expr(copy);
    return copy;
  }

  // A block pointer made or advanced inside an expression (`tl.load(tl.advance(p, (0, BK)))`): its parts go in
  // statements before this one, under a fresh name.
  const BlockPointer &hoist(const Expr &value) {
    std::optional<BlockPointer> bp = value_shape(value);
    bp->prefix = fresh_prefix("block_ptr", taken_);
    for (const char *part : {"_base", "_shape0", "_stride0", "_offset0", "_block0", "_index0"}) taken_.insert(bp->prefix + part);
    hoisted_.push_back(std::make_unique<BlockPointer>(*bp));
    StmtList parts;
    assign_pointer(*hoisted_.back(), value, value.span, parts);
    for (StmtPtr &p : parts) pending_.push_back(std::move(p));
    return *hoisted_.back();
  }

  // The block pointer an access goes through: a name, or a call made in place.
  const BlockPointer *access_pointer(const Expr *e) {
    if (!e) return nullptr;
    if (const BlockPointer *bp = pointer_of(e)) return bp;
    if (is_tl_call(module_, e, "make_block_ptr") || (is_tl_call(module_, e, "advance") && value_shape(*e))) return &hoist(*e);
    return nullptr;
  }

  // Before the access: `<prefix>_index<d> = offset_d + tl.arange(0, B_d)`, the
  // indices of the block in each dimension (reassigned at each access).
  void define_indices(const BlockPointer &bp, const SourceSpan &s, const ExprList *corner = nullptr) {
    for (size_t d = 0; d < bp.rank; ++d) {
      ExprList range;
      range.push_back(std::make_unique<IntLit>(0, "0", s));
      range.push_back(clone(*bp.block_shape[d]));
      auto arange = std::make_unique<Call>(std::make_unique<Attribute>(name("tl", s), "arange", s), std::move(range),
                                           std::vector<Keyword>{}, s);
      ExprPtr start = corner ? lowered(*(*corner)[d]) : name(bp.offset(d), s);
      pending_.push_back(assign(bp.index(d), binop(BinaryOpKind::Add, std::move(start), std::move(arange), s), s));
    }
  }

  // The indices of dimension d, expanded to the block's rank.
  ExprPtr index(const BlockPointer &bp, size_t d, const SourceSpan &s) {
    ExprPtr idx = name(bp.index(d), s);
    if (bp.rank == 1) return idx;
    ExprList indices;
    for (size_t k = 0; k < bp.rank; ++k)
      indices.push_back(k == d ? ExprPtr(std::make_unique<Slice>(nullptr, nullptr, nullptr, s))
                               : ExprPtr(std::make_unique<NoneLit>(s)));
    return std::make_unique<Subscript>(std::move(idx), std::move(indices), s);
  }

  ExprPtr address(const BlockPointer &bp, const SourceSpan &s) {
    ExprPtr a = name(bp.base(), s);
    for (size_t d = 0; d < bp.rank; ++d)
      a = binop(BinaryOpKind::Add, std::move(a), binop(BinaryOpKind::Mul, index(bp, d, s), name(bp.stride(d), s), s), s);
    return a;
  }

  // The dimensions `boundary_check` names (literal integers), in order.
  static std::vector<size_t> checked_dims(const Call &c, const BlockPointer &bp) {
    std::vector<size_t> dims;
    const Expr *check = c.keyword("boundary_check");
    if (!check) return dims;
    auto add = [&](const Expr &e) {
      auto *lit = dyn_cast<IntLit>(&e);
      if (!lit) fail(e.span, "tgrad needs boundary_check written as literal dimensions, for example (0, 1)");
      if (lit->value >= bp.rank)
        fail(e.span, "boundary_check names dimension " + std::to_string(lit->value) + " of a block pointer with " +
                         std::to_string(bp.rank));
      dims.push_back(static_cast<size_t>(lit->value));
    };
    if (auto *t = dyn_cast<Tuple>(check)) {
      for (const ExprPtr &e : t->elts) add(*e);
    } else if (auto *l = dyn_cast<List>(check)) {
      for (const ExprPtr &e : l->elts) add(*e);
    } else {
      add(*check);
    }
    return dims;
  }

  // 0 <= index < shape in each checked dimension (Triton's boundary check).
  ExprPtr mask(const BlockPointer &bp, const std::vector<size_t> &dims, const SourceSpan &s) {
    ExprPtr m;
    for (size_t d : dims) {
      for (CompareOpKind op : {CompareOpKind::GtE, CompareOpKind::Lt}) {
        ExprList right;
        right.push_back(op == CompareOpKind::GtE ? ExprPtr(std::make_unique<IntLit>(0, "0", s)) : name(bp.shape(d), s));
        ExprPtr c = std::make_unique<Compare>(index(bp, d, s), std::vector<CompareOpKind>{op}, std::move(right), s);
        m = m ? binop(BinaryOpKind::BitAnd, std::move(m), std::move(c), s) : std::move(c);
      }
    }
    return m;
  }

  // What a checked load reads out of bounds: 0.0 ("zero") or float('nan') ("nan").
  static ExprPtr padding_value(const std::string &padding, const SourceSpan &s) {
    if (padding != "nan") return std::make_unique<FloatLit>(0.0, "0.0", s);
    ExprList nan;
    nan.push_back(std::make_unique<StrLit>("nan", "'nan'", s));
    return std::make_unique<Call>(name("float", s), std::move(nan), std::vector<Keyword>{}, s);
  }

  // tl.load(p, boundary_check=..., padding_option=...) / tl.store(p, v, boundary_check=...).
  ExprPtr lower_access(Call &c, const BlockPointer &bp, bool load) {
    for (const Keyword &k : c.keywords)
      if (k.name == "mask" || k.name == "other")
        fail(k.name_span, "a load or store through a block pointer takes boundary_check and padding_option, not " +
                              k.name + " (Triton refuses it too)");
    std::vector<size_t> dims = checked_dims(c, bp);
    define_indices(bp, c.span);
    ExprList args;
    args.push_back(address(bp, c.span));
    if (!load) {
      ExprPtr value = c.args.size() > 1 ? std::move(c.args[1]) : nullptr;
      for (Keyword &k : c.keywords)
        if (k.name == "value") value = std::move(k.value);
      if (!value) fail(c.span, "tl.store needs a value");
      lower_expr(value);
      args.push_back(std::move(value));
    }
    std::vector<Keyword> kws;
    if (!dims.empty()) kws.push_back({"mask", c.span, mask(bp, dims, c.span)});
    for (Keyword &k : c.keywords) {
      if (k.name == "boundary_check" || k.name == "value" || k.name == "pointer") continue;
      if (k.name == "padding_option") {
        auto *p = dyn_cast<StrLit>(k.value.get());
        if (!p || (p->value != "" && p->value != "zero" && p->value != "nan"))
          fail(k.value->span, "padding_option must be \"zero\", \"nan\" or \"\"");
        // Without a padding option the lanes outside the checked bounds are undefined, as in Triton.
        if (!dims.empty() && !p->value.empty()) kws.push_back({"other", k.name_span, padding_value(p->value, c.span)});
        continue;
      }
      lower_expr(k.value);
      kws.push_back(std::move(k));
    }
    return std::make_unique<Call>(std::move(c.func), std::move(args), std::move(kws), c.span);
  }

  // desc.load(offsets) / desc.store(offsets, value) (also tl.load_tensor_descriptor(desc, offsets) and
  // tl.store_tensor_descriptor(desc, offsets, value)): the block at `offsets`, every dimension checked (a
  // descriptor reads `padding` out of bounds and writes nothing there, as TMA does).
  ExprPtr lower_descriptor_access(Call &c, const BlockPointer &bp, bool load, size_t first_argument) {
    const Expr *offsets = argument(c, first_argument, "offsets");
    if (!offsets) fail(c.span, "a tensor descriptor's load and store need the offsets of the block");
    const ExprList &corner = elements(offsets, c.span, "offsets");
    if (corner.size() != bp.rank)
      fail(offsets->span, "this tensor descriptor has " + std::to_string(bp.rank) + " dimensions; give one offset per "
                          "dimension");
    for (const Keyword &k : c.keywords)
      if (k.name != "offsets" && k.name != "value")
        fail(k.name_span, "tgrad does not lower the '" + k.name + "' argument of a tensor descriptor access");
    define_indices(bp, c.span, &corner);
    std::vector<size_t> dims;
    for (size_t d = 0; d < bp.rank; ++d) dims.push_back(d);
    ExprList args;
    args.push_back(address(bp, c.span));
    if (!load) {
      ExprPtr value = c.args.size() > first_argument + 1 ? std::move(c.args[first_argument + 1]) : nullptr;
      for (Keyword &k : c.keywords)
        if (k.name == "value") value = std::move(k.value);
      if (!value) fail(c.span, "a tensor descriptor's store needs a value");
      lower_expr(value);
      args.push_back(std::move(value));
    }
    std::vector<Keyword> kws;
    kws.push_back({"mask", c.span, mask(bp, dims, c.span)});
    if (load) kws.push_back({"other", c.span, padding_value(bp.padding, c.span)});
    auto func = std::make_unique<Attribute>(name("tl", c.span), load ? "load" : "store", c.span);
    return std::make_unique<Call>(std::move(func), std::move(args), std::move(kws), c.span);
  }

  // A call of a jit helper: a block-pointer argument becomes its parts and its block shape.
  void lower_helper_call(Call &c, const Function &callee) {
    ExprList args;
    std::vector<Keyword> kws;
    auto expand = [&](const BlockPointer &bp, const std::string &param, const SourceSpan &s, bool keyword) {
      if (bp.descriptor)
        fail(s, "tgrad does not pass tensor descriptors to jit helpers yet; make the descriptor inside '" +
                    callee.name + "', or pass its base pointer, shape and strides");
      size_t &rank = needs_[callee.name][param];
      if (rank != 0 && rank != bp.rank)
        fail(s, "'" + callee.name + "' is called with block pointers of " + std::to_string(rank) + " and " +
                    std::to_string(bp.rank) + " dimensions for '" + param + "'; tgrad needs one rank per parameter");
      rank = bp.rank;
      BlockPointer theirs = parameter_block_pointer(callee, param, bp.rank);
      std::vector<std::string> mine = bp.runtime_parts(), their_names = theirs.runtime_parts();
      for (size_t k = 0; k < mine.size(); ++k) {
        if (keyword) kws.push_back({their_names[k], s, name(mine[k], s)});
        else args.push_back(name(mine[k], s));
      }
      for (size_t d = 0; d < bp.rank; ++d) {
        if (keyword) kws.push_back({theirs.block(d), s, clone(*bp.block_shape[d])});
        else args.push_back(clone(*bp.block_shape[d]));
      }
    };
    for (size_t k = 0; k < c.args.size(); ++k) {
      if (const BlockPointer *bp = access_pointer(c.args[k].get())) {
        if (k >= callee.params.size()) fail(c.args[k]->span, "'" + callee.name + "' takes fewer arguments");
        expand(*bp, callee.params[k].name, c.args[k]->span, false);
        continue;
      }
      lower_expr(c.args[k]);
      args.push_back(std::move(c.args[k]));
    }
    for (Keyword &k : c.keywords) {
      if (const BlockPointer *bp = access_pointer(k.value.get())) {
        expand(*bp, k.name, k.value->span, true);
        continue;
      }
      lower_expr(k.value);
      kws.push_back(std::move(k));
    }
    c.args = std::move(args);
    c.keywords = std::move(kws);
  }

  void lower_expr(ExprPtr &e) {
    if (auto *c = dyn_cast<Call>(e.get())) {
      // desc.load(...), desc.store(...) and their tl.*_tensor_descriptor spellings.
      if (auto *method = dyn_cast<Attribute>(c->func.get()))
        if (const BlockPointer *bp = pointer_of(method->value.get()); bp && bp->descriptor) {
          if (method->attr != "load" && method->attr != "store")
            fail(c->span, "tgrad lowers a tensor descriptor's load and store, not " + method->attr + "; write the "
                          "access with tl.load/tl.store on pointers");
          e = lower_descriptor_access(*c, *bp, method->attr == "load", 0);
          return;
        }
      if (is_tl_call(module_, c, "load_tensor_descriptor") || is_tl_call(module_, c, "store_tensor_descriptor")) {
        const BlockPointer *bp = pointer_of(argument(*c, 0, "desc"));
        if (!bp || !bp->descriptor)
          fail(c->span, "tgrad needs the tensor descriptor of this access in a name assigned from "
                        "tl.make_tensor_descriptor in this function");
        e = lower_descriptor_access(*c, *bp, is_tl_call(module_, c, "load_tensor_descriptor"), 1);
        return;
      }
      const bool load = is_tl_call(module_, c, "load"), store = is_tl_call(module_, c, "store");
      if (load || store) {
        if (const BlockPointer *bp = access_pointer(argument(*c, 0, "pointer"))) {
          if (bp->descriptor)
            fail(c->span, "this is a tensor descriptor: load and store through it with its own methods "
                          "(desc.load(offsets), desc.store(offsets, value))");
          if (c->args.empty())
            fail(c->span, "tgrad needs the block pointer of a load or store as its first argument");
          e = lower_access(*c, *bp, load);
          return;
        }
      }
      if (is_tl_call(module_, c, "make_block_ptr") || is_tl_call(module_, c, "advance") || is_tl_call(module_, c, "make_tensor_descriptor"))
        fail(c->span, "tgrad lowers block pointers assigned to names or used directly in tl.load and tl.store; "
                      "assign this one to a name");
      if (auto *callee_name = dyn_cast<Name>(c->func.get()))
        if (const Function *callee = module_.find_function(callee_name->id)) {
          bool any = false;
          for (const ExprPtr &a : c->args) any |= pointer_of(a.get()) || value_shape(*a).has_value();
          for (const Keyword &k : c->keywords) any |= pointer_of(k.value.get()) || value_shape(*k.value).has_value();
          if (any) {
            lower_helper_call(*c, *callee);
            return;
          }
        }
    }
    // p.dtype: the base pointer's; a tensor descriptor's dtype is its elements'.
    if (auto *a = dyn_cast<Attribute>(e.get()); a && a->attr == "dtype")
      if (const BlockPointer *bp = pointer_of(a->value.get())) {
        a->value = name(bp->base(), a->value->span);
        if (bp->descriptor) {
          const SourceSpan s = a->span;
          e = std::make_unique<Attribute>(std::move(e), "element_ty", s);
        }
        return;
      }
    if (pointer_of(e.get()))
      fail(e->span, "'" + cast<Name>(e.get())->id + "' is a block pointer; tgrad lowers block pointers used in "
                    "tl.load, tl.store, tl.advance, .dtype and calls of jit functions, not here");
    for_each_child(*e, [&](ExprPtr &c) { lower_expr(c); });
  }

  const Module &module_;
  const Function &fn_;
  const std::map<std::string, size_t> &params_;
  ParamBlocks &needs_;
  std::set<std::string> taken_;
  StmtList body_;  // fn_'s body, rebound descriptors renamed (RebindRenamer)
  std::map<std::string, std::string> original_;  // those renamed: the user's names, for messages
  std::string user_name(const std::string &n) const {
    auto it = original_.find(n);
    return it == original_.end() ? n : it->second;
  }
  std::vector<const Expr *> conditions_;  // the ifs around the statement find_block_pointers is at
  std::vector<bool> branch_is_else_;
  std::map<std::string, BlockPointer> pointers_;
  std::vector<std::unique_ptr<BlockPointer>> hoisted_;
  StmtList pending_;
};

}  // namespace

bool uses_block_pointers(const Module &module) {
  for (const auto &f : module.functions)
    if (calls_make_block_ptr(module, f->body)) return true;
  return false;
}

std::unique_ptr<Module> lower_block_pointers(const Module &module, DiagEngine &diags, const std::string &root) {
  // The functions the root reaches (by the names they mention): others keep
  // their block pointers (a helper that returns one is inlined, not lowered).
  std::set<std::string> reachable;
  if (!root.empty()) {
    std::vector<std::string> work{root};
    while (!work.empty()) {
      std::string name = work.back();
      work.pop_back();
      const Function *f = module.find_function(name);
      if (!f || !reachable.insert(f->name).second) continue;
      std::set<std::string> mentioned;
      collect_names(f->body, mentioned);
      for (const std::string &m : mentioned)
        if (module.find_function(m)) work.push_back(m);
    }
  }
  // Helpers learn which parameters take block pointers from their callers:
  // lower until no new such parameter appears.
  ParamBlocks needs, seen;
  std::vector<std::unique_ptr<Function>> lowered;
  try {
    for (int round = 0; round < 16; ++round) {
      lowered.clear();
      static const std::map<std::string, size_t> none;
      for (const auto &f : module.functions) {
        auto it = seen.find(f->name);
        const std::map<std::string, size_t> &params = it == seen.end() ? none : it->second;
        if ((params.empty() && !calls_make_block_ptr(module, f->body)) || (!root.empty() && !reachable.count(f->name))) {
          lowered.push_back(nullptr);
          continue;
        }
        lowered.push_back(FunctionLowering(module, *f, params, needs).run());
      }
      if (needs == seen) break;
      seen = needs;
    }
  } catch (const LowerError &e) {
    diags.error(e.span, e.message);
    return nullptr;
  }
  std::unique_ptr<Module> out = clone(module);
  for (size_t k = 0; k < module.functions.size(); ++k)
    if (lowered[k]) out->functions[k] = std::move(lowered[k]);
  return out;
}

const Module *with_block_pointers_lowered(const Module &module, const std::string &root, DiagEngine &diags,
                                          std::unique_ptr<Module> &holder) {
  if (!uses_block_pointers(module)) return &module;
  holder = lower_block_pointers(module, diags, root);
  return holder.get();
}

}  // namespace tgrad::lower
