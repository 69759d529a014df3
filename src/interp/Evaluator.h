// The interpreter's evaluator: walks the AST of jit functions and computes
// Values. Split over three files: Evaluator.cpp (statements, expressions,
// names, calls), Operators.cpp (Python/Triton operator semantics and type
// promotion), Builtins.cpp (tl.*, tl.math.*, libdevice.*, triton.*).
// Errors are thrown as RuntimeError with the location of the expression;
// the public entry points (Interpreter.cpp) turn them into diagnostics.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/interp/TensorOps.h"
#include "tgrad/interp/Interpreter.h"
#include "tgrad/sema/Names.h"

namespace tgrad::interp {

struct RuntimeError {
  SourceSpan span;
  std::string message;
};

struct CallSite {
  SourceSpan span;
  std::string callee;
};

class Evaluator {
 public:
  Evaluator(const ast::Module &module, Memory &memory, const RunOptions &options);

  // Runs `fn` with its parameters bound; the returned value (None if none).
  Value call(const ast::Function &fn, const std::map<std::string, Value> &args, const SourceSpan &call_span);
  Value associative_scan(std::vector<Value> args, std::map<std::string, Value> kwargs, const SourceSpan &span);
  Value combine_reduce(std::vector<Value> args, std::map<std::string, Value> kwargs, const SourceSpan &span);
  Value slice_op(const std::string &name, std::vector<Value> args, std::map<std::string, Value> kwargs,
                 const SourceSpan &span);

  void set_program(std::array<int64_t, 3> pid, std::array<int64_t, 3> grid) {
    pid_ = pid;
    grid_ = grid;
    loop_iterations_ = 0;
  }

  const std::vector<CallSite> &call_stack() const { return stack_; }
  // The call stack at the moment of the last error (innermost last).
  const std::vector<CallSite> &error_stack() const { return error_stack_; }

  // --- used across the evaluator's files ---
  [[noreturn]] void fail(const SourceSpan &span, const std::string &message);
  bool float64() const { return options_.float64; }

  // Python-level conversions.
  static bool is_tensor(const Value &v) { return v.kind == Value::Kind::Tensor; }
  bool truth(const Value &v, const SourceSpan &span);
  long long to_int(const Value &v, const SourceSpan &span, const std::string &what);
  // A Python number or 0-d tensor as a tensor (Python numbers typed as Triton would).
  TensorRef to_tensor(const Value &v, const SourceSpan &span);
  std::vector<int64_t> to_shape(const Value &v, const SourceSpan &span);

  // Operators (Operators.cpp).
  Value binary(ast::BinaryOpKind op, const Value &a, const Value &b, const SourceSpan &span);
  Value unary(ast::UnaryOpKind op, const Value &a, const SourceSpan &span);
  Value compare(ast::CompareOpKind op, const Value &a, const Value &b, const SourceSpan &span);
  // Both operands cast to their computation type and broadcast to one shape.
  std::pair<TensorRef, TensorRef> promote_pair(const Value &a, const Value &b, bool div_or_mod,
                                               const SourceSpan &span);
  TensorRef broadcast(const TensorRef &t, const Shape &shape, const SourceSpan &span);

  // Builtins (Builtins.cpp).
  // tl.rand and the other Philox draws (src/interp/Builtins.cpp).
  Value random_numbers(const std::string &name, std::vector<Value> args, std::map<std::string, Value> kwargs,
                       const SourceSpan &span);
  Value call_builtin(const Value &callee, std::vector<Value> args, std::map<std::string, Value> kwargs,
                     const SourceSpan &span);
  // `ns.attr` for a namespace; nullopt if the namespace has no such member.
  std::optional<Value> namespace_member(const std::string &ns, const std::string &attr);
  static Value known_value(const sema::KnownName &k);

 private:
  enum class Flow { Normal, Return };

  struct Frame {
    std::unordered_map<std::string, Value> vars;
    Value result;
  };

  Flow exec_block(const ast::StmtList &body, Frame &frame);
  Flow exec(const ast::Stmt &s, Frame &frame);
  void assign(const ast::Expr &target, const Value &value, Frame &frame);
  Flow exec_for(const ast::For &s, Frame &frame);
  Value eval(const ast::Expr &e, Frame &frame);
  Value eval_name(const ast::Name &n, Frame &frame);
  Value eval_attribute(const ast::Attribute &a, Frame &frame);
  Value eval_subscript(const ast::Subscript &s, Frame &frame);
  Value eval_call(const ast::Call &c, Frame &frame);
  Value global(const std::string &name, const SourceSpan &span);
  void count_iteration(const SourceSpan &span);
  // The most trips a runtime loop (a for, or a while: tgrad counts stepped while loops as for loops) has run in any
  // program, by its position (Options::loop_trips): a taped loop's backward needs that bound.
  void record_trips(const SourceSpan &loop, int64_t trips);

  const ast::Module &module_;
  Memory &memory_;
  RunOptions options_;
  std::array<int64_t, 3> pid_{0, 0, 0};
  std::array<int64_t, 3> grid_{1, 1, 1};
  int64_t loop_iterations_ = 0;
  std::map<std::string, Value> globals_;  // module constants, evaluated once
  std::vector<CallSite> stack_;
  std::vector<CallSite> error_stack_;

  friend class BuiltinTable;
  friend struct MemoryAccess;

 public:
  Memory &memory() { return memory_; }
  std::array<int64_t, 3> pid() const { return pid_; }
  std::array<int64_t, 3> grid() const { return grid_; }
};

}  // namespace tgrad::interp
