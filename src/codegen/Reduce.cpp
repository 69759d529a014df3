// Reductions (tl.sum, tl.max, tl.min) across the threads of a CTA.
//
// A whole tile reduces in three steps: each thread combines its own
// registers, a warp combines its lanes with butterfly shuffles (every lane
// ends with the warp's value), and the warps' values meet in shared memory,
// where every thread reads all of them in the same order, so every thread
// holds the same result (a scalar, Layout.h), combined in Triton's tree: the
// lanes' butterfly (xor 16, 8, 4, 2, 1) and the warps' one (for 4 warps,
// (w0 + w2) + (w1 + w3)). A reduction along one axis of
// a larger tile goes through shared memory: each thread combines, for each
// element of the result it holds, the column or row it stands for.
#include <limits>

#include "llvm/IR/IntrinsicsNVPTX.h"
#include "src/codegen/Emitter.h"

namespace tgrad::codegen {

using sema::DType;
using sema::ElemType;

llvm::Value *Emitter::identity(ReduceOp op, DType d) {
  llvm::Type *t = type_of(d);
  if (op == ReduceOp::Sum) return llvm::Constant::getNullValue(t);
  const bool max = op == ReduceOp::Max;
  if (sema::is_float(d)) return llvm::ConstantFP::getInfinity(t, max);
  const unsigned bits = t->getIntegerBitWidth();
  if (!sema::is_signed(d) || d == DType::Int1)
    return llvm::ConstantInt::get(t, max ? llvm::APInt::getMinValue(bits) : llvm::APInt::getMaxValue(bits));
  return llvm::ConstantInt::get(t, max ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getSignedMaxValue(bits));
}

llvm::Value *Emitter::combine(ReduceOp op, llvm::Value *a, llvm::Value *b, DType d) {
  const bool fp = sema::is_float(d);
  if (op == ReduceOp::Sum) return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
  const bool max = op == ReduceOp::Max;
  // tl.maximum / tl.minimum (and so tl.max / tl.min) with propagate_nan=NONE: maxnum / minnum.
  if (fp) return b_.CreateBinaryIntrinsic(max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, a, b);
  const bool sign = sema::is_signed(d) && d != DType::Int1;
  llvm::Value *pick_a = max ? (sign ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b))
                            : (sign ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b));
  return b_.CreateSelect(pick_a, a, b);
}

llvm::Value *Emitter::shuffle_xor(llvm::Value *v, int lane_mask) {
  llvm::Type *t = v->getType();
  const unsigned bits = static_cast<unsigned>(module_.getDataLayout().getTypeSizeInBits(t));
  auto shfl = [&](llvm::Value *x32) {
    return b_.CreateIntrinsic(
        llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
        {b_.getInt32(0xffffffffu), x32, b_.getInt32(static_cast<uint32_t>(lane_mask)), b_.getInt32(0x1f)});
  };
  llvm::Type *int_t = b_.getIntNTy(bits);
  llvm::Value *as_int = t->isIntegerTy() ? v : b_.CreateBitCast(v, int_t);
  llvm::Value *result;
  if (bits == 64) {
    llvm::Value *lo = shfl(b_.CreateTrunc(as_int, b_.getInt32Ty()));
    llvm::Value *hi = shfl(b_.CreateTrunc(b_.CreateLShr(as_int, 32), b_.getInt32Ty()));
    result = b_.CreateOr(b_.CreateZExt(lo, int_t), b_.CreateShl(b_.CreateZExt(hi, int_t), 32));
  } else {
    result = b_.CreateTrunc(shfl(b_.CreateZExt(as_int, b_.getInt32Ty())), int_t);
  }
  return t->isIntegerTy() ? result : b_.CreateBitCast(result, t);
}

Tile Emitter::reduce(const Tile &input, std::optional<int> axis, ReduceOp op, DType out) {
  const ElemType oe{out, false};
  const Tile x = cast(input, oe);
  const Layout l = layout(x.shape);
  llvm::Type *t = type_of(oe);
  llvm::Type *mt = t->isIntegerTy(1) ? b_.getInt8Ty() : t;
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  const int warps = static_cast<int>(threads_ / 32);

  if (!axis || x.shape.size() <= 1) {
    llvm::Value *acc = identity(op, out);
    for (int64_t r = 0; r < l.regs(); ++r) {
      llvm::Value *v = x.regs[r];
      if (llvm::Value *own = owns(l, r)) v = b_.CreateSelect(own, v, identity(op, out));
      acc = r == 0 ? v : combine(op, acc, v, out);
    }
    for (int m = 16; m >= 1; m /= 2) acc = combine(op, acc, shuffle_xor(acc, m), out);
    if (warps > 1) {
      open_shared_region();
      llvm::Value *lane = b_.CreateAnd(thread_id(), b_.getInt32(31));
      llvm::Value *warp = b_.CreateLShr(thread_id(), b_.getInt32(5));
      llvm::Value *value = acc;
      guarded(b_.CreateICmpEQ(lane, b_.getInt32(0)), [&] {
        llvm::Value *v = t == mt ? value : b_.CreateZExt(value, mt);
        b_.CreateStore(v, shared(b_.CreateMul(warp, b_.getInt32(static_cast<uint32_t>(bytes))), warps * bytes));
      });
      barrier();
      // Triton's order: warp w's value goes to lane w, whose butterfly (xor warps/2, ..., 1) leaves
      // v[0] = (v[0] + v[warps/2]) + ... at lane 0; every thread here takes the same tree from shared
      // memory (for 4 warps, (w0 + w2) + (w1 + w3)), so 16-bit sums round as Triton's do.
      std::vector<llvm::Value *> v(static_cast<size_t>(warps));
      for (int w = 0; w < warps; ++w) {
        v[static_cast<size_t>(w)] =
            b_.CreateLoad(mt, shared(b_.getInt32(static_cast<uint32_t>(w * bytes)), warps * bytes));
        if (t != mt) v[static_cast<size_t>(w)] = b_.CreateTrunc(v[static_cast<size_t>(w)], t);
      }
      for (int n = warps / 2; n >= 1; n /= 2)  // lanes [0, n) hold the partial sums the next step needs
        for (int w = 0; w < n; ++w)
          v[static_cast<size_t>(w)] = combine(op, v[static_cast<size_t>(w)], v[static_cast<size_t>(w ^ n)], out);
      acc = v[0];
    }
    return Tile{oe, {}, {acc}, Pattern::ChunkUniform};
  }

  // Along one axis: the tile in shared memory, row-major.
  const int a = *axis;
  open_shared_region();
  for (int64_t r = 0; r < l.regs(); ++r) {
    llvm::Value *v = t == mt ? x.regs[r] : b_.CreateZExt(x.regs[r], mt);
    b_.CreateStore(
        v, shared(b_.CreateMul(element_index(l, r), b_.getInt32(static_cast<uint32_t>(bytes))), l.numel * bytes));
  }
  barrier();
  std::vector<int64_t> shape;
  int64_t inner = 1;  // elements between neighbours along the axis
  for (size_t k = 0; k < x.shape.size(); ++k) {
    if (static_cast<int>(k) != a) shape.push_back(x.shape[k]);
    if (static_cast<int>(k) > a) inner *= x.shape[k];
  }
  const int64_t extent = x.shape[static_cast<size_t>(a)];
  const Layout lr = layout(shape);
  Tile result{oe, shape, {}, Pattern::Unknown};
  for (int64_t r = 0; r < lr.regs(); ++r) {
    // Result element e = (outer, inner) -> the source's first element outer*extent*inner + inner.
    llvm::Value *e = element_index(lr, r);
    llvm::Value *outer_i = b_.CreateUDiv(e, b_.getInt32(static_cast<uint32_t>(inner)));
    llvm::Value *inner_i = b_.CreateURem(e, b_.getInt32(static_cast<uint32_t>(inner)));
    llvm::Value *first =
        b_.CreateAdd(b_.CreateMul(outer_i, b_.getInt32(static_cast<uint32_t>(extent * inner))), inner_i);
    // A loop over the axis (not unrolled here: LLVM decides).
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    llvm::BasicBlock *body = llvm::BasicBlock::Create(context(), "reduce", kernel_);
    llvm::BasicBlock *done = llvm::BasicBlock::Create(context(), "reduced", kernel_);
    b_.CreateBr(body);
    b_.SetInsertPoint(body);
    llvm::PHINode *k = b_.CreatePHI(b_.getInt32Ty(), 2);
    llvm::PHINode *acc = b_.CreatePHI(t, 2);
    k->addIncoming(b_.getInt32(0), pre);
    acc->addIncoming(identity(op, out), pre);
    llvm::Value *idx = b_.CreateAdd(first, b_.CreateMul(k, b_.getInt32(static_cast<uint32_t>(inner))));
    llvm::Value *v =
        b_.CreateLoad(mt, shared(b_.CreateMul(idx, b_.getInt32(static_cast<uint32_t>(bytes))), l.numel * bytes));
    if (t != mt) v = b_.CreateTrunc(v, t);
    llvm::Value *next_acc = combine(op, acc, v, out);
    llvm::Value *next_k = b_.CreateAdd(k, b_.getInt32(1));
    k->addIncoming(next_k, b_.GetInsertBlock());
    acc->addIncoming(next_acc, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpULT(next_k, b_.getInt32(static_cast<uint32_t>(extent))), body, done);
    b_.SetInsertPoint(done);
    result.regs.push_back(next_acc);
  }
  return result;
}

Tile Emitter::arg_reduce(const Tile &input, std::optional<int> axis, bool max) {
  // Values compare in their own dtype, floats narrower than 32 bits in fp32 (exact).
  const DType vd =
      sema::is_float(input.elem.dtype) && sema::bits(input.elem.dtype) < 32 ? DType::FP32 : input.elem.dtype;
  const Tile x = cast(input, ElemType{vd, false});
  const Layout l = layout(x.shape);
  llvm::Type *vt = type_of(vd), *it = b_.getInt32Ty();
  const int64_t vbytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(vt));
  const bool fp = sema::is_float(vd), sign = sema::is_signed(vd) && vd != DType::Int1;
  // (b, ib) replaces (a, ia) where b is better, or as good at a smaller index.
  auto better = [&](llvm::Value *a, llvm::Value *ia, llvm::Value *bv, llvm::Value *ib) {
    using P = llvm::CmpInst::Predicate;
    llvm::Value *gt = b_.CreateCmp(fp    ? (max ? P::FCMP_OGT : P::FCMP_OLT)
                                   : max ? (sign ? P::ICMP_SGT : P::ICMP_UGT)
                                         : (sign ? P::ICMP_SLT : P::ICMP_ULT),
                                   bv, a);
    llvm::Value *eq = fp ? b_.CreateFCmpOEQ(bv, a) : b_.CreateICmpEQ(bv, a);
    return b_.CreateOr(gt, b_.CreateAnd(eq, b_.CreateICmpULT(ib, ia)));
  };
  auto step = [&](llvm::Value *&a, llvm::Value *&ia, llvm::Value *bv, llvm::Value *ib) {
    llvm::Value *take = better(a, ia, bv, ib);
    a = b_.CreateSelect(take, bv, a);
    ia = b_.CreateSelect(take, ib, ia);
  };
  const ReduceOp worst_op = max ? ReduceOp::Max : ReduceOp::Min;
  if (!axis || x.shape.size() <= 1) {
    llvm::Value *acc = identity(worst_op, vd), *idx = b_.getInt32(0x7fffffff);
    for (int64_t r = 0; r < l.regs(); ++r) {
      llvm::Value *v = x.regs[r], *i = element_index(l, r);
      if (llvm::Value *own = owns(l, r)) i = b_.CreateSelect(own, i, b_.getInt32(0x7fffffff));
      if (llvm::Value *own = owns(l, r)) v = b_.CreateSelect(own, v, identity(worst_op, vd));
      step(acc, idx, v, i);
    }
    for (int m = 16; m >= 1; m /= 2) step(acc, idx, shuffle_xor(acc, m), shuffle_xor(idx, m));
    const int warps = static_cast<int>(threads_ / 32);
    if (warps > 1) {
      const int64_t bytes = warps * (vbytes + 4);
      open_shared_region();
      llvm::Value *lane = b_.CreateAnd(thread_id(), b_.getInt32(31));
      llvm::Value *warp = b_.CreateLShr(thread_id(), b_.getInt32(5));
      llvm::Value *a = acc, *ia = idx;
      guarded(b_.CreateICmpEQ(lane, b_.getInt32(0)), [&] {
        b_.CreateStore(a, shared(b_.CreateMul(warp, b_.getInt32(static_cast<uint32_t>(vbytes))), bytes));
        b_.CreateStore(ia, shared(b_.CreateAdd(b_.getInt32(static_cast<uint32_t>(warps * vbytes)),
                                               b_.CreateMul(warp, b_.getInt32(4))),
                                  bytes));
      });
      barrier();
      for (int w = 0; w < warps; ++w) {
        llvm::Value *v = b_.CreateLoad(vt, shared(b_.getInt32(static_cast<uint32_t>(w * vbytes)), bytes));
        llvm::Value *i = b_.CreateLoad(it, shared(b_.getInt32(static_cast<uint32_t>(warps * vbytes + w * 4)), bytes));
        if (w == 0) {
          acc = v;
          idx = i;
        } else {
          step(acc, idx, v, i);
        }
      }
    }
    return Tile{ElemType{DType::Int32, false}, {}, {idx}, Pattern::ChunkUniform};
  }
  // Along one axis, through shared memory.
  const int a = *axis;
  open_shared_region();
  for (int64_t r = 0; r < l.regs(); ++r)
    b_.CreateStore(x.regs[r], shared(b_.CreateMul(element_index(l, r), b_.getInt32(static_cast<uint32_t>(vbytes))),
                                     l.numel * vbytes));
  barrier();
  std::vector<int64_t> shape;
  int64_t inner = 1;
  for (size_t k = 0; k < x.shape.size(); ++k) {
    if (static_cast<int>(k) != a) shape.push_back(x.shape[k]);
    if (static_cast<int>(k) > a) inner *= x.shape[k];
  }
  const int64_t extent = x.shape[static_cast<size_t>(a)];
  const Layout lr = layout(shape);
  Tile result{ElemType{DType::Int32, false}, shape, {}, Pattern::Unknown};
  for (int64_t r = 0; r < lr.regs(); ++r) {
    llvm::Value *e = element_index(lr, r);
    llvm::Value *first = b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(e, b_.getInt32(static_cast<uint32_t>(inner))),
                                                   b_.getInt32(static_cast<uint32_t>(extent * inner))),
                                      b_.CreateURem(e, b_.getInt32(static_cast<uint32_t>(inner))));
    // Unrolled: LLVM keeps what it can in registers; the extent is a block size.
    llvm::Value *acc = nullptr, *idx = nullptr;
    for (int64_t k = 0; k < extent; ++k) {
      llvm::Value *off = b_.CreateAdd(first, b_.getInt32(static_cast<uint32_t>(k * inner)));
      llvm::Value *v =
          b_.CreateLoad(vt, shared(b_.CreateMul(off, b_.getInt32(static_cast<uint32_t>(vbytes))), l.numel * vbytes));
      if (k == 0) {
        acc = v;
        idx = b_.getInt32(0);
      } else {
        step(acc, idx, v, b_.getInt32(static_cast<uint32_t>(k)));
      }
    }
    result.regs.push_back(idx);
  }
  return result;
}

}  // namespace tgrad::codegen
