#include "tgrad/ast/Equal.h"

#include <cstring>

namespace tgrad::ast {

namespace {

bool equal_opt(const ExprPtr &a, const ExprPtr &b) {
  if (!a || !b) return !a && !b;
  return equal(*a, *b);
}

bool equal_list(const ExprList &a, const ExprList &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!equal(*a[i], *b[i])) return false;
  return true;
}

bool same_double(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

bool equal(const Expr &a, const Expr &b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case NodeKind::Name: return cast<Name>(&a)->id == cast<Name>(&b)->id;
    case NodeKind::IntLit: return cast<IntLit>(&a)->value == cast<IntLit>(&b)->value;
    case NodeKind::FloatLit: return same_double(cast<FloatLit>(&a)->value, cast<FloatLit>(&b)->value);
    case NodeKind::BoolLit: return cast<BoolLit>(&a)->value == cast<BoolLit>(&b)->value;
    case NodeKind::NoneLit: return true;
    case NodeKind::StrLit: return cast<StrLit>(&a)->value == cast<StrLit>(&b)->value;
    case NodeKind::EllipsisLit: return true;
    case NodeKind::Attribute: {
      auto *x = cast<Attribute>(&a), *y = cast<Attribute>(&b);
      return x->attr == y->attr && equal(*x->value, *y->value);
    }
    case NodeKind::Subscript: {
      auto *x = cast<Subscript>(&a), *y = cast<Subscript>(&b);
      return equal(*x->value, *y->value) && equal_list(x->indices, y->indices);
    }
    case NodeKind::Slice: {
      auto *x = cast<Slice>(&a), *y = cast<Slice>(&b);
      return equal_opt(x->lower, y->lower) && equal_opt(x->upper, y->upper) && equal_opt(x->step, y->step);
    }
    case NodeKind::Call: {
      auto *x = cast<Call>(&a), *y = cast<Call>(&b);
      if (!equal(*x->func, *y->func) || !equal_list(x->args, y->args)) return false;
      if (x->keywords.size() != y->keywords.size()) return false;
      for (size_t i = 0; i < x->keywords.size(); ++i)
        if (x->keywords[i].name != y->keywords[i].name || !equal(*x->keywords[i].value, *y->keywords[i].value))
          return false;
      return true;
    }
    case NodeKind::UnaryOp: {
      auto *x = cast<UnaryOp>(&a), *y = cast<UnaryOp>(&b);
      return x->op == y->op && equal(*x->operand, *y->operand);
    }
    case NodeKind::BinOp: {
      auto *x = cast<BinOp>(&a), *y = cast<BinOp>(&b);
      return x->op == y->op && equal(*x->lhs, *y->lhs) && equal(*x->rhs, *y->rhs);
    }
    case NodeKind::BoolOp: {
      auto *x = cast<BoolOp>(&a), *y = cast<BoolOp>(&b);
      return x->op == y->op && equal_list(x->values, y->values);
    }
    case NodeKind::Compare: {
      auto *x = cast<Compare>(&a), *y = cast<Compare>(&b);
      return x->ops == y->ops && equal(*x->left, *y->left) && equal_list(x->comparators, y->comparators);
    }
    case NodeKind::IfExp: {
      auto *x = cast<IfExp>(&a), *y = cast<IfExp>(&b);
      return equal(*x->cond, *y->cond) && equal(*x->then_value, *y->then_value) &&
             equal(*x->else_value, *y->else_value);
    }
    case NodeKind::Tuple: return equal_list(cast<Tuple>(&a)->elts, cast<Tuple>(&b)->elts);
    case NodeKind::List: return equal_list(cast<List>(&a)->elts, cast<List>(&b)->elts);
#define TGRAD_STMT(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
      break;
  }
  return false;
}

bool equal(const Stmt &a, const Stmt &b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case NodeKind::ExprStmt: return equal(*cast<ExprStmt>(&a)->value, *cast<ExprStmt>(&b)->value);
    case NodeKind::Assign: {
      auto *x = cast<Assign>(&a), *y = cast<Assign>(&b);
      return equal_list(x->targets, y->targets) && equal(*x->value, *y->value);
    }
    case NodeKind::AugAssign: {
      auto *x = cast<AugAssign>(&a), *y = cast<AugAssign>(&b);
      return x->op == y->op && equal(*x->target, *y->target) && equal(*x->value, *y->value);
    }
    case NodeKind::AnnAssign: {
      auto *x = cast<AnnAssign>(&a), *y = cast<AnnAssign>(&b);
      return equal(*x->target, *y->target) && equal(*x->annotation, *y->annotation) && equal_opt(x->value, y->value);
    }
    case NodeKind::If: {
      auto *x = cast<If>(&a), *y = cast<If>(&b);
      return equal(*x->cond, *y->cond) && equal(x->body, y->body) && equal(x->orelse, y->orelse);
    }
    case NodeKind::For: {
      auto *x = cast<For>(&a), *y = cast<For>(&b);
      return equal(*x->target, *y->target) && equal(*x->iter, *y->iter) && equal(x->body, y->body);
    }
    case NodeKind::While: {
      auto *x = cast<While>(&a), *y = cast<While>(&b);
      return equal(*x->cond, *y->cond) && equal(x->body, y->body);
    }
    case NodeKind::Return: return equal_opt(cast<Return>(&a)->value, cast<Return>(&b)->value);
    case NodeKind::Pass: return true;
    case NodeKind::Assert: {
      auto *x = cast<Assert>(&a), *y = cast<Assert>(&b);
      return equal(*x->test, *y->test) && equal_opt(x->msg, y->msg);
    }
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
      break;
  }
  return false;
}

bool equal(const StmtList &a, const StmtList &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!equal(*a[i], *b[i])) return false;
  return true;
}

bool equal(const Function &a, const Function &b) {
  if (a.name != b.name || a.jit_alias != b.jit_alias) return false;
  if (a.decorators.size() != b.decorators.size() || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.decorators.size(); ++i)
    if (a.decorators[i].kind != b.decorators[i].kind || a.decorators[i].text != b.decorators[i].text) return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const Param &p = a.params[i], &q = b.params[i];
    if (p.name != q.name || !equal_opt(p.annotation, q.annotation) || !equal_opt(p.default_value, q.default_value))
      return false;
  }
  return equal_opt(a.returns, b.returns) && equal(a.body, b.body);
}

bool equal(const Module &a, const Module &b) {
  if (a.imports.size() != b.imports.size() || a.constants.size() != b.constants.size() ||
      a.functions.size() != b.functions.size())
    return false;
  for (size_t i = 0; i < a.imports.size(); ++i) {
    const Import &x = a.imports[i], &y = b.imports[i];
    if (x.is_from != y.is_from || x.assignment != y.assignment || x.module != y.module || x.names != y.names ||
        x.conditional != y.conditional)
      return false;
    // Which if/try statement a conditional import sat in only decides how
    // --emit source groups the alternatives; it is not compared.
  }
  for (size_t i = 0; i < a.constants.size(); ++i)
    if (a.constants[i].name != b.constants[i].name || !equal(*a.constants[i].stmt, *b.constants[i].stmt)) return false;
  for (size_t i = 0; i < a.functions.size(); ++i)
    if (!equal(*a.functions[i], *b.functions[i])) return false;
  return true;
}

}  // namespace tgrad::ast
