// Global memory: tl.load, tl.store, tl.atomic_add and tl.atomic_xchg over tiles of pointers.
//
// A chunk of a thread whose pointers are known to step by one element
// (Pattern::Contiguous) is one vector access of up to 16 bytes, taken when
// the kernel finds the chunk's first address aligned to the vector's size
// and every lane of its mask on; else the chunk is one predicated access per
// element, so that a ragged row or an odd stride is slower, never wrong.
// Masked-off lanes of a load give `other`.
//
// As Triton writes them: each vector access is inline PTX under its
// predicate, in one straight line over the chunks (LLVM has no predicated
// load, and branches around each chunk cost registers). The per-element
// accesses follow out of line, behind one test for the whole access: only a
// thread at a ragged end or an odd stride takes them. Where the mask is a
// prefix (`cols < N`, Pattern::Prefix) a chunk's lanes come from one count
// instead of a predicate per lane held from the comparison to the access.
// Before (a branch per chunk, a predicate per lane), layer norm's backward
// in fp32 took 83 registers, 2 CTAs of 256 threads per multiprocessor, and
// 1.18x Triton's time (bench/PTX.md).
#include <algorithm>
#include <string>

#include "llvm/IR/InlineAsm.h"
#include "src/codegen/Emitter.h"

namespace tgrad::codegen {

using sema::DType;
using sema::ElemType;

namespace {

// Bools are bytes in memory, as in Triton.
llvm::Type *memory_type(llvm::Type *t, llvm::LLVMContext &c) {
  return t->isIntegerTy(1) ? llvm::Type::getInt8Ty(c) : t;
}

// How one element travels through inline PTX: its register (constraint and
// width) and its type in a one-element access. Bytes sit in 16-bit registers
// (PTX has no 8-bit ones).
struct Element {
  int64_t bytes;
  std::string reg;   // "h", "r", "l"
  unsigned bits;     // of the register
  std::string type;  // ".u8", ".b16", ".b32", ".b64"
};

Element element_of(int64_t bytes) {
  switch (bytes) {
    case 1: return {1, "h", 16, ".u8"};
    case 2: return {2, "h", 16, ".b16"};
    case 4: return {4, "r", 32, ".b32"};
    default: return {8, "l", 64, ".b64"};
  }
}

// The elements of one vector access of a thread's chunks of `ptr`: 1 where
// the pointers are not known to step by one element. PTX vectors have at
// most 4 elements: 16-bit ones travel paired in 32-bit words, bytes as
// .v4.u8.
int64_t vector_width(const Tile &ptr, const Layout &l, int64_t bytes) {
  if (ptr.pattern != Pattern::Contiguous) return 1;
  const int64_t widest = bytes == 1 ? 4 : 16;
  int64_t vw = l.spt;
  while (vw > 1 && vw * bytes > widest) vw /= 2;
  return vw;
}

std::string operand(int k) { return "$" + std::to_string(k); }
std::string num(int64_t k) { return std::to_string(k); }

std::string at(int addr, int64_t offset) { return "[" + operand(addr) + (offset ? "+" + num(offset) : "") + "]"; }

// "{$first, ..}" over n operands, or "$first" alone.
std::string operand_list(int first, int64_t n) {
  if (n == 1) return operand(first);
  std::string list = "{";
  for (int64_t j = 0; j < n; ++j) list += (j ? ", " : "") + operand(first + static_cast<int>(j));
  return list + "}";
}

std::string vector_suffix(int64_t n) { return n > 1 ? ".v" + num(n) : ""; }
}  // namespace

llvm::Value *Emitter::aligned(llvm::Value *ptr, int64_t bytes) {
  return b_.CreateICmpEQ(
      b_.CreateAnd(b_.CreatePtrToInt(ptr, b_.getInt64Ty()), b_.getInt64(static_cast<uint64_t>(bytes - 1))),
      b_.getInt64(0));
}

llvm::Value *Emitter::chunk_limit(const Tile *mask, const Layout &l, int64_t r0) {
  if (!mask || mask->pattern != Pattern::Prefix) return nullptr;
  llvm::Value *limit = mask->limits[static_cast<size_t>(r0 / l.spt)];
  if (const int64_t k = r0 % l.spt)  // a vector from the middle of its chunk
    limit = saturating_i32("sub", limit, b_.getInt32(static_cast<uint32_t>(k)));
  return limit;
}

llvm::Value *Emitter::ptx(const std::string &text, const std::string &constraints, llvm::Type *result,
                          const std::vector<llvm::Value *> &args, Memory memory) {
  std::vector<llvm::Type *> params;
  for (llvm::Value *a : args) params.push_back(a->getType());
  // The clobber keeps accesses in order in the machine code; the call's
  // attributes tell LLVM's passes the same.
  llvm::InlineAsm *asm_ =
      llvm::InlineAsm::get(llvm::FunctionType::get(result, params, false), text,
                           constraints + (memory == Memory::None ? "" : ",~{memory}"), memory == Memory::Writes);
  llvm::CallInst *call = b_.CreateCall(asm_, args);
  if (memory == Memory::Writes) return call;
  // A load may read memory (so it stays after the stores and barriers
  // before it) and goes where nothing reads its result (a dead load moves
  // no bytes).
  if (memory == Memory::Reads)
    call->setOnlyReadsMemory();
  else
    call->setDoesNotAccessMemory();
  call->setDoesNotThrow();
  call->addFnAttr(llvm::Attribute::WillReturn);
  return call;
}

namespace {

// The registers a load's chunk lands in: 16-bit elements stay paired in
// 32-bit words, as loaded, until each is used (half the registers while a
// row's loads are in flight); other elements one a register.
struct Landing {
  Element e;
  int64_t vw;
  bool paired() const { return e.bytes == 2 && vw >= 2; }
  int n() const { return static_cast<int>(paired() ? vw / 2 : vw); }
  std::string code() const { return paired() ? "r" : e.reg; }
  unsigned bits() const { return paired() ? 32 : e.bits; }
};

}  // namespace

std::string Emitter::lane_predicates(int64_t vw, const ChunkMask &mask, llvm::Value *vector, int first,
                                     std::vector<llvm::Value *> &args, std::string &constraints,
                                     std::vector<std::string> &guards) {
  std::string text;
  if (mask.limit) {
    // Lane j: j < limit, and not taken by the vector.
    args.push_back(mask.limit);
    constraints += ",r";
    if (vector) {
      args.push_back(vector);
      constraints += ",b";
    }
    text += ".reg .pred s<" + num(vw) + ">;\n";
    for (int64_t j = 0; j < vw; ++j) {
      text += vector ? "setp.gt.and.s32 s" + num(j) + ", " + operand(first) + ", " + num(j) + ", !" +
                           operand(first + 1) + ";\n"
                     : "setp.gt.s32 s" + num(j) + ", " + operand(first) + ", " + num(j) + ";\n";
      guards.push_back("@s" + num(j) + " ");
    }
    return text;
  }
  int next = first;
  for (int64_t j = 0; j < vw; ++j) {
    llvm::Value *lane = mask.lanes.empty() ? nullptr : mask.lanes[static_cast<size_t>(j)];
    if (vector) lane = lane ? b_.CreateAnd(lane, b_.CreateNot(vector)) : b_.CreateNot(vector);
    if (!lane) {  // always on
      guards.push_back("");
      continue;
    }
    guards.push_back("@" + operand(next++) + " ");
    args.push_back(lane);
    constraints += ",b";
  }
  return text;
}

llvm::Value *Emitter::vector_ok(llvm::Value *ptr, int64_t vw, int64_t bytes, const ChunkMask &mask) {
  llvm::Value *ok = aligned(ptr, vw * bytes);
  if (mask.limit) ok = b_.CreateAnd(ok, b_.CreateICmpSGE(mask.limit, b_.getInt32(static_cast<uint32_t>(vw))));
  for (llvm::Value *m : mask.lanes) ok = b_.CreateAnd(ok, m);
  return ok;
}

Tile Emitter::load(const Tile &ptr, const Tile *mask, const Tile *other) {
  const ElemType ve{ptr.elem.dtype, false};
  llvm::Type *vt = type_of(ve), *mt = memory_type(vt, context());
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  const Layout l = layout(ptr.shape);
  Tile out{ve, ptr.shape, std::vector<llvm::Value *>(static_cast<size_t>(l.regs())), Pattern::Unknown};
  if (ptr.pattern == Pattern::ChunkUniform && !mask) out.pattern = Pattern::ChunkUniform;
  const int64_t vw = vector_width(ptr, l, bytes);
  const Landing land{element_of(bytes), vw};
  const int n = land.n();
  llvm::Type *reg = b_.getIntNTy(land.bits()), *bits = b_.getIntNTy(static_cast<unsigned>(bytes * 8));
  llvm::Type *result = n == 1 ? reg
                              : static_cast<llvm::Type *>(llvm::StructType::get(
                                    context(), std::vector<llvm::Type *>(static_cast<size_t>(n), reg)));
  // Inline PTX over the landing registers: operands $0.. are they, $n the
  // address, then `args`; the registers' values before are tied to them
  // (where nothing loads a lane it keeps `other`).
  auto call = [&](const std::string &text, std::vector<llvm::Value *> args, std::string constraints,
                  llvm::Value *before) {
    std::string outs;
    for (int j = 0; j < n; ++j) {
      outs += "=" + land.code() + ",";
      args.push_back(n == 1 ? before : b_.CreateExtractValue(before, static_cast<unsigned>(j)));
      constraints += "," + num(j);
    }
    return ptx("{\n" + text + "}", outs + constraints, result, args, Memory::Reads);
  };
  struct Chunk {
    int64_t r0;
    ChunkMask mask;
    llvm::Value *ok = nullptr, *regs = nullptr;
  };
  std::vector<Chunk> chunks;
  const int addr = n;
  for (int64_t r0 = 0; r0 < l.regs(); r0 += vw) {
    if (vw == 1 && !mask) {
      // Always read, one element: LLVM's own load, which it may combine and move.
      llvm::Value *v = b_.CreateLoad(mt, ptr.regs[r0]);
      out.regs[r0] = vt == mt ? v : b_.CreateTrunc(v, vt);
      continue;
    }
    Chunk c{r0, {}, nullptr, llvm::UndefValue::get(result)};
    if (vw > 1) c.mask.limit = chunk_limit(mask, l, r0);
    for (int64_t j = 0; j < vw; ++j) {
      if (mask && !c.mask.limit) c.mask.lanes.push_back(mask->regs[r0 + j]);
      llvm::Value *o = other ? other->regs[r0 + j] : llvm::Constant::getNullValue(vt);
      o = b_.CreateZExt(b_.CreateBitCast(vt == mt ? o : b_.CreateZExt(o, mt), bits), reg);
      const unsigned word = static_cast<unsigned>(land.paired() ? j / 2 : j);
      if (land.paired() && j % 2) {
        llvm::Value *lo = n == 1 ? c.regs : b_.CreateExtractValue(c.regs, word);
        o = b_.CreateOr(lo, b_.CreateShl(o, 16));
      }
      c.regs = n == 1 ? o : b_.CreateInsertValue(c.regs, o, word);
    }
    if (vw == 1) {  // one lane under its predicate
      std::vector<llvm::Value *> args{ptr.regs[r0]};
      std::string constraints = "l";
      std::vector<std::string> guards;
      std::string text = lane_predicates(1, c.mask, nullptr, addr + 1, args, constraints, guards);
      c.regs =
          call(text + guards[0] + "ld.global" + land.e.type + " $0, " + at(addr, 0) + ";\n", args, constraints, c.regs);
    } else {  // the vector, where aligned and every lane on
      c.ok = vector_ok(ptr.regs[r0], vw, bytes, c.mask);
      c.regs = call("@" + operand(addr + 1) + " ld.global" + vector_suffix(n) +
                        (land.paired() ? ".b32 " : land.e.type + " ") + operand_list(0, n) + ", " + at(addr, 0) + ";\n",
                    {ptr.regs[r0], c.ok}, "l,b", c.regs);
    }
    chunks.push_back(c);
  }
  if (vw > 1 && !chunks.empty()) {
    // The chunks whose vector was not taken, lane by lane: one test for the
    // whole access, and out of line, since only a ragged end or an odd
    // stride takes it (inline, under predicates, its registers counted
    // everywhere: layer norm's forward in fp16 took 92 registers).
    llvm::Value *all = chunks[0].ok;
    for (size_t k = 1; k < chunks.size(); ++k) all = b_.CreateAnd(all, chunks[k].ok);
    llvm::BasicBlock *from = b_.GetInsertBlock();
    llvm::BasicBlock *slow = llvm::BasicBlock::Create(context(), "lanes", kernel_);
    llvm::BasicBlock *merge = llvm::BasicBlock::Create(context(), "loaded", kernel_);
    b_.CreateCondBr(all, merge, slow);
    b_.SetInsertPoint(slow);
    std::vector<llvm::Value *> lanes;
    for (Chunk &c : chunks) {
      std::vector<llvm::Value *> args{ptr.regs[c.r0]};
      std::string constraints = "l";
      std::vector<std::string> guards;
      std::string text = lane_predicates(vw, c.mask, c.ok, addr + 1, args, constraints, guards);
      if (land.paired()) {
        // Through 16-bit registers, unpacked from the words and packed back.
        text += ".reg .b16 t<" + num(vw) + ">;\n";
        for (int w = 0; w < n; ++w)
          text += "mov.b32 {t" + num(2 * w) + ", t" + num(2 * w + 1) + "}, $" + num(w) + ";\n";
        for (int64_t j = 0; j < vw; ++j)
          text += guards[static_cast<size_t>(j)] + "ld.global.b16 t" + num(j) + ", " + at(addr, j * bytes) + ";\n";
        for (int w = 0; w < n; ++w)
          text += "mov.b32 $" + num(w) + ", {t" + num(2 * w) + ", t" + num(2 * w + 1) + "};\n";
      } else {
        for (int j = 0; j < n; ++j)
          text += guards[static_cast<size_t>(j)] + "ld.global" + land.e.type + " " + operand(j) + ", " +
                  at(addr, j * bytes) + ";\n";
      }
      lanes.push_back(call(text, args, constraints, c.regs));
    }
    llvm::BasicBlock *slow_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    for (size_t k = 0; k < chunks.size(); ++k) {
      llvm::PHINode *phi = b_.CreatePHI(result, 2);
      phi->addIncoming(chunks[k].regs, from);
      phi->addIncoming(lanes[k], slow_end);
      chunks[k].regs = phi;
    }
  }
  for (const Chunk &c : chunks)
    for (int j = 0; j < n; ++j) {
      llvm::Value *r = n == 1 ? c.regs : b_.CreateExtractValue(c.regs, static_cast<unsigned>(j));
      for (int h = 0; h < (land.paired() ? 2 : 1); ++h) {
        llvm::Value *v = b_.CreateBitCast(b_.CreateTrunc(h ? b_.CreateLShr(r, 16) : r, bits), mt);
        out.regs[static_cast<size_t>(c.r0 + (land.paired() ? 2 * j + h : j))] = vt == mt ? v : b_.CreateTrunc(v, vt);
      }
    }
  return out;
}

void Emitter::store(const Tile &ptr, const Tile &value, const Tile *mask) {
  llvm::Type *vt = type_of(ElemType{ptr.elem.dtype, false}), *mt = memory_type(vt, context());
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  const Layout l = layout(ptr.shape);
  const Element e = element_of(bytes);
  llvm::Type *reg = b_.getIntNTy(e.bits), *bits = b_.getIntNTy(static_cast<unsigned>(bytes * 8));
  const int64_t vw = vector_width(ptr, l, bytes);
  // Operands of a chunk's inline PTX: the address $0, the elements $1..$vw,
  // then the predicates.
  const int first = 1, after = static_cast<int>(vw) + 1;
  struct Chunk {
    std::vector<llvm::Value *> args;  // the address and the elements
    ChunkMask mask;
    llvm::Value *ok = nullptr;
  };
  auto lanes = [&](const Chunk &c) {
    std::vector<llvm::Value *> args = c.args;
    std::string constraints = "l";
    for (int64_t j = 0; j < vw; ++j) constraints += "," + e.reg;
    std::vector<std::string> guards;
    std::string text = lane_predicates(vw, c.mask, c.ok, after, args, constraints, guards);
    for (int64_t j = 0; j < vw; ++j)
      text += guards[static_cast<size_t>(j)] + "st.global" + e.type + " " + at(0, j * bytes) + ", " +
              operand(first + static_cast<int>(j)) + ";\n";
    ptx("{\n" + text + "}", constraints, b_.getVoidTy(), args, Memory::Writes);
  };
  std::vector<Chunk> chunks;
  for (int64_t r0 = 0; r0 < l.regs(); r0 += vw) {
    // A chunk is owned whole or not at all (Layout.h: numel is a multiple of spt).
    llvm::Value *own = owns(l, r0);
    llvm::Value *v0 = vt == mt ? value.regs[r0] : b_.CreateZExt(value.regs[r0], mt);
    if (vw == 1 && !mask && !own) {
      b_.CreateStore(v0, ptr.regs[r0]);
      continue;
    }
    Chunk c;
    c.args.push_back(ptr.regs[r0]);
    if (vw > 1) c.mask.limit = chunk_limit(mask, l, r0);
    if (c.mask.limit && own) c.mask.limit = b_.CreateSelect(own, c.mask.limit, b_.getInt32(0));
    for (int64_t j = 0; j < vw; ++j) {
      llvm::Value *v = vt == mt ? value.regs[r0 + j] : b_.CreateZExt(value.regs[r0 + j], mt);
      c.args.push_back(b_.CreateZExtOrTrunc(b_.CreateBitCast(v, bits), reg));
      if (c.mask.limit) continue;
      llvm::Value *lane = mask ? mask->regs[r0 + j] : nullptr;
      if (own) lane = lane ? b_.CreateAnd(lane, own) : own;
      if (lane) c.mask.lanes.push_back(lane);
    }
    if (vw == 1) {  // one lane under its predicate
      lanes(c);
      continue;
    }
    // The vector, where aligned and every lane on.
    c.ok = vector_ok(ptr.regs[r0], vw, bytes, c.mask);
    std::string text, constraints = "l";
    for (int64_t j = 0; j < vw; ++j) constraints += "," + e.reg;
    if (bytes == 2) {  // paired into words
      const int64_t words = vw / 2;
      text += ".reg .b32 w<" + num(words) + ">;\n";
      std::string list;
      for (int64_t w = 0; w < words; ++w) {
        text += "mov.b32 w" + num(w) + ", {" + operand(first + static_cast<int>(2 * w)) + ", " +
                operand(first + static_cast<int>(2 * w + 1)) + "};\n";
        list += (w ? ", w" : "w") + num(w);
      }
      text += "@" + operand(after) + " st.global" + vector_suffix(words) + ".b32 " + at(0, 0) + ", " +
              (words > 1 ? "{" + list + "}" : list) + ";\n";
    } else {
      text += "@" + operand(after) + " st.global" + vector_suffix(vw) + e.type + " " + at(0, 0) + ", " +
              operand_list(first, vw) + ";\n";
    }
    std::vector<llvm::Value *> args = c.args;
    args.push_back(c.ok);
    ptx("{\n" + text + "}", constraints + ",b", b_.getVoidTy(), args, Memory::Writes);
    chunks.push_back(c);
  }
  if (chunks.empty()) return;
  // The chunks whose vector was not taken, lane by lane, out of line (as for loads).
  llvm::Value *all = chunks[0].ok;
  for (size_t k = 1; k < chunks.size(); ++k) all = b_.CreateAnd(all, chunks[k].ok);
  llvm::BasicBlock *slow = llvm::BasicBlock::Create(context(), "lanes", kernel_);
  llvm::BasicBlock *merge = llvm::BasicBlock::Create(context(), "stored", kernel_);
  b_.CreateCondBr(all, merge, slow);
  b_.SetInsertPoint(slow);
  for (const Chunk &c : chunks) lanes(c);
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
}

Tile Emitter::atomic_add(const Tile &ptr, const Tile &value, const Tile *mask) {
  const bool fp = sema::is_float(ptr.elem.dtype);
  return atomic(fp ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add, ptr, value, mask);
}

Tile Emitter::atomic_xchg(const Tile &ptr, const Tile &value, const Tile *mask) {
  Tile old = atomic(llvm::AtomicRMWInst::Xchg, ptr, value, mask);
  // Only the owner of an element exchanges it; the threads that hold a copy of the element (a tile smaller than
  // the CTA, a scalar) take the old value from the owner through shared memory. (A generated backward reads an
  // upstream gradient and zeroes it with one exchange, and every copy uses what it read.)
  const Layout l = layout(ptr.shape);
  if (l.exact()) return old;
  llvm::Type *vt = type_of(old.elem), *mt = memory_type(vt, context());
  const int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeAllocSize(mt));
  open_shared_region();
  for (int64_t r = 0; r < l.regs(); ++r) {
    llvm::Value *slot = shared(b_.CreateMul(element_index(l, r), b_.getInt32(static_cast<uint32_t>(bytes))),
                               l.numel * bytes);
    llvm::Value *v = vt == mt ? old.regs[r] : b_.CreateZExt(old.regs[r], mt);
    guarded(owns(l, r), [&] { b_.CreateStore(v, slot); });
  }
  barrier();
  for (int64_t r = 0; r < l.regs(); ++r) {
    llvm::Value *slot = shared(b_.CreateMul(element_index(l, r), b_.getInt32(static_cast<uint32_t>(bytes))),
                               l.numel * bytes);
    llvm::Value *v = b_.CreateLoad(mt, slot);
    old.regs[r] = vt == mt ? v : b_.CreateTrunc(v, vt);
  }
  return old;
}

Tile Emitter::atomic(llvm::AtomicRMWInst::BinOp op, const Tile &ptr, const Tile &value, const Tile *mask) {
  const ElemType ve{ptr.elem.dtype, false};
  llvm::Type *vt = type_of(ve);
  const Layout l = layout(ptr.shape);
  Tile out{ve, ptr.shape, {}, Pattern::Unknown};
  for (int64_t r = 0; r < l.regs(); ++r) {
    llvm::Value *cond = owns(l, r);
    if (mask) cond = cond ? b_.CreateAnd(cond, mask->regs[r]) : mask->regs[r];
    auto rmw = [&]() -> llvm::Value * {
      return b_.CreateAtomicRMW(op, ptr.regs[r], value.regs[r], llvm::MaybeAlign(), llvm::AtomicOrdering::Monotonic);
    };
    out.regs.push_back(cond ? guarded(cond, rmw, llvm::Constant::getNullValue(vt)) : rmw());
  }
  return out;
}

}  // namespace tgrad::codegen
