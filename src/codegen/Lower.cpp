// Statements and expressions of a typed kernel, lowered to LLVM IR.
//
// Variables live in entry-block allocas (one per register of their tile),
// which mem2reg turns into SSA values: loops and ifs need no phi nodes here.
// Values Triton knows when it compiles (constexpr numbers, dtypes, decided
// conditions) come from sema's types, never from the IR.
#include "src/codegen/Lower.h"

#include <cmath>

namespace tgrad::codegen {

using ast::BinaryOpKind;
using ast::CompareOpKind;
using sema::DType;
using sema::ElemType;
using sema::SType;

void unsupported(SourceSpan span, const std::string &what) {
  throw Unsupported{span, what + " is not supported by the PTX backend yet"};
}

std::vector<int64_t> broadcast_shapes_of(std::vector<int64_t> a, std::vector<int64_t> b, SourceSpan span) {
  if (a.size() < b.size()) std::swap(a, b);
  std::vector<int64_t> out = a;
  for (size_t k = 0; k < b.size(); ++k) {
    int64_t &o = out[a.size() - b.size() + k];
    const int64_t d = b[k];
    if (o == d || d == 1) continue;
    if (o == 1) {
      o = d;
      continue;
    }
    throw Unsupported{span, "shapes that do not broadcast"};
  }
  return out;
}

namespace {

Pattern meet(Pattern a, Pattern b) { return a == b ? a : Pattern::Unknown; }

}  // namespace

Lowering::Lowering(Emitter &emitter, const ast::Module &module, const sema::TypeInfo &types,
                   const std::map<std::string, Pattern> &pinned)
    : e_(emitter), b_(emitter.builder()), module_(module), types_(types), pinned_(pinned) {}

// ------------------------------------------------------------- statements

void Lowering::bind(const std::string &name, const Tile &value) { store_var(name, value); }

void Lowering::note_scalar_types(const ast::StmtList &body, bool in_loop) {
  for (const auto &st : body) {
    const ast::Expr *target = nullptr;
    if (const auto *a = ast::dyn_cast<ast::Assign>(st.get()); a && a->targets.size() == 1) target = a->targets[0].get();
    if (const auto *a = ast::dyn_cast<ast::AugAssign>(st.get())) target = a->target.get();
    if (const auto *n = ast::dyn_cast<ast::Name>(target)) {
      const SType *t = types_.type_of(n);
      if (t && t->is_tensor() && t->shape.empty() && !t->elem.is_pointer) scalar_types_[n->id] = *t;
      // A number a runtime loop (or a runtime if) assigns is a runtime scalar to Triton, whatever value sema
      // gave it after one pass over the body (`i = 0` ... `while i < n: i += 1`).
      if (t && in_loop && (t->kind == SType::Kind::Int || t->kind == SType::Kind::Float)) {
        loop_numbers_.insert(n->id);
        scalar_types_.emplace(n->id,
                              SType::tensor({t->kind == SType::Kind::Int ? DType::Int32 : DType::FP32, false}, {}));
      }
    }
    if (const auto *i = ast::dyn_cast<ast::If>(st.get())) {
      // A number a runtime if assigns differs by path, as one a loop assigns differs by iteration.
      const SType *c = types_.type_of(i->cond.get());
      const bool runtime = !(c && (sema::known_truth(*c) || c->kind == SType::Kind::None));
      note_scalar_types(i->body, in_loop || runtime);
      note_scalar_types(i->orelse, in_loop || runtime);
    } else if (const auto *f = ast::dyn_cast<ast::For>(st.get())) {
      const auto *call = ast::dyn_cast<ast::Call>(f->iter.get());
      const SType *callee = call ? types_.type_of(call->func.get()) : nullptr;
      note_scalar_types(f->body, in_loop || !(callee && callee->s == "tl.static_range"));
    } else if (const auto *w = ast::dyn_cast<ast::While>(st.get())) {
      note_scalar_types(w->body, true);
    }
  }
}

std::optional<double> Lowering::constexpr_value(const ast::Expr &e, bool &is_int) const {
  if (const SType *t = types_.type_of(&e); t && t->known) {
    if (t->kind == SType::Kind::Int) {
      is_int = true;
      return static_cast<double>(t->n);
    }
    if (t->kind == SType::Kind::Float) {
      is_int = false;
      return t->x;
    }
  }
  if (const auto *n = ast::dyn_cast<ast::Name>(&e)) {
    auto it = unrolled_.find(n->id);
    if (it == unrolled_.end()) return std::nullopt;
    is_int = true;
    return static_cast<double>(it->second);
  }
  if (const auto *u = ast::dyn_cast<ast::UnaryOp>(&e); u && u->op == ast::UnaryOpKind::Neg) {
    std::optional<double> v = constexpr_value(*u->operand, is_int);
    if (v) return -*v;
    return std::nullopt;
  }
  const auto *b = ast::dyn_cast<ast::BinOp>(&e);
  if (!b) return std::nullopt;
  bool li = false, ri = false;
  std::optional<double> l = constexpr_value(*b->lhs, li), r = constexpr_value(*b->rhs, ri);
  if (!l || !r) return std::nullopt;
  is_int = li && ri;
  switch (b->op) {
    case BinaryOpKind::Add: return *l + *r;
    case BinaryOpKind::Sub: return *l - *r;
    case BinaryOpKind::Mul: return *l * *r;
    case BinaryOpKind::Div: is_int = false; return *r == 0 ? std::nullopt : std::optional<double>(*l / *r);
    case BinaryOpKind::FloorDiv: return *r == 0 ? std::nullopt : std::optional<double>(std::floor(*l / *r));
    default: return std::nullopt;
  }
}

bool Lowering::reads_loop_number(const ast::Expr &e) const {
  if (loop_numbers_.empty()) return false;
  if (const auto *n = ast::dyn_cast<ast::Name>(&e)) return loop_numbers_.count(n->id) > 0;
  if (const auto *b = ast::dyn_cast<ast::BinOp>(&e)) return reads_loop_number(*b->lhs) || reads_loop_number(*b->rhs);
  if (const auto *u = ast::dyn_cast<ast::UnaryOp>(&e)) return reads_loop_number(*u->operand);
  if (const auto *c = ast::dyn_cast<ast::Compare>(&e)) {
    bool any = reads_loop_number(*c->left);
    for (const auto &x : c->comparators) any |= reads_loop_number(*x);
    return any;
  }
  if (const auto *b = ast::dyn_cast<ast::BoolOp>(&e)) {
    bool any = false;
    for (const auto &x : b->values) any |= reads_loop_number(*x);
    return any;
  }
  if (const auto *i = ast::dyn_cast<ast::IfExp>(&e))
    return reads_loop_number(*i->cond) || reads_loop_number(*i->then_value) || reads_loop_number(*i->else_value);
  if (const auto *c = ast::dyn_cast<ast::Call>(&e)) {
    bool any = false;
    for (const auto &x : c->args) any |= reads_loop_number(*x);
    for (const auto &k : c->keywords) any |= reads_loop_number(*k.value);
    return any;
  }
  return false;
}

Tile Lowering::runtime_number(const ast::Expr &e) {
  if (const auto *n = ast::dyn_cast<ast::Name>(&e)) {
    if (vars_.count(n->id)) return read_var(*n);
    return python_tile(type(e), e.span);
  }
  if (!reads_loop_number(e)) return eval(e);
  if (const auto *b = ast::dyn_cast<ast::BinOp>(&e)) {
    Operand l = operand(*b->lhs), r = operand(*b->rhs);
    std::string error;
    const bool div = b->op == BinaryOpKind::Div || b->op == BinaryOpKind::Mod;
    std::optional<DType> c = sema::computation_type(l.dtype, l.python, r.dtype, r.python, div, error);
    if (!c) throw Unsupported{e.span, error};
    const DType d = b->op == BinaryOpKind::Div && !sema::is_float(*c) ? DType::FP32 : *c;
    return binop(b->op, l, r, SType::tensor({d, false}, {}), e.span);
  }
  if (const auto *c = ast::dyn_cast<ast::Compare>(&e); c && c->ops.size() == 1)
    return compare(c->ops[0], operand(*c->left), operand(*c->comparators[0]), {}, e.span);
  if (const auto *u = ast::dyn_cast<ast::UnaryOp>(&e); u && u->op == ast::UnaryOpKind::Neg) {
    Tile x = runtime_number(*u->operand);
    const bool fp = sema::is_float(x.elem.dtype);
    return e_.map(x, x.elem, [&](llvm::Value *v) { return fp ? b_.CreateFNeg(v) : b_.CreateNeg(v); });
  }
  unsupported(e.span, "this expression on a number a loop changes");
}

void Lowering::lower_kernel(const ast::Function &fn) {
  note_scalar_types(fn.body, false);
  exit_ = llvm::BasicBlock::Create(e_.context(), "exit", e_.kernel());
  lower_block(fn.body);
  b_.CreateBr(exit_);
  b_.SetInsertPoint(exit_);
  b_.CreateRetVoid();
}

void Lowering::lower_block(const ast::StmtList &body) {
  for (const auto &s : body) lower_stmt(*s);
}

void Lowering::lower_stmt(const ast::Stmt &s) {
  using ast::NodeKind;
  switch (s.kind) {
    case NodeKind::ExprStmt: {
      const ast::Expr &v = *ast::cast<ast::ExprStmt>(&s)->value;
      if (ast::isa<ast::StrLit>(&v)) return;  // a docstring
      if (const auto *c = ast::dyn_cast<ast::Call>(&v)) {
        call(*c);
        return;
      }
      eval(v);
      return;
    }
    case NodeKind::Assign: {
      const auto *a = ast::cast<ast::Assign>(&s);
      for (const auto &t : a->targets) assign(*t, *a->value);
      return;
    }
    case NodeKind::AnnAssign: {
      const auto *a = ast::cast<ast::AnnAssign>(&s);
      if (a->value) assign(*a->target, *a->value);
      return;
    }
    case NodeKind::AugAssign: {
      const auto *a = ast::cast<ast::AugAssign>(&s);
      const auto *name = ast::dyn_cast<ast::Name>(a->target.get());
      if (!name) unsupported(a->target->span, "an augmented assignment to anything but a name");
      SType result = type(*a->target);
      if (!result.is_tensor() || loop_numbers_.count(name->id)) {
        auto scalar = scalar_types_.find(name->id);
        if (scalar == scalar_types_.end() || !vars_.count(name->id)) {
          if (!result.is_tensor()) return;  // a constexpr, known from sema
        } else if (!result.is_tensor()) {
          result = scalar->second;
        }
      }
      Operand l;
      l.tile = read_var(*name);
      l.dtype = l.tile.elem.dtype;
      Tile v = binop(a->op, l, operand(*a->value), result, a->span);
      store_var(name->id, v);
      return;
    }
    case NodeKind::If: lower_if(*ast::cast<ast::If>(&s)); return;
    case NodeKind::For: lower_for(*ast::cast<ast::For>(&s)); return;
    case NodeKind::While: lower_while(*ast::cast<ast::While>(&s)); return;
    case NodeKind::Return: {
      const auto *r = ast::cast<ast::Return>(&s);
      if (returned_) {
        // An inlined helper: only its last statement returns (Builtins.cpp checks).
        if (r->value) *returned_ = eval_multi(*r->value);
        return;
      }
      if (r->value) unsupported(r->span, "a kernel that returns a value");
      b_.CreateBr(exit_);
      // What follows a return is unreachable; LLVM drops it.
      b_.SetInsertPoint(llvm::BasicBlock::Create(e_.context(), "after_return", e_.kernel()));
      return;
    }
    case NodeKind::Pass: return;
    case NodeKind::Assert: return;  // Python asserts: Triton checks them only when it compiles
    default: unsupported(s.span, std::string("the statement '") + ast::kind_name(s.kind) + "'");
  }
}

void Lowering::assign(const ast::Expr &target, const ast::Expr &value) {
  if (const auto *name = ast::dyn_cast<ast::Name>(&target)) {
    const SType &t = type(target);
    if (!t.is_tensor()) {
      // A Python number the kernel later holds as a scalar tensor (`count = 0` before `count += n`): stored
      // in that tensor's type. Any other constexpr, dtype, None or tuple: sema knows it at every use.
      auto scalar = scalar_types_.find(name->id);
      if (scalar != scalar_types_.end() &&
          (t.kind == SType::Kind::Int || t.kind == SType::Kind::Float || t.kind == SType::Kind::Bool)) {
        store_var(name->id,
                  e_.splat(scalar->second.elem, {}, materialize(operand(value), scalar->second.elem.dtype).regs[0]));
        return;
      }
      const SType &v = type(value);
      if (v.kind == SType::Kind::Unknown) unsupported(value.span, "a value of unknown type");
      return;
    }
    Tile v = eval_as(value, t.elem, shape_of(t, target.span));
    store_var(name->id, v);
    return;
  }
  if (const auto *tuple = ast::dyn_cast<ast::Tuple>(&target)) {
    std::vector<Tile> values;
    if (const auto *vt = ast::dyn_cast<ast::Tuple>(&value)) {
      if (vt->elts.size() != tuple->elts.size()) unsupported(value.span, "unpacking a tuple of another length");
      // Every value first, as Python does (`a, b = b, a`).
      std::vector<std::pair<const ast::Expr *, Tile>> pending;
      for (size_t k = 0; k < tuple->elts.size(); ++k) {
        const SType &t = type(*tuple->elts[k]);
        if (!t.is_tensor()) continue;
        pending.emplace_back(tuple->elts[k].get(), eval_as(*vt->elts[k], t.elem, shape_of(t, tuple->elts[k]->span)));
      }
      for (auto &[t, v] : pending) {
        const auto *n = ast::dyn_cast<ast::Name>(t);
        if (!n) unsupported(t->span, "assigning to anything but a name");
        store_var(n->id, v);
      }
      return;
    }
    values = eval_multi(value);
    if (values.size() != tuple->elts.size()) unsupported(value.span, "unpacking a tuple of another length");
    for (size_t k = 0; k < values.size(); ++k) {
      const auto *n = ast::dyn_cast<ast::Name>(tuple->elts[k].get());
      if (!n) unsupported(tuple->elts[k]->span, "assigning to anything but a name");
      const SType &t = type(*n);
      if (!t.is_tensor()) continue;
      Tile v = e_.broadcast(e_.cast(values[k], t.elem), shape_of(t, n->span));
      store_var(n->id, v);
    }
    return;
  }
  unsupported(target.span, "assigning to a subscript or an attribute");
}

void Lowering::store_var(const std::string &name, Tile value) {
  auto it = vars_.find(name);
  if (it == vars_.end() || it->second.elem != value.elem || it->second.shape != value.shape) {
    Var v;
    v.elem = value.elem;
    v.shape = value.shape;
    llvm::Type *t = e_.type_of(value.elem);
    for (size_t r = 0; r < value.regs.size(); ++r) v.slots.push_back(e_.entry_alloca(t, name));
    for (size_t c = 0; c < value.limits.size(); ++c) v.limit_slots.push_back(e_.entry_alloca(b_.getInt32Ty(), name));
    auto pin = pinned_.find(name);
    v.pattern = pin == pinned_.end() ? value.pattern : meet(pin->second, value.pattern);
    it = vars_.insert_or_assign(name, std::move(v)).first;
  }
  Var &v = it->second;
  const Pattern p = meet(v.pattern, value.pattern);
  if (p != v.pattern) {
    // Reads before this store assumed the stronger pattern: lower again.
    if (v.read) weakened_[name] = p;
    v.pattern = p;
  }
  for (size_t r = 0; r < value.regs.size(); ++r) b_.CreateStore(value.regs[r], v.slots[r]);
  if (v.pattern == Pattern::Prefix)
    for (size_t c = 0; c < v.limit_slots.size(); ++c) b_.CreateStore(value.limits[c], v.limit_slots[c]);
}

llvm::Value *Lowering::scalar_condition(const ast::Expr &cond) {
  const SType &t = type(cond);
  if (!t.is_tensor() && !reads_loop_number(cond)) unsupported(cond.span, "a condition of unknown value");
  Tile c = t.is_tensor() ? eval(cond) : runtime_number(cond);
  if (c.numel() != 1) unsupported(cond.span, "a condition on a tile of several elements");
  return e_.truth(c.regs[0], c.elem);
}

void Lowering::lower_if(const ast::If &s) {
  if (std::optional<bool> known = sema::known_truth(type(*s.cond)); known && !reads_loop_number(*s.cond)) {
    lower_block(*known ? s.body : s.orelse);
    return;
  }
  if (type(*s.cond).kind == SType::Kind::None) {
    lower_block(s.orelse);
    return;
  }
  llvm::Value *c = scalar_condition(*s.cond);
  llvm::Function *f = e_.kernel();
  llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(e_.context(), "if", f);
  llvm::BasicBlock *else_bb = llvm::BasicBlock::Create(e_.context(), "else", f);
  llvm::BasicBlock *merge = llvm::BasicBlock::Create(e_.context(), "endif", f);
  b_.CreateCondBr(c, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  lower_block(s.body);
  b_.CreateBr(merge);
  b_.SetInsertPoint(else_bb);
  lower_block(s.orelse);
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
}

void Lowering::lower_for(const ast::For &s) {
  const auto *target = ast::dyn_cast<ast::Name>(s.target.get());
  const auto *iter = ast::dyn_cast<ast::Call>(s.iter.get());
  const SType *callee = iter ? types_.type_of(iter->func.get()) : nullptr;
  const bool is_range = callee && callee->kind == SType::Kind::Builtin &&
                        (callee->s == "range" || callee->s == "tl.range" || callee->s == "tl.static_range");
  if (!target || !is_range) unsupported(s.iter->span, "a loop over anything but range(...)");
  std::vector<const ast::Expr *> args;
  for (const auto &a : iter->args) args.push_back(a.get());
  if (args.empty() || args.size() > 3) unsupported(iter->span, "range() with these arguments");
  if (callee->s == "tl.static_range") {
    // Unrolled, as Triton does: the variable is a constant in each copy of the body.
    std::vector<long long> bounds;
    for (const ast::Expr *a : args) {
      bool is_int = false;
      std::optional<double> v = constexpr_value(*a, is_int);
      if (!v || !is_int) unsupported(a->span, "a tl.static_range bound that is not a known integer");
      bounds.push_back(static_cast<long long>(*v));
    }
    const long long lo = bounds.size() == 1 ? 0 : bounds[0], hi = bounds.size() == 1 ? bounds[0] : bounds[1];
    const long long st = bounds.size() == 3 ? bounds[2] : 1;
    if (st == 0) unsupported(iter->span, "a tl.static_range with step 0");
    for (long long k = lo; st > 0 ? k < hi : k > hi; k += st) {
      unrolled_[target->id] = k;
      lower_block(s.body);
    }
    unrolled_.erase(target->id);
    return;
  }
  // The loop variable's type: int32, or int64 where a bound is.
  DType d = DType::Int32;
  std::vector<Operand> ops;
  for (const ast::Expr *a : args) {
    ops.push_back(operand(*a));
    if (!ops.back().python && ops.back().dtype == DType::Int64) d = DType::Int64;
    if (!ops.back().python && !sema::is_integer(ops.back().dtype)) unsupported(a->span, "range() over non-integers");
  }
  const ElemType et{d, false};
  llvm::Value *start = args.size() == 1 ? e_.constant(d, 0, 0) : materialize(ops[0], d).regs[0];
  llvm::Value *stop = materialize(ops[args.size() == 1 ? 0 : 1], d).regs[0];
  llvm::Value *step = args.size() == 3 ? materialize(ops[2], d).regs[0] : e_.constant(d, 0, 1);
  llvm::AllocaInst *iv = e_.entry_alloca(e_.type_of(et), "iv");
  b_.CreateStore(start, iv);
  llvm::Function *f = e_.kernel();
  llvm::BasicBlock *head = llvm::BasicBlock::Create(e_.context(), "for", f);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(e_.context(), "for_body", f);
  llvm::BasicBlock *done = llvm::BasicBlock::Create(e_.context(), "for_end", f);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::Value *i = b_.CreateLoad(e_.type_of(et), iv);
  // A step known to be positive (the common case) compares one way only.
  llvm::Value *up = b_.CreateICmpSLT(i, stop), *down = b_.CreateICmpSGT(i, stop);
  llvm::Value *going = b_.CreateSelect(b_.CreateICmpSGT(step, e_.constant(d, 0, 0)), up, down);
  b_.CreateCondBr(going, body, done);
  b_.SetInsertPoint(body);
  store_var(target->id, e_.splat(et, {}, i));
  lower_block(s.body);
  b_.CreateStore(b_.CreateAdd(b_.CreateLoad(e_.type_of(et), iv), step), iv);
  b_.CreateBr(head);
  b_.SetInsertPoint(done);
}

void Lowering::lower_while(const ast::While &s) {
  llvm::Function *f = e_.kernel();
  llvm::BasicBlock *head = llvm::BasicBlock::Create(e_.context(), "while", f);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(e_.context(), "while_body", f);
  llvm::BasicBlock *done = llvm::BasicBlock::Create(e_.context(), "while_end", f);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  std::optional<bool> known = sema::known_truth(type(*s.cond));
  if (reads_loop_number(*s.cond)) known.reset();
  if (known && !*known) {
    b_.CreateBr(done);
  } else {
    b_.CreateCondBr(known ? b_.getTrue() : scalar_condition(*s.cond), body, done);
  }
  b_.SetInsertPoint(body);
  lower_block(s.body);
  b_.CreateBr(head);
  b_.SetInsertPoint(done);
}

// ------------------------------------------------------------ expressions

const SType &Lowering::type(const ast::Expr &e) const {
  const SType *t = types_.type_of(&e);
  if (!t) throw Unsupported{e.span, "an expression tgrad could not type"};
  return *t;
}

std::vector<int64_t> Lowering::shape_of(const SType &t, SourceSpan span) const {
  std::vector<int64_t> shape;
  for (const sema::Dim &d : t.shape) {
    if (!d.value)
      throw Unsupported{span, "a tile whose shape '" + sema::shape_str(t.shape) + "' is not known: give -D"};
    shape.push_back(*d.value);
  }
  return shape;
}

Tile Lowering::python_tile(const SType &t, SourceSpan span) {
  if (t.kind == SType::Kind::Int && t.known) {
    DType d = sema::python_int_dtype(t.n);
    return e_.splat({d, false}, {}, e_.constant(d, 0, t.n));
  }
  if (t.kind == SType::Kind::Float && t.known)
    return e_.splat({DType::FP32, false}, {}, e_.constant(DType::FP32, t.x, 0));
  if (t.kind == SType::Kind::Bool && t.known)
    return e_.splat({DType::Int1, false}, {}, e_.constant(DType::Int1, 0, t.b));
  unsupported(span, "a value of type '" + t.str() + "' where a tensor is needed");
}

Tile Lowering::python_value(const ast::Expr &e) {
  const SType &t = type(e);
  if (reads_loop_number(e)) return runtime_number(e);
  if (t.known || (t.kind != SType::Kind::Int && t.kind != SType::Kind::Float)) return python_tile(t, e.span);
  Operand o = operand(e);
  return o.python ? materialize(o, o.dtype) : o.tile;
}

Tile Lowering::eval_as(const ast::Expr &e, ElemType elem, const std::vector<int64_t> &shape) {
  const SType &t = type(e);
  if (!t.is_tensor()) {
    Operand o = operand(e);
    return e_.broadcast(materialize(o, elem.dtype), shape);
  }
  return e_.broadcast(e_.cast(eval(e), elem), shape);
}

Tile Lowering::read_var(const ast::Name &n) {
  auto it = vars_.find(n.id);
  if (it == vars_.end()) unsupported(n.span, "the name '" + n.id + "' here");
  Var &v = it->second;
  v.read = true;
  Tile t{v.elem, v.shape, {}, v.pattern};
  llvm::Type *ty = e_.type_of(v.elem);
  for (llvm::AllocaInst *slot : v.slots) t.regs.push_back(b_.CreateLoad(ty, slot, n.id));
  if (v.pattern == Pattern::Prefix)
    for (llvm::AllocaInst *slot : v.limit_slots) t.limits.push_back(b_.CreateLoad(b_.getInt32Ty(), slot, n.id));
  return t;
}

Tile Lowering::eval(const ast::Expr &e) {
  const SType &t = type(e);
  if (!t.is_tensor()) return python_value(e);
  using ast::NodeKind;
  Tile out;
  switch (e.kind) {
    case NodeKind::Name: out = read_var(*ast::cast<ast::Name>(&e)); break;
    case NodeKind::BinOp: {
      const auto *op = ast::cast<ast::BinOp>(&e);
      out = binop(op->op, operand(*op->lhs), operand(*op->rhs), t, e.span);
      break;
    }
    case NodeKind::Compare: {
      const auto *c = ast::cast<ast::Compare>(&e);
      if (c->ops.size() != 1) unsupported(e.span, "a chained comparison");
      out = compare(c->ops[0], operand(*c->left), operand(*c->comparators[0]), shape_of(t, e.span), e.span);
      break;
    }
    case NodeKind::UnaryOp: out = unary(*ast::cast<ast::UnaryOp>(&e)); break;
    case NodeKind::BoolOp: {
      const auto *op = ast::cast<ast::BoolOp>(&e);
      if (t.elem != ElemType{DType::Int1, false}) unsupported(e.span, "'and' / 'or' on values that are not bools");
      const std::vector<int64_t> shape = shape_of(t, e.span);
      out = eval_as(*op->values[0], t.elem, shape);
      for (size_t k = 1; k < op->values.size(); ++k) {
        Tile next = eval_as(*op->values[k], t.elem, shape);
        out = e_.zip(out, next, t.elem, [&](llvm::Value *a, llvm::Value *b) {
          return op->op == ast::BoolOpKind::And ? b_.CreateAnd(a, b) : b_.CreateOr(a, b);
        });
      }
      break;
    }
    case NodeKind::IfExp: out = if_exp(*ast::cast<ast::IfExp>(&e)); break;
    case NodeKind::Subscript: out = subscript(*ast::cast<ast::Subscript>(&e)); break;
    case NodeKind::Call: {
      std::vector<Tile> values = call(*ast::cast<ast::Call>(&e));
      if (values.size() != 1) unsupported(e.span, "a call that returns several values here");
      out = values[0];
      break;
    }
    default: unsupported(e.span, std::string("the expression '") + ast::kind_name(e.kind) + "'");
  }
  // What sema says it is (a Python number promoted by an assignment, a scalar given a shape).
  if (out.elem != t.elem) out = e_.cast(out, t.elem);
  const std::vector<int64_t> shape = shape_of(t, e.span);
  if (out.shape != shape) out = e_.broadcast(out, shape);
  return out;
}

std::vector<Tile> Lowering::eval_multi(const ast::Expr &e) {
  if (const auto *t = ast::dyn_cast<ast::Tuple>(&e)) {
    std::vector<Tile> values;
    for (const auto &x : t->elts) values.push_back(eval(*x));
    return values;
  }
  if (const auto *c = ast::dyn_cast<ast::Call>(&e)) return call(*c);
  return {eval(e)};
}

Lowering::Operand Lowering::operand(const ast::Expr &e) {
  const SType &t = type(e);
  Operand o;
  if (t.is_tensor() || reads_loop_number(e)) {
    o.tile = t.is_tensor() ? eval(e) : runtime_number(e);
    o.dtype = o.tile.elem.dtype;
    return o;
  }
  o.python = true;
  if (t.kind == SType::Kind::Int && t.known) {
    o.n = t.n;
    o.x = static_cast<double>(t.n);
    o.dtype = sema::python_int_dtype(t.n);
  } else if (t.kind == SType::Kind::Float && t.known) {
    o.x = t.x;
    o.dtype = sema::python_float_dtype(t.x);
  } else if (t.kind == SType::Kind::Bool && t.known) {
    o.n = t.b;
    o.x = t.b;
    o.dtype = DType::Int1;
  } else if (bool is_int = false; std::optional<double> v = constexpr_value(e, is_int)) {
    o.x = *v;
    o.n = static_cast<long long>(*v);
    o.dtype = is_int ? sema::python_int_dtype(o.n) : sema::python_float_dtype(o.x);
  } else {
    unsupported(e.span, "a value of type '" + t.str() + "' in arithmetic");
  }
  return o;
}

Tile Lowering::materialize(const Operand &o, DType d) {
  if (!o.python) return e_.cast(o.tile, {d, false});
  const bool from_float = o.dtype == DType::FP32 || o.dtype == DType::FP64;
  if (sema::is_float(d)) return e_.splat({d, false}, {}, e_.constant(d, o.x, 0));
  return e_.splat({d, false}, {}, e_.constant(d, 0, from_float ? static_cast<long long>(o.x) : o.n));
}

Tile Lowering::binop(BinaryOpKind op, const Operand &l, const Operand &r, const SType &result, SourceSpan span) {
  const std::vector<int64_t> shape = shape_of(result, span);
  if (op == BinaryOpKind::MatMul) unsupported(span, "'@' (tl.dot)");
  if (op == BinaryOpKind::Pow) unsupported(span, "'**' on tensors");
  if (result.elem.is_pointer) {
    const bool lp = !l.python && l.tile.elem.is_pointer;
    const Operand &po = lp ? l : r, &oo = lp ? r : l;
    if (op != BinaryOpKind::Add && !(op == BinaryOpKind::Sub && lp)) unsupported(span, "this pointer arithmetic");
    Tile p = e_.broadcast(po.tile, shape);
    Tile off = e_.broadcast(materialize(oo, oo.python ? DType::Int64 : oo.dtype), shape);
    if (!sema::is_integer(off.elem.dtype)) unsupported(span, "a pointer offset that is not an integer");
    off = e_.cast(off, {DType::Int64, false});
    llvm::Type *elem = e_.type_of(ElemType{result.elem.dtype, false});
    if (elem->isIntegerTy(1)) elem = b_.getInt8Ty();
    Tile out{result.elem, shape, {}, Pattern::Unknown};
    for (size_t k = 0; k < p.regs.size(); ++k) {
      llvm::Value *o = op == BinaryOpKind::Sub ? b_.CreateNeg(off.regs[k]) : off.regs[k];
      out.regs.push_back(b_.CreateGEP(elem, p.regs[k], o));
    }
    if (p.pattern == Pattern::ChunkUniform &&
        (off.pattern == Pattern::ChunkUniform || (off.pattern == Pattern::Contiguous && op == BinaryOpKind::Add)))
      out.pattern = off.pattern;
    else if (p.pattern == Pattern::Contiguous && off.pattern == Pattern::ChunkUniform)
      out.pattern = Pattern::Contiguous;
    return out;
  }
  std::string error;
  const bool div = op == BinaryOpKind::Div || op == BinaryOpKind::Mod;
  std::optional<DType> compute = sema::computation_type(l.dtype, l.python, r.dtype, r.python, div, error);
  if (!compute) throw Unsupported{span, error};
  DType c = *compute;
  // Integers divide in fp32 (Triton's true division).
  if (op == BinaryOpKind::Div && !sema::is_float(c)) c = DType::FP32;
  Tile a = e_.broadcast(materialize(l, c), shape), bt = e_.broadcast(materialize(r, c), shape);
  const bool fp = sema::is_float(c), sign = sema::is_signed(c) && c != DType::Int1;
  auto f = [&](llvm::Value *x, llvm::Value *y) -> llvm::Value * {
    switch (op) {
      case BinaryOpKind::Add: return fp ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y);
      case BinaryOpKind::Sub: return fp ? b_.CreateFSub(x, y) : b_.CreateSub(x, y);
      case BinaryOpKind::Mul: return fp ? b_.CreateFMul(x, y) : b_.CreateMul(x, y);
      case BinaryOpKind::Div: return c == DType::FP32 ? e_.divide_full(x, y) : b_.CreateFDiv(x, y);
      case BinaryOpKind::FloorDiv:
        if (fp) unsupported(span, "'//' on floating-point values");
        return sign ? b_.CreateSDiv(x, y) : b_.CreateUDiv(x, y);
      case BinaryOpKind::Mod: return fp ? b_.CreateFRem(x, y) : sign ? b_.CreateSRem(x, y) : b_.CreateURem(x, y);
      case BinaryOpKind::LShift: return b_.CreateShl(x, y);
      case BinaryOpKind::RShift: return sign ? b_.CreateAShr(x, y) : b_.CreateLShr(x, y);
      case BinaryOpKind::BitAnd: return b_.CreateAnd(x, y);
      case BinaryOpKind::BitOr: return b_.CreateOr(x, y);
      case BinaryOpKind::BitXor: return b_.CreateXor(x, y);
      default: unsupported(span, std::string("'") + ast::spelling(op) + "'");
    }
  };
  if (fp && (op == BinaryOpKind::LShift || op == BinaryOpKind::RShift || op == BinaryOpKind::BitAnd ||
             op == BinaryOpKind::BitOr || op == BinaryOpKind::BitXor))
    unsupported(span, "bitwise operations on floating-point values");
  Tile out = e_.zip(a, bt, {c, false}, f);
  if (op == BinaryOpKind::BitAnd && c == DType::Int1) e_.and_prefix(out, a, bt);
  if (op == BinaryOpKind::Add || op == BinaryOpKind::Sub) {
    const bool sub = op == BinaryOpKind::Sub;
    if (a.pattern == Pattern::Contiguous && bt.pattern == Pattern::ChunkUniform) out.pattern = Pattern::Contiguous;
    if (!sub && a.pattern == Pattern::ChunkUniform && bt.pattern == Pattern::Contiguous)
      out.pattern = Pattern::Contiguous;
  }
  if (!sema::is_integer(c) && out.pattern == Pattern::Contiguous) out.pattern = Pattern::Unknown;
  return e_.cast(out, result.elem);
}

Tile Lowering::compare(CompareOpKind op, const Operand &l, const Operand &r, const std::vector<int64_t> &shape,
                       SourceSpan span) {
  DType c;
  const bool lp = !l.python && l.tile.elem.is_pointer, rp = !r.python && r.tile.elem.is_pointer;
  if (lp || rp) {
    c = DType::Int64;
  } else {
    std::string error;
    std::optional<DType> compute = sema::computation_type(l.dtype, l.python, r.dtype, r.python, false, error);
    if (!compute) throw Unsupported{span, error};
    c = *compute;
  }
  Tile a = e_.broadcast(lp ? e_.cast(l.tile, {DType::Int64, false}) : materialize(l, c), shape);
  Tile bt = e_.broadcast(rp ? e_.cast(r.tile, {DType::Int64, false}) : materialize(r, c), shape);
  const bool fp = sema::is_float(c), sign = sema::is_signed(c) && c != DType::Int1;
  using P = llvm::CmpInst::Predicate;
  P pred;
  switch (op) {
    case CompareOpKind::Lt: pred = fp ? P::FCMP_OLT : sign ? P::ICMP_SLT : P::ICMP_ULT; break;
    case CompareOpKind::LtE: pred = fp ? P::FCMP_OLE : sign ? P::ICMP_SLE : P::ICMP_ULE; break;
    case CompareOpKind::Gt: pred = fp ? P::FCMP_OGT : sign ? P::ICMP_SGT : P::ICMP_UGT; break;
    case CompareOpKind::GtE: pred = fp ? P::FCMP_OGE : sign ? P::ICMP_SGE : P::ICMP_UGE; break;
    case CompareOpKind::Eq: pred = fp ? P::FCMP_OEQ : P::ICMP_EQ; break;
    case CompareOpKind::NotEq: pred = fp ? P::FCMP_UNE : P::ICMP_NE; break;
    default: unsupported(span, std::string("the comparison '") + ast::spelling(op) + "' on tensors");
  }
  Tile out =
      e_.zip(a, bt, {DType::Int1, false}, [&](llvm::Value *x, llvm::Value *y) { return b_.CreateCmp(pred, x, y); });
  // A ragged row's mask (`cols < N`): lanes on up to a count in each chunk.
  const bool less = op == CompareOpKind::Lt || op == CompareOpKind::LtE;
  const bool greater = op == CompareOpKind::Gt || op == CompareOpKind::GtE;
  if ((c == DType::Int32 || c == DType::Int64) && (less || greater)) {
    const Tile &low = less ? a : bt, &high = less ? bt : a;
    if (low.pattern == Pattern::Contiguous && high.pattern == Pattern::ChunkUniform)
      e_.mark_prefix(out, low, high, op == CompareOpKind::LtE || op == CompareOpKind::GtE);
  }
  return out;
}

Tile Lowering::unary(const ast::UnaryOp &u) {
  const SType &t = type(u);
  const std::vector<int64_t> shape = shape_of(t, u.span);
  switch (u.op) {
    case ast::UnaryOpKind::Pos: return eval_as(*u.operand, t.elem, shape);
    case ast::UnaryOpKind::Neg: {
      Tile x = eval_as(*u.operand, t.elem, shape);
      const bool fp = sema::is_float(t.elem.dtype);
      return e_.map(x, t.elem, [&](llvm::Value *v) { return fp ? b_.CreateFNeg(v) : b_.CreateNeg(v); });
    }
    case ast::UnaryOpKind::Not: {
      Tile x = eval(*u.operand);
      Tile c = e_.map(x, {DType::Int1, false}, [&](llvm::Value *v) { return b_.CreateNot(e_.truth(v, x.elem)); });
      return e_.cast(c, t.elem);
    }
    case ast::UnaryOpKind::Invert: {
      Tile x = eval_as(*u.operand, t.elem, shape);
      if (!sema::is_integer(t.elem.dtype)) unsupported(u.span, "'~' on a value that is not an integer");
      return e_.map(x, t.elem, [&](llvm::Value *v) { return b_.CreateNot(v); });
    }
  }
  unsupported(u.span, "this unary operator");
}

Tile Lowering::if_exp(const ast::IfExp &x) {
  const SType &t = type(x);
  const std::vector<int64_t> shape = shape_of(t, x.span);
  if (std::optional<bool> known = sema::known_truth(type(*x.cond)); known && !reads_loop_number(*x.cond))
    return eval_as(*known ? *x.then_value : *x.else_value, t.elem, shape);
  // A runtime condition: only the branch taken runs (it may load).
  llvm::Value *c = scalar_condition(*x.cond);
  llvm::Function *f = e_.kernel();
  llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(e_.context(), "ifexp", f);
  llvm::BasicBlock *else_bb = llvm::BasicBlock::Create(e_.context(), "ifexp_else", f);
  llvm::BasicBlock *merge = llvm::BasicBlock::Create(e_.context(), "ifexp_end", f);
  b_.CreateCondBr(c, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  Tile a = eval_as(*x.then_value, t.elem, shape);
  llvm::BasicBlock *then_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(else_bb);
  Tile bt = eval_as(*x.else_value, t.elem, shape);
  llvm::BasicBlock *else_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  Tile out{t.elem, shape, {}, Pattern::Unknown};
  for (size_t k = 0; k < a.regs.size(); ++k) {
    llvm::PHINode *phi = b_.CreatePHI(a.regs[k]->getType(), 2);
    phi->addIncoming(a.regs[k], then_end);
    phi->addIncoming(bt.regs[k], else_end);
    out.regs.push_back(phi);
  }
  return out;
}

Tile Lowering::subscript(const ast::Subscript &s) {
  // Only new axes and whole dimensions: x[:, None], x[None, :], x[None].
  for (const auto &i : s.indices) {
    if (ast::isa<ast::NoneLit>(i.get())) continue;
    const auto *sl = ast::dyn_cast<ast::Slice>(i.get());
    if (sl && !sl->lower && !sl->upper && !sl->step) continue;
    unsupported(i->span, "indexing a tile with anything but ':' and None");
  }
  const SType &t = type(s);
  return e_.reshape(eval(*s.value), shape_of(t, s.span));
}

}  // namespace tgrad::codegen
