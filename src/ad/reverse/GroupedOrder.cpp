#include "src/ad/reverse/GroupedOrder.h"

#include <map>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad::reverse {
namespace {

bool mentions_programs(const Expr &e) {
  bool found = false;
  visit_expr(e, [&](const Expr &x) {
    found |= program_axis_of(x, "tl.program_id") != -2 || program_axis_of(x, "tl.num_programs") != -2;
  });
  return found;
}

const BinOp *binary(const Expr *e, BinaryOpKind op) {
  auto *b = e ? dyn_cast<BinOp>(e) : nullptr;
  return b && b->op == op ? b : nullptr;
}

bool same(const Expr *a, const Expr *b) { return a && b && ast::equal(*a, *b); }

// The single-assignment names of the block's prefix, each readable as the
// expression of launch values and program ids it stands for.
class Expander {
 public:
  Expander(const StmtList &block, size_t end) {
    std::map<std::string, int> count;
    count_assignments(block, count);
    for (size_t k = 0; k < end && k < block.size(); ++k) {
      const std::string n = assigned_name(*block[k]);
      if (!n.empty() && count[n] == 1) {
        defs_[n] = cast<Assign>(block[k].get())->value.get();
        order_.push_back(n);
      }
    }
  }

  // `e` with every such name replaced by its expansion, or null where the
  // expansion grows past a size worth matching (a long unrolled prefix).
  ExprPtr expand(const Expr &e) const {
    size_t nodes = 0;
    ExprPtr out = expand(e, 0, nodes);
    return nodes > kMaxNodes ? nullptr : std::move(out);
  }
  ExprPtr expand_name(const std::string &n) const {
    auto it = defs_.find(n);
    return it == defs_.end() ? nullptr : expand(*it->second);
  }
  const Expr *definition(const std::string &n) const {
    auto it = defs_.find(n);
    return it == defs_.end() ? nullptr : it->second;
  }
  const std::vector<std::string> &names() const { return order_; }

 private:
  static constexpr size_t kMaxNodes = 4096;

  ExprPtr expand(const Expr &e, int depth, size_t &nodes) const {
    ExprPtr out = clone(e);
    if (depth > 64 || nodes > kMaxNodes) return out;
    rewrite_expr(out, [&](ExprPtr &x) {
      ++nodes;
      if (auto *n = dyn_cast<Name>(x.get()))
        if (auto it = defs_.find(n->id); it != defs_.end()) x = expand(*it->second, depth + 1, nodes);
    });
    return out;
  }

  std::map<std::string, const Expr *> defs_;
  std::vector<std::string> order_;
};

// The parts of a grouped ordering, read off pid_n's expansion.
struct Parts {
  const Expr *pid = nullptr, *in_group = nullptr, *group_size = nullptr;  // P, G * n, min(m - first, G)
  const Expr *group = nullptr, *rows = nullptr, *columns = nullptr, *first = nullptr;
};

// `a * b` with one side `x`: the other side.
const Expr *other_factor(const Expr *product, const Expr *x) {
  const BinOp *m = binary(product, BinaryOpKind::Mul);
  if (!m) return nullptr;
  if (same(m->lhs.get(), x)) return m->rhs.get();
  if (same(m->rhs.get(), x)) return m->lhs.get();
  return nullptr;
}

// pid_n = (P % (G * n)) // min(m - (P // (G * n)) * G, G)
std::optional<Parts> match_column(const Expr &e) {
  Parts p;
  const BinOp *div = binary(&e, BinaryOpKind::FloorDiv);
  const BinOp *rem = div ? binary(div->lhs.get(), BinaryOpKind::Mod) : nullptr;
  if (!rem || program_axis_of(*rem->lhs, "tl.program_id") != 0) return std::nullopt;
  p.pid = rem->lhs.get();
  p.in_group = rem->rhs.get();
  p.group_size = div->rhs.get();
  auto *min = dyn_cast<Call>(p.group_size);
  if (!min || (callee(*min) != "min" && callee(*min) != "tl.minimum") || min->args.size() != 2 ||
      !min->keywords.empty())
    return std::nullopt;
  for (int i = 0; i < 2 && !p.first; ++i) {
    const BinOp *sub = binary(min->args[static_cast<size_t>(i)].get(), BinaryOpKind::Sub);
    const Expr *group = min->args[static_cast<size_t>(1 - i)].get();
    if (!sub) continue;
    // first = (P // (G * n)) * G
    const Expr *group_index = other_factor(sub->rhs.get(), group);
    const BinOp *g = binary(group_index, BinaryOpKind::FloorDiv);
    if (!g || !same(g->lhs.get(), p.pid) || !same(g->rhs.get(), p.in_group)) continue;
    const Expr *columns = other_factor(p.in_group, group);
    if (!columns) continue;
    p.group = group;
    p.rows = sub->lhs.get();
    p.columns = columns;
    p.first = sub->rhs.get();
  }
  if (!p.first || mentions_programs(*p.group) || mentions_programs(*p.rows) || mentions_programs(*p.columns))
    return std::nullopt;
  return p;
}

// pid_m = first + ((P % (G * n)) % group_size), or first + (P % group_size)
bool matches_row(const Expr &e, const Parts &p) {
  const BinOp *add = binary(&e, BinaryOpKind::Add);
  if (!add) return false;
  for (int i = 0; i < 2; ++i) {
    const Expr *first = i == 0 ? add->lhs.get() : add->rhs.get();
    const BinOp *rem = binary(i == 0 ? add->rhs.get() : add->lhs.get(), BinaryOpKind::Mod);
    if (!same(first, p.first) || !rem || !same(rem->rhs.get(), p.group_size)) continue;
    if (same(rem->lhs.get(), p.pid)) return true;
    const BinOp *inner = binary(rem->lhs.get(), BinaryOpKind::Mod);
    if (inner && same(inner->lhs.get(), p.pid) && same(inner->rhs.get(), p.in_group)) return true;
  }
  return false;
}

}  // namespace

int program_axis_of(const Expr &e, const char *fn) {
  auto *c = dyn_cast<Call>(&e);
  if (!c || callee(*c) != fn) return -2;
  const Expr *a = call_argument(*c, 0, "axis");
  auto *i = a ? dyn_cast<IntLit>(a) : nullptr;
  return i ? static_cast<int>(i->value) : -1;
}

std::optional<GroupedOrder> read_grouped_order_as_2d(StmtList &block, size_t end) {
  // Only a kernel on a 1-D grid: its other axes' ids would collide with the ones made here.
  bool other_axes = false;
  visit_exprs(block, [&](const Expr &e) {
    for (const char *fn : {"tl.program_id", "tl.num_programs"}) {
      const int a = program_axis_of(e, fn);
      if (a == -1 || a > 0) other_axes = true;
    }
  });
  if (other_axes) return std::nullopt;

  const Expander expander(block, end);
  GroupedOrder order;
  ExprPtr rows, columns;
  for (const std::string &c : expander.names()) {
    if (!binary(expander.definition(c), BinaryOpKind::FloorDiv)) continue;
    ExprPtr column = expander.expand_name(c);
    std::optional<Parts> parts = column ? match_column(*column) : std::nullopt;
    if (!parts) continue;
    for (const std::string &r : expander.names()) {
      if (!binary(expander.definition(r), BinaryOpKind::Add)) continue;
      ExprPtr row = expander.expand_name(r);
      if (!row || !matches_row(*row, *parts)) continue;
      order.row = r;
      order.column = c;
      rows = clone(*parts->rows);
      columns = clone(*parts->columns);
      break;
    }
    if (!order.row.empty()) break;
  }
  if (order.row.empty()) return std::nullopt;
  // Names that hold the counts, for the owner's loop bound.
  for (const std::string &n : expander.names()) {
    ExprPtr v = expander.expand_name(n);
    if (order.rows_name.empty() && same(v.get(), rows.get())) order.rows_name = n;
    if (order.columns_name.empty() && same(v.get(), columns.get())) order.columns_name = n;
  }
  if (order.rows_name.empty() || order.columns_name.empty()) return std::nullopt;
  order.rows = std::shared_ptr<const Expr>(std::move(rows));
  order.columns = std::shared_ptr<const Expr>(std::move(columns));

  rewrite_exprs(block, [](ExprPtr &e) {
    if (program_axis_of(*e, "tl.program_id") == 0 || program_axis_of(*e, "tl.num_programs") == 0)
      e = name(kGroupedProgramId);
  });
  for (StmtPtr &s : block) {
    const std::string n = assigned_name(*s);
    if (n == order.row) cast<Assign>(s.get())->value = call("tl.program_id", list(int_lit(0)));
    if (n == order.column) cast<Assign>(s.get())->value = call("tl.program_id", list(int_lit(1)));
  }
  return order;
}

}  // namespace tgrad::ad::reverse
