// The AST walk: a typed kernel (sema::TypeInfo, every constexpr known) to
// LLVM IR through the Emitter. Statements become control flow on uniform
// scalars; expressions become tiles; tl builtins map to the Emitter's
// operations (Builtins.cpp). What is outside the backend's subset throws
// Unsupported at the construct.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/codegen/Emitter.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::codegen {

class Lowering {
 public:
  // `pinned`: variables whose pattern (Emitter.h) an earlier attempt found
  // to be weaker than its first assignment's; they start at that pattern.
  // After lower_kernel, `weakened()` lists any variable found weaker only
  // after it was read: then the caller lowers the kernel again.
  Lowering(Emitter &emitter, const ast::Module &module, const sema::TypeInfo &types,
           const std::map<std::string, Pattern> &pinned);

  void bind(const std::string &name, const Tile &value);
  void lower_kernel(const ast::Function &fn);
  const std::map<std::string, Pattern> &weakened() const { return weakened_; }

 private:
  struct Var {
    sema::ElemType elem;
    std::vector<int64_t> shape;
    std::vector<llvm::AllocaInst *> slots;
    std::vector<llvm::AllocaInst *> limit_slots;  // Tile::limits, where first stored a prefix
    Pattern pattern = Pattern::Unknown;
    bool read = false;
  };
  // An operand of arithmetic: a tile, or a Python number (a constexpr),
  // which takes part in type promotion as Triton's to_tensor does.
  struct Operand {
    Tile tile;
    bool python = false;
    sema::DType dtype = sema::DType::Int32;
    double x = 0;
    long long n = 0;
  };

  // Statements.
  void lower_block(const ast::StmtList &body);
  void lower_stmt(const ast::Stmt &s);
  void assign(const ast::Expr &target, const ast::Expr &value);
  void store_var(const std::string &name, Tile value);
  void lower_if(const ast::If &s);
  void lower_for(const ast::For &s);
  void lower_while(const ast::While &s);

  // Names a Python number is assigned to that the kernel later holds as a
  // scalar tensor (`count = 0` before `count += n`): that tensor's type.
  void note_scalar_types(const ast::StmtList &body, bool in_loop);
  // The value of an expression Triton knows when it compiles but sema typed
  // without one: arithmetic on the variable of an unrolled tl.static_range.
  std::optional<double> constexpr_value(const ast::Expr &e, bool &is_int) const;

  // Whether an expression reads a number a runtime loop assigns (sema's
  // value for it, one pass's, is not the value at run time); and such an
  // expression computed as a scalar tile.
  bool reads_loop_number(const ast::Expr &e) const;
  Tile runtime_number(const ast::Expr &e);

  // Expressions.
  const sema::SType &type(const ast::Expr &e) const;
  std::vector<int64_t> shape_of(const sema::SType &t, SourceSpan span) const;
  Tile eval(const ast::Expr &e);
  std::vector<Tile> eval_multi(const ast::Expr &e);
  Tile eval_as(const ast::Expr &e, sema::ElemType elem, const std::vector<int64_t> &shape);
  Tile python_tile(const sema::SType &t, SourceSpan span);
  // A Python number as a scalar tile: known to sema, or computed by constexpr_value.
  Tile python_value(const ast::Expr &e);
  Tile read_var(const ast::Name &n);
  Operand operand(const ast::Expr &e);
  Tile materialize(const Operand &o, sema::DType d);
  Tile binop(ast::BinaryOpKind op, const Operand &l, const Operand &r, const sema::SType &result, SourceSpan span);
  Tile compare(ast::CompareOpKind op, const Operand &l, const Operand &r, const std::vector<int64_t> &shape,
               SourceSpan span);
  Tile unary(const ast::UnaryOp &u);
  Tile if_exp(const ast::IfExp &e);
  Tile subscript(const ast::Subscript &s);
  llvm::Value *scalar_condition(const ast::Expr &cond);

  // Calls (Builtins.cpp).
  std::vector<Tile> call(const ast::Call &c);
  std::vector<Tile> call_helper(const ast::Call &c, const ast::Function &fn);
  Tile call_builtin(const ast::Call &c, std::string name);
  Tile math(const std::string &fn, const std::vector<const ast::Expr *> &args, const sema::SType &result,
            SourceSpan span);

  Emitter &e_;
  llvm::IRBuilder<> &b_;
  const ast::Module &module_;
  const sema::TypeInfo &types_;
  const std::map<std::string, Pattern> &pinned_;
  std::map<std::string, Pattern> weakened_;
  std::map<std::string, Var> vars_;
  llvm::BasicBlock *exit_ = nullptr;       // where `return` goes
  std::vector<Tile> *returned_ = nullptr;  // an inlined helper's return values
  std::map<const ast::Function *, std::string> helper_signatures_;
  std::map<std::string, sema::SType> scalar_types_;
  std::set<std::string> loop_numbers_;  // numbers runtime loops and ifs assign: read from their variable, never sema
  std::map<std::string, long long> unrolled_;  // tl.static_range variables and their current values
};

// NumPy broadcasting of two shapes.
std::vector<int64_t> broadcast_shapes_of(std::vector<int64_t> a, std::vector<int64_t> b, SourceSpan span);

[[noreturn]] void unsupported(SourceSpan span, const std::string &what);

}  // namespace tgrad::codegen
