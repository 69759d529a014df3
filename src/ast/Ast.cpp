#include "tgrad/ast/Ast.h"

#include <algorithm>

namespace tgrad::ast {

const char *kind_name(NodeKind kind) {
  switch (kind) {
#define TGRAD_EXPR(Name) \
  case NodeKind::Name:   \
    return #Name;
#define TGRAD_STMT(Name) \
  case NodeKind::Name:   \
    return #Name;
#include "tgrad/ast/Nodes.def"
  }
  return "?";
}

bool is_expr_kind(NodeKind kind) {
  switch (kind) {
#define TGRAD_EXPR(Name) \
  case NodeKind::Name:   \
    return true;
#define TGRAD_STMT(Name) \
  case NodeKind::Name:   \
    return false;
#include "tgrad/ast/Nodes.def"
  }
  return false;
}

const char *spelling(BinaryOpKind op) {
  switch (op) {
    case BinaryOpKind::Add: return "+";
    case BinaryOpKind::Sub: return "-";
    case BinaryOpKind::Mul: return "*";
    case BinaryOpKind::Div: return "/";
    case BinaryOpKind::FloorDiv: return "//";
    case BinaryOpKind::Mod: return "%";
    case BinaryOpKind::Pow: return "**";
    case BinaryOpKind::MatMul: return "@";
    case BinaryOpKind::LShift: return "<<";
    case BinaryOpKind::RShift: return ">>";
    case BinaryOpKind::BitAnd: return "&";
    case BinaryOpKind::BitOr: return "|";
    case BinaryOpKind::BitXor: return "^";
  }
  return "?";
}

const char *spelling(UnaryOpKind op) {
  switch (op) {
    case UnaryOpKind::Neg: return "-";
    case UnaryOpKind::Pos: return "+";
    case UnaryOpKind::Invert: return "~";
    case UnaryOpKind::Not: return "not";
  }
  return "?";
}

const char *spelling(BoolOpKind op) { return op == BoolOpKind::And ? "and" : "or"; }

const char *spelling(CompareOpKind op) {
  switch (op) {
    case CompareOpKind::Lt: return "<";
    case CompareOpKind::Gt: return ">";
    case CompareOpKind::Eq: return "==";
    case CompareOpKind::NotEq: return "!=";
    case CompareOpKind::LtE: return "<=";
    case CompareOpKind::GtE: return ">=";
    case CompareOpKind::Is: return "is";
    case CompareOpKind::IsNot: return "is not";
    case CompareOpKind::In: return "in";
    case CompareOpKind::NotIn: return "not in";
  }
  return "?";
}

const Expr *Call::keyword(const std::string &name) const {
  for (const Keyword &k : keywords)
    if (k.name == name) return k.value.get();
  return nullptr;
}

bool is_constexpr_annotation(const Expr *e) {
  const auto *attr = dyn_cast<Attribute>(e);
  if (!attr || attr->attr != "constexpr") return false;
  if (const auto *base = dyn_cast<Name>(attr->value.get())) return base->id == "tl";
  if (const auto *mid = dyn_cast<Attribute>(attr->value.get()))
    if (const auto *root = dyn_cast<Name>(mid->value.get()))
      return root->id == "triton" && mid->attr == "language";
  return false;
}

bool Function::is_constexpr_function() const {
  return std::any_of(decorators.begin(), decorators.end(),
                     [](const Decorator &d) { return d.kind == DecoratorKind::ConstexprFunction; });
}

bool Function::is_constexpr_param(size_t i) const {
  return i < params.size() && is_constexpr_annotation(params[i].annotation.get());
}

const Function *Module::find_function(const std::string &name) const {
  for (const auto &f : functions)
    if (!f->superseded && (f->name == name || f->jit_alias == name)) return f.get();
  return nullptr;
}

// ---------------------------------------------------------------------- clone

namespace {
ExprPtr clone_opt(const ExprPtr &e) { return e ? clone(*e) : nullptr; }
ExprList clone_list(const ExprList &list) {
  ExprList out;
  out.reserve(list.size());
  for (const ExprPtr &e : list) out.push_back(clone(*e));
  return out;
}
}  // namespace

ExprPtr clone(const Expr &e) {
  const SourceSpan s = e.span;
  switch (e.kind) {
    case NodeKind::Name: return std::make_unique<Name>(cast<Name>(&e)->id, s);
    case NodeKind::IntLit: {
      auto *n = cast<IntLit>(&e);
      return std::make_unique<IntLit>(n->value, n->spelling, s);
    }
    case NodeKind::FloatLit: {
      auto *n = cast<FloatLit>(&e);
      return std::make_unique<FloatLit>(n->value, n->spelling, s);
    }
    case NodeKind::BoolLit: return std::make_unique<BoolLit>(cast<BoolLit>(&e)->value, s);
    case NodeKind::NoneLit: return std::make_unique<NoneLit>(s);
    case NodeKind::StrLit: {
      auto *n = cast<StrLit>(&e);
      return std::make_unique<StrLit>(n->value, n->spelling, s);
    }
    case NodeKind::EllipsisLit: return std::make_unique<EllipsisLit>(s);
    case NodeKind::Attribute: {
      auto *n = cast<Attribute>(&e);
      return std::make_unique<Attribute>(clone(*n->value), n->attr, s);
    }
    case NodeKind::Subscript: {
      auto *n = cast<Subscript>(&e);
      return std::make_unique<Subscript>(clone(*n->value), clone_list(n->indices), s);
    }
    case NodeKind::Slice: {
      auto *n = cast<Slice>(&e);
      return std::make_unique<Slice>(clone_opt(n->lower), clone_opt(n->upper), clone_opt(n->step), s);
    }
    case NodeKind::Call: {
      auto *n = cast<Call>(&e);
      std::vector<Keyword> kws;
      for (const Keyword &k : n->keywords) kws.push_back({k.name, k.name_span, clone(*k.value)});
      return std::make_unique<Call>(clone(*n->func), clone_list(n->args), std::move(kws), s);
    }
    case NodeKind::UnaryOp: {
      auto *n = cast<UnaryOp>(&e);
      return std::make_unique<UnaryOp>(n->op, clone(*n->operand), s);
    }
    case NodeKind::BinOp: {
      auto *n = cast<BinOp>(&e);
      return std::make_unique<BinOp>(n->op, clone(*n->lhs), clone(*n->rhs), s);
    }
    case NodeKind::BoolOp: {
      auto *n = cast<BoolOp>(&e);
      return std::make_unique<BoolOp>(n->op, clone_list(n->values), s);
    }
    case NodeKind::Compare: {
      auto *n = cast<Compare>(&e);
      return std::make_unique<Compare>(clone(*n->left), n->ops, clone_list(n->comparators), s);
    }
    case NodeKind::IfExp: {
      auto *n = cast<IfExp>(&e);
      return std::make_unique<IfExp>(clone(*n->cond), clone(*n->then_value), clone(*n->else_value), s);
    }
    case NodeKind::Tuple: return std::make_unique<Tuple>(clone_list(cast<Tuple>(&e)->elts), s);
    case NodeKind::List: return std::make_unique<List>(clone_list(cast<List>(&e)->elts), s);
#define TGRAD_STMT(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
      break;
  }
  return nullptr;  // unreachable: an Expr never has a statement kind
}

StmtPtr clone(const Stmt &st) {
  const SourceSpan s = st.span;
  switch (st.kind) {
    case NodeKind::ExprStmt: return std::make_unique<ExprStmt>(clone(*cast<ExprStmt>(&st)->value), s);
    case NodeKind::Assign: {
      auto *n = cast<Assign>(&st);
      return std::make_unique<Assign>(clone_list(n->targets), clone(*n->value), s);
    }
    case NodeKind::AugAssign: {
      auto *n = cast<AugAssign>(&st);
      return std::make_unique<AugAssign>(clone(*n->target), n->op, clone(*n->value), s);
    }
    case NodeKind::AnnAssign: {
      auto *n = cast<AnnAssign>(&st);
      return std::make_unique<AnnAssign>(clone(*n->target), clone(*n->annotation), clone_opt(n->value), s);
    }
    case NodeKind::If: {
      auto *n = cast<If>(&st);
      auto copy = std::make_unique<If>(clone(*n->cond), clone(n->body), clone(n->orelse), s);
      copy->guards_early_return = n->guards_early_return;
      return copy;
    }
    case NodeKind::For: {
      auto *n = cast<For>(&st);
      return std::make_unique<For>(clone(*n->target), clone(*n->iter), clone(n->body), s);
    }
    case NodeKind::While: {
      auto *n = cast<While>(&st);
      return std::make_unique<While>(clone(*n->cond), clone(n->body), s);
    }
    case NodeKind::Return: return std::make_unique<Return>(clone_opt(cast<Return>(&st)->value), s);
    case NodeKind::Pass: return std::make_unique<Pass>(s);
    case NodeKind::Assert: {
      auto *n = cast<Assert>(&st);
      return std::make_unique<Assert>(clone(*n->test), clone_opt(n->msg), s);
    }
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
      break;
  }
  return nullptr;  // unreachable: a Stmt never has an expression kind
}

StmtList clone(const StmtList &body) {
  StmtList out;
  out.reserve(body.size());
  for (const StmtPtr &s : body) {
    out.push_back(clone(*s));
    out.back()->leading_comment = s->leading_comment;
  }
  return out;
}

std::string bound_name(const Import &imp, size_t entry) {
  const auto &[name, alias] = imp.names[entry];
  if (!alias.empty()) return alias;
  return imp.is_from ? name : name.substr(0, name.find('.'));
}

std::unique_ptr<Function> clone_signature(const Function &f) {
  auto c = std::make_unique<Function>();
  c->name = f.name;
  c->span = f.span;
  c->name_span = f.name_span;
  c->decorators = f.decorators;
  for (const Param &p : f.params)
    c->params.push_back({p.name, p.span, p.annotation ? clone(*p.annotation) : nullptr,
                         p.default_value ? clone(*p.default_value) : nullptr});
  c->returns = f.returns ? clone(*f.returns) : nullptr;
  c->jit_alias = f.jit_alias;
  c->conditional = f.conditional;
  c->group = f.group;
  c->superseded = f.superseded;
  return c;
}

std::unique_ptr<Function> clone(const Function &f) {
  std::unique_ptr<Function> c = clone_signature(f);
  c->body = clone(f.body);
  if (f.alternative) c->alternative = clone(*f.alternative);  // (a module read through an import keeps it)
  return c;
}

std::unique_ptr<Module> clone(const Module &m) {
  auto out = std::make_unique<Module>();
  out->file_id = m.file_id;
  out->imports = m.imports;
  for (const Constant &c : m.constants) out->constants.push_back({c.name, c.span, clone(*c.stmt), c.imported});
  for (const auto &f : m.functions) out->functions.push_back(clone(*f));
  out->host_names = m.host_names;
  out->module_namespaces = m.module_namespaces;
  return out;
}

}  // namespace tgrad::ast
