#include "src/lower/Walk.h"

#include "tgrad/ast/Walk.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::lower {

using namespace ast;

namespace {

// The expression slots of a block's statements and the blocks they hold;
// `Block` is StmtList or const StmtList, so that one list serves both walks.
template <class Block, class OnExpr>
void for_each_slot(Block &block, OnExpr &&on) {
  for (auto &st : block) {
    auto *s = st.get();
    switch (s->kind) {
      case NodeKind::ExprStmt: on(cast<ExprStmt>(s)->value); break;
      case NodeKind::Assign:
        for (auto &t : cast<Assign>(s)->targets) on(t);
        on(cast<Assign>(s)->value);
        break;
      case NodeKind::AugAssign:
        on(cast<AugAssign>(s)->target);
        on(cast<AugAssign>(s)->value);
        break;
      case NodeKind::AnnAssign:
        on(cast<AnnAssign>(s)->target);
        if (cast<AnnAssign>(s)->value) on(cast<AnnAssign>(s)->value);
        break;
      case NodeKind::If:
        on(cast<If>(s)->cond);
        for_each_slot(cast<If>(s)->body, on);
        for_each_slot(cast<If>(s)->orelse, on);
        break;
      case NodeKind::For:
        on(cast<For>(s)->target);
        on(cast<For>(s)->iter);
        for_each_slot(cast<For>(s)->body, on);
        break;
      case NodeKind::While:
        on(cast<While>(s)->cond);
        for_each_slot(cast<While>(s)->body, on);
        break;
      case NodeKind::Return:
        if (cast<Return>(s)->value) on(cast<Return>(s)->value);
        break;
      case NodeKind::Assert:
        on(cast<Assert>(s)->test);
        if (cast<Assert>(s)->msg) on(cast<Assert>(s)->msg);
        break;
      default: break;
    }
  }
}

}  // namespace

void visit_block(const StmtList &block, const std::function<void(const Expr &)> &fn) {
  for_each_slot(block, [&](const ExprPtr &e) { visit_expr(*e, fn); });
}

void rewrite_block(StmtList &block, const std::function<void(ExprPtr &)> &fn) {
  for_each_slot(block, [&](ExprPtr &e) { rewrite_expr(e, fn); });
}

void collect_names(const Expr &e, std::set<std::string> &out) {
  visit_expr(e, [&](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x)) out.insert(n->id);
  });
}

void collect_names(const StmtList &block, std::set<std::string> &out) {
  visit_block(block, [&](const Expr &x) {
    if (auto *n = dyn_cast<Name>(&x)) out.insert(n->id);
  });
}

bool is_tl_call(const Module &module, const Expr *e, const char *name) {
  auto *c = dyn_cast<Call>(e);
  if (!c) return false;
  const std::string callee = emit::print_expr(*c->func);
  if (callee == std::string("tl.") + name || callee == std::string("triton.language.") + name) return true;
  return isa<Name>(c->func.get()) && sema::tl_function_bound_to(module, callee) == std::string("tl.") + name;
}


}  // namespace tgrad::lower
