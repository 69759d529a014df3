// Tiles in registers: layouts, constants, conversions, broadcasts.
#include "src/codegen/Emitter.h"

#include <cmath>
#include <limits>

#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/IntrinsicsNVPTX.h"

namespace tgrad::codegen {

using sema::DType;
using sema::ElemType;

Emitter::Emitter(llvm::Module &module, llvm::Function *kernel, int num_warps, int64_t max_spt)
    : module_(module), kernel_(kernel), b_(module.getContext()), threads_(int64_t{num_warps} * 32), max_spt_(max_spt) {}

llvm::Type *Emitter::type_of(ElemType e) {
  llvm::LLVMContext &c = context();
  if (e.is_pointer) return llvm::PointerType::get(c, 1);  // global memory
  switch (e.dtype) {
    case DType::Int1: return llvm::Type::getInt1Ty(c);
    case DType::Int8:
    case DType::UInt8: return llvm::Type::getInt8Ty(c);
    case DType::Int16:
    case DType::UInt16: return llvm::Type::getInt16Ty(c);
    case DType::Int32:
    case DType::UInt32: return llvm::Type::getInt32Ty(c);
    case DType::Int64:
    case DType::UInt64: return llvm::Type::getInt64Ty(c);
    case DType::FP16: return llvm::Type::getHalfTy(c);
    case DType::BF16: return llvm::Type::getBFloatTy(c);
    case DType::FP32: return llvm::Type::getFloatTy(c);
    case DType::FP64: return llvm::Type::getDoubleTy(c);
    case DType::FP8E4B15:
    case DType::FP8E4NV:
    case DType::FP8E4B8:
    case DType::FP8E5:
    case DType::FP8E5B16:
      // (compile() refuses fp8 values at their location first; this guards the walk.)
      throw Unsupported{{}, "tgrad's PTX backend does not compile fp8 values yet"};
  }
  return nullptr;
}

Layout Emitter::layout(const std::vector<int64_t> &shape) const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return layout_of(n);
}

llvm::AllocaInst *Emitter::entry_alloca(llvm::Type *type, const std::string &name) {
  llvm::BasicBlock &entry = kernel_->getEntryBlock();
  llvm::IRBuilder<> at(&entry, entry.begin());
  return at.CreateAlloca(type, nullptr, name);
}

llvm::Value *Emitter::thread_id() {
  if (!tid_) {
    // Read once, at the top of the kernel, so that every use is dominated.
    llvm::BasicBlock &entry = kernel_->getEntryBlock();
    llvm::IRBuilder<> at(&entry, entry.getFirstInsertionPt());
    tid_ = at.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}, nullptr, "tid");
  }
  return tid_;
}

llvm::Value *Emitter::program_id(int axis) {
  static const llvm::Intrinsic::ID ids[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  return b_.CreateIntrinsic(ids[axis], {}, {});
}

llvm::Value *Emitter::num_programs(int axis) {
  static const llvm::Intrinsic::ID ids[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z};
  return b_.CreateIntrinsic(ids[axis], {}, {});
}

void Emitter::barrier() { b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); }

llvm::Value *Emitter::element_index(const Layout &l, int64_t r) {
  llvm::Value *e = b_.CreateAdd(b_.CreateMul(thread_id(), b_.getInt32(static_cast<uint32_t>(l.spt))),
                                b_.getInt32(static_cast<uint32_t>(l.base_of(r))));
  if (!l.exact()) e = b_.CreateURem(e, b_.getInt32(static_cast<uint32_t>(l.numel)));
  return e;
}

llvm::Value *Emitter::owns(const Layout &l, int64_t r) {
  if (l.exact()) return nullptr;
  llvm::Value *e = b_.CreateAdd(b_.CreateMul(thread_id(), b_.getInt32(static_cast<uint32_t>(l.spt))),
                                b_.getInt32(static_cast<uint32_t>(l.base_of(r))));
  return b_.CreateICmpULT(e, b_.getInt32(static_cast<uint32_t>(l.numel)));
}

llvm::Value *Emitter::constant(DType d, double x, int64_t n) {
  llvm::Type *t = type_of(d);
  if (sema::is_float(d)) return llvm::ConstantFP::get(t, x);
  if (d == DType::Int1) return b_.getInt1(n != 0);
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(n), sema::is_signed(d));
}

Tile Emitter::splat(ElemType e, const std::vector<int64_t> &shape, llvm::Value *v) {
  Tile t{e, shape, {}, Pattern::ChunkUniform};
  t.regs.assign(static_cast<size_t>(layout(shape).regs()), v);
  return t;
}

Tile Emitter::arange(int64_t start, int64_t end) {
  Tile t{ElemType{DType::Int32, false}, {end - start}, {}, Pattern::Contiguous};
  Layout l = layout(t.shape);
  for (int64_t r = 0; r < l.regs(); ++r)
    t.regs.push_back(b_.CreateAdd(element_index(l, r), b_.getInt32(static_cast<uint32_t>(start))));
  return t;
}

Tile Emitter::reshape(const Tile &t, const std::vector<int64_t> &shape) {
  Tile r = t;
  r.shape = shape;
  return r;
}

void Emitter::open_shared_region() {
  if (!smem_) {
    llvm::Type *array = llvm::ArrayType::get(b_.getInt8Ty(), 0);
    smem_ = new llvm::GlobalVariable(module_, array, false, llvm::GlobalValue::ExternalLinkage, nullptr, "tgrad_smem",
                                     nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    smem_->setAlignment(llvm::Align(16));
    region_size_ = new llvm::GlobalVariable(module_, b_.getInt32Ty(), false, llvm::GlobalValue::InternalLinkage,
                                            b_.getInt32(0), "tgrad_region_size");
    region_phase_ = entry_alloca(b_.getInt32Ty(), "region_phase");
    llvm::IRBuilder<> at(region_phase_->getParent(), std::next(region_phase_->getIterator()));
    at.CreateStore(at.getInt32(0), region_phase_);
  }
  llvm::Value *phase = b_.CreateLoad(b_.getInt32Ty(), region_phase_);
  region_base_ = b_.CreateMul(phase, b_.CreateLoad(b_.getInt32Ty(), region_size_));
  b_.CreateStore(b_.CreateXor(phase, b_.getInt32(1)), region_phase_);
}

llvm::Value *Emitter::shared(llvm::Value *offset, int64_t bytes) {
  region_bytes_ = std::max(region_bytes_, bytes);
  return b_.CreateGEP(b_.getInt8Ty(), smem_, b_.CreateAdd(region_base_, offset));
}

void Emitter::finish_shared() {
  if (!region_size_) return;
  const int64_t region = (region_bytes_ + 15) / 16 * 16;
  region_size_->setInitializer(b_.getInt32(static_cast<uint32_t>(region)));
  region_size_->setConstant(true);
  smem_bytes_ = 2 * region;
}

namespace {

// How a value sits in shared memory: bools as bytes.
llvm::Type *memory_type(llvm::Type *t, llvm::LLVMContext &c) {
  return t->isIntegerTy(1) ? llvm::Type::getInt8Ty(c) : t;
}

}  // namespace

Tile Emitter::broadcast(const Tile &t, const std::vector<int64_t> &shape) {
  if (t.shape == shape) return t;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (t.numel() == n && n == 1) return reshape(t, shape);
  if (t.numel() == 1) return splat(t.elem, shape, t.regs[0]);
  // Same elements in the same row-major order: the layout is the same.
  const bool same_order = t.numel() == n && [&] {
    std::vector<int64_t> a, b;
    for (int64_t d : t.shape)
      if (d != 1) a.push_back(d);
    for (int64_t d : shape)
      if (d != 1) b.push_back(d);
    return a == b;
  }();
  if (same_order) return reshape(t, shape);

  // Through shared memory: every thread writes the elements it owns, then
  // reads those its registers of the new shape stand for.
  const Layout ls = layout(t.shape), ld = layout(shape);
  llvm::Type *vt = type_of(t.elem), *mt = memory_type(vt, context());
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  open_shared_region();
  for (int64_t r = 0; r < ls.regs(); ++r) {
    llvm::Value *v = vt == mt ? t.regs[r] : b_.CreateZExt(t.regs[r], mt);
    llvm::Value *off = b_.CreateMul(element_index(ls, r), b_.getInt32(static_cast<uint32_t>(bytes)));
    b_.CreateStore(v, shared(off, ls.numel * bytes));
  }
  barrier();
  // Source strides, the shapes aligned at their last dimension.
  const size_t rank = shape.size(), srank = t.shape.size();
  std::vector<int64_t> sstride(rank, 0);
  int64_t stride = 1;
  for (size_t k = 0; k < srank; ++k) {
    size_t sd = srank - 1 - k, dd = rank - 1 - k;
    sstride[dd] = t.shape[sd] == 1 ? 0 : stride;
    stride *= t.shape[sd];
  }
  Tile out{t.elem, shape, {}, Pattern::Unknown};
  for (int64_t r = 0; r < ld.regs(); ++r) {
    llvm::Value *e = element_index(ld, r), *src = b_.getInt32(0);
    int64_t inner = 1;
    for (size_t k = rank; k-- > 0;) {
      if (sstride[k] != 0) {
        llvm::Value *i = b_.CreateURem(b_.CreateUDiv(e, b_.getInt32(static_cast<uint32_t>(inner))),
                                       b_.getInt32(static_cast<uint32_t>(shape[k])));
        src = b_.CreateAdd(src, b_.CreateMul(i, b_.getInt32(static_cast<uint32_t>(sstride[k]))));
      }
      inner *= shape[k];
    }
    llvm::Value *off = b_.CreateMul(src, b_.getInt32(static_cast<uint32_t>(bytes)));
    llvm::Value *v = b_.CreateLoad(mt, shared(off, ls.numel * bytes));
    out.regs.push_back(vt == mt ? v : b_.CreateTrunc(v, vt));
  }
  // What each chunk holds: chunks lie within a row when the row is a whole
  // number of chunks.
  const int64_t last = shape.empty() ? 1 : shape.back();
  if (last % ld.spt == 0) {
    const int64_t slast = t.shape.empty() ? 1 : t.shape.back();
    if (slast == 1 && rank >= 1)
      out.pattern = Pattern::ChunkUniform;
    else if (slast == last && ls.spt % ld.spt == 0 &&
             (t.pattern == Pattern::ChunkUniform || t.pattern == Pattern::Contiguous))
      out.pattern = t.pattern;  // (a prefix's counts stayed with the threads that held them)
  }
  return out;
}

llvm::Value *Emitter::truth(llvm::Value *v, ElemType from) {
  if (from.is_pointer) return b_.CreateIsNotNull(v);
  if (from.dtype == DType::Int1) return v;
  if (sema::is_float(from.dtype)) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
  return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
}

llvm::Value *Emitter::convert(llvm::Value *v, ElemType from, ElemType to) {
  if (from == to) return v;
  llvm::Type *tt = type_of(to);
  if (from.is_pointer && to.is_pointer) return v;
  if (from.is_pointer) return to.dtype == DType::Int1 ? truth(v, from) : b_.CreatePtrToInt(v, tt);
  if (to.is_pointer) return b_.CreateIntToPtr(b_.CreateSExtOrTrunc(v, b_.getInt64Ty()), tt);
  if (to.dtype == DType::Int1) return truth(v, from);
  const bool ff = sema::is_float(from.dtype), tf = sema::is_float(to.dtype);
  if (ff && tf) {
    if (sema::bits(from.dtype) == sema::bits(to.dtype))  // fp16 <-> bf16: through fp32
      return b_.CreateFPTrunc(b_.CreateFPExt(v, b_.getFloatTy()), tt);
    return sema::bits(from.dtype) < sema::bits(to.dtype) ? b_.CreateFPExt(v, tt) : b_.CreateFPTrunc(v, tt);
  }
  if (ff) return sema::is_signed(to.dtype) ? b_.CreateFPToSI(v, tt) : b_.CreateFPToUI(v, tt);
  const bool from_signed = sema::is_signed(from.dtype) && from.dtype != DType::Int1;
  if (tf) return from_signed ? b_.CreateSIToFP(v, tt) : b_.CreateUIToFP(v, tt);
  return from_signed ? b_.CreateSExtOrTrunc(v, tt) : b_.CreateZExtOrTrunc(v, tt);
}

Tile Emitter::cast(const Tile &t, ElemType to, bool bitcast) {
  if (t.elem == to && !bitcast) return t;  // keeps what is known of the values
  Tile out{to, t.shape, {}, Pattern::Unknown};
  llvm::Type *tt = type_of(to);
  for (llvm::Value *v : t.regs) out.regs.push_back(bitcast ? b_.CreateBitCast(v, tt) : convert(v, t.elem, to));
  // Integer widening keeps steps of one and equal values; anything keeps equal values.
  if (t.pattern == Pattern::ChunkUniform) out.pattern = Pattern::ChunkUniform;
  if (t.pattern == Pattern::Contiguous && !bitcast && sema::is_integer(to.dtype) && !to.is_pointer &&
      sema::bits(to.dtype) >= sema::bits(t.elem.dtype) && to.dtype != DType::Int1)
    out.pattern = Pattern::Contiguous;
  return out;
}

Tile Emitter::map(const Tile &a, ElemType out, const std::function<llvm::Value *(llvm::Value *)> &f) {
  Tile t{out, a.shape, {}, a.pattern == Pattern::ChunkUniform ? Pattern::ChunkUniform : Pattern::Unknown};
  for (llvm::Value *v : a.regs) t.regs.push_back(f(v));
  return t;
}

Tile Emitter::zip(const Tile &a, const Tile &b, ElemType out,
                  const std::function<llvm::Value *(llvm::Value *, llvm::Value *)> &f) {
  const bool uniform = a.pattern == Pattern::ChunkUniform && b.pattern == Pattern::ChunkUniform;
  Tile t{out, a.shape, {}, uniform ? Pattern::ChunkUniform : Pattern::Unknown};
  for (size_t r = 0; r < a.regs.size(); ++r) t.regs.push_back(f(a.regs[r], b.regs[r]));
  return t;
}

void Emitter::mark_prefix(Tile &mask, const Tile &low, const Tile &high, bool inclusive) {
  const Layout l = layout(mask.shape);
  const bool wide = low.regs[0]->getType()->isIntegerTy(64);
  mask.limits.clear();
  for (int64_t c = 0; c < l.reps; ++c) {
    // Lane j is on where low + j < high (<=): j < high - low (+ 1), saturated
    // so that no difference of two int32 wraps; int64 clamped into [0, spt].
    const size_t r0 = static_cast<size_t>(c * l.spt);
    llvm::Value *d;
    if (wide) {
      d = b_.CreateBinaryIntrinsic(llvm::Intrinsic::ssub_sat, high.regs[r0], low.regs[r0]);
      if (inclusive) d = b_.CreateBinaryIntrinsic(llvm::Intrinsic::sadd_sat, d, b_.getInt64(1));
      d = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, d, b_.getInt64(0));
      d = b_.CreateTrunc(b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, d, b_.getInt64(static_cast<uint64_t>(l.spt))),
                         b_.getInt32Ty());
    } else {
      d = saturating_i32("sub", high.regs[r0], low.regs[r0]);
      if (inclusive) d = saturating_i32("add", d, b_.getInt32(1));
    }
    mask.limits.push_back(d);
  }
  mask.pattern = Pattern::Prefix;
}

llvm::Value *Emitter::saturating_i32(const std::string &op, llvm::Value *a, llvm::Value *b) {
  // PTX's one instruction (LLVM expands its llvm.ssub.sat into six).
  return ptx(op + ".sat.s32 $0, $1, $2;", "=r,r,r", b_.getInt32Ty(), {a, b}, Memory::None);
}

void Emitter::and_prefix(Tile &result, const Tile &a, const Tile &b) {
  const Layout l = layout(result.shape);
  const bool ap = a.pattern == Pattern::Prefix, bp = b.pattern == Pattern::Prefix;
  if (!(ap && (bp || b.pattern == Pattern::ChunkUniform)) && !(bp && a.pattern == Pattern::ChunkUniform)) return;
  result.limits.clear();
  for (int64_t c = 0; c < l.reps; ++c) {
    const size_t r0 = static_cast<size_t>(c * l.spt);
    llvm::Value *v;
    if (ap && bp)
      v = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a.limits[static_cast<size_t>(c)],
                                   b.limits[static_cast<size_t>(c)]);
    else  // a prefix and a whole chunk on or off
      v = b_.CreateSelect(ap ? b.regs[r0] : a.regs[r0], (ap ? a : b).limits[static_cast<size_t>(c)], b_.getInt32(0));
    result.limits.push_back(v);
  }
  result.pattern = Pattern::Prefix;
}

llvm::Value *Emitter::intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Type *> types,
                                std::vector<llvm::Value *> args) {
  return b_.CreateIntrinsic(id, types, args);
}

llvm::Value *Emitter::divide_full(llvm::Value *a, llvm::Value *b) {
  llvm::Type *f = b_.getFloatTy();
  llvm::InlineAsm *div = llvm::InlineAsm::get(llvm::FunctionType::get(f, {f, f}, false), "div.full.f32 $0, $1, $2;",
                                              "=f,f,f", /*hasSideEffects=*/false);
  return b_.CreateCall(div, {a, b});
}

llvm::Value *Emitter::call_libdevice(const std::string &name, llvm::Type *type, std::vector<llvm::Value *> args) {
  std::vector<llvm::Type *> params;
  for (llvm::Value *a : args) params.push_back(a->getType());
  llvm::FunctionCallee f = module_.getOrInsertFunction(name, llvm::FunctionType::get(type, params, false));
  return b_.CreateCall(f, args);
}

llvm::Value *Emitter::guarded(llvm::Value *cond, const std::function<llvm::Value *()> &then, llvm::Value *otherwise) {
  llvm::BasicBlock *from = b_.GetInsertBlock();
  llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(context(), "then", kernel_);
  llvm::BasicBlock *merge = llvm::BasicBlock::Create(context(), "merge", kernel_);
  b_.CreateCondBr(cond, then_bb, merge);
  b_.SetInsertPoint(then_bb);
  llvm::Value *v = then();
  llvm::BasicBlock *then_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  llvm::PHINode *phi = b_.CreatePHI(v->getType(), 2);
  phi->addIncoming(v, then_end);
  phi->addIncoming(otherwise, from);
  return phi;
}

void Emitter::guarded(llvm::Value *cond, const std::function<void()> &then) {
  llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(context(), "then", kernel_);
  llvm::BasicBlock *merge = llvm::BasicBlock::Create(context(), "merge", kernel_);
  b_.CreateCondBr(cond, then_bb, merge);
  b_.SetInsertPoint(then_bb);
  then();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
}

}  // namespace tgrad::codegen
