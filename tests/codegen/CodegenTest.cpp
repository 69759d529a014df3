// The NVPTX backend, construct by construct: each kernel compiles through
// the public API (tgrad::compile), its PTX is accepted by ptxas for sm_90,
// and shows the instructions the construct must become. Kernels outside the
// backend's subset fail with a located diagnostic, never a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tgrad/tgrad.h"

namespace {

struct Outcome {
  bool ok = false;
  tgrad::CompiledKernel kernel;
  std::string errors;  // rendered diagnostics where !ok
  tgrad::Error::Kind kind = tgrad::Error::Kind::Input;
};

Outcome compile_text(const std::string &source, tgrad::CompileRequest request) {
  Outcome out;
  tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read_text(source, "kernel.py");
  if (!file) {
    out.errors = file.error().render();
    return out;
  }
  tgrad::Result<tgrad::CompiledKernel> k = tgrad::compile(*file, request);
  if (!k) {
    out.errors = k.error().render();
    out.kind = k.error().kind;
    return out;
  }
  out.ok = true;
  out.kernel = *k;
  return out;
}

// ptxas from the CUDA toolkit assembles the PTX for sm_90.
void expect_ptxas_accepts(const std::string &ptx, const std::string &name) {
  const char *ptxas = "/usr/local/cuda/bin/ptxas";
  ASSERT_EQ(access(ptxas, X_OK), 0) << ptxas << " is missing: the CUDA toolkit is part of the build environment";
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string file = dir + "/" + name + ".ptx";
  {
    std::ofstream f(file);
    f << ptx;
  }
  const std::string command = std::string(ptxas) + " -arch=sm_90 " + file + " -o " + dir + "/" + name + ".cubin 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << ptx;
}

// Compiles, checks with ptxas, returns the PTX.
std::string ptx_of(const std::string &name, const std::string &source, tgrad::CompileRequest request) {
  Outcome o = compile_text(source, request);
  EXPECT_TRUE(o.ok) << o.errors;
  if (!o.ok) return "";
  expect_ptxas_accepts(o.kernel.text, name);
  return o.kernel.text;
}

bool has(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

const char *kHeader = "import triton\nimport triton.language as tl\n\n\n";

TEST(Codegen, VectorAddLoadsAndStoresVectorsOfSixteenBytes) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
                          "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                          "    mask = offs < n\n"
                          "    x = tl.load(x_ptr + offs, mask=mask)\n"
                          "    y = tl.load(y_ptr + offs, mask=mask)\n"
                          "    tl.store(out_ptr + offs, x + y, mask=mask)\n";
  const std::string ptx =
      ptx_of("add", src, {"add", {"BLOCK=1024"}, {"x_ptr=*fp32", "y_ptr=*fp32", "out_ptr=*fp32", "n=i32"}});
  EXPECT_TRUE(has(ptx, ".entry add(")) << ptx;
  EXPECT_TRUE(has(ptx, ".maxntid 128, 1, 1")) << ptx;
  // Each chunk one vector under its predicate (aligned, every lane on) ...
  EXPECT_TRUE(has(ptx, "ld.global.v4.b32 {")) << ptx;
  EXPECT_TRUE(has(ptx, "st.global.v4.b32 [")) << ptx;
  // ... else lane by lane, each lane's predicate from the chunk's count (`offs < n` is a prefix).
  EXPECT_TRUE(has(ptx, "setp.gt.and.s32 s3, ")) << ptx;
  EXPECT_TRUE(has(ptx, "@s3 ld.global.b32 ")) << ptx;
  EXPECT_TRUE(has(ptx, "@s3 st.global.b32 [")) << ptx;
  EXPECT_TRUE(has(ptx, "%ctaid.x")) << ptx;
}

TEST(Codegen, MaskedAccessesOfEachElementSize) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def kinds(A, B, C, D, E, F, G, n, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    m = offs < n\n"
                          "    a = tl.load(A + offs, mask=m)\n"
                          "    b = tl.load(B + offs, mask=m)\n"
                          "    c = tl.load(C + offs, mask=m)\n"
                          "    d = tl.load(D + offs, mask=m)\n"
                          "    tl.store(E + offs, a.to(tl.float32) + b.to(tl.float32) + c.to(tl.float32), mask=m)\n"
                          "    tl.store(F + offs, d + 1, mask=m)\n"
                          "    tl.store(G + offs, a > 0, mask=m)\n";
  const std::string ptx = ptx_of(
      "kinds", src,
      {"kinds", {"BLOCK=1024"}, {"A=*fp16", "B=*bf16", "C=*i8", "D=*i64", "E=*fp32", "F=*i64", "G=*i1", "n=i32"}});
  // 16-bit elements land paired in 32-bit words; their lanes go through 16-bit registers.
  EXPECT_TRUE(has(ptx, "ld.global.v4.b32 {")) << ptx;
  EXPECT_TRUE(has(ptx, "ld.global.b16 t7, ")) << ptx;
  // Bytes (int8, and bools in memory) four at a time; 8-byte elements two.
  EXPECT_TRUE(has(ptx, "ld.global.v4.u8 {")) << ptx;
  EXPECT_TRUE(has(ptx, "st.global.v4.u8 [")) << ptx;
  EXPECT_TRUE(has(ptx, "ld.global.v2.b64 {")) << ptx;
  EXPECT_TRUE(has(ptx, "st.global.v2.b64 [")) << ptx;
}

TEST(Codegen, LoadsNobodyReadsGoAndLoadsStayAfterBarriers) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def order(X, B, Y, n, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    m = offs < n\n"
                          "    b = tl.load(B + offs, mask=m)\n"
                          "    tl.store(Y + offs, tl.load(X + offs, mask=m), mask=m)\n"
                          "    tl.debug_barrier()\n"
                          "    y = tl.load(Y + offs, mask=m)\n"
                          "    tl.store(X + offs, y * 2, mask=m & (offs % 3 == 0))\n";
  const std::string ptx = ptx_of("order", src, {"order", {"BLOCK=1024"}, {"X=*fp32", "B=*fp32", "Y=*fp32", "n=i32"}});
  // B's load is dead: its pointer is never even read.
  EXPECT_FALSE(has(ptx, "[order_param_1]")) << ptx;
  // The load of Y stays after the barrier that orders it after the store.
  const size_t barrier = ptx.find("bar.sync");
  ASSERT_NE(barrier, std::string::npos) << ptx;
  EXPECT_NE(ptx.find("ld.global.v4.b32", barrier), std::string::npos) << ptx;
  // A mask that is no prefix (offs % 3 == 0) gives each lane its own predicate, not a count.
  ASSERT_NE(ptx.rfind("st.global.v4.b32"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find("setp.gt.and.s32", ptx.rfind("st.global.v4.b32")), std::string::npos) << ptx;
}

TEST(Codegen, SidecarListsRuntimeParametersInOrder) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def scale(X, Y, n, s, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * s, mask=offs < n)\n";
  Outcome o = compile_text(src, {"scale", {"BLOCK=128"}, {"X=*fp16", "Y=*bf16", "n=i64", "s=fp32"}, 2});
  ASSERT_TRUE(o.ok) << o.errors;
  EXPECT_EQ(o.kernel.metadata_json,
            "{\n  \"kernel\": \"scale\",\n  \"params\": [\n    {\n      \"name\": \"X\",\n      \"type\": \"*fp16\"\n"
            "    },\n    {\n      \"name\": \"Y\",\n      \"type\": \"*bf16\"\n    },\n    {\n      \"name\": \"n\",\n"
            "      \"type\": \"i64\"\n    },\n    {\n      \"name\": \"s\",\n      \"type\": \"fp32\"\n    }\n  ],\n"
            "  \"num_warps\": 2,\n  \"threads_per_cta\": 64,\n  \"shared_bytes\": 0,\n  \"arch\": \"sm_90\"\n}\n");
  expect_ptxas_accepts(o.kernel.text, "scale");
  EXPECT_TRUE(has(o.kernel.text, "cvt.rn.bf16.f32")) << o.kernel.text;
}

TEST(Codegen, ProgramIdsOfEveryAxisAndNumPrograms) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def ids(out):\n"
                          "    i = tl.program_id(0) + tl.program_id(1) * 3 + tl.program_id(axis=2) * 5\n"
                          "    tl.store(out + i, tl.num_programs(0) + tl.num_programs(2))\n";
  const std::string ptx = ptx_of("ids", src, {"ids", {}, {"out=*i32"}, 1});
  for (const char *r : {"%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.z"}) EXPECT_TRUE(has(ptx, r)) << r;
}

TEST(Codegen, TwoDimensionalTilesBroadcastThroughSharedMemory) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def copy2d(X, Y, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):\n"
                          "    rows = tl.program_id(0) * BM + tl.arange(0, BM)\n"
                          "    cols = tl.arange(0, BN)\n"
                          "    mask = (rows[:, None] < M) & (cols[None, :] < N)\n"
                          "    x = tl.load(X + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)\n"
                          "    tl.store(Y + rows[:, None] * stride + cols[None, :], x * 2.0, mask=mask)\n";
  Outcome o = compile_text(src, {"copy2d", {"BM=16", "BN=64"}, {"X=*fp32", "Y=*fp32", "M=i32", "N=i32", "stride=i32"}});
  ASSERT_TRUE(o.ok) << o.errors;
  expect_ptxas_accepts(o.kernel.text, "copy2d");
  EXPECT_GT(o.kernel.shared_bytes, 0);
  EXPECT_TRUE(has(o.kernel.text, "bar.sync")) << o.kernel.text;
  EXPECT_TRUE(has(o.kernel.text, "ld.shared")) << o.kernel.text;
}

TEST(Codegen, ReductionsUseWarpShufflesAndSharedMemory) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def stats(X, S, n, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    x = tl.load(X + offs, mask=offs < n, other=0.0)\n"
                          "    tl.store(S, tl.sum(x, axis=0))\n"
                          "    tl.store(S + 1, tl.max(x, axis=0))\n"
                          "    tl.store(S + 2, tl.min(x))\n";
  Outcome o = compile_text(src, {"stats", {"BLOCK=2048"}, {"X=*fp32", "S=*fp32", "n=i32"}, 8});
  ASSERT_TRUE(o.ok) << o.errors;
  expect_ptxas_accepts(o.kernel.text, "stats");
  EXPECT_TRUE(has(o.kernel.text, "shfl.sync.bfly.b32")) << o.kernel.text;
  EXPECT_TRUE(has(o.kernel.text, "max.f32")) << o.kernel.text;
  EXPECT_TRUE(has(o.kernel.text, "min.f32")) << o.kernel.text;
  EXPECT_EQ(o.kernel.shared_bytes, 2 * 8 * 4);  // one value per warp, in each of two regions (Emitter.h)
  // Three reductions, one barrier each: writes go to the region the previous reduction did not read.
  size_t barriers = 0;
  for (size_t at = o.kernel.text.find("bar.sync"); at != std::string::npos; at = o.kernel.text.find("bar.sync", at + 1))
    ++barriers;
  EXPECT_EQ(barriers, 3u) << o.kernel.text;
}

TEST(Codegen, ReductionAlongOneAxisOfATwoDimensionalTile) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def colsum(X, Y, BM: tl.constexpr, BN: tl.constexpr):\n"
                          "    r = tl.arange(0, BM)\n"
                          "    c = tl.arange(0, BN)\n"
                          "    x = tl.load(X + r[:, None] * BN + c[None, :])\n"
                          "    tl.store(Y + c, tl.sum(x, axis=0))\n"
                          "    tl.store(Y + BN + r, tl.max(x, axis=1).to(tl.float16).to(tl.float32))\n";
  const std::string ptx = ptx_of("colsum", src, {"colsum", {"BM=32", "BN=64"}, {"X=*fp32", "Y=*fp32"}});
  EXPECT_TRUE(has(ptx, "cvt.rn.f16.f32")) << ptx;
}

TEST(Codegen, ArgmaxAndArgmin) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def arg(X, I, n, BM: tl.constexpr, BN: tl.constexpr):\n"
                          "    offs = tl.arange(0, BN)\n"
                          "    x = tl.load(X + offs, mask=offs < n, other=0.0)\n"
                          "    tl.store(I, tl.argmax(x, axis=0))\n"
                          "    tl.store(I + 1, tl.argmin(x, 0))\n"
                          "    r = tl.arange(0, BM)\n"
                          "    t = tl.load(X + r[:, None] * BN + offs[None, :])\n"
                          "    tl.store(I + 2 + r, tl.argmax(t, axis=1))\n";
  const std::string ptx = ptx_of("arg", src, {"arg", {"BM=4", "BN=256"}, {"X=*fp16", "I=*i32", "n=i32"}});
  EXPECT_TRUE(has(ptx, "shfl.sync.bfly.b32")) << ptx;
}

TEST(Codegen, CastsBetweenFloatsAndIntegers) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def casts(A, B, C, D, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    a = tl.load(A + offs)\n"
                          "    tl.store(B + offs, a.to(tl.bfloat16))\n"
                          "    tl.store(C + offs, a.to(tl.int32) // 3 % 5)\n"
                          "    tl.store(D + offs, (a.to(tl.int32) >> 1).to(tl.float64) / 2)\n";
  const std::string ptx = ptx_of("casts", src, {"casts", {"BLOCK=256"}, {"A=*fp16", "B=*bf16", "C=*i8", "D=*fp64"}});
  EXPECT_TRUE(has(ptx, "cvt.rzi.s32.f16") || has(ptx, "cvt.rzi.s32.f32")) << ptx;
  EXPECT_TRUE(has(ptx, ".f64")) << ptx;
}

TEST(Codegen, MaskedLoadsWithOtherAndWhere) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def relu(X, Y, n, BLOCK: tl.constexpr):\n"
                          "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                          "    x = tl.load(X + offs, mask=offs < n, other=-1.0)\n"
                          "    tl.store(Y + offs, tl.where(x > 0, x, 0.0), mask=offs < n)\n";
  const std::string ptx = ptx_of("relu", src, {"relu", {"BLOCK=512"}, {"X=*fp32", "Y=*fp32", "n=i32"}});
  EXPECT_TRUE(has(ptx, "-1082130432")) << ptx;  // other=-1.0 (0xBF800000), where a lane loads nothing
  EXPECT_TRUE(has(ptx, "selp.f32") || has(ptx, "max.f32")) << ptx;
}

TEST(Codegen, LibdeviceMathIsLinkedAndInlined) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def gelu(X, Y, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    x = tl.load(X + offs)\n"
                          "    y = 0.5 * x * (1 + tl.math.erf(x * 0.7071067811865476)) + tl.exp(x) + tl.log(x)\n"
                          "    y += tl.sqrt(x) + tl.math.rsqrt(x) + tl.sigmoid(x) + tl.abs(x)\n"
                          "    tl.store(Y + offs, y)\n";
  const std::string ptx = ptx_of("gelu", src, {"gelu", {"BLOCK=128"}, {"X=*fp32", "Y=*fp32"}});
  EXPECT_FALSE(has(ptx, "__nv_")) << "libdevice calls left in the PTX";
  EXPECT_TRUE(has(ptx, "ex2.approx")) << ptx;
}

TEST(Codegen, LoopsAndRuntimeConditions) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def loops(X, Y, n, mode, BLOCK: tl.constexpr):\n"
                          "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n"
                          "    for start in range(0, n, BLOCK):\n"
                          "        offs = start + tl.arange(0, BLOCK)\n"
                          "        acc += tl.load(X + offs, mask=offs < n, other=0.0)\n"
                          "    total = tl.sum(acc, axis=0)\n"
                          "    i = 0\n"
                          "    while i < mode:\n"
                          "        i += 1\n"
                          "        total = total * 2.0 + i * 3\n"
                          "    if mode > 3:\n"
                          "        total = -total\n"
                          "    else:\n"
                          "        total = total + 1.0\n"
                          "    tl.store(Y, total)\n";
  const std::string ptx = ptx_of("loops", src, {"loops", {"BLOCK=256"}, {"X=*fp32", "Y=*fp32", "n=i32", "mode=i32"}});
  EXPECT_TRUE(has(ptx, "bra")) << ptx;
}

TEST(Codegen, NumbersARuntimeIfAssignsAreRuntimeValues) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def k(Y, mode):\n"
                          "    scale = 1.0\n"
                          "    if mode > 0:\n"
                          "        scale = 2.0\n"
                          "    tl.store(Y, tl.load(Y) * scale)\n";
  tgrad::CompileRequest request{"k", {}, {"Y=*fp32", "mode=i32"}};
  request.emit = "llvm";
  Outcome o = compile_text(src, request);
  ASSERT_TRUE(o.ok) << o.errors;
  EXPECT_TRUE(has(o.kernel.text, "float 2.000000e+00, float 1.000000e+00")) << o.kernel.text;
}

TEST(Codegen, AtomicsHelpersAndBarriers) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def _square(x):\n"
                          "    return x * x\n"
                          "\n"
                          "@triton.jit\n"
                          "def acc(X, S, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    x = _square(tl.load(X + offs))\n"
                          "    tl.debug_barrier()\n"
                          "    tl.atomic_add(S + offs % 4, x)\n";
  const std::string ptx = ptx_of("acc", src, {"acc", {"BLOCK=128"}, {"X=*fp32", "S=*fp32"}});
  EXPECT_TRUE(has(ptx, "atom.global.add.f32") || has(ptx, "red.global.add.f32")) << ptx;
  EXPECT_TRUE(has(ptx, "bar.sync")) << ptx;
}

// A generated backward reads an upstream gradient and zeroes it with one tl.atomic_xchg, often through a scalar
// pointer (every thread holds a copy of the scalar): one thread exchanges it, and the others must get the value
// it read (through shared memory, after a barrier), not the 0 a skipped exchange would leave.
TEST(Codegen, AtomicExchangeSharesTheOldValueWithEveryCopy) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def take(G, X, Y, BLOCK: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    g = tl.atomic_xchg(G, 0.0)\n"
                          "    tl.store(Y + offs, tl.load(X + offs) * g)\n";
  const std::string ptx = ptx_of("take", src, {"take", {"BLOCK=128"}, {"G=*fp32", "X=*fp32", "Y=*fp32"}});
  EXPECT_TRUE(has(ptx, "atom.global.exch.b32")) << ptx;
  EXPECT_TRUE(has(ptx, "st.shared")) << ptx;
  EXPECT_TRUE(has(ptx, "bar.sync")) << ptx;
  EXPECT_TRUE(has(ptx, "ld.shared")) << ptx;
}

TEST(Codegen, EmitsOptimizedLlvmIr) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def one(Y):\n"
                          "    tl.store(Y, 1.0)\n";
  tgrad::CompileRequest request{"one", {}, {"Y=*fp32"}};
  request.emit = "llvm";
  Outcome o = compile_text(src, request);
  ASSERT_TRUE(o.ok) << o.errors;
  EXPECT_TRUE(has(o.kernel.text, "define ptx_kernel void @one(ptr addrspace(1)")) << o.kernel.text;
  EXPECT_FALSE(has(o.kernel.text, "alloca")) << "mem2reg left a variable in memory:\n" << o.kernel.text;
}

TEST(Codegen, EveryInScopeTestKernelCompiles) {
  struct Case {
    const char *file, *kernel;
    std::vector<std::string> defines, types;
  };
  const std::vector<Case> cases = {
      {"tests/kernels/vector_add.py",
       "add_kernel",
       {"BLOCK_SIZE=1024"},
       {"x_ptr=*fp16", "y_ptr=*fp16", "out_ptr=*fp16", "n_elements=i32"}},
      {"tests/kernels/softmax.py",
       "softmax_kernel",
       {"BLOCK_SIZE=1024"},
       {"out_ptr=*bf16", "in_ptr=*bf16", "in_row_stride=i32", "out_row_stride=i32", "n_cols=i32"}},
      {"tests/kernels/cross_entropy.py",
       "cross_entropy_kernel",
       {"BLOCK_SIZE=1024"},
       {"logits_ptr=*fp32", "targets_ptr=*i64", "loss_ptr=*fp32", "stride=i32", "n_cols=i32"}},
      {"tests/kernels/rms_norm.py",
       "rms_norm_fwd_kernel",
       {"BLOCK_SIZE=4096"},
       {"X=*fp16", "W=*fp16", "Y=*fp16", "Rstd=*fp32", "stride_x_row=i32", "stride_y_row=i32", "N=i32", "eps=fp32"}},
      {"tests/kernels/layer_norm.py",
       "layer_norm_fwd_kernel",
       {"BLOCK_SIZE=1024"},
       {"X=*fp32", "Y=*fp32", "W=*fp32", "B=*fp32", "Mean=*fp32", "Rstd=*fp32", "stride_x_row=i32", "stride_y_row=i32",
        "N=i32", "eps=fp32"}},
      {"tests/kernels/runtime_if.py",
       "scaled_act_kernel",
       {"BLOCK_SIZE=256"},
       {"x_ptr=*fp32", "out_ptr=*fp32", "n_elements=i32", "mode=i32", "scale=fp32"}},
      {"tests/kernels/gelu_conditional_import.py",
       "gelu_tanh_kernel",
       {"BLOCK=256"},
       {"X=*bf16", "Y=*bf16", "n_elements=i32"}},
      {"tests/kernels/helper_call.py",
       "bias_gelu_kernel",
       {"APPROX=False", "STORE_GRAD=True", "BLOCK_M=16", "BLOCK_N=128"},
       {"X=*fp16", "Bias=*fp16", "Y=*fp16", "G=*fp32", "M=i32", "N=i32", "stride_xm=i32", "stride_ym=i32",
        "stride_gm=i32"}},
      {"tests/kernels/libdevice_imports.py",
       "module_spellings_kernel",
       {"BLOCK=512"},
       {"X=*fp32", "Y=*fp32", "G=*fp32", "N=i32"}},
      {"tests/kernels/masked_lanes.py",
       "kl_rows_kernel",
       {"BLOCK=1024"},
       {"P=*fp32", "Q=*fp32", "Loss=*fp32", "stride=i32", "n_cols=i32"}},
  };
  for (const Case &c : cases) {
    tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read(c.file);
    ASSERT_TRUE(file) << file.error().render();
    tgrad::CompileRequest request{c.kernel, c.defines, c.types, 4};
    tgrad::Result<tgrad::CompiledKernel> k = tgrad::compile(*file, request);
    ASSERT_TRUE(k) << c.file << ": " << k.error().render();
    expect_ptxas_accepts(k->text, c.kernel);
  }
}

// ------------------------------------------------------------ errors

TEST(CodegenErrors, DotIsALocatedErrorWithTheSourceLine) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def mm(A, C, B: tl.constexpr):\n"
                          "    r = tl.arange(0, B)\n"
                          "    a = tl.load(A + r[:, None] * B + r[None, :])\n"
                          "    tl.store(C + r[:, None] * B + r[None, :], tl.dot(a, a))\n";
  Outcome o = compile_text(src, {"mm", {"B=16"}, {"A=*fp16", "C=*fp32"}});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.kind, tgrad::Error::Kind::Input);
  EXPECT_TRUE(has(o.errors, "kernel.py:9:47: error: 'tl.dot' is not supported by the PTX backend yet")) << o.errors;
  EXPECT_TRUE(has(o.errors, "tl.dot(a, a)")) << o.errors;
  EXPECT_TRUE(has(o.errors, "^")) << o.errors;
}

TEST(CodegenErrors, UnsupportedConstructsAreLocated) {
  struct Case {
    const char *body, *message;
  };
  const std::vector<Case> cases = {
      {"    tl.atomic_max(X + offs, x)\n", "'tl.atomic_max' is not supported by the PTX backend yet"},
      {"    tl.store(X + offs, tl.cumsum(x, 0))\n", "'tl.cumsum' is not supported by the PTX backend yet"},
      {"    tl.store(X + offs, tl.cumsum(x, 0) + tl.flip(x, 0))\n", "is not supported by the PTX backend yet"},
      {"    tl.store(X + offs, tl.trans(x[:, None]).reshape(16))\n",
       "'tl.trans' is not supported by the PTX backend yet"},
  };
  for (const Case &c : cases) {
    const std::string src = std::string(kHeader) +
                            "@triton.jit\n"
                            "def k(X):\n"
                            "    offs = tl.arange(0, 16)\n"
                            "    x = tl.load(X + offs)\n" +
                            c.body;
    Outcome o = compile_text(src, {"k", {}, {"X=*fp32"}});
    ASSERT_FALSE(o.ok) << c.body;
    EXPECT_TRUE(has(o.errors, "kernel.py:9:")) << o.errors;
    EXPECT_TRUE(has(o.errors, c.message)) << o.errors;
  }
}

TEST(CodegenErrors, CallsWithoutTheirArgumentsAreErrorsNotCrashes) {
  for (const char *body : {"    tl.store(X + offs, tl.where(x > 0, x))\n", "    tl.store(X + offs, tl.maximum(x))\n",
                           "    tl.store(X + offs, tl.full([16], dtype=tl.float32))\n"}) {
    const std::string src = std::string(kHeader) +
                            "@triton.jit\n"
                            "def k(X):\n"
                            "    offs = tl.arange(0, 16)\n"
                            "    x = tl.load(X + offs)\n" +
                            body;
    Outcome o = compile_text(src, {"k", {}, {"X=*fp32"}});
    EXPECT_FALSE(o.ok) << body;
    EXPECT_TRUE(has(o.errors, "kernel.py:9:")) << o.errors;
  }
}

TEST(Codegen, StaticRangeUnrollsAndPythonNumbersBecomeScalars) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def poly(X, Y, C, n, BLOCK: tl.constexpr, K: tl.constexpr):\n"
                          "    offs = tl.arange(0, BLOCK)\n"
                          "    x = tl.load(X + offs, mask=offs < n, other=0.0)\n"
                          "    p = tl.zeros([BLOCK], dtype=tl.float32)\n"
                          "    for i in tl.static_range(K):\n"
                          "        p = p * x + 1.0 / (K - i)\n"
                          "    count = 0\n"
                          "    for start in range(0, n, BLOCK):\n"
                          "        count += tl.sum((offs + start < n).to(tl.int32))\n"
                          "    tl.store(Y + offs, p, mask=offs < n)\n"
                          "    tl.store(C, count)\n";
  Outcome o = compile_text(src, {"poly", {"BLOCK=128", "K=4"}, {"X=*fp32", "Y=*fp32", "C=*i32", "n=i32"}});
  ASSERT_TRUE(o.ok) << o.errors;
  expect_ptxas_accepts(o.kernel.text, "poly");
  // 1/4, 1/3, 1/2 and 1/1 folded into the unrolled body.
  EXPECT_TRUE(has(o.kernel.text, "0f3EAAAAAB")) << o.kernel.text;
}

TEST(CodegenErrors, ParametersWithoutTypesOrValuesAreNamed) {
  const std::string src = std::string(kHeader) +
                          "@triton.jit\n"
                          "def k(X, n, BLOCK: tl.constexpr):\n"
                          "    tl.store(X + tl.arange(0, BLOCK), n)\n";
  Outcome o = compile_text(src, {"k", {}, {"X=*fp32"}});
  ASSERT_FALSE(o.ok);
  EXPECT_TRUE(has(o.errors, "kernel.py:6:10: error: parameter 'n' needs a type to compile: --arg n=TYPE")) << o.errors;
  EXPECT_TRUE(
      has(o.errors, "kernel.py:6:13: error: tl.constexpr parameter 'BLOCK' needs a value to compile: -D BLOCK="))
      << o.errors;
}

TEST(CodegenErrors, MalformedRequestsAreRequestErrors) {
  const std::string src = std::string(kHeader) + "@triton.jit\ndef k(X):\n    tl.store(X, 1.0)\n";
  Outcome warps = compile_text(src, {"k", {}, {"X=*fp32"}, 3});
  ASSERT_FALSE(warps.ok);
  EXPECT_EQ(warps.kind, tgrad::Error::Kind::Request);
  EXPECT_TRUE(has(warps.errors, "a power of two from 1 to 32")) << warps.errors;
  Outcome missing = compile_text(src, {"nope", {}, {}});
  ASSERT_FALSE(missing.ok);
  EXPECT_EQ(missing.kind, tgrad::Error::Kind::Request);
  Outcome extra = compile_text(src, {"k", {}, {"X=*fp32", "Z=i32"}});
  ASSERT_FALSE(extra.ok);
  EXPECT_TRUE(has(extra.errors, "'k' has no parameter 'Z'")) << extra.errors;
}

}  // namespace
