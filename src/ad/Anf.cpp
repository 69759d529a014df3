#include "src/ad/Anf.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_set>

#include "src/ad/AnfWalk.h"
#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;

namespace {

struct AnfError {
  SourceSpan span;
  std::string message;
};

// The longest name a value gets from its operands (`offs_m_col_times_stride_qm`).
constexpr size_t kMaxGeneratedName = 40;

const char *op_word(BinaryOpKind op) {
  switch (op) {
    case BinaryOpKind::Add: return "plus";
    case BinaryOpKind::Sub: return "minus";
    case BinaryOpKind::Mul: return "times";
    case BinaryOpKind::Div: return "div";
    case BinaryOpKind::FloorDiv: return "floordiv";
    case BinaryOpKind::Mod: return "mod";
    case BinaryOpKind::Pow: return "pow";
    case BinaryOpKind::MatMul: return "matmul";
    case BinaryOpKind::LShift: return "shl";
    case BinaryOpKind::RShift: return "shr";
    case BinaryOpKind::BitAnd: return "and";
    case BinaryOpKind::BitOr: return "or";
    case BinaryOpKind::BitXor: return "xor";
  }
  return "op";
}

// The leading '_'-separated words of `name` that fit in `limit` characters,
// without a trailing operator word (`dc_ptr_plus_stride_cm`, not
// `dc_ptr_plus_stride_cm_tim`): a shorter description, never a cut word.
std::string whole_words(const std::string &name, size_t limit) {
  static const std::set<std::string> operators = {"plus", "minus", "times", "div", "floordiv", "mod", "pow",
                                                  "matmul", "shl", "shr", "and", "or", "xor", "to", "neg", "not"};
  std::vector<std::string> words;
  size_t length = 0;
  for (size_t start = 0; start <= name.size();) {
    size_t end = name.find('_', start);
    if (end == std::string::npos) end = name.size();
    const std::string word = name.substr(start, end - start);
    const size_t grown = length + (words.empty() ? 0 : 1) + word.size();
    if (!words.empty() && grown > limit) break;
    words.push_back(word);
    length = grown;
    start = end + 1;
  }
  while (words.size() > 1 && (operators.count(words.back()) || words.back().empty())) words.pop_back();
  std::string out;
  for (const std::string &w : words) out += (out.empty() ? "" : "_") + w;
  return out;
}

// An identifier piece for an operand: a name, a dotted path, a literal.
std::string piece(const Expr &e) {
  switch (e.kind) {
    case NodeKind::Name: return cast<Name>(&e)->id;
    case NodeKind::Attribute: {
      std::string base = piece(*cast<Attribute>(&e)->value);
      return base.empty() ? "" : base + "_" + cast<Attribute>(&e)->attr;
    }
    case NodeKind::IntLit:
    case NodeKind::FloatLit: {
      // Small familiar constants read as words; any other constant is "c".
      double v = isa<IntLit>(&e) ? static_cast<double>(cast<IntLit>(&e)->value) : cast<FloatLit>(&e)->value;
      if (v == 0) return "zero";
      if (v == 0.5) return "half";
      if (v == 1) return "one";
      if (v == 2) return "two";
      if (isa<IntLit>(&e) && v < 100) return std::to_string(cast<IntLit>(&e)->value);
      return "c";
    }
    case NodeKind::BoolLit: return cast<BoolLit>(&e)->value ? "true" : "false";
    case NodeKind::NoneLit: return "none";
    case NodeKind::UnaryOp: {
      std::string inner = piece(*cast<UnaryOp>(&e)->operand);
      return inner.empty() ? "" : "neg_" + inner;
    }
    default: return "";
  }
}

// What an expression computes, as a noun: the name of a value whose
// operands make too long a one.
std::string operation_noun(const Expr &e) {
  if (auto *b = dyn_cast<BinOp>(&e)) {
    switch (b->op) {
      case BinaryOpKind::Add: return "sum";
      case BinaryOpKind::Sub: return "difference";
      case BinaryOpKind::Mul: return "product";
      case BinaryOpKind::Div: return "quotient";
      case BinaryOpKind::FloorDiv: return "quotient";
      case BinaryOpKind::Mod: return "remainder";
      case BinaryOpKind::Pow: return "power";
      case BinaryOpKind::BitAnd: return "both";
      case BinaryOpKind::BitOr: return "either";
      default: return "t";
    }
  }
  if (isa<Compare>(&e)) return "condition";
  if (auto *s = dyn_cast<Subscript>(&e)) {
    const bool col = s->indices.size() == 2 && isa<Slice>(s->indices[0].get()) && isa<NoneLit>(s->indices[1].get());
    const bool row = s->indices.size() == 2 && isa<NoneLit>(s->indices[0].get()) && isa<Slice>(s->indices[1].get());
    return col ? "column" : row ? "row" : "view";
  }
  if (auto *u = dyn_cast<UnaryOp>(&e)) return u->op == UnaryOpKind::Neg ? "negated" : "t";
  return "t";
}

}  // namespace

std::string name_for(const Expr &e) {
  std::string name;
  switch (e.kind) {
    case NodeKind::BinOp: {
      auto *b = cast<BinOp>(&e);
      std::string l = piece(*b->lhs), r = piece(*b->rhs);
      // `0.5 * x` reads as x_times_half: a constant goes last where order does not matter.
      bool commutative = b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Mul;
      if (commutative && (isa<IntLit>(b->lhs.get()) || isa<FloatLit>(b->lhs.get())) && !isa<IntLit>(b->rhs.get()) &&
          !isa<FloatLit>(b->rhs.get()))
        std::swap(l, r);
      name = (l.empty() ? "t" : l) + "_" + op_word(b->op) + "_" + (r.empty() ? "t" : r);
      break;
    }
    case NodeKind::UnaryOp: {
      auto *u = cast<UnaryOp>(&e);
      std::string x = piece(*u->operand);
      name = std::string(u->op == UnaryOpKind::Neg ? "neg" : u->op == UnaryOpKind::Not ? "not" : u->op == UnaryOpKind::Invert ? "inv" : "pos") +
             "_" + (x.empty() ? "t" : x);
      break;
    }
    case NodeKind::Call: {
      auto *c = cast<Call>(&e);
      name = piece(*c->func);
      // A reduction or scan by the user's combine function is named after the operand and the function (`w_mul_reduced`
      // for `tl.reduce(w, 0, _mul)`), not after every argument (`tl_reduce_w_zero__mul`).
      if (name == "tl_reduce" || name == "tl_associative_scan") {
        const Expr *operand = call_argument(*c, 0, "input"), *fn = call_argument(*c, 2, "combine_fn");
        std::string what = operand ? piece(*operand) : "", how = fn ? piece(*fn) : "";
        while (!how.empty() && how.front() == '_') how.erase(0, 1);
        if (!what.empty() && !how.empty()) {
          name = what + "_" + how + (name == "tl_reduce" ? "_reduced" : "_scan");
          break;
        }
      }
      if (name.empty()) name = "call";
      for (const ExprPtr &a : c->args) {
        std::string p = piece(*a);
        if (!p.empty()) name += "_" + p;
      }
      break;
    }
    case NodeKind::Subscript: {
      auto *s = cast<Subscript>(&e);
      std::string base = piece(*s->value);
      bool col = s->indices.size() == 2 && isa<Slice>(s->indices[0].get()) && isa<NoneLit>(s->indices[1].get());
      bool row = s->indices.size() == 2 && isa<NoneLit>(s->indices[0].get()) && isa<Slice>(s->indices[1].get());
      name = (base.empty() ? "t" : base) + (col ? "_col" : row ? "_row" : "_view");
      break;
    }
    default: name = piece(e);
  }
  if (name.empty()) name = "t";
  // Long names stop helping the reader: keep the operation and drop the
  // operands, whole, never part of one (`M_plus_off_hz_times_N` once read as
  // M + off_hz * N where the value was M + off_hz * N_CTX + offs_m): a call is
  // named after its function, an operator after what it computes (`product`).
  if (auto *c = dyn_cast<Call>(&e); c && name.size() > 32) {
    name = piece(*c->func);
    if (name.size() > 32 || name.empty()) name = whole_words(name, 24);  // (a dotted path: its leading parts)
  } else if (name.size() > kMaxGeneratedName) {
    name = operation_noun(e);
    // `K_ptrs_base + ...` is K_ptrs_base_offset and `index * ...` index_scaled:
    // true of the value, and it says what it starts from.
    auto *b = dyn_cast<BinOp>(&e);
    const std::string l = b ? piece(*b->lhs) : "";
    const char *suffix = !b ? nullptr : b->op == BinaryOpKind::Add ? "_offset" : b->op == BinaryOpKind::Mul ? "_scaled" : nullptr;
    if (suffix && !l.empty() && l.size() + std::strlen(suffix) <= kMaxGeneratedName) name = l + suffix;
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "t_" + name;
  return name;
}

void NameAllocator::reserve_all(const Module &module, const Function &fn) {
  for (const auto &f : module.functions) {
    reserve(f->name);
    if (!f->jit_alias.empty()) reserve(f->jit_alias);
  }
  for (const Constant &c : module.constants) reserve(c.name);
  for (const Import &imp : module.imports)
    for (const auto &n : imp.names) reserve(n.second.empty() ? n.first.substr(0, n.first.find('.')) : n.second);
  for (const char *builtin : {"tl", "triton", "libdevice", "range", "min", "max", "float", "int", "len", "abs", "math"})
    reserve(builtin);
  for (const Param &p : fn.params) reserve(p.name);
}

std::string NameAllocator::fresh(const std::string &base) {
  if (!used_.count(base)) {
    used_.insert(base);
    return base;
  }
  int &k = next_suffix_.emplace(base, 2).first->second;
  for (;; ++k) {
    std::string candidate = base + "_" + std::to_string(k);
    if (!used_.count(candidate)) {
      used_.insert(candidate);
      return candidate;
    }
  }
}

namespace {

class Normalizer {
 public:
  Normalizer(const Module &module, const Function &fn, const sema::TypeInfo &types, bool kernel)
      : fn_(fn), types_(types), kernel_(kernel) {
    names_.reserve_all(module, fn);
    // Every name the user assigns is reserved, so temporaries never take one.
    collect_assigned(fn.body);
    // A reassigned parameter gets a new name: the parameter's value stays readable.
    for (const Param &p : fn.params) {
      current_[p.name] = p.name;
      assigned_.insert(p.name);
    }
  }

  AnfFunction run() {
    AnfFunction out;
    out.fn = clone_signature(fn_);
    body_ = &out.fn->body;
    out_ = &out;
    block(fn_.body);
    return out;
  }

 private:
  [[noreturn]] void fail(const SourceSpan &span, const std::string &message) { throw AnfError{span, message}; }

  void collect_assigned(const StmtList &body) {
    std::vector<std::string> names;
    assigned_names(body, names);
    for (const std::string &n : names) names_.reserve(n);
  }
  // The user names a block assigns, in order of first assignment, appended to
  // `out` (names already in `out` are not repeated).
  static void assigned_names(const StmtList &body, std::vector<std::string> &out) {
    std::unordered_set<std::string> seen(out.begin(), out.end());
    collect_assigned_names(body, out, seen);
  }
  static void collect_assigned_names(const StmtList &body, std::vector<std::string> &out,
                                     std::unordered_set<std::string> &seen) {
    auto add = [&](const Expr &t, auto &self) -> void {
      if (auto *n = dyn_cast<Name>(&t)) {
        if (seen.insert(n->id).second) out.push_back(n->id);
      } else if (auto *tu = dyn_cast<Tuple>(&t)) {
        for (const ExprPtr &e : tu->elts) self(*e, self);
      }
    };
    for (const StmtPtr &s : body) {
      if (auto *a = dyn_cast<Assign>(s.get()))
        for (const ExprPtr &t : a->targets) add(*t, add);
      if (auto *a = dyn_cast<AugAssign>(s.get())) add(*a->target, add);
      if (auto *a = dyn_cast<AnnAssign>(s.get()); a && a->value) add(*a->target, add);
      if (auto *i = dyn_cast<If>(s.get())) {
        collect_assigned_names(i->body, out, seen);
        collect_assigned_names(i->orelse, out, seen);
      }
      if (auto *f = dyn_cast<For>(s.get())) {
        add(*f->target, add);
        collect_assigned_names(f->body, out, seen);
      }
      if (auto *w = dyn_cast<While>(s.get())) collect_assigned_names(w->body, out, seen);
    }
  }

  const sema::SType *type_of(const Expr &e) const { return types_.type_of(&e); }

  // Values known before the kernel runs stay inline; tensors become names.
  bool is_static(const Expr &e) const {
    const sema::SType *t = type_of(e);
    if (!t) return isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e) || isa<NoneLit>(&e) || isa<StrLit>(&e);
    switch (t->kind) {
      case sema::SType::Kind::Tensor:
      case sema::SType::Kind::Unknown: return false;
      case sema::SType::Kind::Tuple:
        for (const sema::SType &x : t->elems)
          if (x.kind == sema::SType::Kind::Tensor || x.kind == sema::SType::Kind::Unknown) return false;
        return true;
      default: return true;
    }
  }

  void emit(StmtPtr s) {
    out_->origin[s.get()] = current_origin_;
    body_->push_back(std::move(s));
  }
  void emit_copy(const std::string &to, const std::string &from, const SourceSpan &span) {
    ExprList targets;
    targets.push_back(std::make_unique<Name>(to, span));
    emit(std::make_unique<Assign>(std::move(targets), std::make_unique<Name>(from, span), span));
  }

  // `for v in range(a, b, c)` in a kernel: the loop stays, its carried values
  // get one name each (see Anf.h).
  void runtime_loop(const For &loop) {
    auto *call = dyn_cast<Call>(loop.iter.get());
    auto *var = dyn_cast<Name>(loop.target.get());
    const sema::SType *f = call ? type_of(*call->func) : nullptr;
    if (!call || !var || !f || f->kind != sema::SType::Kind::Builtin || (f->s != "range" && f->s != "tl.range" && f->s != "tl.static_range"))
      fail(loop.iter->span, "a loop in a differentiated kernel must be `for name in range(...)` or tl.range(...)");
    for (const Keyword &k : call->keywords)
      if (k.name == "num_stages" || k.name == "loop_unroll_factor" || k.name == "flatten" || k.name == "warp_specialize" ||
          k.name == "disallow_acc_multi_buffer")
        continue;
      else
        fail(k.name_span, "tgrad does not know the tl.range option '" + k.name + "'");
    ExprList bounds;
    for (const ExprPtr &a : call->args) bounds.push_back(atom(*a));
    std::vector<Keyword> options;
    for (const Keyword &k : call->keywords) options.push_back({k.name, k.name_span, rename(*k.value)});
    auto iter = std::make_unique<Call>(rename(*call->func), std::move(bounds), std::move(options), call->span);

    std::vector<std::string> assigned;
    assigned_names(loop.body, assigned);
    std::vector<std::pair<std::string, LoopCarried>> carried;  // user name -> names
    for (const std::string &u : assigned) {
      auto it = current_.find(u);
      if (it == current_.end() || u == var->id) continue;  // first assigned in the loop: local to it
      std::string init = it->second;
      std::string inside = define(u);
      emit_copy(inside, init, loop.span);
      carried.push_back({u, {inside, init}});
    }
    // Names first assigned in the body are local to it: Triton does not carry them out.
    std::map<std::string, std::string> before = current_;
    std::string v = define(var->id);
    auto node = std::make_unique<For>(std::make_unique<Name>(v, loop.target->span), std::move(iter), StmtList{}, loop.span);
    StmtList *outer = body_;
    body_ = &node->body;
    block(loop.body);
    for (auto &[user, names] : carried) {
      current_origin_ = &loop;
      if (current_[user] != names.name) emit_copy(names.name, current_[user], loop.span);
      current_[user] = names.name;
    }
    current_ = before;
    body_ = outer;
    current_origin_ = &loop;
    std::vector<LoopCarried> info;
    for (auto &c : carried) info.push_back(c.second);
    out_->carried[node.get()] = std::move(info);
    emit(std::move(node));
  }

  // `if c:` on a runtime value in a kernel: both branches stay; a name either
  // assigns is merged under one new name set at the end of each branch.
  void runtime_if(const If &i) {
    ExprPtr cond = atom(*i.cond);
    auto node = std::make_unique<If>(std::move(cond), StmtList{}, StmtList{}, i.span);
    node->guards_early_return = i.guards_early_return;
    std::map<std::string, std::string> before = current_;
    StmtList *outer = body_;
    body_ = &node->body;
    block(i.body);
    std::map<std::string, std::string> after_then = current_;
    current_ = before;
    body_ = &node->orelse;
    block(i.orelse);
    std::map<std::string, std::string> after_else = current_;
    current_ = before;
    std::vector<std::string> assigned;
    // After an early return's guard nothing runs: no name needs merging.
    if (!i.guards_early_return) {
      assigned_names(i.body, assigned);
      assigned_names(i.orelse, assigned);
    }
    for (const std::string &u : assigned) {
      auto t = after_then.find(u), e = after_else.find(u);
      if (t == after_then.end() || e == after_else.end()) continue;  // assigned in one branch only: local to it
      if (t->second == e->second) {
        current_[u] = t->second;
        continue;
      }
      current_origin_ = &i;
      std::string merged = define(u);
      body_ = &node->body;
      emit_copy(merged, t->second, i.span);
      body_ = &node->orelse;
      emit_copy(merged, e->second, i.span);
    }
    body_ = outer;
    current_origin_ = &i;
    emit(std::move(node));
  }

  // A static expression with names renamed to their current SSA names.
  ExprPtr rename(const Expr &e) {
    ExprPtr c = clone(e);
    rename_in_place(*c);
    return c;
  }
  void rename_in_place(Expr &e) {
    switch (e.kind) {
      case NodeKind::Name: {
        auto *n = cast<Name>(&e);
        auto it = current_.find(n->id);
        if (it != current_.end()) n->id = it->second;
        return;
      }
      case NodeKind::Attribute: rename_in_place(*cast<Attribute>(&e)->value); return;
      case NodeKind::Subscript:
        rename_in_place(*cast<Subscript>(&e)->value);
        for (ExprPtr &i : cast<Subscript>(&e)->indices) rename_in_place(*i);
        return;
      case NodeKind::Call:
        rename_in_place(*cast<Call>(&e)->func);
        for (ExprPtr &a : cast<Call>(&e)->args) rename_in_place(*a);
        for (Keyword &k : cast<Call>(&e)->keywords) rename_in_place(*k.value);
        return;
      case NodeKind::UnaryOp: rename_in_place(*cast<UnaryOp>(&e)->operand); return;
      case NodeKind::BinOp:
        rename_in_place(*cast<BinOp>(&e)->lhs);
        rename_in_place(*cast<BinOp>(&e)->rhs);
        return;
      case NodeKind::BoolOp:
        for (ExprPtr &v : cast<BoolOp>(&e)->values) rename_in_place(*v);
        return;
      case NodeKind::Compare:
        rename_in_place(*cast<Compare>(&e)->left);
        for (ExprPtr &c : cast<Compare>(&e)->comparators) rename_in_place(*c);
        return;
      case NodeKind::IfExp:
        rename_in_place(*cast<IfExp>(&e)->cond);
        rename_in_place(*cast<IfExp>(&e)->then_value);
        rename_in_place(*cast<IfExp>(&e)->else_value);
        return;
      case NodeKind::Tuple:
        for (ExprPtr &x : cast<Tuple>(&e)->elts) rename_in_place(*x);
        return;
      case NodeKind::List:
        for (ExprPtr &x : cast<List>(&e)->elts) rename_in_place(*x);
        return;
      default: return;
    }
  }

  // An operand: a name or a static value; anything else gets a temporary.
  ExprPtr atom(const Expr &e, const std::string &preferred = "") {
    if (auto *n = dyn_cast<Name>(&e)) return rename(*n);
    if (is_static(e)) return rename(e);
    ExprPtr op = operation(e);
    std::string name = names_.fresh(preferred.empty() ? name_for(*op) : preferred);
    ExprList targets;
    targets.push_back(std::make_unique<Name>(name, e.span));
    emit(std::make_unique<Assign>(std::move(targets), std::move(op), e.span));
    return std::make_unique<Name>(name, e.span);
  }

  // One operation whose operands are atoms.
  ExprPtr operation(const Expr &e) {
    switch (e.kind) {
      case NodeKind::BinOp: {
        auto *b = cast<BinOp>(&e);
        ExprPtr l = atom(*b->lhs);
        return std::make_unique<BinOp>(b->op, std::move(l), atom(*b->rhs), e.span);
      }
      case NodeKind::UnaryOp: {
        auto *u = cast<UnaryOp>(&e);
        return std::make_unique<UnaryOp>(u->op, atom(*u->operand), e.span);
      }
      case NodeKind::Compare: {
        auto *c = cast<Compare>(&e);
        ExprPtr left = atom(*c->left);
        ExprList rest;
        for (const ExprPtr &x : c->comparators) rest.push_back(atom(*x));
        return std::make_unique<Compare>(std::move(left), c->ops, std::move(rest), e.span);
      }
      case NodeKind::Call: {
        auto *c = cast<Call>(&e);
        ExprPtr func;
        if (auto *attr = dyn_cast<Attribute>(c->func.get()); attr && !is_static(*attr->value))
          func = std::make_unique<Attribute>(atom(*attr->value), attr->attr, c->func->span);  // a method's receiver
        else
          func = rename(*c->func);
        // A scan's inputs and inline assembly's args= stay a tuple (list) of
        // atoms: reverse mode reads them there.
        const sema::SType *callee = type_of(*c->func);
        const bool operand_list = callee && callee->kind == sema::SType::Kind::Builtin &&
                                  (callee->s == "tl.associative_scan" || callee->s == "tl.inline_asm_elementwise");
        auto argument = [&](const Expr &a) {
          return operand_list && (isa<Tuple>(&a) || isa<List>(&a)) ? operation(a) : atom(a);
        };
        ExprList args;
        for (const ExprPtr &a : c->args) args.push_back(argument(*a));
        std::vector<Keyword> kws;
        for (const Keyword &k : c->keywords) kws.push_back({k.name, k.name_span, argument(*k.value)});
        return std::make_unique<Call>(std::move(func), std::move(args), std::move(kws), e.span);
      }
      case NodeKind::Subscript: {
        auto *s = cast<Subscript>(&e);
        ExprPtr base = atom(*s->value);
        ExprList idx;
        for (const ExprPtr &i : s->indices) idx.push_back(rename(*i));
        return std::make_unique<Subscript>(std::move(base), std::move(idx), e.span);
      }
      case NodeKind::Attribute: {
        auto *a = cast<Attribute>(&e);
        return std::make_unique<Attribute>(atom(*a->value), a->attr, e.span);
      }
      case NodeKind::IfExp: {
        auto *i = cast<IfExp>(&e);
        const sema::SType *c = type_of(*i->cond);
        if (c && c->known) {
          bool taken = c->kind == sema::SType::Kind::Bool ? c->b : c->n != 0;
          return operation_or_atom(taken ? *i->then_value : *i->else_value);
        }
        fail(e.span, "a conditional expression on a value computed at run time cannot be differentiated yet; use "
                     "tl.where, or make the condition tl.constexpr");
      }
      case NodeKind::Tuple:
      case NodeKind::List: {  // (a list: inline assembly's args=, above)
        ExprList elts;
        for (const ExprPtr &x : isa<Tuple>(&e) ? cast<Tuple>(&e)->elts : cast<List>(&e)->elts) elts.push_back(atom(*x));
        if (isa<List>(&e)) return std::make_unique<List>(std::move(elts), e.span);
        return std::make_unique<Tuple>(std::move(elts), e.span);
      }
      case NodeKind::BoolOp: {
        // `and` / `or` on int1 tiles (sema types them so) are & and | lane by lane; an operand known when Triton
        // compiles that does not decide (True in an `and`) drops out, as Triton drops it. Values without a gradient.
        auto *b = cast<BoolOp>(&e);
        const sema::SType *t = type_of(e);
        if (!is_static(e) && t && t->is_tensor() && !t->shape.empty()) {
          ExprList operands;
          for (const ExprPtr &x : b->values) {
            if (const sema::SType *xt = type_of(*x); xt && !xt->is_tensor())
              if (std::optional<bool> truth = sema::known_truth(*xt); truth && *truth == (b->op == BoolOpKind::And))
                continue;
            operands.push_back(atom(*x));
          }
          const BinaryOpKind lanes = b->op == BoolOpKind::And ? BinaryOpKind::BitAnd : BinaryOpKind::BitOr;
          for (size_t k = 1; k < operands.size(); ++k) {
            auto combined = std::make_unique<BinOp>(lanes, std::move(operands[0]), std::move(operands[k]), e.span);
            if (k + 1 == operands.size()) return combined;
            operands[0] = atom(*combined);
          }
          if (!operands.empty()) return std::move(operands[0]);
        }
        if (is_static(e)) return rename(e);
        fail(e.span, "this expression cannot be differentiated yet");
      }
      case NodeKind::Name: return rename(e);
      default:
        if (is_static(e)) return rename(e);
        fail(e.span, "this expression cannot be differentiated yet");
    }
  }

  ExprPtr operation_or_atom(const Expr &e) {
    if (isa<Name>(&e) || is_static(e)) return rename(e);
    return operation(e);
  }

  // Binds a user name to a new SSA name (the user's own the first time).
  std::string define(const std::string &user_name) {
    names_.reserve(user_name);  // loop variables are not reserved up front
    std::string ssa = assigned_.count(user_name) ? names_.fresh(user_name) : user_name;
    assigned_.insert(user_name);
    current_[user_name] = ssa;
    return ssa;
  }

  void assign_to(const Expr &target, ExprPtr value, const SourceSpan &span) {
    if (auto *n = dyn_cast<Name>(&target)) {
      ExprList targets;
      std::string ssa = define(n->id);
      targets.push_back(std::make_unique<Name>(ssa, target.span));
      emit(std::make_unique<Assign>(std::move(targets), std::move(value), span));
      return;
    }
    if (auto *t = dyn_cast<Tuple>(&target)) {
      // a, b = f(x): name the tuple, then take its elements.
      ExprPtr whole = std::move(value);
      std::vector<ExprPtr> parts;
      if (auto *tv = dyn_cast<Tuple>(whole.get()); tv && tv->elts.size() == t->elts.size()) {
        for (ExprPtr &x : tv->elts) parts.push_back(std::move(x));
      } else {
        std::string name = names_.fresh(name_for(*whole));
        ExprList targets;
        targets.push_back(std::make_unique<Name>(name, span));
        emit(std::make_unique<Assign>(std::move(targets), std::move(whole), span));
        for (size_t k = 0; k < t->elts.size(); ++k) {
          ExprList idx;
          idx.push_back(std::make_unique<IntLit>(k, std::to_string(k), span));
          parts.push_back(std::make_unique<Subscript>(std::make_unique<Name>(name, span), std::move(idx), span));
        }
      }
      if (parts.size() != t->elts.size()) fail(target.span, "cannot unpack into " + std::to_string(t->elts.size()) + " names");
      for (size_t k = 0; k < parts.size(); ++k) assign_to(*t->elts[k], std::move(parts[k]), span);
      return;
    }
    fail(target.span, "only names and tuples of names can be assigned in a differentiated function");
  }

  void block(const StmtList &body) {
    for (const StmtPtr &s : body) stmt(*s);
  }

  // A compile-time if on element types that chooses dtypes or constants, or
  // casts (FlagGems' norms: `if tl.constexpr(X.dtype.element_ty ==
  // tl.float16) or ...: cdtype = tl.float32` / `else: cdtype =
  // X.dtype.element_ty`; its cumsum: `if x.dtype.is_fp16(): x =
  // x.to(tl.float32)`): rather than the branch these types take, each name
  // it assigns gets one value with a conditional expression on the same
  // condition, which Triton decides when it compiles the backward as it
  // decides the forward's if (`cdtype = tl.float32 if ... else
  // X.dtype.element_ty`, `x = x.to(tl.float32 if x.dtype.is_fp16() else
  // x.dtype)`). So one backward serves every element type (a generic
  // backward: src/ad/GenericTypes.h) and reads as the user wrote it. Only
  // where each branch holds nothing but assignments of compile-time values
  // (names, attributes, literals) or casts of a name to itself (`x =
  // x.to(D)`), and nested ifs of the same kind; a name assigned on one path
  // only must have had a value before. Otherwise the branch taken, as before.
  struct DispatchName {
    std::string name;
    bool cast = false;  // every assignment `name = name.to(D)`
  };
  bool keep_dtype_dispatch(const If &i) {
    if (!reads_element_type(*i.cond)) return false;
    std::vector<DispatchName> assigned;
    if (!dispatch_branch_names(i.body, assigned) || !dispatch_branch_names(i.orelse, assigned)) return false;
    std::vector<std::string> names;
    for (const DispatchName &d : assigned) names.push_back(d.name);
    std::vector<ExprPtr> values;
    for (const DispatchName &d : assigned) {
      if (!current_.count(d.name) && (d.cast || !assigned_in_every_path(i.body, d.name) ||
                                      !assigned_in_every_path(i.orelse, d.name)))
        return false;
      auto before = [&]() -> ExprPtr {
        if (!current_.count(d.name)) return nullptr;
        ExprPtr n = std::make_unique<Name>(d.name, i.span);
        return d.cast ? std::make_unique<Attribute>(std::move(n), "dtype", i.span) : std::move(n);
      };
      ExprPtr then_value = branch_value(i.body, d, names, before());
      ExprPtr else_value = branch_value(i.orelse, d, names, before());
      if (!then_value || !else_value) return false;
      ExprPtr chosen = std::make_unique<IfExp>(clone(*i.cond), std::move(then_value), std::move(else_value), i.span);
      if (d.cast) {
        ExprList args;
        args.push_back(std::move(chosen));
        chosen = std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>(d.name, i.span), "to", i.span),
                                        std::move(args), std::vector<Keyword>{}, i.span);
      }
      values.push_back(std::move(chosen));
    }
    // Every value reads the names as they were before the if (the condition
    // is evaluated first): renamed before any is assigned.
    for (ExprPtr &v : values) rename_in_place(*v);
    for (size_t k = 0; k < assigned.size(); ++k) assign_to(Name(assigned[k].name, i.span), std::move(values[k]), i.span);
    return true;
  }
  // (Also a comparison with a dtype of tl's, which Triton decides when it compiles, and a name assigned from
  // such an expression: FlagGems' `dtype = inp.type.element_ty` and then `acc_type = tl.float32 if dtype is
  // tl.bfloat16 else dtype`; `is_half = elem == tl.float16`.)
  bool reads_element_type(const Expr &e) const {
    bool found = false;
    visit_expr(e, [&](const Expr &x) {
      if (auto *a = dyn_cast<Attribute>(&x)) found |= a->attr == "dtype" || a->attr == "element_ty" || a->attr == "type";
      if (auto *n = dyn_cast<Name>(&x)) found |= element_type_names_.count(n->id) > 0;
      if (auto *c = dyn_cast<Compare>(&x)) {
        found |= is_tl_dtype(c->left.get());
        for (const ExprPtr &r : c->comparators) found |= is_tl_dtype(r.get());
      }
    });
    return found;
  }
  static bool reads_any(const Expr &e, const std::vector<std::string> &names) {
    bool found = false;
    visit_expr(e, [&](const Expr &x) {
      if (auto *n = dyn_cast<Name>(&x)) found |= std::find(names.begin(), names.end(), n->id) != names.end();
    });
    return found;
  }
  // Compile-time values a dispatch branch may assign: names, attributes of
  // them, literals (`tl.float32`, `X.dtype.element_ty`, `1e-6`).
  static bool plain_value(const Expr &e) {
    if (isa<Name>(&e) || isa<IntLit>(&e) || isa<FloatLit>(&e) || isa<BoolLit>(&e) || isa<StrLit>(&e) || isa<NoneLit>(&e))
      return true;
    if (auto *a = dyn_cast<Attribute>(&e)) return plain_value(*a->value);
    if (auto *u = dyn_cast<UnaryOp>(&e)) return u->op == UnaryOpKind::Neg && plain_value(*u->operand);
    return false;
  }
  // `name.to(D)` with D a plain value: D; else null.
  static const Expr *self_cast_dtype(const Expr &value, const std::string &name) {
    auto *c = dyn_cast<Call>(&value);
    auto *to = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
    auto *of = to ? dyn_cast<Name>(to->value.get()) : nullptr;
    if (!of || to->attr != "to" || of->id != name || c->args.size() != 1 || !c->keywords.empty() ||
        !plain_value(*c->args[0]))
      return nullptr;
    return c->args[0].get();
  }
  // The names a dispatch branch assigns, appended to `names` in order; false
  // where it holds anything else, or a name is both cast and given a value.
  bool dispatch_branch_names(const StmtList &branch, std::vector<DispatchName> &names) const {
    for (const StmtPtr &s : branch) {
      if (auto *a = dyn_cast<Assign>(s.get())) {
        auto *n = a->targets.size() == 1 ? dyn_cast<Name>(a->targets[0].get()) : nullptr;
        if (!n) return false;
        const bool cast = self_cast_dtype(*a->value, n->id) != nullptr;
        if (!cast && !plain_value(*a->value)) return false;
        auto it = std::find_if(names.begin(), names.end(), [&](const DispatchName &d) { return d.name == n->id; });
        if (it == names.end())
          names.push_back({n->id, cast});
        else if (it->cast != cast)
          return false;
        continue;
      }
      if (auto *nested = dyn_cast<If>(s.get())) {
        if (!reads_element_type(*nested->cond)) return false;
        if (!dispatch_branch_names(nested->body, names) || !dispatch_branch_names(nested->orelse, names)) return false;
        continue;
      }
      if (isa<Pass>(s.get())) continue;
      return false;
    }
    return true;
  }
  static bool assigned_in_every_path(const StmtList &branch, const std::string &name) {
    for (const StmtPtr &s : branch) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && cast<Name>(a->targets[0].get())->id == name) return true;
      if (auto *nested = dyn_cast<If>(s.get());
          nested && assigned_in_every_path(nested->body, name) && assigned_in_every_path(nested->orelse, name))
        return true;
    }
    return false;
  }
  // What `d` has after `branch` (its value, or for a cast its dtype; through
  // nested ifs as conditional expressions), or `otherwise` where the branch
  // leaves it. Null where a value or condition reads a name the if assigns
  // after the branch assigned it (or a cast is applied twice).
  ExprPtr branch_value(const StmtList &branch, const DispatchName &d, const std::vector<std::string> &assigned,
                       ExprPtr otherwise) const {
    ExprPtr value = std::move(otherwise);
    bool changed = false;
    for (const StmtPtr &s : branch) {
      if (auto *a = dyn_cast<Assign>(s.get())) {
        const std::string &target = cast<Name>(a->targets[0].get())->id;
        const bool mine = target == d.name;
        // (A cast's operand is the name as it was: only its dtype is read.)
        const Expr *cast_to = self_cast_dtype(*a->value, target);
        const Expr *v = cast_to ? cast_to : a->value.get();
        if (reads_any(*v, assigned)) return nullptr;
        if (!mine) continue;
        if (d.cast && changed) return nullptr;
        value = clone(*v);
        changed = true;
        continue;
      }
      if (auto *nested = dyn_cast<If>(s.get())) {
        if (reads_any(*nested->cond, assigned)) return nullptr;
        ExprPtr then_value = branch_value(nested->body, d, assigned, value ? clone(*value) : nullptr);
        ExprPtr else_value = branch_value(nested->orelse, d, assigned, value ? clone(*value) : nullptr);
        if (!then_value || !else_value) return nullptr;
        value = std::make_unique<IfExp>(clone(*nested->cond), std::move(then_value), std::move(else_value), nested->span);
        changed = true;
      }
    }
    return value;
  }

  // `for i in tl.static_range(a, b, c)` with known bounds: the body once per
  // value of i, i bound to that constant (Triton unrolls it the same way).
  // In a kernel, bounds without values leave it a loop (false).
  bool unroll_static_range(const For &loop) {
    auto *call = dyn_cast<Call>(loop.iter.get());
    auto *var = dyn_cast<Name>(loop.target.get());
    if (!call || !var || !call->keywords.empty()) return false;
    const sema::SType *f = type_of(*call->func);
    if (!f || f->kind != sema::SType::Kind::Builtin || f->s != "tl.static_range") return false;
    std::vector<long long> bounds;
    for (const ExprPtr &a : call->args) {
      const sema::SType *t = type_of(*a);
      if (!t || t->kind != sema::SType::Kind::Int || !t->known) {
        // Bounds not given (a generic constexpr): in a kernel, the loop is
        // reversed like a runtime loop, which computes the same values.
        if (kernel_) return false;
        fail(a->span, "tl.static_range needs bounds known before the kernel runs to be unrolled (give them with -D)");
      }
      bounds.push_back(t->n);
    }
    if (bounds.empty() || bounds.size() > 3) return false;
    long long start = bounds.size() == 1 ? 0 : bounds[0], stop = bounds.size() == 1 ? bounds[0] : bounds[1];
    long long step = bounds.size() == 3 ? bounds[2] : 1;
    if (step == 0) fail(call->span, "tl.static_range step must not be zero");
    if ((stop - start) / step > 1024) fail(call->span, "tl.static_range over more than 1024 values is too long to unroll");
    const auto previous = unrolled_.find(var->id);
    const std::optional<long long> outer =
        previous == unrolled_.end() ? std::nullopt : std::optional<long long>(previous->second);
    for (long long i = start; step > 0 ? i < stop : i > stop; i += step) {
      unrolled_[var->id] = i;
      current_origin_ = &loop;
      assign_to(*loop.target, std::make_unique<IntLit>(static_cast<uint64_t>(i < 0 ? -i : i), ""), loop.span);
      if (i < 0) {
        // A negative constant: -n.
        auto &last = cast<Assign>(body_->back().get())->value;
        last = std::make_unique<UnaryOp>(UnaryOpKind::Neg, std::move(last), loop.span);
      }
      block(loop.body);
    }
    if (outer) unrolled_[var->id] = *outer;
    else unrolled_.erase(var->id);
    return true;
  }

  // The value of a condition inside an unrolled tl.static_range loop, where
  // the loop variable is a constant in each copy of the body (`if i_w == 0:`,
  // `if HAS_BIAS and i > 0:`); none where it depends on anything not known
  // before the kernel runs. Sema typed the body once, with the variable as a
  // symbol, so these conditions are folded here.
  std::optional<long long> fold(const Expr &e) const {
    if (auto *n = dyn_cast<Name>(&e))
      if (auto it = unrolled_.find(n->id); it != unrolled_.end()) return it->second;
    if (const sema::SType *t = type_of(e); t && t->known) {
      if (t->kind == sema::SType::Kind::Int) return t->n;
      if (t->kind == sema::SType::Kind::Bool) return t->b ? 1 : 0;
    }
    if (auto *l = dyn_cast<IntLit>(&e)) return static_cast<long long>(l->value);
    if (auto *b = dyn_cast<BoolLit>(&e)) return b->value ? 1 : 0;
    if (auto *u = dyn_cast<UnaryOp>(&e)) {
      std::optional<long long> v = fold(*u->operand);
      if (!v) return std::nullopt;
      if (u->op == UnaryOpKind::Neg) return -*v;
      if (u->op == UnaryOpKind::Pos) return *v;
      if (u->op == UnaryOpKind::Not) return *v == 0 ? 1 : 0;
      return std::nullopt;
    }
    if (auto *b = dyn_cast<BinOp>(&e)) {
      std::optional<long long> x = fold(*b->lhs), y = fold(*b->rhs);
      if (!x || !y) return std::nullopt;
      switch (b->op) {
        case BinaryOpKind::Add: return *x + *y;
        case BinaryOpKind::Sub: return *x - *y;
        case BinaryOpKind::Mul: return *x * *y;
        case BinaryOpKind::FloorDiv:
        case BinaryOpKind::Mod: {
          if (*y == 0) return std::nullopt;
          long long q = *x / *y;
          if ((*x % *y != 0) && ((*x < 0) != (*y < 0))) --q;  // Python rounds toward negative infinity
          return b->op == BinaryOpKind::FloorDiv ? q : *x - q * *y;
        }
        default: return std::nullopt;
      }
    }
    if (auto *c = dyn_cast<Compare>(&e)) {
      std::optional<long long> left = fold(*c->left);
      for (size_t k = 0; k < c->ops.size(); ++k) {
        std::optional<long long> right = fold(*c->comparators[k]);
        if (!left || !right) return std::nullopt;
        bool holds = false;
        switch (c->ops[k]) {
          case CompareOpKind::Lt: holds = *left < *right; break;
          case CompareOpKind::Gt: holds = *left > *right; break;
          case CompareOpKind::Eq: holds = *left == *right; break;
          case CompareOpKind::NotEq: holds = *left != *right; break;
          case CompareOpKind::LtE: holds = *left <= *right; break;
          case CompareOpKind::GtE: holds = *left >= *right; break;
          default: return std::nullopt;
        }
        if (!holds) return 0;
        left = right;
      }
      return 1;
    }
    if (auto *b = dyn_cast<BoolOp>(&e)) {
      // Python's and/or: the first operand that decides, else the last.
      for (size_t k = 0; k < b->values.size(); ++k) {
        std::optional<long long> v = fold(*b->values[k]);
        if (!v) return std::nullopt;
        if (k + 1 == b->values.size() || (b->op == BoolOpKind::And ? *v == 0 : *v != 0)) return v;
      }
    }
    return std::nullopt;
  }

  // Names whose value (as the user's code assigned it last) reads element types: conditions on them are decided
  // when Triton compiles, as ones on `X.dtype` are (keep_dtype_dispatch).
  void note_element_type_name(const Expr &target, const Expr &value) {
    auto *n = dyn_cast<Name>(&target);
    if (!n) return;
    if (reads_element_type(value)) element_type_names_.insert(n->id);
    else element_type_names_.erase(n->id);
  }

  void stmt(const Stmt &s) {
    current_origin_ = &s;
    switch (s.kind) {
      case NodeKind::Assign: {
        auto *a = cast<Assign>(&s);
        ExprPtr value = operation_or_atom(*a->value);
        if (a->targets.size() > 1) {
          // a = b = v: name v once, then copy.
          std::string name = names_.fresh(name_for(*value));
          ExprList targets;
          targets.push_back(std::make_unique<Name>(name, s.span));
          emit(std::make_unique<Assign>(std::move(targets), std::move(value), s.span));
          for (const ExprPtr &t : a->targets) assign_to(*t, std::make_unique<Name>(name, s.span), s.span);
          return;
        }
        note_element_type_name(*a->targets[0], *a->value);
        assign_to(*a->targets[0], std::move(value), s.span);
        return;
      }
      case NodeKind::AugAssign: {
        auto *a = cast<AugAssign>(&s);
        ExprPtr left = atom(*a->target);
        ExprPtr value = std::make_unique<BinOp>(a->op, std::move(left), atom(*a->value), s.span);
        assign_to(*a->target, std::move(value), s.span);
        return;
      }
      case NodeKind::AnnAssign: {
        auto *a = cast<AnnAssign>(&s);
        if (!a->value) return;
        // `BLOCK_K: tl.constexpr = triton.next_power_of_2(D)`: the annotation is
        // what makes the name a compile-time value in Triton (tl.arange needs
        // one), so the statement stays whole, annotation and all. Its value is
        // computed at compile time: nothing in it has a gradient.
        if (isa<Name>(a->target.get()) && is_constexpr_annotation(a->annotation.get())) {
          note_element_type_name(*a->target, *a->value);
          emit(std::make_unique<AnnAssign>(clone(*a->target), clone(*a->annotation), clone(*a->value), s.span));
          return;
        }
        assign_to(*a->target, operation_or_atom(*a->value), s.span);
        return;
      }
      case NodeKind::ExprStmt: {
        // Calls kept for their checks (tl.static_assert, ...); values have no effect.
        auto *e = cast<ExprStmt>(&s);
        if (isa<Call>(e->value.get())) {
          ExprPtr call = operation(*e->value);  // tl.store(P + offs, ...): the operands become names
          emit(std::make_unique<ExprStmt>(std::move(call), s.span));
        }
        return;
      }
      case NodeKind::Return: {
        auto *r = cast<Return>(&s);
        if (!r->value) fail(s.span, "an early return cannot be differentiated yet; guard the work with an if instead");
        ExprPtr value;
        // A returned expression is named `out` (`out0`, `out1`, ... in a tuple):
        // its adjoint, `bout`, is a parameter of the backward.
        if (auto *t = dyn_cast<Tuple>(r->value.get())) {
          ExprList elts;
          for (size_t k = 0; k < t->elts.size(); ++k) elts.push_back(atom(*t->elts[k], "out" + std::to_string(k)));
          value = std::make_unique<Tuple>(std::move(elts), r->value->span);
        } else {
          value = atom(*r->value, "out");
        }
        emit(std::make_unique<Return>(std::move(value), s.span));
        returned_ = true;
        return;
      }
      case NodeKind::If: {
        auto *i = cast<If>(&s);
        const sema::SType *c = type_of(*i->cond);
        if ((!c || !c->known) && !unrolled_.empty())
          if (std::optional<long long> value = fold(*i->cond)) {
            block(*value != 0 ? i->body : i->orelse);
            return;
          }
        if ((!c || !c->known) && kernel_) return runtime_if(*i);
        if (!c || !c->known)
          fail(i->cond->span, "an if on a value computed at run time cannot be differentiated in a tile function yet; "
                              "make the condition tl.constexpr (give it with -D) or use tl.where");
        if (keep_dtype_dispatch(*i)) return;
        bool taken = c->kind == sema::SType::Kind::Bool ? c->b : c->kind == sema::SType::Kind::Int ? c->n != 0
                     : c->kind != sema::SType::Kind::None;
        block(taken ? i->body : i->orelse);
        return;
      }
      case NodeKind::For:
        if (unroll_static_range(*cast<For>(&s))) return;
        if (kernel_) return runtime_loop(*cast<For>(&s));
        fail(s.span, "loops in a differentiated function are not supported yet (only tl.static_range with bounds "
                     "known before the kernel runs, which is unrolled); reverse mode for runtime loops is not "
                     "implemented");
      case NodeKind::While:
        fail(s.span, "tgrad cannot count this while loop's trips to replay it: a while loop differentiates where its "
                     "last statement steps one variable (`v += step`), its condition compares that variable with "
                     "bounds the loop does not change (`while lo <= v and v < hi:`), and nothing else assigns it "
                     "(src/ad/WhileLoops.h); otherwise write it as `for i in range(...)` with a bound");
      case NodeKind::Pass: return;
      case NodeKind::Assert: emit(clone(s)); return;
#define TGRAD_EXPR(Name) case NodeKind::Name:
#include "tgrad/ast/Nodes.def"
        return;
    }
  }

 public:
  bool returned() const { return returned_; }

 private:
  const Function &fn_;
  const sema::TypeInfo &types_;
  NameAllocator names_;
  std::map<std::string, std::string> current_;  // user name -> current SSA name
  std::set<std::string> assigned_;
  std::set<std::string> element_type_names_;  // (note_element_type_name)
  bool kernel_ = false;
  StmtList *body_ = nullptr;
  AnfFunction *out_ = nullptr;
  const Stmt *current_origin_ = nullptr;
  bool returned_ = false;
  std::map<std::string, long long> unrolled_;  // the variables of unrolled tl.static_range loops: their values
};

}  // namespace

std::optional<AnfFunction> to_anf(const Module &module, const Function &fn, const sema::TypeInfo &types,
                                  DiagEngine &diags, bool kernel) {
  Normalizer n(module, fn, types, kernel);
  try {
    AnfFunction out = n.run();
    if (!kernel && !n.returned()) {
      diags.error(fn.name_span, "'" + fn.name + "' returns nothing: a tile function to differentiate must return its result");
      return std::nullopt;
    }
    return out;
  } catch (const AnfError &e) {
    diags.error(e.span, e.message);
    return std::nullopt;
  }
}

}  // namespace tgrad::ad
