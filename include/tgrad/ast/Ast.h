// The tgrad AST: one tree type for every stage (parse, sema, AD, emit, interp,
// codegen). The backward kernel is an AST of the same language as the forward.
//
// Ownership: a tree of std::unique_ptr children, never a DAG; copies are made
// with clone(). Every node carries the SourceSpan it was parsed from; nodes a
// pass generates keep the span of the forward node they stand for (or an
// invalid span). Kinds are listed once, in Nodes.def.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/diag/Diagnostics.h"

namespace tgrad::ast {

enum class NodeKind {
#define TGRAD_EXPR(Name) Name,
#define TGRAD_STMT(Name) Name,
#include "tgrad/ast/Nodes.def"
};

const char *kind_name(NodeKind kind);
bool is_expr_kind(NodeKind kind);

struct Node {
  explicit Node(NodeKind k, SourceSpan s = {}) : kind(k), span(s) {}
  virtual ~Node() = default;
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;

  const NodeKind kind;
  SourceSpan span;
};

struct Expr : Node {
  using Node::Node;
  static bool classof(const Node *n) { return is_expr_kind(n->kind); }
};
struct Stmt : Node {
  using Node::Node;
  static bool classof(const Node *n) { return !is_expr_kind(n->kind); }
  // A comment printed on its own line above the statement (after a blank
  // line), e.g. the backward's "Grad of: ..." headers. The parser never sets
  // it (source comments are not kept) and equality ignores it.
  std::string leading_comment;
};

using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using ExprList = std::vector<ExprPtr>;
using StmtList = std::vector<StmtPtr>;

// LLVM-style checked casts over NodeKind.
template <class T> bool isa(const Node *n) { return n && T::classof(n); }
template <class T> T *cast(Node *n) { return static_cast<T *>(n); }
template <class T> const T *cast(const Node *n) { return static_cast<const T *>(n); }
template <class T> T *dyn_cast(Node *n) { return isa<T>(n) ? static_cast<T *>(n) : nullptr; }
template <class T> const T *dyn_cast(const Node *n) {
  return isa<T>(n) ? static_cast<const T *>(n) : nullptr;
}

#define TGRAD_NODE_CLASSOF(Name) \
  static bool classof(const Node *n) { return n->kind == NodeKind::Name; }

// ------------------------------------------------------------------ operators

enum class BinaryOpKind { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, MatMul, LShift, RShift, BitAnd, BitOr, BitXor };
enum class UnaryOpKind { Neg, Pos, Invert, Not };
enum class BoolOpKind { And, Or };
enum class CompareOpKind { Lt, Gt, Eq, NotEq, LtE, GtE, Is, IsNot, In, NotIn };

const char *spelling(BinaryOpKind op);   // "+", "//", ...
const char *spelling(UnaryOpKind op);    // "-", "not", ...
const char *spelling(BoolOpKind op);     // "and", "or"
const char *spelling(CompareOpKind op);  // "<", "is not", ...

// ---------------------------------------------------------------- expressions

struct Name : Expr {
  explicit Name(std::string id, SourceSpan s = {}) : Expr(NodeKind::Name, s), id(std::move(id)) {}
  TGRAD_NODE_CLASSOF(Name)
  std::string id;
};

struct IntLit : Expr {
  IntLit(uint64_t value, std::string spelling, SourceSpan s = {})
      : Expr(NodeKind::IntLit, s), value(value), spelling(std::move(spelling)) {}
  TGRAD_NODE_CLASSOF(IntLit)
  uint64_t value;        // Python literals are non-negative; `-1` is UnaryOp(Neg, 1)
  std::string spelling;  // as written ("0xFF"); empty for generated literals
};

struct FloatLit : Expr {
  FloatLit(double value, std::string spelling, SourceSpan s = {})
      : Expr(NodeKind::FloatLit, s), value(value), spelling(std::move(spelling)) {}
  TGRAD_NODE_CLASSOF(FloatLit)
  double value;
  std::string spelling;  // as written ("1e-5"); empty for generated literals
};

struct BoolLit : Expr {
  BoolLit(bool value, SourceSpan s = {}) : Expr(NodeKind::BoolLit, s), value(value) {}
  TGRAD_NODE_CLASSOF(BoolLit)
  bool value;
};

struct NoneLit : Expr {
  explicit NoneLit(SourceSpan s = {}) : Expr(NodeKind::NoneLit, s) {}
  TGRAD_NODE_CLASSOF(NoneLit)
};

struct StrLit : Expr {
  StrLit(std::string value, std::string spelling, SourceSpan s = {})
      : Expr(NodeKind::StrLit, s), value(std::move(value)), spelling(std::move(spelling)) {}
  TGRAD_NODE_CLASSOF(StrLit)
  std::string value;     // decoded contents (UTF-8)
  std::string spelling;  // as written, quotes included; empty for generated literals
};

struct EllipsisLit : Expr {
  explicit EllipsisLit(SourceSpan s = {}) : Expr(NodeKind::EllipsisLit, s) {}
  TGRAD_NODE_CLASSOF(EllipsisLit)
};

struct Attribute : Expr {
  Attribute(ExprPtr value, std::string attr, SourceSpan s = {})
      : Expr(NodeKind::Attribute, s), value(std::move(value)), attr(std::move(attr)) {}
  TGRAD_NODE_CLASSOF(Attribute)
  ExprPtr value;
  std::string attr;
};

// x[i], x[:, None], x[a, b:c]. A subscript with one index has one element.
struct Subscript : Expr {
  Subscript(ExprPtr value, ExprList indices, SourceSpan s = {})
      : Expr(NodeKind::Subscript, s), value(std::move(value)), indices(std::move(indices)) {}
  TGRAD_NODE_CLASSOF(Subscript)
  ExprPtr value;
  ExprList indices;
};

// lower:upper:step; only valid as an index of a Subscript. Absent parts are null.
struct Slice : Expr {
  Slice(ExprPtr lower, ExprPtr upper, ExprPtr step, SourceSpan s = {})
      : Expr(NodeKind::Slice, s), lower(std::move(lower)), upper(std::move(upper)), step(std::move(step)) {}
  TGRAD_NODE_CLASSOF(Slice)
  ExprPtr lower, upper, step;
};

struct Keyword {
  std::string name;
  SourceSpan name_span;
  ExprPtr value;
};

struct Call : Expr {
  Call(ExprPtr func, ExprList args, std::vector<Keyword> keywords, SourceSpan s = {})
      : Expr(NodeKind::Call, s), func(std::move(func)), args(std::move(args)), keywords(std::move(keywords)) {}
  TGRAD_NODE_CLASSOF(Call)
  ExprPtr func;
  ExprList args;
  std::vector<Keyword> keywords;
  // The keyword's value, or null.
  const Expr *keyword(const std::string &name) const;
};

struct UnaryOp : Expr {
  UnaryOp(UnaryOpKind op, ExprPtr operand, SourceSpan s = {})
      : Expr(NodeKind::UnaryOp, s), op(op), operand(std::move(operand)) {}
  TGRAD_NODE_CLASSOF(UnaryOp)
  UnaryOpKind op;
  ExprPtr operand;
};

struct BinOp : Expr {
  BinOp(BinaryOpKind op, ExprPtr lhs, ExprPtr rhs, SourceSpan s = {})
      : Expr(NodeKind::BinOp, s), op(op), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  TGRAD_NODE_CLASSOF(BinOp)
  BinaryOpKind op;
  ExprPtr lhs, rhs;
};

// `a and b and c`: one node with every operand, as in Python's ast.
struct BoolOp : Expr {
  BoolOp(BoolOpKind op, ExprList values, SourceSpan s = {})
      : Expr(NodeKind::BoolOp, s), op(op), values(std::move(values)) {}
  TGRAD_NODE_CLASSOF(BoolOp)
  BoolOpKind op;
  ExprList values;  // at least two
};

// `a < b <= c`: left, then ops[i] between comparators[i-1] (or left) and comparators[i].
struct Compare : Expr {
  Compare(ExprPtr left, std::vector<CompareOpKind> ops, ExprList comparators, SourceSpan s = {})
      : Expr(NodeKind::Compare, s), left(std::move(left)), ops(std::move(ops)), comparators(std::move(comparators)) {}
  TGRAD_NODE_CLASSOF(Compare)
  ExprPtr left;
  std::vector<CompareOpKind> ops;
  ExprList comparators;
};

struct IfExp : Expr {
  IfExp(ExprPtr cond, ExprPtr then_value, ExprPtr else_value, SourceSpan s = {})
      : Expr(NodeKind::IfExp, s), cond(std::move(cond)), then_value(std::move(then_value)),
        else_value(std::move(else_value)) {}
  TGRAD_NODE_CLASSOF(IfExp)
  ExprPtr cond, then_value, else_value;
};

struct Tuple : Expr {
  explicit Tuple(ExprList elts, SourceSpan s = {}) : Expr(NodeKind::Tuple, s), elts(std::move(elts)) {}
  TGRAD_NODE_CLASSOF(Tuple)
  ExprList elts;
};

struct List : Expr {
  explicit List(ExprList elts, SourceSpan s = {}) : Expr(NodeKind::List, s), elts(std::move(elts)) {}
  TGRAD_NODE_CLASSOF(List)
  ExprList elts;
};

// ----------------------------------------------------------------- statements

struct ExprStmt : Stmt {
  explicit ExprStmt(ExprPtr value, SourceSpan s = {}) : Stmt(NodeKind::ExprStmt, s), value(std::move(value)) {}
  TGRAD_NODE_CLASSOF(ExprStmt)
  ExprPtr value;
};

// targets[0] = targets[1] = ... = value. A target is a Name, Tuple of targets,
// Attribute or Subscript.
struct Assign : Stmt {
  Assign(ExprList targets, ExprPtr value, SourceSpan s = {})
      : Stmt(NodeKind::Assign, s), targets(std::move(targets)), value(std::move(value)) {}
  TGRAD_NODE_CLASSOF(Assign)
  ExprList targets;
  ExprPtr value;
};

// Kept as written (`acc += x`) so printed source reads like the user's; the
// AD front end lowers it to Assign(BinOp) where it needs to.
struct AugAssign : Stmt {
  AugAssign(ExprPtr target, BinaryOpKind op, ExprPtr value, SourceSpan s = {})
      : Stmt(NodeKind::AugAssign, s), target(std::move(target)), op(op), value(std::move(value)) {}
  TGRAD_NODE_CLASSOF(AugAssign)
  ExprPtr target;
  BinaryOpKind op;
  ExprPtr value;
};

struct AnnAssign : Stmt {
  AnnAssign(ExprPtr target, ExprPtr annotation, ExprPtr value, SourceSpan s = {})
      : Stmt(NodeKind::AnnAssign, s), target(std::move(target)), annotation(std::move(annotation)),
        value(std::move(value)) {}
  TGRAD_NODE_CLASSOF(AnnAssign)
  ExprPtr target, annotation;
  ExprPtr value;  // may be null: `x: tl.tensor`
};

// `elif` is an If that is the only statement of its parent's orelse.
struct If : Stmt {
  If(ExprPtr cond, StmtList body, StmtList orelse, SourceSpan s = {})
      : Stmt(NodeKind::If, s), cond(std::move(cond)), body(std::move(body)), orelse(std::move(orelse)) {}
  TGRAD_NODE_CLASSOF(If)
  ExprPtr cond;
  StmtList body, orelse;
  // Made from an early return (src/ad/EarlyReturn.h): no statement runs
  // after it, so the names its branches assign need not agree in type.
  bool guards_early_return = false;
};

struct For : Stmt {
  For(ExprPtr target, ExprPtr iter, StmtList body, SourceSpan s = {})
      : Stmt(NodeKind::For, s), target(std::move(target)), iter(std::move(iter)), body(std::move(body)) {}
  TGRAD_NODE_CLASSOF(For)
  ExprPtr target, iter;
  StmtList body;
};

struct While : Stmt {
  While(ExprPtr cond, StmtList body, SourceSpan s = {})
      : Stmt(NodeKind::While, s), cond(std::move(cond)), body(std::move(body)) {}
  TGRAD_NODE_CLASSOF(While)
  ExprPtr cond;
  StmtList body;
};

struct Return : Stmt {
  explicit Return(ExprPtr value, SourceSpan s = {}) : Stmt(NodeKind::Return, s), value(std::move(value)) {}
  TGRAD_NODE_CLASSOF(Return)
  ExprPtr value;  // null for a bare `return`
};

struct Pass : Stmt {
  explicit Pass(SourceSpan s = {}) : Stmt(NodeKind::Pass, s) {}
  TGRAD_NODE_CLASSOF(Pass)
};

struct Assert : Stmt {
  Assert(ExprPtr test, ExprPtr msg, SourceSpan s = {})
      : Stmt(NodeKind::Assert, s), test(std::move(test)), msg(std::move(msg)) {}
  TGRAD_NODE_CLASSOF(Assert)
  ExprPtr test;
  ExprPtr msg;  // may be null
};

#undef TGRAD_NODE_CLASSOF

// ------------------------------------------------------------ module structure

enum class DecoratorKind {
  Jit,         // @triton.jit, @triton.jit(...), @jit
  Autotune,    // @triton.autotune(...)
  Heuristics,  // @triton.heuristics(...)
  // @triton.constexpr_function, @tl.constexpr: a Python function Triton calls while compiling, on compile-time
  // values (`acc_dtype: tl.constexpr = get_accum_type(X.dtype.element_ty)`); read like a jit helper, never a kernel
  ConstexprFunction,
  Other,       // a project's own wrapper: kept as text, with a warning
};

// Decorators are kept as source text and re-emitted verbatim: autotune configs
// hold dicts and lambdas that are plain Python, not tile language.
struct Decorator {
  DecoratorKind kind = DecoratorKind::Other;
  std::string name;  // dotted name: "triton.autotune"
  std::string text;  // everything after '@', as written (may span lines)
  SourceSpan span;
};

struct Param {
  std::string name;
  SourceSpan span;
  ExprPtr annotation;     // `BLOCK: tl.constexpr`; may be null
  ExprPtr default_value;  // may be null
};

// `tl.constexpr` or `triton.language.constexpr` (a parameter's or an assignment's annotation).
bool is_constexpr_annotation(const Expr *e);

struct Function {
  std::string name;
  SourceSpan span;       // the whole definition
  SourceSpan name_span;  // the name after `def`
  std::vector<Decorator> decorators;
  std::vector<Param> params;
  ExprPtr returns;  // `-> ...` annotation; may be null
  StmtList body;
  // Set when the function is made a jit function by the call form
  // `ALIAS = triton.jit(name)` instead of a decorator; ALIAS is what callers use.
  std::string jit_alias;
  // Set for a function read from another of the user's modules (`from .utils
  // import f`): that module's name. --emit source leaves it out.
  std::string imported_from;
  // Defined inside a module-level if/try block (`else: @triton.jit def
  // make_tensor_descriptor(...): return None`, a fallback for older Tritons):
  // one alternative of that statement, numbered like Import::group.
  bool conditional = false;
  int group = 0;
  // An alternative of the same statement binds the name to something tgrad
  // knows (`make_tensor_descriptor = triton.language.make_tensor_descriptor`):
  // the branch Triton 3.6 takes. find_function skips this definition; --emit
  // source still prints it (sema::supersede_fallback_functions sets it).
  bool superseded = false;
  // The definition of the same name in another branch of the same module-level if, which this one replaced
  // (sema::supersede_fallback_functions may put it back); not compared or printed.
  std::unique_ptr<Function> alternative;

  bool is_constexpr_param(size_t i) const;
  // Decorated @triton.constexpr_function or @tl.constexpr: a compile-time helper, never a kernel.
  bool is_constexpr_function() const;
};

struct Import {
  SourceSpan span;
  bool is_from = false;                // from M import a as b
  std::string module;                  // "triton.language", "..utils"; empty for `from . import x`
  std::vector<std::pair<std::string, std::string>> names;  // (name, alias or "")
  bool conditional = false;            // inside a module-level if/try block: one of several alternatives
  int group = 0;                       // conditional: which module-level if/try statement
  bool followed = false;               // an import of a module tgrad read for the importer (not printed)
  // `NAME = a.b.c` at module level (module "a.b.c", names {{"a.b.c", "NAME"}}):
  // not an import, but it binds NAME to what a.b.c is, resolved like one
  // (`triton_tanh = libdevice.tanh` in a helper module).
  bool assignment = false;
};

// `NAME: tl.constexpr = value` or `NAME = tl.constexpr(value)` at module level.
struct Constant {
  std::string name;
  SourceSpan span;
  StmtPtr stmt;  // the statement as written (AnnAssign or Assign)
  bool imported = false;  // read from another of the user's modules (not printed by --emit source)
};

struct Module {
  int file_id = -1;
  std::vector<Import> imports;
  std::vector<Constant> constants;
  std::vector<std::unique_ptr<Function>> functions;
  // The names the file binds on the host besides those above: its other
  // module-level functions and plain variables (`_NUM_REG = 1`). A constant
  // may be computed from them, with a value tgrad does not know.
  std::vector<std::string> host_names;
  // Of those at the top level, the source as written (Python, never parsed
  // as tile language nor printed by print_module): the --emit torch module
  // copies the ones its kernels' decorators read (an autotune config maker,
  // a heuristic).
  struct HostDefinition {
    std::string name;
    std::string text;
  };
  std::vector<HostDefinition> host_definitions;
  // A user module imported as a namespace (`from flag_gems.utils import triton_lang_extension as tle`, `import
  // pkg.kernels as K`) -> the prefix under which the functions and constants the importer reads from it
  // (`tle.program_id`) were copied here (`tle_program_id`): src/lower/ModuleNamespaces.h rewrites the calls.
  std::map<std::string, std::string> module_namespaces;

  // By name, or by the alias of `alias = triton.jit(name)` (the jit function
  // callers use).
  const Function *find_function(const std::string &name) const;
};

// The name an import's entry binds in the importing module: the alias,
// else the name for `from M import name`, else the first component of
// `import a.b.c`.
std::string bound_name(const Import &imp, size_t entry);

// Deep copies. Spans are copied too.
ExprPtr clone(const Expr &e);
StmtPtr clone(const Stmt &s);
StmtList clone(const StmtList &body);
// A function without its body (name, decorators, parameters), and a whole one.
std::unique_ptr<Function> clone_signature(const Function &f);
std::unique_ptr<Function> clone(const Function &f);
// A module: its imports, constants and functions.
std::unique_ptr<Module> clone(const Module &m);

}  // namespace tgrad::ast
