// What a prologue kernel saves for owner-computes kernels (src/ad/reverse/PrologueSaves.h).
#include "src/ad/reverse/PrologueSaves.h"

#include <algorithm>
#include <cctype>

#include "src/ad/AnfWalk.h"
#include "src/ad/reverse/AstHelpers.h"

namespace tgrad::ad::reverse {

std::optional<std::vector<std::string>> dimension_texts(const SType &t) {
  std::vector<std::string> out;
  for (const sema::Dim &d : t.shape) {
    if (d.value) out.push_back(std::to_string(*d.value));
    else if (!d.symbol.empty() && std::all_of(d.symbol.begin(), d.symbol.end(), [](char ch) {
               return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
             }))
      out.push_back(d.symbol);
    else return std::nullopt;
  }
  return out;
}

ExprPtr offset_address(const std::string &scratch, const std::vector<std::string> &offsets) {
  ExprPtr at = name(scratch);
  for (const std::string &o : offsets) at = std::make_unique<BinOp>(BinaryOpKind::Add, std::move(at), name(o));
  return at;
}

void flatten(const StmtList &block, std::vector<const Stmt *> &out) {
  for (const StmtPtr &s : block) {
    out.push_back(s.get());
    if (auto *i = dyn_cast<If>(s.get())) {
      flatten(i->body, out);
      flatten(i->orelse, out);
    }
  }
}

std::vector<std::string> row_statistics(const StmtList &loop_body, const std::set<const Stmt *> &prefix,
                                        const std::function<const SType *(const std::string &)> &type_of_name) {
  std::vector<const Stmt *> all;
  flatten(loop_body, all);
  std::map<std::string, std::vector<const Stmt *>> prefix_defs;
  std::set<std::string> assigned_elsewhere, read_elsewhere;
  for (const Stmt *s : all) {
    if (isa<If>(s)) continue;
    std::map<std::string, int> assigned;
    stmt_assignments(*s, assigned);
    for (const auto &kv : assigned) {
      if (prefix.count(s)) prefix_defs[kv.first].push_back(s);
      else assigned_elsewhere.insert(kv.first);
    }
    if (!prefix.count(s)) stmt_reads(*s, read_elsewhere);
  }
  std::vector<std::string> out;
  for (const auto &[v, defs] : prefix_defs) {
    if (assigned_elsewhere.count(v) || !read_elsewhere.count(v)) continue;
    // Assigned by plain assignments only (a loop of the prefix that assigns it is not a row statistic's formula).
    if (std::any_of(defs.begin(), defs.end(), [](const Stmt *d) { return !isa<Assign>(d) && !isa<AugAssign>(d); }))
      continue;
    const SType *t = type_of_name(v);
    if (!is_float_tensor(t) || t->shape.size() != 1 || !dimension_texts(*t)) continue;
    // The prefix statements v depends on: does one of them reduce?
    std::set<std::string> need{v}, seen;
    bool reduces = false;
    while (!need.empty() && !reduces) {
      const std::string n = *need.begin();
      need.erase(need.begin());
      if (!seen.insert(n).second) continue;
      auto d = prefix_defs.find(n);
      if (d == prefix_defs.end()) continue;
      for (const Stmt *s : d->second) {
        std::set<std::string> r;
        stmt_reads(*s, r);
        need.insert(r.begin(), r.end());
        const Expr *value = isa<Assign>(s)      ? cast<Assign>(s)->value.get()
                            : isa<AugAssign>(s) ? cast<AugAssign>(s)->value.get()
                                                : nullptr;
        if (value) visit_expr(*value, [&](const Expr &e) {
          auto *c = dyn_cast<Call>(&e);
          const std::string f = c ? callee(*c) : "";
          reduces |= f == "tl.sum" || f == "tl.max" || f == "tl.min";
        });
      }
    }
    if (reduces) out.push_back(v);
  }
  return out;
}

// `p.dtype.element_ty` of a pointer `p` computed from one float pointer parameter P (of `types`) with P's element
// type (`pointer_param`: P, or "" where not one): P.
static std::string element_type_of_parameter(const Expr &e, const sema::ParamTypes &types,
                                      const std::function<std::string(const std::string &)> &pointer_param) {
  auto *element = dyn_cast<Attribute>(&e);
  auto *dtype = element && element->attr == "element_ty" ? dyn_cast<Attribute>(element->value.get()) : nullptr;
  auto *p = dtype && dtype->attr == "dtype" ? dyn_cast<Name>(dtype->value.get()) : nullptr;
  const std::string param = p ? pointer_param(p->id) : "";
  auto t = types.find(param);
  if (t == types.end() || !t->second.is_tensor() || !t->second.elem.is_pointer || !sema::is_float(t->second.elem.dtype))
    return "";
  return param;
}

// (Each owner loads one tile instead of computing it from several in every iteration, and reads the values its cast
// gave: the relu epilogue's `tl.where(C > 0, dC, 0)`, an operand of tl.dot in B's dtype.)
std::map<std::string, CastOperandTile> cast_operand_tiles(const StmtList &loop_body, const std::set<const Stmt *> &prefix,
                                                      const sema::ParamTypes &types,
                                                      const std::function<const SType *(const std::string &)> &type_of_name,
                                                      const std::function<std::string(const std::string &)> &pointer_param,
                                                      const std::set<std::string> &forward_pointers,
                                                      const std::function<const Expr *(const std::string &)> &definition,
                                                      const std::set<std::string> &prologue_names,
                                                      const std::map<std::string, std::string> &input_of) {
  std::vector<const Stmt *> all;
  flatten(loop_body, all);
  std::map<std::string, std::vector<const Stmt *>> prefix_defs;
  std::set<std::string> assigned_elsewhere;
  for (const Stmt *s : all) {
    if (isa<If>(s)) continue;
    std::map<std::string, int> assigned;
    stmt_assignments(*s, assigned);
    for (const auto &kv : assigned) {
      if (prefix.count(s)) prefix_defs[kv.first].push_back(s);
      else assigned_elsewhere.insert(kv.first);
    }
  }
  // Each name's reads outside the prefix, and the casts among them (per target pointer): a read of v inside
  // `v.to(P.dtype.element_ty)` counts as both.
  std::map<std::string, int> reads_outside, casts;
  std::map<std::string, std::set<std::string>> cast_targets;
  for (const Stmt *s : all) {
    if (prefix.count(s) || isa<If>(s)) continue;
    std::set<std::string> r;
    stmt_reads(*s, r);
    const Expr *value = isa<Assign>(s) ? cast<Assign>(s)->value.get() : isa<ExprStmt>(s) ? cast<ExprStmt>(s)->value.get() : nullptr;
    if (!value) {
      for (const std::string &n : r) reads_outside[n] += 1000;  // (a loop's, an update's: not a cast)
      continue;
    }
    visit_expr(*value, [&](const Expr &e) {
      if (auto *n = dyn_cast<Name>(&e)) ++reads_outside[n->id];
      auto *c = dyn_cast<Call>(&e);
      auto *to = c ? dyn_cast<Attribute>(c->func.get()) : nullptr;
      auto *v = to && to->attr == "to" && c->args.size() == 1 && c->keywords.empty() ? dyn_cast<Name>(to->value.get()) : nullptr;
      const std::string p = v ? element_type_of_parameter(*c->args[0], types, pointer_param) : "";
      if (p.empty()) return;
      ++casts[v->id];
      cast_targets[v->id].insert(p);
    });
  }
  std::map<std::string, CastOperandTile> out;
  for (const auto &[v, defs] : prefix_defs) {
    if (assigned_elsewhere.count(v) || !casts.count(v) || casts[v] != reads_outside[v] || cast_targets[v].size() != 1)
      continue;
    if (std::any_of(defs.begin(), defs.end(), [](const Stmt *d) { return !isa<Assign>(d); })) continue;
    const SType *t = type_of_name(v);
    if (!is_float_tensor(t) || t->shape.size() != 2 || !dimension_texts(*t)) continue;
    // The tiles its computation loads, through the prefix's definitions.
    std::set<std::string> need{v}, seen;
    int loads = 0;
    while (!need.empty()) {
      const std::string n = *need.begin();
      need.erase(need.begin());
      if (!seen.insert(n).second) continue;
      auto d = prefix_defs.find(n);
      if (d == prefix_defs.end()) continue;
      for (const Stmt *s : d->second) {
        std::set<std::string> r;
        stmt_reads(*s, r);
        need.insert(r.begin(), r.end());
        if (auto *a = dyn_cast<Assign>(s))
          visit_expr(*a->value, [&](const Expr &e) {
            if (auto *c = dyn_cast<Call>(&e); c && callee(*c) == "tl.load") ++loads;
          });
      }
    }
    if (loads < 2) continue;
    // The mask of its loads, where they share one (other=0) and v is 0 wherever it is false: the owner loads the
    // saved tile under it, so that what it knows of the lanes outside (their gradient is zero: ZeroLanes.h, the
    // peeled loops of MaskPeeling.h) still holds.
    std::string mask, like;
    std::vector<std::string> offsets;
    bool one_mask = true;
    std::function<bool(const Expr &)> zero_outside = [&](const Expr &e) -> bool {
      if (auto *i = dyn_cast<IntLit>(&e)) return i->value == 0;
      if (auto *f = dyn_cast<FloatLit>(&e)) return f->value == 0.0;
      if (auto *n = dyn_cast<Name>(&e)) {
        auto d = prefix_defs.find(n->id);
        if (d == prefix_defs.end() || d->second.size() != 1 || !isa<Assign>(d->second[0])) return false;
        return zero_outside(*cast<Assign>(d->second[0])->value);
      }
      if (auto *u = dyn_cast<UnaryOp>(&e)) return u->op == UnaryOpKind::Neg && zero_outside(*u->operand);
      if (auto *b = dyn_cast<BinOp>(&e)) {
        if (b->op == BinaryOpKind::Mul) return zero_outside(*b->lhs) || zero_outside(*b->rhs);
        if (b->op == BinaryOpKind::Add || b->op == BinaryOpKind::Sub) return zero_outside(*b->lhs) && zero_outside(*b->rhs);
        return false;
      }
      auto *c = dyn_cast<Call>(&e);
      if (!c) return false;
      if (auto *to = dyn_cast<Attribute>(c->func.get()); to && to->attr == "to") return zero_outside(*to->value);
      const std::string f = callee(*c);
      if (f == "tl.where" && c->args.size() == 3) return zero_outside(*c->args[1]) && zero_outside(*c->args[2]);
      if (f != "tl.load") return false;
      const Expr *mask_kw = c->keyword("mask");
      auto *m = mask_kw ? dyn_cast<Name>(mask_kw) : nullptr;
      const Expr *other = c->keyword("other");
      auto *pointer = c->args.size() == 1 ? dyn_cast<Name>(c->args[0].get()) : nullptr;
      if (!m || !other || !zero_outside(*other) || !pointer) return false;
      one_mask &= mask.empty() || mask == m->id;
      mask = m->id;
      // Its base and offsets: `p = q + o` along the chain, q the pointer, o a name.
      std::string at = pointer->id, base;
      std::vector<std::string> offs;
      for (int depth = 0; depth < 16 && base.empty(); ++depth) {
        if (types.count(at)) {
          base = at;
          break;
        }
        const Expr *def = definition(at);
        auto *add = def ? dyn_cast<BinOp>(def) : nullptr;
        auto *l = add && add->op == BinaryOpKind::Add ? dyn_cast<Name>(add->lhs.get()) : nullptr;
        auto *r = add && add->op == BinaryOpKind::Add ? dyn_cast<Name>(add->rhs.get()) : nullptr;
        if (!l || !r) return false;
        const SType *lt = type_of_name(l->id);
        const bool left_pointer = types.count(l->id) ? types.at(l->id).elem.is_pointer : lt && lt->elem.is_pointer;
        at = left_pointer ? l->id : r->id;
        offs.push_back(left_pointer ? r->id : l->id);
      }
      if (base.empty()) return false;
      for (const std::string &o : offs)
        if (!types.count(o) && !prologue_names.count(o)) return false;  // (the prologue has the prefix's names only)
      std::sort(offs.begin(), offs.end());
      one_mask &= offsets.empty() || offsets == offs;
      offsets = offs;
      // Through an upstream gradient only, which is addressed with its output's offsets: laid out like that output,
      // and each element computed by the one program that stored it (a forward input's offsets may be every
      // program's, whose values of the tile could differ: their saves would race).
      if (auto in = input_of.find(base); in != input_of.end() && forward_pointers.count(in->second)) like = in->second;
      return one_mask;
    };
    auto d = prefix_defs.find(v);
    if (!zero_outside(*cast<Assign>(d->second[0])->value) || !one_mask || mask.empty() || !prefix_defs.count(mask) ||
        like.empty())
      continue;
    out[v] = {*cast_targets[v].begin(), mask, like, offsets};
  }
  return out;
}

}  // namespace tgrad::ad::reverse
