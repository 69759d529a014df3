// The code generator's view of a CTA: tiles held in registers in the
// blocked layout (Layout.h), and the operations that move them between
// threads (broadcasts through shared memory, reductions with warp shuffles),
// read and write global memory, and convert them. The AST walk (Lower.cpp)
// is written on top of these, and knows nothing of threads.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "src/codegen/Layout.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/DType.h"

namespace tgrad::codegen {

// What the code generator knows of a tile's values within each chunk of a
// thread (Layout.h), so that accesses through a tile of pointers can be one
// vector access per chunk: equal values (a row's base pointer), values that
// step by one (`base + tl.arange(0, N)`), or, for masks, lanes that are on
// from the chunk's first up to a count and off after it (`cols < N`, the
// mask of a ragged row: Tile::limits). Proven as tiles are built, never
// guessed.
enum class Pattern { Unknown, ChunkUniform, Contiguous, Prefix };

struct Tile {
  sema::ElemType elem;
  std::vector<int64_t> shape;       // empty for a scalar
  std::vector<llvm::Value *> regs;  // Layout::regs() values, in register order
  Pattern pattern = Pattern::Unknown;
  // Pattern::Prefix: one i32 per chunk of the thread (Layout::reps of them);
  // lane j of chunk c is on exactly when j < limits[c]. A masked access then
  // tests one number per chunk instead of holding a predicate per lane.
  std::vector<llvm::Value *> limits = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// A construct the backend does not compile: the walk stops and reports it
// once, at its location.
struct Unsupported {
  SourceSpan span;
  std::string message;
};

enum class ReduceOp { Sum, Max, Min };

class Emitter {
 public:
  Emitter(llvm::Module &module, llvm::Function *kernel, int num_warps, int64_t max_spt);

  llvm::IRBuilder<> &builder() { return b_; }
  llvm::LLVMContext &context() { return b_.getContext(); }
  llvm::Module &module() { return module_; }
  llvm::Function *kernel() { return kernel_; }
  int64_t threads() const { return threads_; }
  // The dynamic shared memory the kernel needs; after finish_shared().
  int64_t shared_bytes() const { return smem_bytes_; }
  // Sizes the two shared-memory regions once every use is emitted.
  void finish_shared();

  llvm::Type *type_of(sema::ElemType e);
  llvm::Type *type_of(sema::DType d) { return type_of(sema::ElemType{d, false}); }
  Layout layout(const std::vector<int64_t> &shape) const;
  Layout layout_of(int64_t numel) const { return Layout::of(numel, threads_, max_spt_); }

  // An alloca in the entry block (mem2reg and SROA turn them into registers).
  llvm::AllocaInst *entry_alloca(llvm::Type *type, const std::string &name);

  // Special registers.
  llvm::Value *thread_id();
  llvm::Value *program_id(int axis);
  llvm::Value *num_programs(int axis);
  void barrier();

  // The element (row-major index into the tile, i32) register r of this
  // thread holds, and whether this thread owns it (null: always).
  llvm::Value *element_index(const Layout &l, int64_t r);
  llvm::Value *owns(const Layout &l, int64_t r);

  // Constants and splats.
  llvm::Value *constant(sema::DType d, double x, int64_t n);
  Tile splat(sema::ElemType e, const std::vector<int64_t> &shape, llvm::Value *v);
  Tile arange(int64_t start, int64_t end);

  // The tile with the given shape under NumPy broadcasting (or the same
  // elements in a shape of as many: expand_dims, reshape). Elements move
  // between threads through shared memory.
  Tile broadcast(const Tile &t, const std::vector<int64_t> &shape);
  Tile reshape(const Tile &t, const std::vector<int64_t> &shape);

  // Triton's conversions (tl.cast, .to): value-preserving, or bitcast.
  llvm::Value *convert(llvm::Value *v, sema::ElemType from, sema::ElemType to);
  Tile cast(const Tile &t, sema::ElemType to, bool bitcast = false);
  // Truth of a value (!= 0), i1.
  llvm::Value *truth(llvm::Value *v, sema::ElemType from);

  // `low < high` (`low <= high` where `inclusive`) over integer tiles of one
  // shape, `low` stepping by one and `high` equal within each chunk: the
  // comparison as a Pattern::Prefix mask (its lanes are `mask`'s).
  void mark_prefix(Tile &mask, const Tile &low, const Tile &high, bool inclusive);
  // Inline PTX `text` over `args` (constraints as LLVM's), returning
  // `result`: reading no memory, reading memory (a load: in order after
  // writes, removed where unused), or writing it (kept, in order).
  enum class Memory { None, Reads, Writes };
  llvm::Value *ptx(const std::string &text, const std::string &constraints, llvm::Type *result,
                   const std::vector<llvm::Value *> &args, Memory memory);
  // a + b or a - b (op "add", "sub") of i32 values, saturated to the i32 range.
  llvm::Value *saturating_i32(const std::string &op, llvm::Value *a, llvm::Value *b);
  // `a & b` over masks of one shape: its limits where a and b are prefixes,
  // or one is and the other is equal within each chunk.
  void and_prefix(Tile &result, const Tile &a, const Tile &b);

  // Register by register, over tiles of one shape.
  Tile map(const Tile &a, sema::ElemType out, const std::function<llvm::Value *(llvm::Value *)> &f);
  Tile zip(const Tile &a, const Tile &b, sema::ElemType out,
           const std::function<llvm::Value *(llvm::Value *, llvm::Value *)> &f);

  // Global memory. `mask` and `other` have the pointer tile's shape (or are
  // null); `other` has the loaded dtype.
  Tile load(const Tile &ptr, const Tile *mask, const Tile *other);
  void store(const Tile &ptr, const Tile &value, const Tile *mask);
  // atom.global.add (fadd / add), the old values.
  Tile atomic_add(const Tile &ptr, const Tile &value, const Tile *mask);
  // tl.atomic_xchg: every copy of an element gets the value its owner exchanged.
  Tile atomic_xchg(const Tile &ptr, const Tile &value, const Tile *mask);
  // One read-modify-write per owned element (relaxed, as Triton's sem="relaxed"); copies read 0.
  Tile atomic(llvm::AtomicRMWInst::BinOp op, const Tile &ptr, const Tile &value, const Tile *mask);

  // A reduction over `axis` (none: every element) in dtype `out`.
  Tile reduce(const Tile &x, std::optional<int> axis, ReduceOp op, sema::DType out);
  // tl.argmax / tl.argmin over `axis` (none: every element): the int32
  // index of the first largest (smallest) element, as Triton's tie_break_left.
  Tile arg_reduce(const Tile &x, std::optional<int> axis, bool max);
  // The combination of two values of dtype d.
  llvm::Value *combine(ReduceOp op, llvm::Value *a, llvm::Value *b, sema::DType d);

  // A libdevice function applied (`__nv_expf`, declared on first use).
  llvm::Value *call_libdevice(const std::string &name, llvm::Type *type, std::vector<llvm::Value *> args);
  // fp32 a / b as Triton divides: div.full.f32 (within 2 ulp; its ElementwiseOpToLLVM's FDivOpConversion).
  llvm::Value *divide_full(llvm::Value *a, llvm::Value *b);
  llvm::Value *intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Type *> types, std::vector<llvm::Value *> args);

 private:
  // Every use of shared memory (a broadcast, a reduction) writes, waits at
  // a barrier, and reads. Uses alternate between two regions: then no
  // barrier is needed before a write, since the last reader of the same
  // region has passed the barrier of the use between (control flow is
  // uniform: every thread makes the same uses in the same order). Opens the
  // next use's region.
  void open_shared_region();
  // Byte address `offset` of the current region, reserving `bytes` of it.
  llvm::Value *shared(llvm::Value *offset, int64_t bytes);
  llvm::Value *identity(ReduceOp op, sema::DType d);
  // Whether `ptr` is a multiple of `bytes` (a power of two).
  llvm::Value *aligned(llvm::Value *ptr, int64_t bytes);
  // Which lanes of a chunk an access touches: each lane's predicate, or
  // the count of a prefix (lanes j < limit); neither: every lane.
  struct ChunkMask {
    std::vector<llvm::Value *> lanes;
    llvm::Value *limit = nullptr;
  };
  // Whether the vector of `vw` elements of `bytes` at `ptr` may be taken:
  // aligned, and every lane on.
  llvm::Value *vector_ok(llvm::Value *ptr, int64_t vw, int64_t bytes, const ChunkMask &mask);
  // The PTX that gives each lane of a chunk its predicate (on in `mask`,
  // and where `vector` is given, not taken by the vector access), its
  // operands (numbered from `first`) added to args and constraints;
  // `guards` gets each lane's guard ("@p ", or "" for a lane always on).
  std::string lane_predicates(int64_t vw, const ChunkMask &mask, llvm::Value *vector, int first,
                              std::vector<llvm::Value *> &args, std::string &constraints,
                              std::vector<std::string> &guards);
  // A prefix mask's count for the `vw` lanes from register r0 (Tile::limits),
  // null where the mask is not a prefix.
  llvm::Value *chunk_limit(const Tile *mask, const Layout &l, int64_t r0);
  // The value of lane (this lane ^ lane_mask), any type of up to 64 bits.
  llvm::Value *shuffle_xor(llvm::Value *v, int lane_mask);
  // Runs `then` where cond holds: the value it makes, else `otherwise`.
  llvm::Value *guarded(llvm::Value *cond, const std::function<llvm::Value *()> &then, llvm::Value *otherwise);
  void guarded(llvm::Value *cond, const std::function<void()> &then);

  llvm::Module &module_;
  llvm::Function *kernel_;
  llvm::IRBuilder<> b_;
  int64_t threads_;
  int64_t max_spt_;
  int64_t smem_bytes_ = 0;
  int64_t region_bytes_ = 0;
  llvm::GlobalVariable *smem_ = nullptr;
  llvm::GlobalVariable *region_size_ = nullptr;  // set by finish_shared()
  llvm::AllocaInst *region_phase_ = nullptr;     // 0 or 1: the region of the next use
  llvm::Value *region_base_ = nullptr;
  llvm::Value *tid_ = nullptr;
};

}  // namespace tgrad::codegen
