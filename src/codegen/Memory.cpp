// Global memory: tl.load, tl.store and tl.atomic_add over tiles of pointers.
//
// A chunk of a thread whose pointers are known to step by one element
// (Pattern::Contiguous) is one vector access of up to 16 bytes, taken when
// the chunk's first address is aligned to the vector's size and every lane
// of its mask is on: both are tested when the kernel runs, so a ragged row
// or an odd stride falls back to one predicated access per element instead
// of being wrong. Masked-off lanes of a load give `other`.
#include <algorithm>

#include "src/codegen/Emitter.h"

namespace tgrad::codegen {

using sema::DType;
using sema::ElemType;

namespace {

// Bools are bytes in memory, as in Triton.
llvm::Type *memory_type(llvm::Type *t, llvm::LLVMContext &c) {
  return t->isIntegerTy(1) ? llvm::Type::getInt8Ty(c) : t;
}

}  // namespace

Tile Emitter::load(const Tile &ptr, const Tile *mask, const Tile *other) {
  const ElemType ve{ptr.elem.dtype, false};
  llvm::Type *vt = type_of(ve), *mt = memory_type(vt, context());
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  const Layout l = layout(ptr.shape);
  Tile out{ve, ptr.shape, std::vector<llvm::Value *>(static_cast<size_t>(l.regs())), Pattern::Unknown};
  auto from_memory = [&](llvm::Value *v) { return vt == mt ? v : b_.CreateTrunc(v, vt); };
  auto scalar = [&](int64_t r) -> llvm::Value * {
    auto read = [&]() -> llvm::Value * { return from_memory(b_.CreateLoad(mt, ptr.regs[r])); };
    if (!mask) return read();
    llvm::Value *otherwise = other ? other->regs[r] : llvm::Constant::getNullValue(vt);
    return guarded(mask->regs[r], read, otherwise);
  };
  int64_t vw = 1;
  if (ptr.pattern == Pattern::Contiguous) {
    vw = l.spt;
    while (vw > 1 && vw * bytes > 16) vw /= 2;
  }
  for (int64_t r0 = 0; r0 < l.regs(); r0 += vw) {
    if (vw == 1) {
      out.regs[r0] = scalar(r0);
      continue;
    }
    llvm::Value *ok = b_.CreateICmpEQ(b_.CreateAnd(b_.CreatePtrToInt(ptr.regs[r0], b_.getInt64Ty()),
                                                   b_.getInt64(static_cast<uint64_t>(vw * bytes - 1))),
                                      b_.getInt64(0));
    if (mask)
      for (int64_t j = 0; j < vw; ++j) ok = b_.CreateAnd(ok, mask->regs[r0 + j]);
    llvm::BasicBlock *fast = llvm::BasicBlock::Create(context(), "vload", kernel_);
    llvm::BasicBlock *slow = llvm::BasicBlock::Create(context(), "sload", kernel_);
    llvm::BasicBlock *merge = llvm::BasicBlock::Create(context(), "loaded", kernel_);
    b_.CreateCondBr(ok, fast, slow);
    b_.SetInsertPoint(fast);
    // The phi joins whole vectors, extracted after it: were the vector load
    // only read by extracts, LLVM would split it into scalar loads again.
    llvm::Type *vec = llvm::FixedVectorType::get(mt, static_cast<unsigned>(vw));
    llvm::Value *loaded = b_.CreateAlignedLoad(vec, ptr.regs[r0], llvm::Align(static_cast<uint64_t>(vw * bytes)));
    llvm::BasicBlock *fast_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(slow);
    llvm::Value *gathered = llvm::PoisonValue::get(vec);
    for (int64_t j = 0; j < vw; ++j) {
      llvm::Value *v = scalar(r0 + j);
      gathered = b_.CreateInsertElement(gathered, vt == mt ? v : b_.CreateZExt(v, mt), j);
    }
    llvm::BasicBlock *slow_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    llvm::PHINode *phi = b_.CreatePHI(vec, 2);
    phi->addIncoming(loaded, fast_end);
    phi->addIncoming(gathered, slow_end);
    for (int64_t j = 0; j < vw; ++j) out.regs[r0 + j] = from_memory(b_.CreateExtractElement(phi, j));
  }
  if (ptr.pattern == Pattern::ChunkUniform && !mask) out.pattern = Pattern::ChunkUniform;
  return out;
}

void Emitter::store(const Tile &ptr, const Tile &value, const Tile *mask) {
  llvm::Type *vt = type_of(ElemType{ptr.elem.dtype, false}), *mt = memory_type(vt, context());
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  const Layout l = layout(ptr.shape);
  auto to_memory = [&](llvm::Value *v) { return vt == mt ? v : b_.CreateZExt(v, mt); };
  auto scalar = [&](int64_t r) {
    llvm::Value *cond = owns(l, r);
    if (mask) cond = cond ? b_.CreateAnd(cond, mask->regs[r]) : mask->regs[r];
    auto write = [&] { b_.CreateStore(to_memory(value.regs[r]), ptr.regs[r]); };
    if (cond)
      guarded(cond, write);
    else
      write();
  };
  int64_t vw = 1;
  if (ptr.pattern == Pattern::Contiguous) {
    vw = l.spt;
    while (vw > 1 && vw * bytes > 16) vw /= 2;
  }
  for (int64_t r0 = 0; r0 < l.regs(); r0 += vw) {
    if (vw == 1) {
      scalar(r0);
      continue;
    }
    llvm::Value *ok = b_.CreateICmpEQ(b_.CreateAnd(b_.CreatePtrToInt(ptr.regs[r0], b_.getInt64Ty()),
                                                   b_.getInt64(static_cast<uint64_t>(vw * bytes - 1))),
                                      b_.getInt64(0));
    // A chunk is owned whole or not at all (Layout.h: numel is a multiple of spt).
    if (llvm::Value *own = owns(l, r0)) ok = b_.CreateAnd(ok, own);
    if (mask)
      for (int64_t j = 0; j < vw; ++j) ok = b_.CreateAnd(ok, mask->regs[r0 + j]);
    llvm::BasicBlock *fast = llvm::BasicBlock::Create(context(), "vstore", kernel_);
    llvm::BasicBlock *slow = llvm::BasicBlock::Create(context(), "sstore", kernel_);
    llvm::BasicBlock *merge = llvm::BasicBlock::Create(context(), "stored", kernel_);
    b_.CreateCondBr(ok, fast, slow);
    b_.SetInsertPoint(fast);
    llvm::Type *vec = llvm::FixedVectorType::get(mt, static_cast<unsigned>(vw));
    llvm::Value *v = llvm::PoisonValue::get(vec);
    for (int64_t j = 0; j < vw; ++j) v = b_.CreateInsertElement(v, to_memory(value.regs[r0 + j]), j);
    b_.CreateAlignedStore(v, ptr.regs[r0], llvm::Align(static_cast<uint64_t>(vw * bytes)));
    b_.CreateBr(merge);
    b_.SetInsertPoint(slow);
    for (int64_t j = 0; j < vw; ++j) scalar(r0 + j);
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
  }
}

Tile Emitter::atomic_add(const Tile &ptr, const Tile &value, const Tile *mask) {
  const ElemType ve{ptr.elem.dtype, false};
  llvm::Type *vt = type_of(ve);
  const Layout l = layout(ptr.shape);
  Tile out{ve, ptr.shape, {}, Pattern::Unknown};
  const llvm::AtomicRMWInst::BinOp op = sema::is_float(ve.dtype) ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add;
  for (int64_t r = 0; r < l.regs(); ++r) {
    llvm::Value *cond = owns(l, r);
    if (mask) cond = cond ? b_.CreateAnd(cond, mask->regs[r]) : mask->regs[r];
    auto add = [&]() -> llvm::Value * {
      return b_.CreateAtomicRMW(op, ptr.regs[r], value.regs[r], llvm::MaybeAlign(), llvm::AtomicOrdering::Monotonic);
    };
    out.regs.push_back(cond ? guarded(cond, add, llvm::Constant::getNullValue(vt)) : add());
  }
  return out;
}

}  // namespace tgrad::codegen
