// The reference interpreter: runs a kernel over a launch grid on the CPU,
// program by program, with host buffers behind its pointer arguments; or runs
// a pure tile function on given tile arguments.
//
// Semantics are Triton's (TRITON.md): broadcasting, type promotion, masked
// loads with `other`, masked stores, atomics, reductions, scans, tl.dot,
// casts with fp16/bf16 rounding, control flow, jit helper calls,
// tl.static_assert and tl.device_assert. An access outside a buffer is an
// error at the access's location, never undefined behaviour. In float64 mode
// every floating value is computed in double (dtypes are still checked), for
// gradient checking.
#pragma once

#include <array>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/interp/Value.h"

namespace tgrad::interp {

// Host memory: the buffers behind pointer arguments. Element values are
// held as double (floats, exactly in float64 mode) or int64 (integers).
struct Buffer {
  std::string name;
  sema::DType dtype = sema::DType::FP32;
  Shape shape;  // for reports; the kernel sees a flat array
  std::vector<double> f;
  std::vector<int64_t> i;

  int64_t size() const { return sema::is_float(dtype) ? static_cast<int64_t>(f.size()) : static_cast<int64_t>(i.size()); }
  double get(int64_t k) const { return sema::is_float(dtype) ? f[k] : static_cast<double>(i[k]); }
};

class Memory {
 public:
  // Adds a buffer; returns the address of its first element.
  int64_t add(Buffer b);
  const std::vector<Buffer> &buffers() const { return buffers_; }
  std::vector<Buffer> &buffers() { return buffers_; }

  // Address arithmetic: (index + 1) << kShift plus an element offset.
  static constexpr int kShift = 40;
  static int64_t base_address(size_t index) { return static_cast<int64_t>(index + 1) << kShift; }
  // The buffer and offset an address names, or nullopt if it names none.
  std::optional<std::pair<size_t, int64_t>> resolve(int64_t address) const;

 private:
  std::vector<Buffer> buffers_;
};

struct RunOptions {
  bool float64 = false;
  // Loop iterations one program may run in all before the interpreter stops
  // it (a kernel that never ends would otherwise hang the tool).
  int64_t max_loop_iterations = 100'000'000;
  // Where set, the most iterations any one run of each runtime loop took,
  // by the loop's (line, column): what a taped loop's backward must be
  // given as its bound on the trip count (ad::Backward::Tape).
  std::map<std::pair<int, int>, int64_t> *loop_trips = nullptr;
  // Where set, each element a tl.load reads (its lanes the mask keeps), by
  // buffer index: which elements a backward's gradient must cover.
  std::map<size_t, std::set<int64_t>> *loaded = nullptr;
};

// A kernel argument: a buffer (by index in Memory), a runtime scalar, or,
// for tl.constexpr parameters, a Python value.
struct KernelArg {
  enum class Kind { Buffer, Int, Float, Constexpr, None };  // None: a pointer passed as None
  Kind kind = Kind::Int;
  size_t buffer = 0;
  long long n = 0;
  double x = 0;
  Value constexpr_value;
};

struct Launch {
  std::string kernel;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::map<std::string, KernelArg> args;  // by parameter name
};

// Runs every program of the grid. Reports errors to `diags`; false on error.
bool run_kernel(const ast::Module &module, const Launch &launch, Memory &memory, const RunOptions &options,
                DiagEngine &diags);

// Calls a jit function with the given arguments (tensors or Python values,
// by parameter name); returns its results (a tuple's elements, or one value).
std::optional<std::vector<Value>> run_function(const ast::Module &module, const std::string &name,
                                               const std::map<std::string, Value> &args, Memory &memory,
                                               const RunOptions &options, DiagEngine &diags);

// A host tensor value for run_function: values given in row-major order.
Value make_tensor(sema::DType dtype, const Shape &shape, const std::vector<double> &values, bool float64);

}  // namespace tgrad::interp
