// Small builders of AST nodes the reverse-mode engine emits (`tl.where(...)`,
// `x = value`), and the error it throws to stop at a located message.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "src/ad/AnfWalk.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad::reverse {

using namespace ast;
using sema::SType;


struct AdError {
  SourceSpan span;
  std::string message;
};

[[noreturn]] inline void fail(const SourceSpan &span, const std::string &message) { throw AdError{span, message}; }

inline ExprPtr name(const std::string &id, const SourceSpan &s = {}) { return std::make_unique<Name>(id, s); }

// A call's callee as written: "tl.dot", "min", "x.to".
inline std::string callee(const Call &c) { return emit::print_expr(*c.func); }

// `v.to(T)` of a range loop's variable v (a program id the backward loops over) as `tl.cast(v, T)`: Triton's
// interpreter (TRITON_INTERPRET=1) runs range loops in Python, where v is an int, which has no `.to`; compiled
// Triton gives a tensor either way, and tl.cast takes both.
// (In A-normal form the cast's receiver is a copy of v: `t = v`, `i = t.to(tl.int64)`.)
inline void cast_loop_variable_portably(StmtList &block, const std::string &v) {
  std::set<std::string> copies = {v};
  for (size_t before = 0; before != copies.size();) {
    before = copies.size();
    each_assignment(block, [&](const std::string &target, const Expr &value) {
      if (auto *n = dyn_cast<Name>(&value); n && copies.count(n->id)) copies.insert(target);
    });
  }
  rewrite_exprs(block, [&](ExprPtr &e) {
    auto *c = dyn_cast<Call>(e.get());
    auto *to = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
    auto *receiver = to && to->attr == "to" ? dyn_cast<Name>(to->value.get()) : nullptr;
    if (!receiver || !copies.count(receiver->id)) return;
    ExprList args;
    args.push_back(std::move(to->value));
    for (ExprPtr &a : c->args) args.push_back(std::move(a));
    e = std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>("tl"), "cast"), std::move(args),
                               std::move(c->keywords), c->span);
  });
}

// `x[:, None]` (1: a column) or `x[None, :]` (2: a row), else 0.
inline int broadcast_axis(const Subscript &s) {
  if (s.indices.size() != 2) return 0;
  auto whole = [](const Expr &e) {
    auto *sl = dyn_cast<Slice>(&e);
    return sl && !sl->lower && !sl->upper && !sl->step;
  };
  if (whole(*s.indices[0]) && isa<NoneLit>(s.indices[1].get())) return 1;
  if (isa<NoneLit>(s.indices[0].get()) && whole(*s.indices[1])) return 2;
  return 0;
}

// `value[:, None]` (column) or `value[None, :]`.
inline ExprPtr broadcast(ExprPtr value, bool column) {
  ExprList idx;
  idx.push_back(column ? ExprPtr(std::make_unique<Slice>(nullptr, nullptr, nullptr)) : ExprPtr(std::make_unique<NoneLit>()));
  idx.push_back(column ? ExprPtr(std::make_unique<NoneLit>()) : ExprPtr(std::make_unique<Slice>(nullptr, nullptr, nullptr)));
  return std::make_unique<Subscript>(std::move(value), std::move(idx));
}

// `tl.float32` as an attribute chain.
inline ExprPtr dotted_name(const std::string &dotted) {
  ExprPtr e;
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    e = e ? std::make_unique<Attribute>(std::move(e), part) : name(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return e;
}

inline ExprPtr call(const std::string &dotted, ExprList args, std::vector<Keyword> kws = {}, const SourceSpan &s = {}) {
  return std::make_unique<Call>(dotted_name(dotted), std::move(args), std::move(kws), s);
}

inline ExprList list(ExprPtr a) {
  ExprList l;
  l.push_back(std::move(a));
  return l;
}
inline ExprList list(ExprPtr a, ExprPtr b) {
  ExprList l;
  l.push_back(std::move(a));
  l.push_back(std::move(b));
  return l;
}

inline ExprList list(ExprPtr a, ExprPtr b, ExprPtr c) {
  ExprList l = list(std::move(a), std::move(b));
  l.push_back(std::move(c));
  return l;
}

inline StmtPtr assign(const std::string &target, ExprPtr value, const SourceSpan &s = {}) {
  ExprList t;
  t.push_back(name(target, s));
  return std::make_unique<Assign>(std::move(t), std::move(value), s);
}

inline ExprPtr int_lit(int64_t v) { return std::make_unique<IntLit>(static_cast<uint64_t>(v), ""); }

// `value.to(dtype)`
inline ExprPtr cast_to(ExprPtr value, ExprPtr dtype) {
  return std::make_unique<Call>(std::make_unique<Attribute>(std::move(value), "to"), list(std::move(dtype)),
                                std::vector<Keyword>{});
}

// `a == b`
inline ExprPtr equals(ExprPtr a, ExprPtr b) {
  return std::make_unique<Compare>(std::move(a), std::vector<CompareOpKind>{CompareOpKind::Eq}, list(std::move(b)));
}

// `a <op> b`
inline ExprPtr binary(BinaryOpKind op, ExprPtr a, ExprPtr b, const SourceSpan &s = {}) {
  return std::make_unique<BinOp>(op, std::move(a), std::move(b), s);
}

// `tl.static_assert(pointer.dtype.element_ty == tl.<dtype>, why)`: the backward
// relies on reading a value back exactly from a buffer whose type is generic.
inline StmtPtr buffer_dtype_assertion(const std::string &pointer, const std::string &dtype, const std::string &why) {
  ExprPtr same = equals(std::make_unique<Attribute>(std::make_unique<Attribute>(name(pointer), "dtype"), "element_ty"),
                        dotted_name("tl." + dtype));
  return std::make_unique<ExprStmt>(call("tl.static_assert", list(std::move(same), std::make_unique<StrLit>(why, ""))));
}

// The message of the assertion that guards reading `value` back from `base`
// (Engine::replay_stmt), and the value such an assertion guards: where
// dead-code removal drops the read-back, its assertion goes too
// (Engine::drop_unguarded_read_back_assertions).
inline std::string read_back_assertion_message(const std::string &value, const std::string &base,
                                               const std::string &dtype) {
  return "tgrad: the backward reads '" + value + "' back from " + base + ", which must be a " + dtype +
         " buffer (or give --arg " + base + "=*DTYPE)";
}
inline std::optional<std::string> read_back_assertion_value(const Stmt &s) {
  static const std::string prefix = "tgrad: the backward reads '";
  auto *e = dyn_cast<ExprStmt>(&s);
  auto *c = e ? dyn_cast<Call>(e->value.get()) : nullptr;
  auto *f = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
  if (!f || f->attr != "static_assert" || c->args.size() != 2) return std::nullopt;
  auto *why = dyn_cast<StrLit>(c->args[1].get());
  if (!why || why->value.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const size_t end = why->value.find('\'', prefix.size());
  if (end == std::string::npos) return std::nullopt;
  return why->value.substr(prefix.size(), end - prefix.size());
}

inline bool is_float_tensor(const SType *t) { return t && t->is_tensor() && !t->elem.is_pointer && sema::is_float(t->elem.dtype); }

// A value that can carry a gradient: a float tensor, or a tuple holding one
// (the result of a jit function returning several values).
inline bool carries_gradient(const SType *t) {
  if (is_float_tensor(t)) return true;
  if (t && t->kind == SType::Kind::Tuple)
    for (const SType &e : t->elems)
      if (carries_gradient(&e)) return true;
  return false;
}

// Removes block[k], moving a comment that introduces a block to the next statement.
inline void erase_keeping_comment(StmtList &block, size_t k) {
  const Stmt &s = *block[k];
  if (!s.leading_comment.empty() && k + 1 < block.size() && block[k + 1]->leading_comment.empty())
    block[k + 1]->leading_comment = s.leading_comment;
  block.erase(block.begin() + static_cast<long>(k));
}

// `x.to(...)`, a cast: the slot of x, else null.
inline ExprPtr *cast_receiver(Expr &e) {
  auto *c = dyn_cast<Call>(&e);
  auto *a = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
  return a && a->attr == "to" ? &a->value : nullptr;
}
inline const Expr *cast_receiver(const Expr &e) {
  const ExprPtr *slot = cast_receiver(const_cast<Expr &>(e));
  return slot ? slot->get() : nullptr;
}

// `0` or `0.0`.
inline bool is_zero_literal(const Expr &e) {
  if (auto *f = dyn_cast<FloatLit>(&e)) return f->value == 0.0;
  if (auto *i = dyn_cast<IntLit>(&e)) return i->value == 0;
  return false;
}

// The last part of a called function's dotted name (tl.math.exp2 -> exp2).
inline std::string callee_last_part(const Call &c) {
  const std::string f = callee(c);
  const size_t dot = f.rfind('.');
  return dot == std::string::npos ? f : f.substr(dot + 1);
}

// Removes the assignments `x = x` a rewrite left (`s = tl.where(mask, s, 0.0)` with its mask dropped), at any
// depth; an if left with nothing to do in either branch goes too, and a body left empty gets a `pass`.
inline void drop_self_assignments(StmtList &block) {
  for (size_t k = block.size(); k-- > 0;) {
    if (auto *a = dyn_cast<Assign>(block[k].get()); a && a->targets.size() == 1)
      if (auto *t = dyn_cast<Name>(a->targets[0].get()); t) {
        auto *v = dyn_cast<Name>(a->value.get());
        if (v && v->id == t->id) {
          erase_keeping_comment(block, k);
          continue;
        }
      }
    if (auto *i = dyn_cast<If>(block[k].get())) {
      drop_self_assignments(i->body);
      drop_self_assignments(i->orelse);
      if (i->body.empty() && i->orelse.empty()) erase_keeping_comment(block, k);
      else if (i->body.empty()) i->body.push_back(std::make_unique<Pass>());
    } else if (auto *f = dyn_cast<For>(block[k].get())) {
      drop_self_assignments(f->body);
      if (f->body.empty()) f->body.push_back(std::make_unique<Pass>());
    } else if (auto *w = dyn_cast<While>(block[k].get())) {
      drop_self_assignments(w->body);
      if (w->body.empty()) w->body.push_back(std::make_unique<Pass>());
    }
  }
}

}  // namespace tgrad::ad::reverse
