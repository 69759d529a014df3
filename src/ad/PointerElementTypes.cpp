#include "src/ad/PointerElementTypes.h"

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "tgrad/ast/Walk.h"

namespace tgrad::ad {
namespace {

using namespace ast;

// The pointer parameter a pointer expression offsets (`X + row * stride +
// cols`: X), through names; "*" where it leads back to a name being looked
// at (a pointer advanced in a loop, `p = p + step`); nullopt where unknown.
class PointerBases {
 public:
  PointerBases(const Function &fn, const std::set<std::string> &pointers) : pointers_(pointers) {
    collect(fn.body);
  }

  std::optional<std::string> base(const Expr &e) {
    if (auto *n = dyn_cast<Name>(&e)) return base_of_name(n->id);
    auto *op = dyn_cast<BinOp>(&e);
    if (!op || (op->op != BinaryOpKind::Add && op->op != BinaryOpKind::Sub)) return std::nullopt;
    std::optional<std::string> l = base(*op->lhs), r = base(*op->rhs);
    // Exactly one operand of pointer arithmetic is a pointer (and of a difference, the left one).
    if (l && !r) return l;
    if (r && !l && op->op == BinaryOpKind::Add) return r;
    return std::nullopt;
  }

 private:
  std::optional<std::string> base_of_name(const std::string &n) {
    if (other_.count(n)) return std::nullopt;
    if (visiting_.count(n)) return std::string("*");
    auto d = defs_.find(n);
    const bool param = pointers_.count(n) > 0;
    if (d == defs_.end()) return param ? std::optional<std::string>(n) : std::nullopt;
    visiting_.insert(n);
    std::optional<std::string> found = param ? std::optional<std::string>(n) : std::nullopt;
    bool ok = true;
    for (const Expr *v : d->second) {
      std::optional<std::string> b = base(*v);
      if (!b) ok = false;
      else if (*b != "*" && found && *found != *b) ok = false;
      else if (*b != "*") found = b;
    }
    visiting_.erase(n);
    if (!ok) return std::nullopt;
    return found ? found : std::optional<std::string>("*");  // (each value offsets one being looked at)
  }

  void collect(const StmtList &b) {
    for (const StmtPtr &s : b) {
      if (auto *a = dyn_cast<Assign>(s.get()); a && a->targets.size() == 1 && isa<Name>(a->targets[0].get())) {
        defs_[cast<Name>(a->targets[0].get())->id].push_back(a->value.get());
      } else if (auto *a = dyn_cast<AugAssign>(s.get()); a && isa<Name>(a->target.get()) &&
                                                         (a->op == BinaryOpKind::Add || a->op == BinaryOpKind::Sub)) {
        // `p += step`: p + step
        owned_.push_back(std::make_unique<BinOp>(a->op, clone(*a->target), clone(*a->value)));
        defs_[cast<Name>(a->target.get())->id].push_back(owned_.back().get());
      } else if (!isa<If>(s.get()) && !isa<For>(s.get()) && !isa<While>(s.get())) {
        std::map<std::string, int> assigned;
        stmt_assignments(*s, assigned);
        for (const auto &kv : assigned) other_.insert(kv.first);
      }
      if (auto *f = dyn_cast<For>(s.get())) {
        std::map<std::string, int> target;
        visit_expr(*f->target, [&](const Expr &x) {
          if (auto *n = dyn_cast<Name>(&x)) other_.insert(n->id);
        });
      }
      if (auto *i = dyn_cast<If>(s.get())) {
        collect(i->body);
        collect(i->orelse);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        collect(f->body);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        collect(w->body);
      }
    }
  }

  const std::set<std::string> &pointers_;
  std::map<std::string, std::vector<const Expr *>> defs_;  // each name's assigned values
  std::set<std::string> other_;                            // names assigned otherwise (loop variables, tuples)
  std::set<std::string> visiting_;
  std::vector<ExprPtr> owned_;                             // the values of `p += step`
};

}  // namespace

void read_element_types_from_parameters(Function &fn, const std::set<std::string> &pointers) {
  // Found on the first `.dtype.element_ty` of a value that is not a parameter: most functions have none. (The
  // rewrites before it change no name or pointer arithmetic the bases follow, only what an attribute reads.)
  std::optional<PointerBases> bases;
  std::function<void(StmtList &)> block = [&](StmtList &b) {
    for (StmtPtr &s : b) {
      auto rewrite = [&](ExprPtr &root) {
        rewrite_expr(root, [&](ExprPtr &x) {
          auto *elem = dyn_cast<Attribute>(x.get());
          auto *dtype = elem && elem->attr == "element_ty" ? dyn_cast<Attribute>(elem->value.get()) : nullptr;
          if (!dtype || dtype->attr != "dtype") return;
          if (auto *n = dyn_cast<Name>(dtype->value.get()); n && pointers.count(n->id)) return;
          if (!bases) bases.emplace(fn, pointers);
          if (std::optional<std::string> p = bases->base(*dtype->value); p && *p != "*")
            dtype->value = std::make_unique<Name>(*p, dtype->value->span);
        });
      };
      if (auto *a = dyn_cast<Assign>(s.get())) rewrite(a->value);
      if (auto *a = dyn_cast<AugAssign>(s.get())) rewrite(a->value);
      if (auto *a = dyn_cast<AnnAssign>(s.get()); a && a->value) rewrite(a->value);
      if (auto *e = dyn_cast<ExprStmt>(s.get())) rewrite(e->value);
      if (auto *r = dyn_cast<Return>(s.get()); r && r->value) rewrite(r->value);
      if (auto *i = dyn_cast<If>(s.get())) {
        rewrite(i->cond);
        block(i->body);
        block(i->orelse);
      } else if (auto *f = dyn_cast<For>(s.get())) {
        rewrite(f->iter);
        block(f->body);
      } else if (auto *w = dyn_cast<While>(s.get())) {
        rewrite(w->cond);
        block(w->body);
      }
    }
  };
  block(fn.body);
}


}  // namespace tgrad::ad
