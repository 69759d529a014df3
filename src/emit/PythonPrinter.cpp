#include "tgrad/emit/PythonPrinter.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tgrad::emit {

using namespace ast;

namespace {

// Python's precedence levels, lowest binding first (the Language Reference's
// "Operator precedence" table). Atoms and primaries bind tightest.
enum Prec : int {
  kTuple = 0,  // a, b  (only where a bare tuple is allowed)
  kTest = 1,   // x if c else y
  kOr = 2,
  kAnd = 3,
  kNot = 4,
  kCompare = 5,
  kBitOr = 6,
  kBitXor = 7,
  kBitAnd = 8,
  kShift = 9,
  kArith = 10,
  kTerm = 11,
  kUnary = 12,
  kPower = 13,
  kPrimary = 14,  // x.a, x[i], f(x)
  kAtom = 15,
};

int binop_prec(BinaryOpKind op) {
  switch (op) {
    case BinaryOpKind::Add:
    case BinaryOpKind::Sub: return kArith;
    case BinaryOpKind::Mul:
    case BinaryOpKind::Div:
    case BinaryOpKind::FloorDiv:
    case BinaryOpKind::Mod:
    case BinaryOpKind::MatMul: return kTerm;
    case BinaryOpKind::Pow: return kPower;
    case BinaryOpKind::LShift:
    case BinaryOpKind::RShift: return kShift;
    case BinaryOpKind::BitAnd: return kBitAnd;
    case BinaryOpKind::BitOr: return kBitOr;
    case BinaryOpKind::BitXor: return kBitXor;
  }
  return kAtom;
}

int prec_of(const Expr &e) {
  switch (e.kind) {
    case NodeKind::IfExp: return kTest;
    case NodeKind::BoolOp: return cast<BoolOp>(&e)->op == BoolOpKind::Or ? kOr : kAnd;
    case NodeKind::UnaryOp: return cast<UnaryOp>(&e)->op == UnaryOpKind::Not ? kNot : kUnary;
    case NodeKind::Compare: return kCompare;
    case NodeKind::BinOp: return binop_prec(cast<BinOp>(&e)->op);
    case NodeKind::Attribute:
    case NodeKind::Subscript:
    case NodeKind::Call: return kPrimary;
    case NodeKind::Tuple: return kAtom;  // printed with its own parentheses
    default: return kAtom;
  }
}

class ExprPrinter {
 public:
  explicit ExprPrinter(std::ostringstream &out) : out_(out) {}

  // Prints `e`, parenthesised if it binds less tightly than `min_prec`.
  void print(const Expr &e, int min_prec) {
    bool parens = prec_of(e) < min_prec;
    if (parens) out_ << '(';
    print_bare(e);
    if (parens) out_ << ')';
  }

  // A tuple without its parentheses (statement level: `return a, b`).
  void print_tuple_bare(const Expr &e) {
    const auto *t = dyn_cast<Tuple>(&e);
    if (!t) return print(e, kTest);
    if (t->elts.empty()) {
      out_ << "()";  // the empty tuple has no bare form
      return;
    }
    for (size_t i = 0; i < t->elts.size(); ++i) {
      if (i) out_ << ", ";
      print(*t->elts[i], kTest);
    }
    if (t->elts.size() == 1) out_ << ',';
  }

 private:
  void print_list(const ExprList &elts) {
    for (size_t i = 0; i < elts.size(); ++i) {
      if (i) out_ << ", ";
      print(*elts[i], kTest);
    }
  }

  void print_bare(const Expr &e) {
    switch (e.kind) {
      case NodeKind::Name: out_ << cast<Name>(&e)->id; return;
      case NodeKind::IntLit: {
        auto *n = cast<IntLit>(&e);
        if (n->spelling.empty()) out_ << n->value; else out_ << n->spelling;
        return;
      }
      case NodeKind::FloatLit: {
        auto *n = cast<FloatLit>(&e);
        out_ << (n->spelling.empty() ? float_spelling(n->value) : n->spelling);
        return;
      }
      case NodeKind::BoolLit: out_ << (cast<BoolLit>(&e)->value ? "True" : "False"); return;
      case NodeKind::NoneLit: out_ << "None"; return;
      case NodeKind::StrLit: {
        auto *n = cast<StrLit>(&e);
        out_ << (n->spelling.empty() ? quote_string(n->value) : n->spelling);
        return;
      }
      case NodeKind::EllipsisLit: out_ << "..."; return;
      case NodeKind::Attribute: {
        auto *n = cast<Attribute>(&e);
        // `1 .real` needs no care here: an IntLit's attribute is not tile language.
        print(*n->value, kPrimary);
        out_ << '.' << n->attr;
        return;
      }
      case NodeKind::Subscript: {
        auto *n = cast<Subscript>(&e);
        print(*n->value, kPrimary);
        out_ << '[';
        for (size_t i = 0; i < n->indices.size(); ++i) {
          if (i) out_ << ", ";
          print(*n->indices[i], kTest);
        }
        out_ << ']';
        return;
      }
      case NodeKind::Slice: {
        auto *n = cast<Slice>(&e);
        if (n->lower) print(*n->lower, kTest);
        out_ << ':';
        if (n->upper) print(*n->upper, kTest);
        if (n->step) {
          out_ << ':';
          print(*n->step, kTest);
        }
        return;
      }
      case NodeKind::Call: {
        auto *n = cast<Call>(&e);
        print(*n->func, kPrimary);
        out_ << '(';
        print_list(n->args);
        for (size_t i = 0; i < n->keywords.size(); ++i) {
          if (i || !n->args.empty()) out_ << ", ";
          out_ << n->keywords[i].name << '=';
          print(*n->keywords[i].value, kTest);
        }
        out_ << ')';
        return;
      }
      case NodeKind::UnaryOp: {
        auto *n = cast<UnaryOp>(&e);
        if (n->op == UnaryOpKind::Not) {
          out_ << "not ";
          print(*n->operand, kNot);
        } else {
          out_ << spelling(n->op);
          print(*n->operand, kUnary);
        }
        return;
      }
      case NodeKind::BinOp: {
        auto *n = cast<BinOp>(&e);
        int p = binop_prec(n->op);
        if (n->op == BinaryOpKind::Pow) {
          // Right-associative; its right operand may be a unary expression.
          print(*n->lhs, p + 1);
          out_ << " ** ";
          print(*n->rhs, kUnary);
        } else {
          print(*n->lhs, p);
          out_ << ' ' << spelling(n->op) << ' ';
          print(*n->rhs, p + 1);
        }
        return;
      }
      case NodeKind::BoolOp: {
        auto *n = cast<BoolOp>(&e);
        int p = prec_of(e);
        for (size_t i = 0; i < n->values.size(); ++i) {
          if (i) out_ << ' ' << spelling(n->op) << ' ';
          print(*n->values[i], p + 1);
        }
        return;
      }
      case NodeKind::Compare: {
        auto *n = cast<Compare>(&e);
        print(*n->left, kCompare + 1);
        for (size_t i = 0; i < n->ops.size(); ++i) {
          out_ << ' ' << spelling(n->ops[i]) << ' ';
          print(*n->comparators[i], kCompare + 1);
        }
        return;
      }
      case NodeKind::IfExp: {
        auto *n = cast<IfExp>(&e);
        print(*n->then_value, kTest + 1);
        out_ << " if ";
        print(*n->cond, kTest + 1);
        out_ << " else ";
        print(*n->else_value, kTest);
        return;
      }
      case NodeKind::Tuple: {
        if (cast<Tuple>(&e)->elts.empty()) {
          out_ << "()";
          return;
        }
        out_ << '(';
        print_tuple_bare(e);
        out_ << ')';
        return;
      }
      case NodeKind::List: {
        out_ << '[';
        print_list(cast<List>(&e)->elts);
        out_ << ']';
        return;
      }
#define TGRAD_STMT(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        return;
    }
  }

  std::ostringstream &out_;
};

class StmtPrinter {
 public:
  explicit StmtPrinter(std::ostringstream &out) : out_(out), expr_(out) {}

  void print_body(const StmtList &body, int depth) {
    if (body.empty()) {
      indent(depth);
      out_ << "pass\n";
      return;
    }
    for (const StmtPtr &s : body) print(*s, depth);
  }

  void print(const Stmt &s, int depth) {
    if (!s.leading_comment.empty()) {
      out_ << '\n';
      size_t start = 0;
      while (start <= s.leading_comment.size()) {
        size_t nl = s.leading_comment.find('\n', start);
        indent(depth);
        out_ << "# " << s.leading_comment.substr(start, nl == std::string::npos ? std::string::npos : nl - start) << '\n';
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
    }
    indent(depth);
    switch (s.kind) {
      case NodeKind::ExprStmt:
        expr_.print_tuple_bare(*cast<ExprStmt>(&s)->value);
        out_ << '\n';
        return;
      case NodeKind::Assign: {
        auto *n = cast<Assign>(&s);
        for (const ExprPtr &t : n->targets) {
          expr_.print_tuple_bare(*t);
          out_ << " = ";
        }
        expr_.print_tuple_bare(*n->value);
        out_ << '\n';
        return;
      }
      case NodeKind::AugAssign: {
        auto *n = cast<AugAssign>(&s);
        expr_.print(*n->target, kTest);
        out_ << ' ' << spelling(n->op) << "= ";
        expr_.print_tuple_bare(*n->value);
        out_ << '\n';
        return;
      }
      case NodeKind::AnnAssign: {
        auto *n = cast<AnnAssign>(&s);
        expr_.print(*n->target, kTest);
        out_ << ": ";
        expr_.print(*n->annotation, kTest);
        if (n->value) {
          out_ << " = ";
          expr_.print_tuple_bare(*n->value);
        }
        out_ << '\n';
        return;
      }
      case NodeKind::If: {
        auto *n = cast<If>(&s);
        out_ << "if ";
        print_if_rest(*n, depth);
        return;
      }
      case NodeKind::For: {
        auto *n = cast<For>(&s);
        out_ << "for ";
        expr_.print_tuple_bare(*n->target);
        out_ << " in ";
        expr_.print_tuple_bare(*n->iter);
        out_ << ":\n";
        print_body(n->body, depth + 1);
        return;
      }
      case NodeKind::While: {
        auto *n = cast<While>(&s);
        out_ << "while ";
        expr_.print(*n->cond, kTest);
        out_ << ":\n";
        print_body(n->body, depth + 1);
        return;
      }
      case NodeKind::Return: {
        auto *n = cast<Return>(&s);
        out_ << "return";
        if (n->value) {
          out_ << ' ';
          expr_.print_tuple_bare(*n->value);
        }
        out_ << '\n';
        return;
      }
      case NodeKind::Pass: out_ << "pass\n"; return;
      case NodeKind::Assert: {
        auto *n = cast<Assert>(&s);
        out_ << "assert ";
        expr_.print(*n->test, kTest);
        if (n->msg) {
          out_ << ", ";
          expr_.print(*n->msg, kTest);
        }
        out_ << '\n';
        return;
      }
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        return;
    }
  }

 private:
  // After "if " or "elif ": condition, body, and the elif/else chain.
  void print_if_rest(const If &n, int depth) {
    expr_.print(*n.cond, kTest);
    out_ << ":\n";
    print_body(n.body, depth + 1);
    if (n.orelse.empty()) return;
    indent(depth);
    if (n.orelse.size() == 1 && isa<If>(n.orelse[0].get())) {
      out_ << "elif ";
      print_if_rest(*cast<If>(n.orelse[0].get()), depth);
      return;
    }
    out_ << "else:\n";
    print_body(n.orelse, depth + 1);
  }

  void indent(int depth) { out_ << std::string(4 * depth, ' '); }

  std::ostringstream &out_;
  ExprPrinter expr_;
};

// The names an import binds, in order.
std::vector<std::string> bound_names(const Import &imp) {
  std::vector<std::string> out;
  for (size_t k = 0; k < imp.names.size(); ++k) out.push_back(bound_name(imp, k));
  return out;
}

void print_import(std::ostringstream &out, const Import &imp, int depth = 0) {
  out << std::string(static_cast<size_t>(depth) * 4, ' ');
  if (imp.assignment) {
    out << imp.names[0].second << " = " << imp.module << '\n';
    return;
  }
  auto name_with_alias = [&](const std::pair<std::string, std::string> &n) {
    out << n.first;
    if (!n.second.empty()) out << " as " << n.second;
  };
  out << (imp.is_from ? "from " + imp.module + " import " : std::string("import "));
  for (size_t i = 0; i < imp.names.size(); ++i) {
    if (i) out << ", ";
    name_with_alias(imp.names[i]);
  }
  out << '\n';
}

}  // namespace

std::string float_spelling(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "-float('inf')";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote_string(const std::string &value) {
  // Single quotes where the text holds double quotes and no single one: no escapes, which inductor's copy of a
  // kernel's source (torch.compile, PyTorch 2.11) drops from escaped double quotes.
  const char quote = value.find('"') != std::string::npos && value.find('\'') == std::string::npos ? '\'' : '"';
  std::string out(1, quote);
  for (unsigned char c : value) {
    switch (c) {
      case '"':
      case '\'':
        if (c == static_cast<unsigned char>(quote)) out += '\\';
        out += static_cast<char>(c);
        break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // printable ASCII and UTF-8 bytes as they are
        }
    }
  }
  return out + quote;
}

// One stream per thread for the expression printers: the passes print an expression (a callee, a line's width)
// tens of thousands of times for a long function, and making a stream costs more than most of those prints
// (its locale). The printer changes no format flag, so a cleared stream prints as a new one would.
namespace {
std::ostringstream &expression_stream() {
  thread_local std::ostringstream out;
  out.str(std::string());
  out.clear();
  return out;
}
}  // namespace

std::string print_expr(const Expr &e) {
  std::ostringstream &out = expression_stream();
  ExprPrinter(out).print(e, kTest);
  return out.str();
}

std::string print_operand(const Expr &e) {
  std::ostringstream &out = expression_stream();
  ExprPrinter(out).print(e, kUnary);
  return out.str();
}

std::string print_stmts(const StmtList &body, int depth) {
  std::ostringstream out;
  StmtPrinter p(out);
  for (const StmtPtr &s : body) p.print(*s, depth);
  return out.str();
}

std::string print_function(const Function &f) {
  std::ostringstream out;
  for (const Decorator &d : f.decorators) out << '@' << d.text << '\n';
  out << "def " << f.name << '(';
  ExprPrinter ep(out);
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Param &p = f.params[i];
    if (i) out << ", ";
    out << p.name;
    if (p.annotation) {
      out << ": ";
      ep.print(*p.annotation, kTest);
    }
    if (p.default_value) {
      out << (p.annotation ? " = " : "=");
      ep.print(*p.default_value, kTest);
    }
  }
  out << ')';
  if (f.returns) {
    out << " -> ";
    ep.print(*f.returns, kTest);
  }
  out << ":\n";
  StmtPrinter(out).print_body(f.body, 1);
  if (!f.jit_alias.empty()) out << "\n\n" << f.jit_alias << " = triton.jit(" << f.name << ")\n";
  return out.str();
}

std::string print_module(const Module &m) {
  std::ostringstream out;
  for (size_t k = 0; k < m.imports.size(); ++k) {
    if (m.imports[k].followed) continue;  // belongs to a module read for this one
    if (!m.imports[k].conditional) {
      print_import(out, m.imports[k]);
      continue;
    }
    // Alternatives from module-level if/try blocks (the imports of one such
    // statement that bind the same names): a chain of try/except ImportError,
    // which keeps them alternatives (the first that imports wins) and reads
    // back as the same conditional imports; a lone one ends in `pass`.
    size_t end = k + 1;
    while (end < m.imports.size() && m.imports[end].conditional && m.imports[end].group == m.imports[k].group &&
           bound_names(m.imports[end]) == bound_names(m.imports[k]))
      ++end;
    // (An alternative `NAME = a.b.c` fails with AttributeError.)
    bool assignment = false;
    for (size_t a = k; a < end; ++a) assignment |= m.imports[a].assignment;
    for (size_t a = k; a < end; ++a) {
      const std::string indent(static_cast<size_t>(a - k) * 4, ' ');
      out << indent << "try:\n";
      print_import(out, m.imports[a], static_cast<int>(a - k) + 1);
      out << indent << (assignment ? "except (ImportError, AttributeError):\n" : "except ImportError:\n");
    }
    out << std::string(static_cast<size_t>(end - k) * 4, ' ') << "pass\n";
    k = end - 1;
  }
  if (!m.constants.empty()) {
    if (!m.imports.empty()) out << '\n';
    for (const Constant &c : m.constants)
      if (!c.imported) StmtPrinter(out).print(*c.stmt, 0);
  }
  for (const auto &f : m.functions) {
    if (!f->imported_from.empty()) continue;  // defined in another of the user's modules
    if (out.tellp() > 0) out << "\n\n";
    out << print_function(*f);
  }
  return out.str();
}

}  // namespace tgrad::emit
