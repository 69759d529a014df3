// Whole-kernel reverse mode: gradient checks of the straight-line test
// kernels in the interpreter (float64 finite differences on sampled
// elements), the access analysis' decisions, and the located errors for
// what it cannot differentiate yet.
#include <gtest/gtest.h>

#include "tests/ad/KernelSetup.h"

namespace tgrad::testing {
namespace {

using sema::DType;

class KernelReverse : public ::testing::TestWithParam<KernelCase> {};

TEST_P(KernelReverse, MatchesFiniteDifferencesInFloat64) {
  KernelSetup s = setup(GetParam());
  ASSERT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 96);
  ASSERT_TRUE(result) << s.parsed->all_messages();
  for (const auto &arg : result->args)
    EXPECT_TRUE(arg.pass) << "d/d" << arg.name << ": relative error " << arg.relative_error << "\n" << result->backward_source;
  auto reparsed = parse_text(result->backward_source, "bwd.py");
  EXPECT_TRUE(reparsed->ok()) << reparsed->all_messages();
}

// The backward `tgrad FILE --wrt ...` prints without --arg and -D (types
// chosen by tgrad, src/ad/GenericTypes.h; one backward per value of a flag
// that guards definitions, src/ad/Specialize.h), run on the same buffers
// with the case's constexpr values.
TEST_P(KernelReverse, GenericBackwardMatchesFiniteDifferences) {
  KernelSetup s = setup(GetParam());
  ASSERT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  s.request.param_types.clear();
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 96);
  ASSERT_TRUE(result) << s.parsed->all_messages();
  EXPECT_NE(result->backward_source.find("# Generic: the same backward for"), std::string::npos) << result->backward_source;
  for (const auto &arg : result->args)
    EXPECT_TRUE(arg.pass) << "d/d" << arg.name << ": relative error " << arg.relative_error << "\n" << result->backward_source;
}

TEST_P(KernelReverse, ExplainsEachMemoryAdjoint) {
  KernelSetup s = setup(GetParam());
  auto bwd = ad::differentiate(*s.parsed->module, s.parsed->sources, s.request, *s.parsed->diags);
  ASSERT_TRUE(bwd) << s.parsed->all_messages();
  std::string all;
  for (const std::string &e : bwd->explanations) all += e + "\n";
  for (const std::string &want : GetParam().expect_explained) EXPECT_NE(all.find(want), std::string::npos) << all;
}

// Ragged sizes: 1000 elements in blocks of 256, rows of 100 in blocks of 128.
INSTANTIATE_TEST_SUITE_P(
    TestKernels, KernelReverse,
    ::testing::Values(
        KernelCase{"vector_add", "add_kernel", {4, 1, 1},
                   {"x_ptr=fp32[1000]", "y_ptr=fp32[1000]", "out_ptr=fp32[1000]:zeros", "n_elements=1000"},
                   {"BLOCK_SIZE=256"}, {"x_ptr", "y_ptr"},
                   {"load through 'x_ptr' is a plain store: offset = program_id * BLOCK_SIZE + tl.arange(0, 256)"}},
        KernelCase{"softmax", "softmax_kernel", {7, 1, 1},
                   {"out_ptr=fp32[7,100]:zeros", "in_ptr=fp32[7,100]", "in_row_stride=100", "out_row_stride=100", "n_cols=100"},
                   {"BLOCK_SIZE=128"}, {"in_ptr"},
                   {"load through 'in_ptr' is a plain store, assuming in_row_stride >= n_cols",
                    // (y (dy - sum(dy y)) from the stored y: checked against finite differences like any other)
                    "the softmax epilogue's value is read from the output the forward stored through 'out_ptr'"}},
        KernelCase{"rms_norm", "rms_norm_fwd_kernel", {5, 1, 1},
                   {"X=fp32[5,100]", "W=fp32[100]", "Y=fp32[5,100]:zeros", "Rstd=fp32[5]:zeros", "stride_x_row=100",
                    "stride_y_row=100", "N=100", "eps=0.00001"},
                   {"BLOCK_SIZE=128"}, {"X", "W"},
                   {"load through 'W' is summed in registers over this program's share of the forward's programs, "
                    "stored to its row of a partial-sum buffer, and a reduction kernel sums the rows",
                    "load through 'X' is a plain store, assuming stride_x_row >= N"}},
        // Three loops over each row in blocks of 32 (100 = 3 * 32 + 4): additive accumulators, X loaded three times.
        KernelCase{"layer_norm", "layer_norm_fwd_kernel", {5, 1, 1},
                   {"X=fp32[5,100]", "Y=fp32[5,100]:zeros", "W=fp32[100]", "B=fp32[100]", "Mean=fp32[5]:zeros",
                    "Rstd=fp32[5]:zeros", "stride_x_row=100", "stride_y_row=100", "N=100", "eps=0.00001"},
                   {"BLOCK_SIZE=32"}, {"X", "W", "B"},
                   {"line 45: the gradient of the load through 'X' is a plain store, assuming stride_x_row >= N",
                    "line 28: the gradient of the load through 'X' is a store adding to the earlier gradients",
                    "line 43: the gradient of the load through 'W' is added to this program's row of a partial-sum",
                    "line 44: the gradient of the load through 'B' is added to this program's row of a partial-sum"}},
        // The same with rows that fit one block: the one-pass backward (X loaded once, W and B summed in registers).
        KernelCase{"layer_norm", "layer_norm_fwd_kernel", {5, 1, 1},
                   {"X=fp32[5,100]", "Y=fp32[5,100]:zeros", "W=fp32[100]", "B=fp32[100]", "Mean=fp32[5]:zeros",
                    "Rstd=fp32[5]:zeros", "stride_x_row=100", "stride_y_row=100", "N=100", "eps=0.00001"},
                   {"BLOCK_SIZE=128"}, {"X", "W", "B"},
                   {"each of the 3 loops over range(0, N, BLOCK_SIZE) runs once when (0 < N) & (N <= BLOCK_SIZE)",
                    "one pass: line 20: the gradient of the load through 'X' is a plain store, assuming stride_x_row >= N",
                    "one pass: line 43: the gradient of the load through 'W' is summed in registers",
                    "one pass: line 44: the gradient of the load through 'B' is summed in registers"}},
        // Two loads of one buffer at offsets one apart: a program's addresses are its neighbour's too.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[17]", "Y=fp32[16]:zeros"}, {"B=8"}, {"X"},
                   {"the gradient of the load through 'X' is a tl.atomic_add: the loads through 'X' have offsets not "
                    "proven equal"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    a = tl.load(X + o)\n    b = tl.load(X + o + 1)\n"
                   "    tl.store(Y + o, a * b)\n"},
        // A load in a loop at the same addresses every iteration: its gradients add up.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[16]", "Y=fp32[16]:zeros", "N=3"}, {"B=8"}, {"X"},
                   {"the gradient of the load through 'X' is a store adding to the earlier gradients"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, N, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    acc = tl.zeros([B], dtype=tl.float32)\n"
                   "    for i in range(0, N):\n        x = tl.load(X + o)\n        acc += x * x\n"
                   "    tl.store(Y + o, acc)\n"},
        // A load in a runtime if that is not taken: its gradient buffer starts at zero (the check poisons it otherwise).
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[16]", "Y=fp32[16]:zeros", "mode=0"}, {"B=8"}, {"X"},
                   {"the gradient of the load through 'X' is a plain store"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, mode, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    y = tl.zeros([B], dtype=tl.float32)\n"
                   "    if mode > 0:\n        x = tl.load(X + o)\n        y = x * x\n    tl.store(Y + o, y)\n"},
        // A flag compared with module constants (one of them negative) that guards a definition: without -D,
        // one backward per value (src/ad/Specialize.h), dispatched on MODE; here the -1 one runs.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[16]", "W=fp32[16]", "Y=fp32[16]:zeros"}, {"MODE=-1", "B=8"}, {"X", "W"},
                   {},
                   "import triton\nimport triton.language as tl\nMODE_SCALE: tl.constexpr = tl.constexpr(-1)\n"
                   "MODE_SHIFT: tl.constexpr = tl.constexpr(1)\n@triton.jit\n"
                   "def k(X, W, Y, MODE: tl.constexpr, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    x = tl.load(X + o)\n"
                   "    if MODE == MODE_SCALE:\n        w = tl.load(W + o)\n    if MODE == MODE_SHIFT:\n"
                   "        w = tl.load(W + o) * 2.0\n    y = x * x\n    if MODE == MODE_SCALE:\n        y = y * w\n"
                   "    if MODE == MODE_SHIFT:\n        y = y + w\n    tl.store(Y + o, y)\n"},
        // A --wrt pointer only the other specialization loads (fla's causal conv1d: x under HAS_WEIGHT): here its
        // gradient is zero (was "'x' is a runtime scalar"). Its base address comes from a helper, inlined.
        KernelCase{"", "k", {3, 1, 1}, {"x=fp32[3,10]", "w=fp32[10]", "y=fp32[3,10]:zeros", "N=10"},
                   {"HAS_WEIGHT=False", "BLOCK=16"}, {"x", "w"}, {},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef _row(p, row, N):\n"
                   "    return p + row * N\n@triton.jit\n"
                   "def k(x, w, y, N, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):\n"
                   "    row = tl.program_id(0)\n    o = tl.arange(0, BLOCK)\n    p_x = _row(x, row, N)\n"
                   "    acc = tl.load(w + o, mask=o < N, other=0.0)\n    if HAS_WEIGHT:\n"
                   "        acc = acc * tl.load(p_x + o, mask=o < N, other=0.0)\n"
                   "    tl.store(_row(y, row, N) + o, acc, mask=o < N)\n"},
        KernelCase{"", "k", {3, 1, 1}, {"x=fp32[3,10]", "w=fp32[10]", "y=fp32[3,10]:zeros", "N=10"},
                   {"HAS_WEIGHT=True", "BLOCK=16"}, {"x", "w"}, {},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef _row(p, row, N):\n"
                   "    return p + row * N\n@triton.jit\n"
                   "def k(x, w, y, N, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):\n"
                   "    row = tl.program_id(0)\n    o = tl.arange(0, BLOCK)\n    p_x = _row(x, row, N)\n"
                   "    acc = tl.load(w + o, mask=o < N, other=0.0)\n    if HAS_WEIGHT:\n"
                   "        acc = acc * tl.load(p_x + o, mask=o < N, other=0.0)\n"
                   "    tl.store(_row(y, row, N) + o, acc, mask=o < N)\n"},
        // A helper's `if b_lamb is not None:` (fla's mesa_net) is decided by the argument's kind: a tile at one
        // call (the term's gradient flows to L), None at the other (no term); one backward helper per call.
        KernelCase{"", "k", {1, 1, 1}, {"P=fp32[8,8]", "V=fp32[8,8]", "L=fp32[8]", "O=fp32[8,8]:zeros"}, {"B=8"},
                   {"P", "V", "L"}, {},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef _update(b_p, b_v, b_lamb):\n"
                   "    b_o = b_p * b_v\n    if b_lamb is not None:\n        b_o += b_lamb[None, :] * b_p\n"
                   "    return b_o\n@triton.jit\ndef k(P, V, L, O, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
                   "    b_p = tl.load(P + o[:, None] * B + o[None, :])\n"
                   "    b_v = tl.load(V + o[:, None] * B + o[None, :])\n    b_lamb = tl.load(L + o)\n"
                   "    b_o = _update(b_p, b_v, b_lamb) + _update(b_v, b_p * b_p, None)\n"
                   "    tl.store(O + o[:, None] * B + o[None, :], b_o)\n"},
        // A 2-D grid of rows and column blocks (examples/gelu_bias.py's shape): each (row, block, lane) owns its
        // element when rows do not overlap, so dX is a plain store under that assumption; 3 rows x 3 blocks of 8
        // over 20 columns, the last block ragged.
        KernelCase{"", "k", {3, 3, 1}, {"X=fp32[3,20]", "Y=fp32[3,20]:zeros", "n_cols=20", "stride=20"}, {"B=8"}, {"X"},
                   {"the gradient of the load through 'X' is a plain store, assuming stride >= n_cols"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, n_cols, stride, B: tl.constexpr):\n    row = tl.program_id(0)\n"
                   "    cols = tl.program_id(1) * B + tl.arange(0, B)\n    mask = cols < n_cols\n"
                   "    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)\n"
                   "    tl.store(Y + row * stride + cols, x * x, mask=mask)\n"},
        // Column blocks that overlap (a step of B // 2 for tiles of B): two programs load the same element. The
        // store is the layout flag's, whose check at the launch finds the cells meet (B // 2 < B) and passes 0: dX
        // is added atomically (the check here launches so).
        KernelCase{"", "k", {3, 5, 1}, {"X=fp32[3,24]", "Y=fp32[3,24]:zeros", "n_cols=20", "stride=24"}, {"B=8"}, {"X"},
                   {"(program_id(1)) * B//2 + (tl.arange(0, B)) * 1: each address belongs to one program and lane where "
                    "these strides keep the indices' cells apart"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, n_cols, stride, B: tl.constexpr):\n    row = tl.program_id(0)\n"
                   "    cols = tl.program_id(1) * (B // 2) + tl.arange(0, B)\n    mask = cols < n_cols\n"
                   "    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)\n"
                   "    tl.atomic_add(Y + row * stride + cols, x * x, mask=mask)\n"},
        // A K loop with advancing pointers and tl.dot into the accumulator; 40x30x50 in blocks of 16; relu epilogue,
        // its derivative read back from C (the check passes C as the forward left it), dA and dB by their owners.
        KernelCase{"matmul", "matmul_kernel", {3, 2, 1},
                   {"a_ptr=fp16[40,50]", "b_ptr=fp16[50,30]", "c_ptr=fp16[40,30]:zeros", "M=40", "N=30", "K=50",
                    "stride_am=50", "stride_ak=1", "stride_bk=30", "stride_bn=1", "stride_cm=30", "stride_cn=1"},
                   {"BLOCK_SIZE_M=16", "BLOCK_SIZE_N=16", "BLOCK_SIZE_K=16", "ACTIVATION='relu'"}, {"a_ptr", "b_ptr"},
                   {"load through 'a_ptr' is a tl.atomic_add: the pointer is advanced by a loop",
                    "the relu epilogue's derivative is read from the output the forward stored through 'c_ptr'",
                    "is gathered by its owners: 'matmul_kernel_bwd_da_ptr'"}},
        // Column tiles of Y stored by a loop (n0 + tl.arange, in steps of BLOCK_N, the mask bounding the columns by
        // N): each iteration writes apart, so each tile's upstream gradient is a plain load, not an exchange.
        KernelCase{"matmul", "low_rank_kernel", {3, 1, 1},
                   {"X=fp32[40,50]", "A=fp32[50,16]", "B=fp32[16,36]", "Y=fp32[40,36]:zeros", "M=40", "K=50", "N=36",
                    "scale=0.5"},
                   {"R=16", "BLOCK_M=16", "BLOCK_K=16", "BLOCK_N=16"}, {"X", "A", "B"},
                   {"each iteration of the loop over 'n0' stores to addresses of 'Y' no other iteration stores to"}},
        // Programs renumbered by tl.swizzle2d (5 x 2 tiles, groups of 2 rows: the last group has one).
        KernelCase{"matmul", "grouped_matmul_kernel", {5, 2, 1},
                   {"a_ptr=fp16[70,50]", "b_ptr=fp16[50,30]", "c_ptr=fp16[70,30]:zeros", "M=70", "N=30", "K=50",
                    "stride_am=50", "stride_ak=1", "stride_bk=30", "stride_bn=1", "stride_cm=30", "stride_cn=1"},
                   {"BLOCK_SIZE_M=16", "BLOCK_SIZE_N=16", "BLOCK_SIZE_K=16", "GROUP_M=2"}, {"a_ptr", "b_ptr"}, {}},
        // One id in the tutorial's grouped order over 5 x 2 tiles, groups of 2 rows (the last has one): owners
        // on the 2-D grid it enumerates.
        KernelCase{"matmul", "tutorial_order_matmul_kernel", {10, 1, 1},
                   {"a_ptr=fp16[70,50]", "b_ptr=fp16[50,30]", "c_ptr=fp16[70,30]:zeros", "M=70", "N=30", "K=50",
                    "stride_am=50", "stride_ak=1", "stride_bk=30", "stride_bn=1", "stride_cm=30", "stride_cn=1"},
                   {"BLOCK_SIZE_M=16", "BLOCK_SIZE_N=16", "BLOCK_SIZE_K=16", "GROUP_SIZE_M=2"}, {"a_ptr", "b_ptr"},
                   {"is gathered by its owners: 'tutorial_order_matmul_kernel_bwd_da_ptr'",
                    "the 1-D grid's grouped ordering enumerates each (pid_m, pid_n) once"}},
        KernelCase{"cross_entropy", "log_softmax_kernel", {7, 1, 1},
                   {"out_ptr=fp32[7,100]:zeros", "in_ptr=fp32[7,100]", "in_row_stride=100", "out_row_stride=100", "n_cols=100"},
                   {"BLOCK_SIZE=128"}, {"in_ptr"}, {"load through 'in_ptr' is a plain store, assuming in_row_stride >= n_cols"}},
        KernelCase{"cross_entropy", "cross_entropy_kernel", {7, 1, 1},
                   {"logits_ptr=fp32[7,100]", "targets_ptr=int32[7]:uniform(0,99)", "loss_ptr=fp32[7]:zeros", "stride=100",
                    "n_cols=100"},
                   {"BLOCK_SIZE=128"}, {"logits_ptr"}, {"load through 'logits_ptr' is a plain store, assuming stride >= n_cols"}},
        // Flash attention's forward: the online softmax's running max, sum and output are taped. Both
        // programs of a (batch, head) add to the same dK, dV rows. 40 queries and keys in blocks of 16.
        KernelCase{"attention", "attn_fwd_kernel", {3, 2, 1},
                   {"Q=fp16[1,2,40,16]", "K=fp16[1,2,40,16]", "V=fp16[1,2,40,16]", "sm_scale=0.25", "M=fp32[1,2,40]:zeros",
                    "Out=fp16[1,2,40,16]:zeros", "stride_qz=1280", "stride_qh=640", "stride_qm=16", "stride_qk=1",
                    "stride_kz=1280", "stride_kh=640", "stride_kn=16", "stride_kk=1", "stride_vz=1280", "stride_vh=640",
                    "stride_vn=16", "stride_vk=1", "stride_oz=1280", "stride_oh=640", "stride_om=16", "stride_ok=1",
                    "H=2", "N_CTX=40"},
                   {"HEAD_DIM=16", "BLOCK_M=16", "BLOCK_N=16", "IS_CAUSAL=False"}, {"Q", "K", "V"},
                   // The stored logsumexp and output read back: no tape, no replay, dK and dV by their owners.
                   {"the loop's online softmax is differentiated from its row statistic, read back from what the "
                    "forward stores through 'M'",
                    "the gradients of 'K', 'V' (dK_dV) are gathered by their owners"}},
        KernelCase{"attention", "attn_fwd_kernel", {3, 2, 1},
                   {"Q=fp16[1,2,40,16]", "K=fp16[1,2,40,16]", "V=fp16[1,2,40,16]", "sm_scale=0.25", "M=fp32[1,2,40]:zeros",
                    "Out=fp16[1,2,40,16]:zeros", "stride_qz=1280", "stride_qh=640", "stride_qm=16", "stride_qk=1",
                    "stride_kz=1280", "stride_kh=640", "stride_kn=16", "stride_kk=1", "stride_vz=1280", "stride_vh=640",
                    "stride_vn=16", "stride_vk=1", "stride_oz=1280", "stride_oh=640", "stride_om=16", "stride_ok=1",
                    "H=2", "N_CTX=40"},
                   // The key loop ends at the query block's diagonal: the owners skip the programs that stop before.
                   {"HEAD_DIM=16", "BLOCK_M=16", "BLOCK_N=16", "IS_CAUSAL=True"}, {"Q", "K", "V"},
                   {"the gradients of 'K', 'V' (dK_dV) are gathered by their owners"}},
        // Valid Triton that used to be rejected: a constexpr-guarded definition (both values of the flag),
        // a number that a loop turns into an fp32 scalar, a runtime if with a number on one branch.
        KernelCase{"merges", "bias_act_kernel", {3, 1, 1}, {"X=fp32[300]", "B=fp32[300]", "Y=fp32[300]:zeros", "N=300"},
                   {"HAS_BIAS=True", "BLOCK=128"}, {"X", "B"}, {}},
        KernelCase{"merges", "bias_act_kernel", {3, 1, 1}, {"X=fp32[300]", "B=fp32[300]", "Y=fp32[300]:zeros", "N=300"},
                   {"HAS_BIAS=False", "BLOCK=128"}, {"X"}, {}},
        // A bias that every row of a 2-D grid loads (3 rows x 2 column blocks): its gradient is the sum over the
        // rows (once a plain store, which kept one row's share: a wrong gradient).
        KernelCase{"", "k", {3, 2, 1}, {"X=fp32[3,40]", "Bias=fp32[40]", "Y=fp32[3,40]:zeros", "n_cols=40"},
                   {"BLOCK=32"}, {"X", "Bias"},
                   {"programs that differ only in tl.program_id(0) read the same addresses"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Bias, Y, n_cols, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n"
                   "    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)\n    mask = cols < n_cols\n"
                   "    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)\n"
                   "    b = tl.load(Bias + cols, mask=mask, other=0.0)\n"
                   "    tl.store(Y + row * n_cols + cols, tl.sigmoid(x + b), mask=mask)\n"},
        KernelCase{"merges", "row_sum_kernel", {3, 1, 1}, {"X=fp32[3,100]", "Y=fp32[3]:zeros", "n_cols=100", "n_chunks=4"},
                   {"BLOCK=32"}, {"X"}, {}},
        KernelCase{"merges", "pick_kernel", {3, 1, 1}, {"X=fp32[3,16]", "Y=fp32[3]:zeros", "mode=1"}, {"BLOCK=16"}, {"X"}, {}},
        KernelCase{"merges", "pick_kernel", {3, 1, 1}, {"X=fp32[3,16]", "Y=fp32[3]:zeros", "mode=0"}, {"BLOCK=16"}, {"X"}, {}},
        // min() of runtime integers (grouped program order) and max()/min() of tiles; 5 x 3 programs.
        KernelCase{"grouped_minmax", "grouped_scale_kernel", {15, 1, 1},
                   {"X=fp32[37,45]", "Y=fp32[37,45]:zeros", "M=37", "N=45"}, {"BLOCK_M=8", "BLOCK_N=16", "GROUP_M=2"},
                   {"X"}, {}},
        // Early returns (one program past the rows, rows whose target is ignored): ifs around the rest.
        KernelCase{"early_return", "masked_rows_kernel", {6, 1, 1},
                   {"X=fp32[5,20]", "Y=fp32[5,20]:zeros", "T=int32[5]:uniform(0,3)", "n_rows=5", "n_cols=20",
                    "ignore_index=1"},
                   {"BLOCK=32"}, {"X"}, {}},
        // A constexpr chunk count narrowed at run time after the early return.
        KernelCase{"early_return", "chunk_tail_kernel", {4, 1, 1},
                   {"X=fp32[3,37]", "Y=fp32[3,16]:zeros", "n_rows=3", "n_cols=37"}, {"NC=8", "BC=16"}, {"X"}, {}},
        // Padding lanes of -inf discarded by a tl.where and by a store's mask: the backward selects, so no
        // 0 * inf makes NaN that a sum spreads over the row (once: NaN gradients for P and S).
        KernelCase{"masked_lanes", "kl_rows_kernel", {3, 1, 1},
                   {"P=fp32[3,40]", "Q=fp32[3,40]", "Loss=fp32[3]:zeros", "stride=40", "n_cols=40"}, {"BLOCK=64"},
                   {"P", "Q"}, {}},
        KernelCase{"masked_lanes", "padded_scale_kernel", {3, 1, 1},
                   {"X=fp32[3,40]", "S=fp32[1]", "Y=fp32[3,40]:zeros", "n_cols=40"}, {"BLOCK=64"}, {"X", "S"}, {}},
        // The padding reaches the where through a method of the tile (x.reshape(B)): NaN for S once.
        KernelCase{"masked_lanes", "reshaped_scale_kernel", {1, 1, 1},
                   {"X=fp32[40]", "S=fp32[1]", "Out=fp32[1]:zeros", "n=40"}, {"B=64"}, {"X", "S"}, {}},
        // Padding lanes of 0.0 whose log a where discards, through a jit helper whose backward divides by
        // them: the helper's contribution is selected too (NaN for W once).
        KernelCase{"masked_lanes", "log_rows_kernel", {3, 1, 1},
                   {"X=fp32[3,40]:uniform(0.5,2)", "W=fp32[1]:uniform(0.5,2)", "Out=fp32[3]:zeros", "n_cols=40"},
                   {"BLOCK=64"}, {"X", "W"}, {}},
        // A where on a predicate of the data (x > 20): the lanes it discards hold exp(x) = inf past 709.
        KernelCase{"masked_lanes", "softplus_kernel", {3, 1, 1},
                   {"X=fp32[300]:uniform(-30,760)", "Y=fp32[300]:zeros", "n=300"}, {"BLOCK=128"}, {"X"}, {}},
        // The tutorial-style attention forward: block pointers advanced by a jit helper (inlined), non-causal
        // and causal (two stages: the blocks left of the diagonal, then the diagonal block).
        KernelCase{"attention_block_ptr", "attn_fwd_block_ptr_kernel", {3, 2, 1},
                   {"Q=fp32[1,2,40,16]", "K=fp32[1,2,40,16]", "V=fp32[1,2,40,16]", "sm_scale=0.5", "M=fp32[2,40]:zeros",
                    "Out=fp32[1,2,40,16]:zeros", "stride_qz=1280", "stride_qh=640", "stride_qm=16", "stride_qk=1",
                    "stride_kz=1280", "stride_kh=640", "stride_kn=16", "stride_kk=1", "stride_vz=1280", "stride_vh=640",
                    "stride_vn=16", "stride_vk=1", "stride_oz=1280", "stride_oh=640", "stride_om=16", "stride_ok=1",
                    "H=2", "N_CTX=40"},
                   {"HEAD_DIM=16", "BLOCK_M=16", "BLOCK_N=16", "STAGE=1"}, {"Q", "K", "V"},
                   {"the loop's online softmax is differentiated from its row statistic",
                    "the gradients of 'K', 'V' (dK_dV) are gathered by their owners"}},
        KernelCase{"attention_block_ptr", "attn_fwd_block_ptr_kernel", {3, 2, 1},
                   {"Q=fp32[1,2,40,16]", "K=fp32[1,2,40,16]", "V=fp32[1,2,40,16]", "sm_scale=0.5", "M=fp32[2,40]:zeros",
                    "Out=fp32[1,2,40,16]:zeros", "stride_qz=1280", "stride_qh=640", "stride_qm=16", "stride_qk=1",
                    "stride_kz=1280", "stride_kh=640", "stride_kn=16", "stride_kk=1", "stride_vz=1280", "stride_vh=640",
                    "stride_vn=16", "stride_vk=1", "stride_oz=1280", "stride_oh=640", "stride_om=16", "stride_ok=1",
                    "H=2", "N_CTX=40"},
                   {"HEAD_DIM=16", "BLOCK_M=16", "BLOCK_N=16", "STAGE=3"}, {"Q", "K", "V"}, {}},
        // Chunked causal linear attention (a taped [D, D] state, tl.dot with a transposed operand), ragged T: each
        // chunk's store is its own block of O, each program's rows of dQ, dK, dV its own.
        KernelCase{"recurrence", "chunk_linear_attn_kernel", {2, 1, 1},
                   {"Q=fp32[2,37,16]", "K=fp32[2,37,16]", "V=fp32[2,37,16]", "O=fp32[2,37,16]:zeros", "T=37",
                    "scale=0.25"},
                   {"D=16", "BT=16"}, {"Q", "K", "V"},
                   {"each iteration of the loop over 'c' stores to addresses of 'O' no other iteration stores to",
                    "the gradient of the load through 'Q' is a plain store"}},
        // A recurrence counting down (range(n - 1, -1, -1)), taped, every step stored.
        KernelCase{"recurrence", "reverse_scan_kernel", {3, 1, 1},
                   {"X=fp32[3,5,16]", "A=fp32[3,5,16]", "H=fp32[3,5,16]:zeros", "n_steps=5"}, {"BLOCK=16"}, {"X", "A"},
                   {"the loop's carried 'h' is taped to 'h_tape'"}},
        // A taped running max whose pointer advances by a fixed step (an induction variable: the reversed loop
        // computes it from the iteration number).
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,5,8]", "Y=fp32[2,8]:zeros", "n=5"}, {"B=8"}, {"X"},
                   {"the loop's carried 'p' steps by B each iteration"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, n, B: tl.constexpr):\n    m = tl.zeros([B], dtype=tl.float32) - float('inf')\n"
                   "    p = X + tl.program_id(0) * n * B + tl.arange(0, B)\n    for i in range(0, n):\n"
                   "        m = tl.maximum(m, tl.load(p))\n        p += B\n"
                   "    tl.store(Y + tl.program_id(0) * B + tl.arange(0, B), m)\n"},
        // Pointers stepped by a product of loop invariants (fla's fused recurrent kernels: `p_q += H*K`), which
        // A-normal form names inside the body.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,5,3,8]", "Y=fp32[2,5,3,8]:zeros", "n=5"}, {"H=3", "B=8"}, {"X"},
                   {"the loop's carried 'p' steps by (H * B) each iteration"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, n, H: tl.constexpr, B: tl.constexpr):\n    h = tl.zeros([B], dtype=tl.float32)\n"
                   "    p = X + tl.program_id(0) * n * H * B + tl.arange(0, B)\n"
                   "    q = Y + tl.program_id(0) * n * H * B + tl.arange(0, B)\n    for i in range(0, n):\n"
                   "        h = h * tl.load(p) + tl.load(p)\n        tl.store(q, h)\n        p += H * B\n"
                   "        q += H * B\n"},
        // Variable-length sequences: with IS_VARLEN the bounds are int64 loads and T is rebound (one backward per
        // value of the flag, as the types differ); a causal filter over tl.static_range(NTAPS), a loop when NTAPS
        // has no value.
        KernelCase{"varlen", "varlen_gate_kernel", {2, 3, 1},
                   {"X=fp32[21,5]", "G=fp32[21,5]", "Y=fp32[21,5]:zeros", "cu_seqlens=int32[4]:uniform(0,1)", "T=7",
                    "D=5"},
                   {"IS_VARLEN=False", "BT=4", "BD=8"}, {"X", "G"}, {}},
        // A gate by USE_G at each chunk's last valid position (the last chunk of each sequence is ragged).
        KernelCase{"varlen", "varlen_tail_gate_kernel", {2, 3, 1},
                   {"X=fp32[33,5]", "G=fp32[33,5]", "Y=fp32[33,5]:zeros", "cu_seqlens=int32[4]", "T=11", "D=5"},
                   {"IS_VARLEN=False", "USE_G=True", "BT=8", "BD=8"}, {"X", "G"}, {}},
        KernelCase{"varlen", "varlen_tail_gate_kernel", {2, 3, 1},
                   {"X=fp32[33,5]", "G=fp32[33,5]", "Y=fp32[33,5]:zeros", "cu_seqlens=int32[4]", "T=11", "D=5"},
                   {"IS_VARLEN=False", "USE_G=False", "BT=8", "BD=8"}, {"X"}, {}},
        // `process = 1`, set from MASK where one is passed, then tested: MASK's gradient is zero.
        KernelCase{"merges", "skip_rows_kernel", {2, 1, 1},
                   {"X=fp32[5,7]", "MASK=fp32[5]:ones", "Y=fp32[5,7]:zeros", "n_rows=5", "n_cols=7"}, {"BLOCK=8"},
                   {"X", "MASK"}, {}},
        // A flag makes `offsets` a number (added to the rows) or a pointer to per-program offsets.
        KernelCase{"varlen", "shifted_rows_kernel", {4, 1, 1},
                   {"X=fp32[13,4]", "TABLE=fp32[16,4]", "Y=fp32[13,4]:zeros", "offsets=2", "n_rows=13"},
                   {"D=4", "BR=4", "OFFSETS_TENSOR=False"}, {"X", "TABLE"}, {}},
        KernelCase{"varlen", "shifted_rows_kernel", {4, 1, 1},
                   {"X=fp32[13,4]", "TABLE=fp32[16,4]", "Y=fp32[13,4]:zeros", "offsets=int32[4]:uniform(0,3)",
                    "n_rows=13"},
                   {"D=4", "BR=4", "OFFSETS_TENSOR=True"}, {"X", "TABLE"}, {}},
        KernelCase{"varlen", "causal_taps_kernel", {3, 1, 1}, {"X=fp32[40]", "W=fp32[3]", "Y=fp32[40]:zeros", "T=40"},
                   {"NTAPS=3", "BT=16"}, {"X", "W"}, {}},
        // A helper from a sibling module (relative import with an alias; the helper calls another and reads a constant).
        KernelCase{"imports_helper", "softplus_scale_kernel", {3, 1, 1},
                   {"X=fp32[300]:uniform(-30,30)", "W=fp32[300]", "Y=fp32[300]:zeros", "n_elements=300"}, {"BLOCK=128"},
                   {"X", "W"}, {}},
        // The helper module's `activation = softplus` (a module-level if's later branch); OUT_DTYPE a constexpr dtype.
        KernelCase{"imports_helper", "activation_cast_kernel", {3, 1, 1},
                   {"X=fp32[300]:uniform(-30,30)", "Y=fp32[300]:zeros", "n_elements=300"},
                   {"OUT_DTYPE=tl.float32", "BLOCK=128"}, {"X"}, {}},
        // Past exp's overflow (709 in float64): the where keeps x, and the helper's backward under the discarded
        // branch is (0 / (1 + inf)) * inf = NaN unless selected.
        KernelCase{"imports_helper", "activation_cast_kernel", {3, 1, 1},
                   {"X=fp32[300]:uniform(700,760)", "Y=fp32[300]:zeros", "n_elements=300"},
                   {"OUT_DTYPE=tl.float32", "BLOCK=128"}, {"X"}, {}},
        // PTX approximations (tanh.approx in an imported helper, sin.approx inline) and a libdevice function the
        // helper module binds to a name in a module-level if.
        // Tensor descriptors: rows 10..11 and columns 6..7 of the last block are past the shape.
        KernelCase{"imports_helper", "descriptor_scale_kernel", {3, 1, 1},
                   {"X=fp32[10,6]", "W=fp32[6]", "Y=fp32[10,6]", "M=10", "N=6"}, {"BM=4", "BN=8"}, {"X", "W"}, {}},
        KernelCase{"imports_helper", "approx_gelu_kernel", {3, 1, 1},
                   {"X=fp32[300]:uniform(-4,4)", "Y=fp32[300]:zeros", "n_elements=300"}, {"BLOCK=128"}, {"X"}, {}},
        // x = a if c else b with c loaded at run time: an if.
        KernelCase{"runtime_ifexp", "scale_kernel", {3, 1, 1},
                   {"X=fp32[300]", "Y=fp32[300]:zeros", "S=fp32[3]", "n=300"}, {"BLOCK=128"}, {"X", "S"}, {}, ""},
        // Conditionals inside larger expressions, on a flag (both values) and at run time; S mixes signs so that
        // programs take both the sum and the max.
        KernelCase{"runtime_ifexp", "centered_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "Y=fp32[4,13]:zeros", "L=fp32[4]", "S=fp32[4]", "n_cols=13"},
                   {"SPLIT=False", "BLOCK=16"}, {"X", "L"}, {}, ""},
        KernelCase{"runtime_ifexp", "centered_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "Y=fp32[4,13]:zeros", "L=fp32[4]", "S=fp32[4]", "n_cols=13"},
                   {"SPLIT=True", "BLOCK=16"}, {"X"}, {}, ""},
        // Flags adding an output and an input (typed here; the generic dispatcher is checked on the GPU).
        KernelCase{"merges", "centered_rows_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "W=fp32[4]", "Y=fp32[4,13]:zeros", "Mean=fp32[4]:zeros", "n_cols=13"},
                   {"IS_CENTERED=True", "HAS_WEIGHT=True", "BLOCK=16"}, {"X", "W"}, {}, ""},
        KernelCase{"merges", "centered_rows_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "W=fp32[4]", "Y=fp32[4,13]:zeros", "Mean=fp32[4]:zeros", "n_cols=13"},
                   {"IS_CENTERED=False", "HAS_WEIGHT=True", "BLOCK=16"}, {"X", "W"}, {}, ""},
        // Flags that a helper tests under its own names (ACT as KIND, TWICE as DOUBLE=).
        KernelCase{"helper_flags", "helper_flag_kernel", {4, 1, 1},
                   {"X=fp32[1000]:uniform(-2,2)", "Y=fp32[1000]:zeros", "n=1000"},
                   {"ACT='square'", "TWICE=True", "BLOCK=256"}, {"X"}, {}, ""},
        KernelCase{"helper_flags", "helper_flag_kernel", {4, 1, 1},
                   {"X=fp32[1000]:uniform(-2,2)", "Y=fp32[1000]:zeros", "n=1000"},
                   {"ACT='exp'", "TWICE=False", "BLOCK=256"}, {"X"}, {}, ""},
        // Dropout: tl.rand of the same seed and offsets in the backward (a seed argument; seeds loaded per row).
        KernelCase{"dropout", "dropout_kernel", {4, 1, 1},
                   {"X=fp32[1000]", "Y=fp32[1000]:zeros", "n_elements=1000", "p=0.3", "seed=1234"}, {"BLOCK=256"},
                   {"X"}, {}, ""},
        KernelCase{"dropout", "row_dropout_scale_kernel", {5, 1, 1},
                   {"X=fp32[5,100]", "W=fp32[100]", "SEEDS=int32[5]:uniform(0,100000)", "Y=fp32[5,100]:zeros",
                    "n_cols=100", "p=0.3"},
                   {"BLOCK=128"}, {"X", "W"}, {}, ""},
        // Flags that leave partial-summed weights unloaded: the generic dispatcher gives every value partial sums.
        KernelCase{"merges", "gated_affine_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "W=fp32[13]", "B=fp32[13]", "Y=fp32[4,13]:zeros", "n_cols=13"},
                   {"HAS_WEIGHT=True", "HAS_BIAS=True", "BLOCK=16"}, {"X", "W", "B"}, {}, ""},
        KernelCase{"merges", "gated_affine_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "W=fp32[13]", "B=fp32[13]", "Y=fp32[4,13]:zeros", "n_cols=13"},
                   {"HAS_WEIGHT=False", "HAS_BIAS=True", "BLOCK=16"}, {"X", "W", "B"}, {}, ""},
        KernelCase{"merges", "gated_affine_kernel", {4, 1, 1},
                   {"X=fp32[4,13]", "W=fp32[13]", "B=fp32[13]", "Y=fp32[4,13]:zeros", "n_cols=13"},
                   {"HAS_WEIGHT=False", "HAS_BIAS=False", "BLOCK=16"}, {"X", "W", "B"}, {}, ""},
        // `acc_z = tl.zeros(...) if HAS_Z else None`, accumulated under `if HAS_Z:` in a loop.
        KernelCase{"merges", "optional_accumulator_kernel", {3, 1, 1},
                   {"X=fp32[3,4,16]", "W=fp32[4,16]", "Y=fp32[3,16]:zeros", "Z=fp32[3,16]:zeros", "n_chunks=4"},
                   {"HAS_Z=True", "BLOCK=16"}, {"X", "W"}, {}, ""},
        KernelCase{"merges", "optional_accumulator_kernel", {3, 1, 1},
                   {"X=fp32[3,4,16]", "W=fp32[4,16]", "Y=fp32[3,16]:zeros", "Z=fp32[3,16]:zeros", "n_chunks=4"},
                   {"HAS_Z=False", "BLOCK=16"}, {"X", "W"}, {}, ""},
        // Constexpr conditions joined by `or` / `and`: Python's value (the first operand that decides), not the
        // last operand's (which once chose the else branch of `A == 1 or C == 1` with A=1, C=0: a wrong gradient).
        KernelCase{"", "k", {1, 1, 1}, {"X=fp32[16]", "Y=fp32[16]:zeros"}, {"A=1", "C=0", "ACT='swish'", "B=16"}, {"X"},
                   {}, "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, A: tl.constexpr, C: tl.constexpr, ACT: tl.constexpr, B: tl.constexpr):\n"
                   "    x = tl.load(X + tl.arange(0, B))\n"
                   "    if A == 1 or C == 1:\n        y = x * x\n    else:\n        y = x\n"
                   "    if A == 0 and C == 0:\n        y = y * 3.0\n"
                   "    if ACT == 'swish' or ACT == 'silu':\n        g = y * tl.sigmoid(y)\n"
                   "    elif ACT == 'sigmoid':\n        g = tl.sigmoid(y)\n"
                   "    tl.store(Y + tl.arange(0, B), g)\n"},
        // A parameter named like a gradient buffer (mamba's dA_cumsum_ptr and ddA_cumsum_ptr), reassigned under a
        // flag: the buffer of dA's gradient has another name in each specialization; the dispatcher passes its own.
        KernelCase{"", "k", {3, 1, 1}, {"A=fp32[3,8]", "dA=fp32[3,8]:zeros", "Y=fp32[3,8]:zeros"}, {"HAS_DA=True", "B=8"},
                   {"A"}, {}, "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(A, dA, Y, HAS_DA: tl.constexpr, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
                   "    a = tl.load(A + tl.program_id(0) * B + o)\n    if HAS_DA:\n"
                   "        dA += tl.program_id(0) * B + o\n        s = a * 2.0\n    if HAS_DA:\n"
                   "        tl.store(dA, s * a)\n    tl.store(Y + tl.program_id(0) * B + o, a * a)\n"},
        KernelCase{"", "k", {3, 1, 1}, {"A=fp32[3,8]", "dA=fp32[3,8]:zeros", "Y=fp32[3,8]:zeros"}, {"HAS_DA=False", "B=8"},
                   {"A"}, {}, "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(A, dA, Y, HAS_DA: tl.constexpr, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
                   "    a = tl.load(A + tl.program_id(0) * B + o)\n    if HAS_DA:\n"
                   "        dA += tl.program_id(0) * B + o\n        s = a * 2.0\n    if HAS_DA:\n"
                   "        tl.store(dA, s * a)\n    tl.store(Y + tl.program_id(0) * B + o, a * a)\n"},
        // fla's recurrent kernels: `(T - 1) if REVERSE else 0` (a flag without a value chooses between a Triton
        // scalar and a number) and pointers stepped by `(-1 if REVERSE else 1) * B` (a loop-invariant step).
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,5,8]", "Y=fp32[2,5,8]:zeros", "T=5"}, {"REVERSE=True", "B=8"}, {"X"},
                   {}, "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, T, REVERSE: tl.constexpr, B: tl.constexpr):\n"
                   "    base = tl.program_id(0) * T + ((T - 1) if REVERSE else 0)\n"
                   "    p = X + base * B + tl.arange(0, B)\n    q = Y + base * B + tl.arange(0, B)\n"
                   "    h = tl.zeros([B], dtype=tl.float32)\n    for _ in range(0, T):\n"
                   "        h = h * tl.load(p) + tl.load(p)\n        tl.store(q, h)\n"
                   "        p += (-1 if REVERSE else 1) * B\n        q += (-1 if REVERSE else 1) * B\n"},
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,5,8]", "Y=fp32[2,5,8]:zeros", "T=5"}, {"REVERSE=False", "B=8"}, {"X"},
                   {}, "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, T, REVERSE: tl.constexpr, B: tl.constexpr):\n"
                   "    base = tl.program_id(0) * T + ((T - 1) if REVERSE else 0)\n"
                   "    p = X + base * B + tl.arange(0, B)\n    q = Y + base * B + tl.arange(0, B)\n"
                   "    h = tl.zeros([B], dtype=tl.float32)\n    for _ in range(0, T):\n"
                   "        h = h * tl.load(p) + tl.load(p)\n        tl.store(q, h)\n"
                   "        p += (-1 if REVERSE else 1) * B\n        q += (-1 if REVERSE else 1) * B\n"},
        // rwkv6's spelling: `(-1 if not REVERSE else 1)`, in a loop that counts down.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,5,8]", "Y=fp32[2,5,8]:zeros", "T=5"}, {"REVERSE=False", "B=8"}, {"X"},
                   {"the loop's carried 'p' steps by"}, "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, T, REVERSE: tl.constexpr, B: tl.constexpr):\n"
                   "    base = tl.program_id(0) * T + ((T - 1) if not REVERSE else 0)\n"
                   "    p = X + base * B + tl.arange(0, B)\n    q = Y + base * B + tl.arange(0, B)\n"
                   "    h = tl.zeros([B], dtype=tl.float32)\n    for _ in range(T - 1, -1, -1):\n"
                   "        h = h * tl.load(p) + tl.load(p)\n        tl.store(q, h)\n"
                   "        p += (-1 if not REVERSE else 1) * B\n        q += (-1 if not REVERSE else 1) * B\n"},
        // Scans: a running sum with a user combine function; a first-order recurrence over (coefficient, state)
        // pairs, forwards and reversed, beside a reversed tl.cumsum.
        KernelCase{"scan", "running_sum_kernel", {3, 1, 1},
                   {"X=fp32[3,13]", "W=fp32[13]", "Y=fp32[3,13]:zeros", "n_cols=13"}, {"BLOCK=16"}, {"X", "W"}, {}, ""},
        KernelCase{"scan", "decay_scan_kernel", {2, 1, 1},
                   {"X=fp32[5,7]", "G=fp32[5,7]", "H=fp32[5,7]:zeros", "n_rows=5", "T=7"},
                   {"BLOCK_ROWS=4", "BLOCK_T=8", "REVERSE=False"}, {"X", "G"}, {}, ""},
        KernelCase{"scan", "decay_scan_kernel", {2, 1, 1},
                   {"X=fp32[5,7]", "G=fp32[5,7]", "H=fp32[5,7]:zeros", "n_rows=5", "T=7"},
                   {"BLOCK_ROWS=4", "BLOCK_T=8", "REVERSE=True"}, {"X", "G"}, {}, ""},
        // A masked store in a loop whose iterations write apart (its upstream gradient loaded), a cumsum per chunk.
        KernelCase{"scan", "chunked_cumsum_kernel", {2, 1, 1}, {"X=fp32[2,13]", "Y=fp32[2,13]:zeros", "T=13"},
                   {"BT=8"}, {"X"}, {}, ""},
        // A suffix sum written with tl.flip around tl.cumsum, scaled by powers of a float scalar; a ragged row.
        KernelCase{"scan", "discounted_returns_kernel", {3, 1, 1},
                   {"R=fp32[3,13]", "V=fp32[3,13]", "Out=fp32[3,13]:zeros", "T=13", "gamma=0.9"}, {"BLOCK=16"},
                   {"R", "V"}, {}, ""},
        // tl.gather along a row and on a vector.
        KernelCase{"gather", "gather_rows_kernel", {2, 1, 1},
                   {"X=fp32[7,8]", "T=fp32[8]", "IDX=int32[7,8]:uniform(0,8)", "PERM=int32[8]:uniform(0,8)",
                    "Y=fp32[7,8]:zeros", "n_rows=7"}, {"C=8", "BLOCK_ROWS=4"}, {"X", "T"}, {}, ""},
        // Integers carried beside taped floats: a data-dependent count (taped as int32) and an argmax (not taped:
        // no adjoint reads it). Ragged rows, so the count's updates differ from the iteration's block size.
        // Accumulators kept in memory (a per-program weight-gradient row in a grid-stride loop; a block updated in
        // place by a loop), carried in registers by the backward.
        KernelCase{"accumulators", "weight_rows_kernel", {2, 1, 1},
                   {"X=fp32[5,8]", "DY=fp32[5,8]", "W=fp32[8]", "RSTD=fp32[5]", "DX=fp32[5,8]:zeros", "DW=fp32[2,8]:zeros",
                    "n_rows=5", "n_cols=7", "stride=8"},
                   {"BLOCK=8", "HAS_WEIGHT=True"}, {"X", "DY", "W", "RSTD"},
                   {"the backward differentiates it as the loop-carried value 'partial_in_memory'"}, ""},
        KernelCase{"accumulators", "weight_rows_kernel", {2, 1, 1},
                   {"X=fp32[5,8]", "DY=fp32[5,8]", "W=fp32[8]", "RSTD=fp32[5]", "DX=fp32[5,8]:zeros", "DW=fp32[2,8]:zeros",
                    "n_rows=5", "n_cols=7", "stride=8"},
                   {"BLOCK=8", "HAS_WEIGHT=False"}, {"X", "DY", "W", "RSTD"}, {}, ""},
        // A taped loop stepping by tl.num_programs(0) * BR, over ragged blocks of rows.
        KernelCase{"accumulators", "block_rows_max_kernel", {2, 1, 1},
                   {"X=fp32[11,7]", "Y=fp32[2,7]:zeros", "n_rows=11", "n_cols=7"}, {"BR=2", "BC=8"}, {"X"}, {}, ""},
        KernelCase{"accumulators", "repeated_update_inplace_kernel", {3, 1, 1}, {"X=fp32[20]", "n=20", "n_steps=3"},
                   {"BLOCK=8"}, {"X"}, {"the loop-carried value 'x_in_memory'"}, ""},
        KernelCase{"online_stats", "online_stats_kernel", {3, 1, 1},
                   {"X=fp32[3,37]", "MEAN=fp32[3]:zeros", "LSE=fp32[3]:zeros", "ARGMAX=int32[3]:zeros", "n_cols=37"},
                   {"BLOCK=8"}, {"X"}, {}, ""},
        // mamba's state passing: an int32 sequence index carried (and taped) beside the state; SEQ holds integers.
        KernelCase{"online_stats", "segment_decay_kernel", {2, 1, 1},
                   {"X=fp32[6,13]", "DECAY=fp32[6]", "SEQ=int32[6]:uniform(0,2)", "Y=fp32[6,13]:zeros",
                    "n_chunks=6", "dim=13"},
                   {"BLOCK=8"}, {"X", "DECAY"}, {}, ""},
        // A taped state of [BR] or [BC] by a flag (one protocol sizes the tape for the larger).
        KernelCase{"online_stats", "running_norm_kernel", {2, 1, 1}, {"X=fp32[2,3,4,8]", "Y=fp32[2,4,8]:zeros", "n_steps=3"},
                   {"BR=4", "BC=8", "BY_ROWS=True"}, {"X"}, {}, ""},
        KernelCase{"online_stats", "running_norm_kernel", {2, 1, 1}, {"X=fp32[2,3,4,8]", "Y=fp32[2,4,8]:zeros", "n_steps=3"},
                   {"BR=4", "BC=8", "BY_ROWS=False"}, {"X"}, {}, ""},
        // tl.dot with N = 1 and M = 1 (Triton takes them; K needs 16): the backward products whose inner dimension
        // would be 1 are sums of broadcast products.
        KernelCase{"matvec", "matvec_kernel", {2, 1, 1},
                   {"A=fp32[27,16]", "X=fp32[16]", "W=fp32[16,16]", "Y=fp32[27]:zeros", "Z=fp32[2,16]:zeros",
                    "n_rows=27"}, {"K=16", "BM=16"}, {"A", "X", "W"}, {}, ""},
        // tl.split / tl.join / tl.interleave: rotary embeddings over interleaved pairs.
        KernelCase{"rotary_pairs", "rotary_pairs_kernel", {2, 1, 1},
                   {"X=fp32[5,8]", "COS=fp32[5,4]", "SIN=fp32[5,4]", "Y=fp32[5,8]:zeros", "n_rows=5"},
                   {"HALF=4", "BLOCK_ROWS=4"}, {"X", "COS", "SIN"}, {}, ""},
        // In place, a block of (x[2d], x[2d+1]) pairs per iteration; the last 3 elements of each row pass through.
        KernelCase{"rotary_pairs", "rotary_pairs_inplace_kernel", {3, 1, 1},
                   {"X=fp32[3,23]", "COS=fp32[3,10]", "SIN=fp32[3,10]", "row_stride=23"}, {"HALF=10", "BLOCK=4"},
                   {"X", "COS", "SIN"}, {}, ""},
        KernelCase{"rotary_pairs", "rotary_interleave_kernel", {3, 1, 1},
                   {"X=fp32[3,8]", "COS=fp32[3,4]", "SIN=fp32[3,4]", "Y=fp32[3,8]:zeros", "S=fp32[3,4]:zeros"},
                   {"HALF=4"}, {"X", "COS", "SIN"}, {}, ""},
        // Forwards that add with tl.atomic_add: into one row (every program), and into rows chosen by an index.
        KernelCase{"atomics", "weighted_colsum_kernel", {5, 1, 1},
                   {"X=fp32[5,13]", "W=fp32[13]", "Y=fp32[13]", "n_cols=13"}, {"BLOCK=16"}, {"X", "W"}, {}, ""},
        KernelCase{"atomics", "scatter_rows_kernel", {6, 1, 1},
                   {"X=fp32[6,13]", "IDX=int32[6]:uniform(0,2)", "Y=fp32[3,13]", "n_cols=13"}, {"BLOCK=16"}, {"X"}, {},
                   ""},
        // A tape and partial sums together: the backward's 3 programs replay the 5 forward programs, a tape row each.
        KernelCase{"recurrence", "weighted_running_max_kernel", {5, 1, 1},
                   {"X=fp32[5,4,8]", "W=fp32[8]", "Y=fp32[5,8]:zeros", "n_chunks=4"}, {"BLOCK=8"}, {"X", "W"}, {}},
        // Loops reversed with a tape: a running max, and a linear recurrence h = a * h + x.
        KernelCase{"recurrence", "running_max_kernel", {3, 1, 1}, {"X=fp32[3,5,16]", "Y=fp32[3,16]:zeros", "n_chunks=5"},
                   {"BLOCK=16"}, {"X"}, {}},
        // range(SKIP + 1, n_cols - 1, SKIP - 1): the trip count and the tape index keep the sums whole (a wrong
        // gradient when they were spliced in as text: n - SKIP + 1).
        KernelCase{"recurrence", "offset_recurrence_kernel", {2, 1, 1}, {"X=fp32[2,13]", "Y=fp32[2,8]", "n_cols=13"},
                   {"SKIP=3", "BLOCK=8"}, {"X"}, {}},
        // A state made [BT, K] and kept [BT, BK] by a dot (K == BK assumed), taped; a gate sum that is None
        // without USE_GATE, carried unchanged (no tape).
        KernelCase{"recurrence", "projected_state_kernel", {2, 1, 1},
                   {"X=fp32[2,3,16,16]", "P=fp32[3,16,16]", "G=fp32[2,3,16]", "Y=fp32[2,16,16]:zeros",
                    "GS=fp32[2,16]:zeros", "n_steps=3"},
                   {"K=16", "BT=16", "BK=16", "USE_GATE=True"}, {"X", "P", "G"}, {}},
        KernelCase{"recurrence", "projected_state_kernel", {2, 1, 1},
                   {"X=fp32[2,3,16,16]", "P=fp32[3,16,16]", "G=fp32[2,3,16]", "Y=fp32[2,16,16]:zeros",
                    "GS=fp32[2,16]:zeros", "n_steps=3"},
                   {"K=16", "BT=16", "BK=16", "USE_GATE=False"}, {"X", "P", "G"}, {}},
        KernelCase{"recurrence", "linear_scan_kernel", {3, 1, 1},
                   {"X=fp32[3,5,16]", "A=fp32[3,5,16]", "H=fp32[3,16]:zeros", "n_steps=5"}, {"BLOCK=16"}, {"X", "A"},
                   {"the loop's carried 'h' is taped to 'h_tape'"}},
        // Online logsumexp per lane; chunks 2 and 4 jump by 100 and 300, so alpha = tl.exp(m - m_new) is below
        // float32's normal range there (and 0 in the first iteration): the backward uses 0 for the inverted sum.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[80]", "Y=fp32[16]:zeros", "N=5"}, {"B=8"}, {"X"},
                   {"the loop's carried 's' is recovered in the reversed loop by inverting its update",
                    "the loop's carried 'm' is taped to 'm_tape'"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, N, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n"
                   "    m = tl.zeros([B], dtype=tl.float32) - float(\"inf\")\n    s = tl.zeros([B], dtype=tl.float32)\n"
                   "    for i in range(0, N):\n        x = tl.load(X + i * 2 * B + o) + 100.0 * (i // 2) * (i // 2)\n"
                   "        m_new = tl.maximum(m, x)\n        alpha = tl.exp(m - m_new)\n"
                   "        s = s * alpha + tl.exp(x - m_new)\n        m = m_new\n"
                   "    tl.store(Y + o, m + tl.log(s))\n"},
        // Every carried value inverted: the loop runs in reverse without a tape.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[80]", "Y=fp32[16]:zeros", "N=5"}, {"B=8"}, {"X"},
                   {"the loop's carried 's' is recovered in the reversed loop by inverting its update"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, N, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    s = tl.zeros([B], dtype=tl.float32)\n"
                   "    for i in range(0, N):\n        x = tl.load(X + i * 2 * B + o)\n"
                   "        s = s * tl.exp(-x) + x * x\n    tl.store(Y + o, s)\n"},
        // Linear updates whose coefficients carry no gradient (a scalar argument, a literal): neither taped nor
        // inverted, since the backward never reads the carried values.
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[80]", "Y=fp32[16]:zeros", "N=5", "decay=0.7"}, {"B=8"}, {"X"},
                   {"the loop's carried 'h' needs neither a tape nor an inversion",
                    "the loop's carried 'g' needs neither a tape nor an inversion"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, N, decay, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    h = tl.zeros([B], dtype=tl.float32)\n"
                   "    g = tl.zeros([B], dtype=tl.float32)\n"
                   "    for i in range(0, N):\n        x = tl.load(X + i * 2 * B + o)\n"
                   "        h = h * decay + x * x\n        g = 0.5 * g - x\n    tl.store(Y + o, h * g)\n"},
        // A sum carried by an outer loop through an inner one: in A-normal form its copies go round
        // (`c_3 = c_2` before the inner loop, `c_2 = c_3` after it), which the search for an online
        // softmax's running max once followed forever (Liger's group norm backward ran out of memory).
        KernelCase{"", "k", {1, 1, 1}, {"X=fp32[8]", "Y=fp32[8]:zeros", "n=3"}, {"B=8"}, {"X"}, {},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(X, Y, n, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
                   "    c = tl.zeros([B], dtype=tl.float32)\n    for j in range(0, n):\n"
                   "        for i in range(0, n):\n            c += tl.load(X + o) * 1.5\n"
                   "    tl.store(Y + o, c)\n"},
        // The tutorial's flash attention: acc = acc * alpha[:, None], then acc = tl.dot(p, v, acc). The
        // accumulator is inverted through the dot: acc = (acc' - tl.dot(p, v)) / alpha[:, None].
        KernelCase{"", "k", {2, 1, 1}, {"Q=fp16[32,16]", "K=fp16[40,16]", "V=fp16[40,16]", "O=fp16[32,16]:zeros", "N=40"},
                   {"M=16", "BN=16", "D=16"}, {"Q", "K", "V"},
                   {"the loop's carried 'acc' is recovered in the reversed loop by inverting its update",
                    "the loop's carried 'l_i' is recovered in the reversed loop by inverting its update",
                    // (It stores no logsumexp to read back: --explain says so.)
                    "the loop's online softmax keeps its taped backward: the kernel does not store its row statistic"},
                   "import triton\nimport triton.language as tl\n@triton.jit\n"
                   "def k(Q, K, V, O, N, M: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):\n"
                   "    rm = tl.program_id(0) * M + tl.arange(0, M)\n    rd = tl.arange(0, D)\n"
                   "    q = tl.load(Q + rm[:, None] * D + rd[None, :])\n"
                   "    m_i = tl.zeros([M], dtype=tl.float32) - float(\"inf\")\n"
                   "    l_i = tl.zeros([M], dtype=tl.float32)\n    acc = tl.zeros([M, D], dtype=tl.float32)\n"
                   "    for start in range(0, N, BN):\n        rn = start + tl.arange(0, BN)\n"
                   "        k = tl.load(K + rn[:, None] * D + rd[None, :], mask=rn[:, None] < N, other=0.0)\n"
                   "        qk = tl.where(rn[None, :] < N, tl.dot(q, tl.trans(k)), float(\"-inf\"))\n"
                   "        m_ij = tl.maximum(m_i, tl.max(qk, 1))\n        p = tl.math.exp2(qk - m_ij[:, None])\n"
                   "        alpha = tl.math.exp2(m_i - m_ij)\n        l_i = l_i * alpha + tl.sum(p, 1)\n"
                   "        acc = acc * alpha[:, None]\n"
                   "        v = tl.load(V + rn[:, None] * D + rd[None, :], mask=rn[:, None] < N, other=0.0)\n"
                   "        acc = tl.dot(p.to(tl.float16), v, acc)\n        m_i = m_ij\n"
                   "    tl.store(O + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16))\n"},
        // Outputs written more than once at an address: the upstream gradient is consumed, so only the
        // last value written takes it. A second store over the even lanes of the first:
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[16]", "Y=fp32[16]:zeros"}, {"B=8"}, {"X"},
                   {"'Y': the forward may write an address more than once ('Y' is stored to more than once (lines 7 and 8))"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    x = tl.load(X + o)\n    tl.store(Y + o, x * x)\n"
                   "    tl.store(Y + o, x * 3.0, mask=o % 2 == 0)\n"},
        // ... a store in a loop at addresses that do not move with it (the last iteration's value stays):
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,4,8]", "Y=fp32[16]:zeros", "N=4"}, {"B=8"}, {"X"},
                   {"the store is repeated by a loop at addresses that do not move with it"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, N, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    acc = tl.zeros([B], dtype=tl.float32)\n"
                   "    for i in range(N):\n        acc += tl.load(X + (tl.program_id(0) * N + i) * B + tl.arange(0, B))\n"
                   "        tl.store(Y + o, acc * acc)\n"},
        // ... every program storing the same addresses (one of them takes the gradient, atomically):
        KernelCase{"", "k", {4, 1, 1}, {"X=fp32[8]", "Y=fp32[8]:zeros"}, {"B=8"}, {"X"},
                   {"the offset has no program id"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n"
                   "    x = tl.load(X + tl.arange(0, B))\n    tl.store(Y + tl.arange(0, B), x * x)\n"},
        // ... and the two halves of each row, rotary style (disjoint, but not proven so).
        KernelCase{"", "k", {3, 1, 1}, {"X=fp32[3,16]", "C=fp32[8]", "Y=fp32[3,16]:zeros"}, {"H=8"}, {"X", "C"},
                   {"'Y' is stored to more than once"},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, C, Y, H: tl.constexpr):\n"
                   "    o = tl.program_id(0) * 2 * H + tl.arange(0, H)\n    c = tl.load(C + tl.arange(0, H))\n"
                   "    a = tl.load(X + o)\n    b = tl.load(X + o + H)\n"
                   "    tl.store(Y + o, a * c - b * (1.0 - c))\n    tl.store(Y + o + H, b * c + a * (1.0 - c))\n"},
        // Updates in place: one gradient buffer, the upstream gradient on entry; what no store writes passes through.
        KernelCase{"in_place", "rotary_inplace_kernel", {3, 1, 1},
                   {"Q=fp32[3,3,16]", "COS=fp32[3,8]", "SIN=fp32[3,8]", "n_heads=3"}, {"HEADS=4", "HALF=8"},
                   {"Q", "COS", "SIN"}, {"'Q': the forward may write an address more than once ('Q' is updated in place)"}},
        KernelCase{"in_place", "rotary_kernel", {3, 1, 1},
                   {"Q=fp32[3,3,16]", "COS=fp32[3,8]", "SIN=fp32[3,8]", "OUT=fp32[3,3,16]:zeros", "n_heads=3"},
                   {"HEADS=4", "HALF=8"}, {"Q", "COS", "SIN"}, {"'OUT' is stored to more than once"}},
        KernelCase{"in_place", "square_positive_inplace_kernel", {3, 1, 1}, {"X=fp32[40]", "n=37"}, {"BLOCK=16"},
                   {"X"}, {"'X' is updated in place", "the gradient of the load through 'X' is a store adding to the earlier gradients"}},
        // A flag with a default, launched with the default left out, given, and given the other value.
        KernelCase{"defaulted_flag", "signed_rotation_kernel", {3, 1, 1},
                   {"X=fp32[80]", "C=fp32[40]", "S=fp32[40]", "YA=fp32[40]:zeros", "YB=fp32[40]:zeros", "n=37"},
                   {"BLOCK=16"}, {"X", "C", "S"}, {}},
        KernelCase{"defaulted_flag", "signed_rotation_kernel", {3, 1, 1},
                   {"X=fp32[80]", "C=fp32[40]", "S=fp32[40]", "YA=fp32[40]:zeros", "YB=fp32[40]:zeros", "n=37"},
                   {"INVERSE=False", "BLOCK=16"}, {"X", "C", "S"}, {}},
        KernelCase{"defaulted_flag", "signed_rotation_kernel", {3, 1, 1},
                   {"X=fp32[80]", "C=fp32[40]", "S=fp32[40]", "YA=fp32[40]:zeros", "YB=fp32[40]:zeros", "n=37"},
                   {"INVERSE=True", "BLOCK=16"}, {"X", "C", "S"}, {}},
        // A string-or-None flag: None and a string, each through the dispatcher in the generic check.
        KernelCase{"defaulted_flag", "optional_activation_kernel", {3, 1, 1},
                   {"X=fp32[40]", "Y=fp32[40]:zeros", "n=37"}, {"ACT=None", "BLOCK=16"}, {"X"}, {}},
        KernelCase{"defaulted_flag", "optional_activation_kernel", {3, 1, 1},
                   {"X=fp32[40]", "Y=fp32[40]:zeros", "n=37"}, {"ACT='softsign'", "BLOCK=16"}, {"X"}, {}},
        // ... inside a grid-stride row loop and a loop walking the row: each iteration of both owns its block.
        KernelCase{"in_place", "strided_inplace_scale_kernel", {3, 1, 1},
                   {"X=fp32[7,40]", "W=fp32[40]", "n_rows=7", "n_cols=37"}, {"BLOCK=16"}, {"X", "W"},
                   {"'X' is updated in place"}},
        // A head loop updating each head's two halves in place under a lane mask (unsloth's rope): 3 rows, 5 heads
        // in groups of 2, a block of 8 lanes over halves of 4.
        KernelCase{"in_place", "head_group_rope_inplace_kernel", {3, 3, 1},
                   {"Q=fp32[3,40]", "COS=fp32[3,4]", "SIN=fp32[3,4]", "row_stride=40", "n_heads=5"},
                   {"HEAD_DIM=8", "GROUP=2", "BLOCK=8"}, {"Q", "COS", "SIN"}, {"'Q' is updated in place"}},
        // A running state over 3 chunks in place, K = 12 and V = 10 in blocks of 8 (masked lanes), 2 sequences of 2
        // heads: each iteration's block shown its own by the masks' bounds (src/ad/AccessBlocks.cpp).
        KernelCase{"in_place", "chunk_state_reduction_kernel", {2, 2, 4},
                   {"S=fp32[2,3,2,12,10]", "D=fp32[2,3,2]", "NT=3"}, {"H=2", "K=12", "V=10", "BK=8", "BV=8"},
                   {"S", "D"}, {"'S' is updated in place"}},
        // Loads reading back what the same program stored (src/ad/StoredValueForwarding.h): 3 programs over 7 rows of
        // 37 columns in blocks of 16 (masked lanes), the third loop reading the first's column blocks; a helper's
        // store read back and written again.
        KernelCase{"read_back", "two_pass_kernel", {3, 1, 1},
                   {"X=fp32[7,40]", "W=fp32[7]", "Y=fp32[7,37]:zeros", "n_rows=7", "stride_x=40"}, {"N=37", "BLOCK_R=4", "BLOCK_N=16"},
                   {"X", "W"}, {"in the iteration of the earlier loop with the same index"}},
        KernelCase{"read_back", "reread_kernel", {3, 1, 1},
                   {"X=fp32[40]", "Y=fp32[40]:zeros", "Z=fp32[40]:zeros", "n=37", "scale=0.7"}, {"BLOCK=16"}, {"X"},
                   {"the load of 'Y' at line 47 reads back what the store at line 36 wrote in the same program, so "
                    "it takes that value"}},
        // A load, an addition and a store back at addresses an inner loop moves (Liger's tiled dW rows): 3 programs
        // over 7 rows, column blocks of 16 over 37 columns.
        KernelCase{"memory_additions", "tiled_partial_sums_kernel", {3, 1, 1},
                   {"X=fp32[7,40]", "W=fp32[40]", "P=fp32[3,40]", "n_rows=7", "n_cols=37"}, {"BLOCK=16"},
                   {"X", "W", "P"}, {"differentiated as tl.atomic_add", "'P': the kernel only adds to it"}},
        // While loops that step one variable, as counted for loops (src/ad/WhileLoops.h): a grid-stride row loop
        // (the step's sign known at run time), tiles of groups of loaded sizes dealt in turn with two bounds (as
        // unsloth's grouped GEMM), rows walked down with `-=` (and up, the step negative), and a value carried
        // through the trips (the loop is taped).
        KernelCase{"while_loops", "persistent_rows_kernel", {3, 1, 1},
                   {"X=fp32[7,20]", "W=fp32[20]", "Y=fp32[7,20]:zeros", "n_rows=7", "n_cols=20", "NUM_PROGRAMS=3"},
                   {"BLOCK=32"}, {"X", "W"}, {}},
        KernelCase{"while_loops", "grid_stride_rows_kernel", {3, 1, 1},
                   {"X=fp32[7,20]", "W=fp32[20]", "Y=fp32[7,20]:zeros", "n_rows=7", "n_cols=20"}, {"BLOCK=32"},
                   {"X", "W"}, {}},
        KernelCase{"while_loops", "grouped_tiles_kernel", {3, 1, 1},
                   {"X=fp32[36,20]", "W=fp32[4,20]", "Y=fp32[36,20]:zeros", "sizes=int32[4]:uniform(0,10)",
                    "n_groups=4", "n_cols=20", "NUM_SMS=3"},
                   {"BLOCK_M=2", "BLOCK_N=32"}, {"X", "W"}, {}},
        KernelCase{"while_loops", "descending_rows_kernel", {3, 1, 1},
                   {"X=fp32[8,20]", "Y=fp32[8,20]:zeros", "first=7", "n_rows=8", "n_cols=20", "STEP=3"}, {"BLOCK=32"},
                   {"X"}, {}},
        KernelCase{"while_loops", "descending_rows_kernel", {3, 1, 1},
                   {"X=fp32[8,20]", "Y=fp32[8,20]:zeros", "first=2", "n_rows=8", "n_cols=20", "STEP=-3"}, {"BLOCK=32"},
                   {"X"}, {}},
        KernelCase{"", "k", {2, 1, 1}, {"X=fp32[2,8]", "Y=fp32[2,8]:zeros", "n=3"}, {"B=8"}, {"X"}, {},
                   "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X, Y, n, B: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n    x = tl.load(X + o)\n"
                   "    while n > 0:\n        x = x * x * 0.5\n        n -= 1\n    tl.store(Y + o, x)\n"},
        // Taped loops nested in an accumulating loop, in a taped loop, and in a runtime if (both branches).
        KernelCase{"recurrence", "nested_scan_kernel", {2, 1, 1},
                   {"X=fp32[2,3,4,16]", "Y=fp32[2,16]:zeros", "n_outer=3", "n_inner=4"}, {"BLOCK=16"}, {"X"}, {}},
        KernelCase{"recurrence", "nested_taped_kernel", {2, 1, 1},
                   {"X=fp32[2,3,4,16]", "Y=fp32[2,16]:zeros", "n_outer=3", "n_inner=4"}, {"BLOCK=16"}, {"X"}, {}},
        KernelCase{"recurrence", "branch_scan_kernel", {2, 1, 1},
                   {"X=fp32[2,4,16]", "Y=fp32[2,16]:zeros", "n=4", "mode=1"}, {"BLOCK=16"}, {"X"}, {}},
        KernelCase{"recurrence", "branch_scan_kernel", {2, 1, 1},
                   {"X=fp32[2,4,16]", "Y=fp32[2,16]:zeros", "n=4", "mode=-1"}, {"BLOCK=16"}, {"X"}, {}},
        // Names that hold different things at different points (tests/kernels/name_reuse.py): a pointer parameter
        // rebound to what it loads under a flag (both values), one name for two pointers, hinted and reshaped pointers.
        KernelCase{"name_reuse", "biased_scale_kernel", {4, 1, 1},
                   {"X=fp32[1000]", "bias=fp32[1000]", "Y=fp32[1000]:zeros", "n=1000"}, {"HAS_BIAS=True", "BLOCK=256"},
                   {"X", "bias"}, {}},
        KernelCase{"name_reuse", "biased_scale_kernel", {4, 1, 1},
                   {"X=fp32[1000]", "bias=fp32[1000]", "Y=fp32[1000]:zeros", "n=1000"}, {"HAS_BIAS=False", "BLOCK=256"},
                   {"X", "bias"}, {}},
        KernelCase{"name_reuse", "dequant_scale_kernel", {4, 1, 1},
                   {"S=fp32[1000]", "Z=int32[1000]:uniform(0,4096)", "Y=fp32[1000]:zeros", "n=1000"}, {"BLOCK=256"},
                   {"S"}, {}},
        // A load's `other` loaded from a differentiated pointer: its lanes' gradient goes there.
        KernelCase{"name_reuse", "shifted_with_state_kernel", {5, 1, 1},
                   {"X=fp32[5,20]", "S=fp32[5,3]", "Y=fp32[5,20]:zeros", "n_cols=20"}, {"SHIFT=3", "BLOCK=32"}, {"X", "S"},
                   {}},
        KernelCase{"name_reuse", "hinted_rows_kernel", {5, 1, 1},
                   {"X=fp32[5,100]", "W=fp32[100]", "Y=fp32[5,100]:zeros", "n_cols=100"}, {"BLOCK=128"}, {"X", "W"},
                   {}},
        // A grid-stride loop (3 programs over 7 rows): each row's gradient is a plain store by its program.
        KernelCase{"launch_options", "_staged_rows_kernel", {3, 1, 1},
                   {"X=fp32[7,100]", "Y=fp32[7,100]:zeros", "n_rows=7", "n_cols=100"}, {"BLOCK=128", "num_stages=2"},
                   {"X"}, {"load through 'X' is a plain store: offset = the grid-stride loop's variable"}},
        // Tensor descriptors made by a helper that keeps one it is given; K loaded transposed (x.T once lost its
        // gradient silently).
        KernelCase{"descriptor_attention", "descriptor_attention_kernel", {2, 2, 1},
                   {"sm_scale=0.5", "M=fp32[2,32]:zeros", "Z=1", "H=2", "desc_q=fp16[1,2,32,16]", "desc_k=fp16[1,2,32,16]",
                    "desc_v=fp16[1,2,32,16]", "desc_o=fp16[1,2,32,16]:zeros"},
                   {"N_CTX=32", "HEAD_DIM=16", "BLOCK_M=16", "BLOCK_N=16", "FP8=False"}, {"desc_q", "desc_k", "desc_v"}, {}},
        // Compute types chosen by the inputs' element types (tests/kernels/dtype_dispatch.py): each branch of the
        // forward's if, through the one generic backward that keeps the choice.
        KernelCase{"dtype_dispatch", "rms_scale_kernel", {3, 1, 1},
                   {"X=fp16[3,20]", "W=fp32[20]", "Y=fp32[3,20]:zeros", "n_cols=20", "eps=0.001"}, {"BLOCK=32"},
                   {"X", "W"}, {}},
        KernelCase{"dtype_dispatch", "rms_scale_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "W=bf16[20]", "Y=fp32[3,20]:zeros", "n_cols=20", "eps=0.001"}, {"BLOCK=32"},
                   {"X", "W"}, {}},
        KernelCase{"dtype_dispatch", "energy_cumsum_kernel", {3, 1, 1},
                   {"X=bf16[3,20]", "Y=fp32[3,20]:zeros", "n_cols=20"}, {"BLOCK=32"}, {"X"}, {}},
        KernelCase{"dtype_dispatch", "energy_cumsum_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "Y=fp32[3,20]:zeros", "n_cols=20"}, {"BLOCK=32"}, {"X"}, {}},
        KernelCase{"dtype_dispatch", "mixed_matmul_kernel", {2, 2, 1},
                   {"A=fp16[20,24]", "B=fp32[24,18]", "C=fp32[20,18]:zeros", "M=20", "N=18", "K=24"},
                   {"BLOCK_M=16", "BLOCK_N=16", "BLOCK_K=16"}, {"A", "B"}, {}},
        // One lane of a stored row read back at a label (tests/kernels/label_read_back.py).
        KernelCase{"label_read_back", "label_logprob_kernel", {4, 1, 1},
                   {"X=fp32[4,20]", "LogP=fp32[4,20]:zeros", "Labels=int32[4]:uniform(0,20)", "Loss=fp32[4]:zeros",
                    "n_cols=20"},
                   {"BLOCK=32"}, {"X"},
                   {"the load of 'LogP' at line 17 reads back what the store at line 15 wrote in the same program (the "
                    "one lane whose offset equals the address it reads"}},
        // tl.reduce with the user's combine functions (tests/kernels/combine_reduce.py).
        KernelCase{"combine_reduce", "row_product_kernel", {2, 1, 1},
                   {"X=fp32[7,10]:uniform(0.5,1.5)", "Y=fp32[7]:zeros", "n_rows=7", "n_cols=10"},
                   {"BLOCK_M=4", "BLOCK_N=16"}, {"X"}, {}},
        KernelCase{"combine_reduce", "combine_softmax_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "Y=fp32[3,20]:zeros", "Low=fp32[3]:zeros", "n_cols=20"}, {"BLOCK=32"}, {"X"}, {}},
        KernelCase{"dtype_dispatch", "accumulated_cumsum_kernel", {3, 1, 1},
                   {"X=fp16[3,20]", "Y=fp32[3,20]:zeros", "n_cols=20"}, {"BLOCK=32"}, {"X"}, {}},
        KernelCase{"dtype_dispatch", "accumulated_cumsum_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "Y=fp64[3,20]:zeros", "n_cols=20"}, {"BLOCK=32"}, {"X"}, {}},
        KernelCase{"dtype_dispatch", "mixed_matmul_kernel", {2, 2, 1},
                   {"A=fp32[20,24]", "B=fp32[24,18]", "C=fp32[20,18]:zeros", "M=20", "N=18", "K=24"},
                   {"BLOCK_M=16", "BLOCK_N=16", "BLOCK_K=16"}, {"A", "B"}, {}},
        // Pointers tested against None (tests/kernels/optional_pointers.py): each passed as None or a tensor; the
        // generic check runs the backward's dispatch on them.
        KernelCase{"optional_pointers", "optional_affine_norm_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "W=None", "B=fp32[20]", "Y=fp32[3,20]:zeros", "n_cols=20", "eps=0.001"},
                   {"BLOCK=32"}, {"X", "B"}, {}},
        KernelCase{"optional_pointers", "optional_affine_norm_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "W=fp32[20]", "B=None", "Y=fp32[3,20]:zeros", "n_cols=20", "eps=0.001"},
                   {"BLOCK=32"}, {"X", "W"}, {}},
        KernelCase{"optional_pointers", "optional_affine_norm_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "W=fp32[20]", "B=fp32[20]", "Y=fp32[3,20]:zeros", "n_cols=20", "eps=0.001"},
                   {"BLOCK=32"}, {"X", "W", "B"}, {}},
        // A cast to fp8 and back (tests/kernels/fp8_quantize.py): straight through, in float32.
        KernelCase{"fp8_quantize", "fake_quant_rows_kernel", {3, 1, 1},
                   {"X=fp32[3,20]", "Y=fp32[3,20]:zeros", "n_cols=20"}, {"BLOCK=32"}, {"X"}, {}},
        // A runtime if/elif/else; the check runs one branch per mode.
        KernelCase{"runtime_if", "scaled_act_kernel", {4, 1, 1},
                   {"x_ptr=fp32[1000]", "out_ptr=fp32[1000]:zeros", "n_elements=1000", "mode=1", "scale=1.5"},
                   {"BLOCK_SIZE=256"}, {"x_ptr"}, {"load through 'x_ptr' is a plain store"}},
        KernelCase{"runtime_if", "scaled_act_kernel", {4, 1, 1},
                   {"x_ptr=fp32[1000]", "out_ptr=fp32[1000]:zeros", "n_elements=1000", "mode=-1", "scale=1.5"},
                   {"BLOCK_SIZE=256"}, {"x_ptr"}, {}},
        KernelCase{"runtime_if", "scaled_act_kernel", {4, 1, 1},
                   {"x_ptr=fp32[1000]", "out_ptr=fp32[1000]:zeros", "n_elements=1000", "mode=0", "scale=1.5"},
                   {"BLOCK_SIZE=256"}, {"x_ptr"}, {}}),
    [](const ::testing::TestParamInfo<KernelCase> &info) {
      return info.param.kernel + "_" + std::to_string(info.index);
    });

std::string errors_of(const std::string &source, const std::vector<std::string> &wrt,
                      const std::vector<std::pair<std::string, std::string>> &pointers) {
  auto p = parse_text(source);
  EXPECT_TRUE(p->ok()) << p->all_messages();
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = wrt;
  for (const auto &[n, t] : pointers) {
    std::string error;
    auto parsed = driver::parse_param_type(n + "=" + t, error);
    EXPECT_TRUE(parsed) << error;
    request.param_types[n] = parsed->second;
  }
  EXPECT_FALSE(ad::differentiate(*p->module, p->sources, request, *p->diags));
  return p->all_messages();
}

const char *kHead = "import triton\nimport triton.language as tl\n@triton.jit\n";

// The generic backward (no types given) of kernel `k` in `source`; empty where it fails.
std::string generic_backward_of(const std::string &source, const std::vector<std::string> &wrt) {
  auto p = parse_text(source);
  EXPECT_TRUE(p->ok()) << p->all_messages();
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = wrt;
  auto b = ad::differentiate(*p->module, p->sources, request, *p->diags);
  EXPECT_TRUE(b) << p->all_messages();
  return b ? b->source : "";
}

// Compile-time ifs on element types (src/ad/Anf.cpp, keep_dtype_dispatch): one conditional expression per name, also
// through an elif chain and for a cast of a name to itself; one generic backward where each element type kept only
// its own branch.
TEST(KernelReverse, ElementTypeIfsKeptAsConditionalExpressions) {
  const std::string body =
      "def k(X, Y, n, BLOCK: tl.constexpr):\n"
      "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
      "    if X.dtype.element_ty == tl.float16:\n"
      "        cdtype = tl.float32\n"
      "    elif X.dtype.element_ty == tl.bfloat16:\n"
      "        cdtype = tl.float32\n"
      "    else:\n"
      "        cdtype = X.dtype.element_ty\n"
      "    x = tl.load(X + offs, mask=offs < n, other=0.0)\n"
      "    if x.dtype.is_fp16():\n"
      "        x = x.to(tl.float32)\n"
      "    tl.store(Y + offs, (x.to(cdtype) * 2.0).to(Y.dtype.element_ty), mask=offs < n)\n";
  const std::string out = generic_backward_of(std::string(kHead) + body, {"X"});
  EXPECT_NE(out.find("cdtype = tl.float32 if X.dtype.element_ty == tl.float16 else tl.float32 if "
                     "X.dtype.element_ty == tl.bfloat16 else X.dtype.element_ty"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(".to(tl.float32 if X.dtype.element_ty.is_fp16() else X.dtype.element_ty)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("# Generic: the same backward for X = *fp32, *fp16, *bf16"), std::string::npos) << out;
}

// An if on element types whose branch computes (not a compile-time value or a cast of the name itself) is the
// branch taken, as before: here the backwards differ by element type, and the error names the parameter.
TEST(KernelReverseErrors, ElementTypeIfsThatComputeAreTheBranchTaken) {
  const std::string source = std::string(kHead) +
      "def k(X, Y, n, BLOCK: tl.constexpr):\n"
      "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
      "    x = tl.load(X + offs, mask=offs < n, other=0.0)\n"
      "    if x.dtype.is_fp16():\n"
      "        x = x * 2.0\n"
      "    tl.store(Y + offs, x, mask=offs < n)\n";
  auto p = parse_text(source);
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  EXPECT_FALSE(ad::differentiate(*p->module, p->sources, request, *p->diags));
  EXPECT_NE(p->all_messages().find("depends on the element type of 'X'"), std::string::npos) << p->all_messages();
}

// The gradient of a product through tl.reduce at rows holding one zero (the others' product at the zero, 0
// elsewhere) and two (0 everywhere): computed without dividing by the zeros.
TEST(KernelReverse, ProductCombineGradientAtZeros) {
  KernelSetup s = setup(KernelCase{"combine_reduce", "row_product_kernel", {2, 1, 1},
                                   {"X=fp32[7,10]:uniform(0.5,1.5)", "Y=fp32[7]:zeros", "n_rows=7", "n_cols=10"},
                                   {"BLOCK_M=4", "BLOCK_N=16"}, {"X"}, {}});
  ASSERT_TRUE(s.parsed->ok()) << s.parsed->all_messages();
  bool found = false;
  for (interp::Buffer &b : s.memory.buffers())
    if (b.name == "X") {
      found = true;
      for (int at : {1 * 10 + 7, 2 * 10 + 3, 2 * 10 + 4, 5 * 10 + 0, 6 * 10 + 9}) b.f[at] = 0.0;
    }
  ASSERT_TRUE(found);
  auto result = driver::grad_check_kernel(*s.parsed->module, s.parsed->sources, s.request, s.launch, s.memory, {},
                                          *s.parsed->diags, 96);
  ASSERT_TRUE(result) << s.parsed->all_messages();
  EXPECT_TRUE(result->pass) << result->args[0].relative_error << "\n" << result->backward_source;
}

TEST(KernelReverse, TwoLoadsThroughOnePointerAccumulate) {
  // Both loads read the same addresses: plain stores of their gradients would
  // keep only one of them. (Their masks differ, so they are not one common
  // subexpression.)
  auto p = parse_text(
      "import triton\nimport triton.language as tl\n@triton.jit\n"
      "def k(X, Y, B: tl.constexpr):\n    o = tl.program_id(0) * B + tl.arange(0, B)\n"
      "    a = tl.load(X + o)\n    b = tl.load(X + o, mask=o < 12, other=0.5)\n    tl.store(Y + o, a * b)\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ad::BackwardRequest request{"k", {"X"}, {}, ""};
  std::string error;
  for (const char *t : {"X=*fp32", "Y=*fp32"}) {
    auto parsed = driver::parse_param_type(t, error);
    request.param_types[parsed->first] = parsed->second;
  }
  request.param_types["B"] = sema::SType::of_int(8);
  interp::Memory memory;
  memory.add(interp::Buffer{"X", DType::FP32, {16}, std::vector<double>(16, 0.0), {}});
  for (int i = 0; i < 16; ++i) memory.buffers()[0].f[i] = 0.1 * i - 0.7;
  memory.add(interp::Buffer{"Y", DType::FP32, {16}, std::vector<double>(16, 0.0), {}});
  interp::Launch launch;
  launch.kernel = "k";
  launch.grid = {2, 1, 1};
  launch.args["X"] = {interp::KernelArg::Kind::Buffer, 0, 0, 0, {}};
  launch.args["Y"] = {interp::KernelArg::Kind::Buffer, 1, 0, 0, {}};
  interp::KernelArg b;
  b.kind = interp::KernelArg::Kind::Constexpr;
  b.constexpr_value = interp::Value::of_int(8);
  launch.args["B"] = b;
  auto result = driver::grad_check_kernel(*p->module, p->sources, request, launch, memory, {}, *p->diags);
  ASSERT_TRUE(result) << p->all_messages();
  EXPECT_TRUE(result->pass) << result->args[0].relative_error << "\n" << result->backward_source;
  // Both loads are injective: the second gradient adds to the first in place, after a barrier.
  EXPECT_EQ(result->backward_source.find("tl.atomic_add"), std::string::npos) << result->backward_source;
  EXPECT_NE(result->backward_source.find("tl.debug_barrier()"), std::string::npos) << result->backward_source;
}

TEST(KernelReverseErrors, ReadAfterWriteThroughMemory) {
  // A load that may read what the kernel stored: the values loaded are not the input's.
  // (At the addresses the store wrote, the load would take the stored value: src/ad/StoredValueForwarding.h. One
  // element further on, it reads another program's store or the contents from before the kernel.)
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, B: tl.constexpr):\n    o = tl.program_id(0) * B + tl.arange(0, B)\n"
                                "    tl.store(X + o, tl.zeros([B], dtype=tl.float32) + 1.0)\n"
                                "    x = tl.load(X + o + 1)\n    tl.store(X + o, x * 2.0)\n",
                            {"X"}, {{"X", "*fp32"}});
  EXPECT_NE(m.find("t.py:7:9: error: 'X' is both loaded and stored by this kernel, and this load comes after a store "
                   "through it (line 6)"),
            std::string::npos)
      << m;
  // One scalar read back from a stored row whose lanes' offsets repeat (`o // 2`): which lane's value the address
  // holds is the forward's race, not a lane to pick; refused as before.
  std::string lanes = errors_of(std::string(kHead) +
                                    "def k(X, Y, Z, I, B: tl.constexpr):\n    o = tl.arange(0, B) // 2\n"
                                    "    tl.store(X + o, tl.load(Y + tl.arange(0, B)) * 2.0)\n"
                                    "    tl.store(Z, tl.load(X + tl.load(I)))\n",
                                {"Y"}, {{"X", "*fp32"}, {"Y", "*fp32"}, {"Z", "*fp32"}, {"I", "*i32"}});
  EXPECT_NE(lanes.find("error: 'X' is read back after this kernel stores to it"), std::string::npos) << lanes;
  // A loop that stores what a later iteration loads, at addresses that move by less than a block (an
  // accumulator at fixed addresses is carried in a register instead: tests/kernels/accumulators.py).
  std::string m2 = errors_of(std::string(kHead) +
                                 "def k(X, n, B: tl.constexpr):\n    o = tl.program_id(0) * B + tl.arange(0, B)\n"
                                 "    for i in range(n):\n        x = tl.load(X + o + i)\n        tl.store(X + o + i, x * 2.0)\n",
                             {"X"}, {{"X", "*fp32"}, {"n", "i32"}});
  EXPECT_NE(m2.find("t.py:7:13: error: 'X' is both loaded and stored by this kernel, and a loop around both runs the "
                    "store before a later iteration's load"),
            std::string::npos)
      << m2;
}

// tl.reduce whose combine function is none of sum, product, maximum, minimum (a Welford step over tuples, an
// affine combine): a located error naming the function, never a wrong gradient.
TEST(KernelReverseErrors, ReduceWithAnUnknownCombineFunction) {
  std::string m = errors_of(std::string(kHead) +
                                "def f(a, b):\n    return a * b + a\n\n\n@triton.jit\n"
                                "def k(X, Y, B: tl.constexpr):\n    x = tl.load(X + tl.arange(0, B))\n"
                                "    tl.store(Y, tl.reduce(x, 0, f))\n",
                            {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}});
  EXPECT_NE(m.find("error: tgrad differentiates tl.reduce of one tensor whose combine function sums, multiplies, or "
                   "takes the maximum or the minimum of two elements; 'f' computes none of these"),
            std::string::npos)
      << m;
  std::string t = errors_of(std::string(kHead) +
                                "def f(a, n, b, m):\n    return a + b, n + m\n\n\n@triton.jit\n"
                                "def k(X, Y, B: tl.constexpr):\n    x = tl.load(X + tl.arange(0, B))\n"
                                "    s, c = tl.reduce((x, x * 0 + 1), 0, f)\n    tl.store(Y, s / c)\n",
                            {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}});
  EXPECT_NE(t.find("'f' reduces several tensors together"), std::string::npos) << t;
}

// Every program storing at one address: where each stores its own program's value, the output is whichever store
// lands last, which the GPU does not fix: a located warning (right for a launch with one program along that axis).
// Where they store one value (a weight every program loads alike), one program takes the upstream gradient, silently.
TEST(KernelReverse, ProgramsStoringTheirOwnValuesAtOneAddressWarn) {
  auto warnings_of = [](const std::string &body) {
    auto p = parse_text(std::string(kHead) + body);
    ad::BackwardRequest request;
    request.function = "k";
    request.wrt = {"X"};
    std::string error;
    for (const char *t : {"X=*fp32", "Y=*fp32", "N=i32"}) {
      auto parsed = driver::parse_param_type(t, error);
      request.param_types[parsed->first] = parsed->second;
    }
    auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
    EXPECT_TRUE(bwd) << p->all_messages();
    if (bwd) EXPECT_NE(bwd->source.find("tl.atomic_xchg(dY"), std::string::npos) << bwd->source;
    return p->all_messages();
  };
  const std::string racy =
      "def k(X, Y, N):\n    o = tl.arange(0, 16)\n    x = tl.load(X + tl.program_id(0) * 16 + o)\n"
      "    tl.store(Y + o, x * x)\n";
  EXPECT_NE(warnings_of(racy).find("t.py:7:5: warning: programs store values that depend on tl.program_id(0) to the "
                                   "same addresses of 'Y'"),
            std::string::npos);
  // The backward asserts one program along that axis, which the launch protocol checks before launching it.
  {
    auto p = parse_text(std::string(kHead) + racy);
    ad::BackwardRequest request;
    request.function = "k";
    request.wrt = {"X"};
    auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
    ASSERT_TRUE(bwd) << p->all_messages();
    EXPECT_NE(bwd->source.find("tl.device_assert(tl.num_programs(0) == 1, \"tgrad: "), std::string::npos) << bwd->source;
  }
  // Under a condition that reads the racing axis (fla's token shift in decoding: an early return leaves one program
  // per sequence), a launch may have more programs of which one stores: nothing asserted. Under another if (a
  // tl.constexpr flag that may skip the store), only a device assertion the launch protocol does not check.
  for (const auto &[guard, expected] : std::vector<std::pair<std::string, std::string>>{
           {"    if tl.program_id(0) == N:\n", ""}, {"    if FLAG:\n", "tgrad, where this runs: programs along axis 0"}}) {
    auto p = parse_text(std::string(kHead) +
                        "def k(X, Y, N, FLAG: tl.constexpr):\n    o = tl.arange(0, 16)\n"
                        "    x = tl.load(X + tl.program_id(0) * 16 + o)\n" + guard + "        tl.store(Y + o, x * x)\n");
    ad::BackwardRequest request;
    request.function = "k";
    request.wrt = {"X"};
    auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
    ASSERT_TRUE(bwd) << p->all_messages();
    if (expected.empty()) EXPECT_EQ(bwd->source.find("tl.num_programs(0) == 1"), std::string::npos) << bwd->source;
    else EXPECT_NE(bwd->source.find(expected), std::string::npos) << bwd->source;
    EXPECT_EQ(bwd->source.find("\"tgrad: programs"), std::string::npos) << bwd->source;
  }
  const std::string alike =
      "def k(X, Y, N):\n    o = tl.arange(0, 16)\n    x = tl.load(X + o)\n    tl.store(Y + o, x * x)\n";
  EXPECT_EQ(warnings_of(alike).find("warning: programs store"), std::string::npos);
  auto p = parse_text(std::string(kHead) + alike);
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  EXPECT_EQ(bwd->source.find("tl.device_assert"), std::string::npos) << bwd->source;
}

// A loop storing column tiles of a row block (`Y + rows[:, None] * N + ns[None, :]`, ns = n0 + tl.arange(0, B) in
// range(0, N, B)): where the mask bounds ns by N, the iterations write apart and each tile's upstream gradient is a
// plain load; without that bound a row's tile may spill into the next row's, written again by a later iteration,
// and the backward takes the upstream gradient with an exchange.
TEST(KernelReverse, TileColumnsWalkedByALoopWriteApartOnlyUnderTheirBound) {
  auto backward_of = [](const std::string &mask) {
    auto p = parse_text(std::string(kHead) +
                        "def k(X, Y, M, N, B: tl.constexpr):\n    rows = tl.program_id(0) * 4 + tl.arange(0, 4)\n"
                        "    for n0 in range(0, N, B):\n        ns = n0 + tl.arange(0, B)\n"
                        "        x = tl.load(X + rows[:, None] * N + ns[None, :], mask=" + mask + ", other=0.0)\n"
                        "        tl.store(Y + rows[:, None] * N + ns[None, :], x * x, mask=" + mask + ")\n");
    ad::BackwardRequest request;
    request.function = "k";
    request.wrt = {"X"};
    auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
    EXPECT_TRUE(bwd) << p->all_messages();
    return bwd ? bwd->source : std::string();
  };
  const std::string bounded = backward_of("(rows[:, None] < M) & (ns[None, :] < N)");
  EXPECT_EQ(bounded.find("tl.atomic_xchg"), std::string::npos) << bounded;
  EXPECT_NE(bounded.find("tl.load(dY"), std::string::npos) << bounded;
  const std::string unbounded = backward_of("rows[:, None] < M");
  EXPECT_NE(unbounded.find("tl.atomic_xchg(dY"), std::string::npos) << unbounded;
}

TEST(KernelReverseErrors, ReadBacksNotForwarded) {
  // Where a load's values are not one earlier store's in the same program, the load stays and the in-place check
  // refuses it (src/ad/StoredValueForwarding.h takes only what it can show).
  struct Case {
    const char *what, *body, *error;
  };
  const Case cases[] = {
      {"the first loop writes the same addresses in every iteration: the buffer keeps the last one's value",
       "def k(X, Y, N, K: tl.constexpr, BK: tl.constexpr):\n    cols = tl.arange(0, BK)\n    m = cols < N\n"
       "    for i in range(K):\n        x = tl.load(X + i * BK + cols, mask=m, other=0.0)\n"
       "        tl.store(Y + cols, x * 2.0, mask=m)\n"
       "    for i in range(K):\n        y = tl.load(Y + cols, mask=m, other=0.0)\n"
       "        tl.store(Y + cols, y + 1.0, mask=m)\n",
       "t.py:11:13: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
      {"the first loop writes the addresses again after the store",
       "def k(X, Y, N, K: tl.constexpr, BK: tl.constexpr):\n"
       "    for i in range(K):\n        x = tl.load(X + i * BK + tl.arange(0, BK))\n"
       "        tl.store(Y + i * BK + tl.arange(0, BK), x)\n        tl.store(Y + i * BK + tl.arange(0, BK), x * 2.0)\n"
       "    for i in range(K):\n        y = tl.load(Y + i * BK + tl.arange(0, BK))\n"
       "        tl.store(Y + i * BK + tl.arange(0, BK), y * y)\n",
       "t.py:10:13: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
      {"the stored value carries a sum over the iterations",
       "def k(X, Y, N, K: tl.constexpr, BK: tl.constexpr):\n    acc = tl.zeros([BK], dtype=tl.float32)\n"
       "    for i in range(K):\n        x = tl.load(X + i * BK + tl.arange(0, BK))\n        acc += x\n"
       "        tl.store(Y + i * BK + tl.arange(0, BK), acc)\n"
       "    for i in range(K):\n        y = tl.load(Y + i * BK + tl.arange(0, BK))\n"
       "        tl.store(Y + i * BK + tl.arange(0, BK), y * y)\n",
       "t.py:11:13: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
      {"the load keeps lanes the store's mask skipped",
       "def k(X, Y, N):\n    o = tl.arange(0, 16)\n    x = tl.load(X + o)\n    tl.store(Y + o, x * 3.0, mask=o < N)\n"
       "    y = tl.load(Y + o)\n    tl.store(Y + o, y * x)\n",
       "t.py:8:9: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
      {"another store between, at other addresses that may meet the load's",
       "def k(X, Y, N):\n    o = tl.arange(0, 16)\n    x = tl.load(X + o)\n    tl.store(Y + o, x * 3.0)\n"
       "    tl.store(Y + 16 - o, x)\n    y = tl.load(Y + o)\n    tl.store(Y + o, y * x)\n",
       "t.py:9:9: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
      {"the address's names change between the store and the load",
       "def k(X, Y, N):\n    o = tl.arange(0, 16)\n    x = tl.load(X + o)\n    tl.store(Y + o, x * 3.0)\n"
       "    o = o + N\n    y = tl.load(Y + o)\n    tl.store(Y + o, y * x)\n",
       "t.py:9:9: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
      {"a scalar stored over a block: the load reads a tile",
       "def k(X, Y, N):\n    o = tl.arange(0, 16)\n    x = tl.load(X + o)\n    tl.store(Y + o, tl.sum(x))\n"
       "    y = tl.load(Y + o)\n    tl.store(Y + o, y * x)\n",
       "t.py:8:9: error: 'Y' is both loaded and stored by this kernel, and this load comes after a store"},
  };
  for (const Case &c : cases) {
    std::string m = errors_of(std::string(kHead) + c.body, {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}, {"N", "i32"}});
    EXPECT_NE(m.find(c.error), std::string::npos) << c.what << "\n" << m;
  }
}

TEST(KernelReverseErrors, InnerLoopsWalkingBlocksSayNothingOfTheLoopAroundThem) {
  // Loaded in one inner loop and stored in another, both walking the row block by block, inside an outer loop
  // whose second iteration loads what the first stored: the inner loops' walk does not make the outer loop's
  // iterations own their addresses. (tgrad accepted this once, and its gradient was wrong.)
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, n, B: tl.constexpr):\n    row = tl.program_id(0)\n"
                                "    for it in range(2):\n        total = 0.0\n"
                                "        for start in range(0, n, B):\n            c = start + tl.arange(0, B)\n"
                                "            x = tl.load(X + row * n + c, mask=c < n, other=0.0)\n"
                                "            total += tl.sum(x * x)\n"
                                "        for start in range(0, n, B):\n            c = start + tl.arange(0, B)\n"
                                "            tl.store(X + row * n + c, tl.zeros([B], dtype=tl.float32) + total, mask=c < n)\n",
                            {"X"}, {{"X", "*fp32"}, {"n", "i32"}});
  EXPECT_NE(m.find("t.py:10:17: error: 'X' is both loaded and stored by this kernel, and a loop around both runs "
                   "the store before a later iteration's load"),
            std::string::npos)
      << m;
}

TEST(KernelReverseErrors, NestedLoopsOwnTheirAddressesOnlyWhereTheOffsetMovesWithEach) {
  // A grid-stride row loop and, in it, a loop that does not walk the row: its second iteration loads what its
  // first stored. The row loop's ownership says nothing of the inner loop.
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, n_rows, n, B: tl.constexpr):\n"
                                "    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):\n"
                                "        for it in range(2):\n            c = tl.arange(0, B)\n"
                                "            x = tl.load(X + row * n + c, mask=c < n, other=0.0)\n"
                                "            tl.store(X + row * n + c, x * x, mask=c < n)\n",
                            {"X"}, {{"X", "*fp32"}, {"n_rows", "i32"}, {"n", "i32"}});
  EXPECT_NE(m.find("t.py:8:17: error: 'X' is both loaded and stored by this kernel, and a loop around both runs "
                   "the store before a later iteration's load"),
            std::string::npos)
      << m;
}

TEST(KernelReverseErrors, ReadBackOfAnOutputTheGradientWouldLose) {
  // DW is not differentiated, but what the loop loads from it is what an earlier iteration stored, a value with a
  // gradient: a second load beside the accumulator keeps it in memory, so tgrad refuses (it once dropped that
  // gradient without a word).
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, DW, n, B: tl.constexpr):\n    c = tl.arange(0, B)\n"
                                "    for i in range(n):\n        x = tl.load(X + i * B + c)\n"
                                "        acc = tl.load(DW + c)\n        tl.store(DW + c, acc + x * x)\n"
                                "        z = tl.load(DW + c)\n",
                            {"X"}, {{"X", "*fp32"}, {"DW", "*fp32"}, {"n", "i32"}});
  EXPECT_NE(m.find("t.py:8:15: error: 'DW' is both loaded and stored by this kernel, and a loop around both runs the "
                   "store before a later iteration's load"),
            std::string::npos)
      << m;
}

TEST(KernelReverseErrors, TapedLoopCarryingAPointerSteppedByTheIteration) {
  // The running max must be taped; a pointer advanced by the loop variable is not an induction variable (its
  // step changes), so the reversed loop cannot compute it: a located error.
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, Y, n, B: tl.constexpr):\n    m = tl.zeros([B], dtype=tl.float32)\n"
                                "    p = X + tl.arange(0, B)\n    for i in range(0, n):\n"
                                "        m = tl.maximum(m, tl.load(p))\n        p += i * B\n"
                                "    tl.store(Y + tl.arange(0, B), m)\n",
                            {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}, {"n", "i32"}});
  EXPECT_NE(m.find("t.py:7:5: error: this loop carries 'p' (*fp32[B]) besides values tgrad must tape to reverse the "
                   "loop; tgrad tapes numbers only, not pointers: compute 'p' from the loop variable instead"),
            std::string::npos)
      << m;
  // The loop variable itself as the step (once taken for a loop invariant: a wrong gradient).
  std::string m2 = errors_of(std::string(kHead) +
                                 "def k(X, Y, n, B: tl.constexpr):\n    m = tl.zeros([B], dtype=tl.float32)\n"
                                 "    p = X + tl.arange(0, B)\n    for i in range(0, n):\n"
                                 "        m = tl.maximum(m, tl.load(p))\n        p += i\n"
                                 "    tl.store(Y + tl.arange(0, B), m)\n",
                             {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}, {"n", "i32"}});
  EXPECT_NE(m2.find("t.py:7:5: error: this loop carries 'p'"), std::string::npos) << m2;
}

// A --wrt pointer the kernel only writes: no gradient as an input, and its upstream gradient needs its own buffer
// (it once got the input gradient's name twice: a backward with a duplicate parameter).
TEST(KernelReverseErrors, WrtPointerOnlyWritten) {
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, Y, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
                                "    tl.store(Y + o, tl.load(X + o) * 2.0)\n",
                            {"X", "Y"}, {{"X", "*fp32"}, {"Y", "*fp32"}});
  EXPECT_NE(m.find("t.py:6:5: error: 'Y' is in --wrt but this kernel only writes through it"), std::string::npos) << m;
}

// Inline assembly other than a one-instruction approximation of a math
// function (here a multiply-add, and tanh.approx on fp16 data) is opaque.
TEST(KernelReverseErrors, InlineAssemblyOtherThanAnApproximation) {
  for (const char *call : {"tl.inline_asm_elementwise(\"fma.rn.f32 $0, $1, $1, $1;\", \"=f,f\", [x], dtype=tl.float32, "
                           "is_pure=True, pack=1)",
                           "tl.inline_asm_elementwise(\"tanh.approx.f32 $0, $1;\", \"=f,f\", [x.to(tl.float16)], "
                           "dtype=tl.float32, is_pure=True, pack=1)"}) {
    std::string m = errors_of(std::string(kHead) + "def k(X, Y, B: tl.constexpr):\n    x = tl.load(X + tl.arange(0, B))\n"
                                  "    tl.store(Y + tl.arange(0, B), " + call + ")\n",
                              {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}});
    EXPECT_NE(m.find("t.py:6:"), std::string::npos) << m;
    EXPECT_NE(m.find("tgrad cannot differentiate this inline assembly: it knows only one-instruction approximations"),
              std::string::npos) << m;
  }
}

// tl.gather's shapes as Triton 3.6 compiles them (measured): an index longer
// than the source along the axis, and one differing elsewhere, are errors.
TEST(KernelReverseErrors, GatherShapesTritonRejects) {
  for (const auto &[index_shape, expected] :
       std::vector<std::pair<std::string, std::string>>{{"[16]", "is longer than its source [8] along the gathered axis"}}) {
    std::string m = errors_of(std::string(kHead) + "def k(X, I, Y):\n    x = tl.load(X + tl.arange(0, 8))\n"
                                  "    i = tl.load(I + tl.arange(0, 16))\n"
                                  "    tl.store(Y + tl.arange(0, 16), tl.gather(x, i, 0))\n",
                              {"X"}, {{"X", "*fp32"}, {"I", "*i32"}, {"Y", "*fp32"}});
    EXPECT_NE(m.find("t.py:7:36: error"), std::string::npos) << index_shape << m;
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  }
  std::string m = errors_of(std::string(kHead) + "def k(X, I, Y):\n"
                                "    x = tl.load(X + tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :])\n"
                                "    i = tl.load(I + tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :])\n"
                                "    tl.store(Y + tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :], tl.gather(x, i, 0))\n",
                            {"X"}, {{"X", "*fp32"}, {"I", "*i32"}, {"Y", "*fp32"}});
  EXPECT_NE(m.find("differ outside the gathered axis 0"), std::string::npos) << m;
}

TEST(KernelReverseErrors, TapedLoopWithARuntimeStep) {
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, Y, n, s, B: tl.constexpr):\n    m = tl.zeros([B], dtype=tl.float32)\n"
                                "    for i in range(0, n, s):\n        m = tl.maximum(m, tl.load(X + i * B + tl.arange(0, B)))\n"
                                "    tl.store(Y + tl.arange(0, B), m)\n",
                            {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}, {"n", "i32"}, {"s", "i32"}});
  EXPECT_NE(m.find("t.py:6:5: error: tgrad reverses this loop by taping its carried values and needs its step known "
                   "before the kernel runs"),
            std::string::npos)
      << m;
}

// A while loop whose trips depend on values it computes has no count before it starts (src/ad/WhileLoops.h).
TEST(KernelReverseErrors, WhileLoops) {
  std::string m = errors_of(std::string(kHead) +
                                "def k(X, Y, B: tl.constexpr):\n    x = tl.load(X + tl.arange(0, B))\n"
                                "    while tl.sum(x * x) > 1.0:\n        x = x * 0.5\n    tl.store(Y + tl.arange(0, B), x)\n",
                            {"X"}, {{"X", "*fp32"}, {"Y", "*fp32"}});
  EXPECT_NE(m.find("t.py:6:5: error: tgrad cannot count this while loop's trips to replay it"), std::string::npos) << m;
}

TEST(KernelReverseErrors, WrtMustBeAFloatPointer) {
  std::string m = errors_of(std::string(kHead) + "def k(X, n):\n    tl.store(X, n * 1.0)\n", {"n"},
                            {{"X", "*fp32"}, {"n", "i32"}});
  EXPECT_NE(m.find("differentiate a kernel with respect to pointers to floating-point data"), std::string::npos) << m;
}

}  // namespace
TEST(KernelReverse, PartialSumsOnlyWhereProgramsDifferByAxis0) {
  // A 2-D grid: the backward cannot loop over the programs, so W's gradient is atomic.
  auto p = parse_text(std::string(kHead) +
                      "def k(X, W, Y, B: tl.constexpr):\n    r = tl.program_id(0) + tl.program_id(1) * 7\n"
                      "    c = tl.arange(0, B)\n    x = tl.load(X + r * B + c)\n    w = tl.load(W + c)\n"
                      "    tl.store(Y + r * B + c, x * w)\n");
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X", "W"};
  std::string error;
  for (const char *t : {"X=*fp32", "W=*fp32", "Y=*fp32"}) {
    auto parsed = driver::parse_param_type(t, error);
    request.param_types[parsed->first] = parsed->second;
  }
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  EXPECT_TRUE(bwd->partial_sums.empty());
  EXPECT_NE(bwd->source.find("tl.atomic_add(dW"), std::string::npos) << bwd->source;
}

TEST(KernelReverse, RowsProofNeedsTheMaskToBoundTheOffsetLanes) {
  // mask = c - 5 < n lets lanes up to n + 4 through: the rows' lanes are all B of the tile, not n, so the plain
  // store assumes rows of n >= B lanes apart (the launcher checks: a box of extents (programs, B), strides (n, 1)).
  auto p = parse_text(std::string(kHead) +
                      "def k(X, Y, n, B: tl.constexpr):\n    r = tl.program_id(0)\n    c = tl.arange(0, B)\n"
                      "    m = c - 5 < n\n    x = tl.load(X + r * n + c, mask=m, other=0.0)\n"
                      "    tl.store(Y + r * n + c, x * 2.0, mask=m)\n");
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  std::string error;
  for (const char *t : {"X=*fp32", "Y=*fp32", "n=i32"}) {
    auto parsed = driver::parse_param_type(t, error);
    request.param_types[parsed->first] = parsed->second;
  }
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  EXPECT_NE(bwd->source.find("if X_disjoint:"), std::string::npos) << bwd->source;
  ASSERT_EQ(bwd->layout_assumptions.size(), 1u);
  std::vector<std::string> box;
  for (const auto &[extent, stride] : bwd->layout_assumptions[0].extent_stride)
    box.push_back(emit::print_expr(*extent) + " by " + emit::print_expr(*stride));
  EXPECT_EQ(box, (std::vector<std::string>{"tl.num_programs(0) by n", "B by 1"}));
}

// The layout analysis (AccessAnalysis::classify_layout): an offset that is a box of indices times strides given at
// run time is a plain store with the box for the launcher to check; anything that lets two programs or lanes meet
// whatever the strides stays atomic.
std::string gradient_write_of(const std::string &body, const std::vector<const char *> &types) {
  auto p = parse_text(std::string(kHead) + body);
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  std::string error;
  for (const char *t : types) {
    auto parsed = driver::parse_param_type(t, error);
    request.param_types[parsed->first] = parsed->second;
  }
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  if (!bwd) return "error: " + p->all_messages();
  std::string box;
  for (const auto &l : bwd->layout_assumptions)
    for (const auto &[extent, stride] : l.extent_stride)
      box += (box.empty() ? "" : ", ") + emit::print_expr(*extent) + " by " + emit::print_expr(*stride);
  const bool atomic = bwd->source.find("tl.atomic_add(dX") != std::string::npos;
  const bool store = bwd->source.find("tl.store(dX") != std::string::npos;
  // A layout-flagged store: `if X_disjoint: tl.store(...) else: tl.atomic_add(...)`.
  const bool flagged = !box.empty() && bwd->source.find("if X_disjoint:") != std::string::npos;
  return flagged && store && atomic ? "store where [" + box + "] apart, else atomic"
         : atomic                   ? "atomic"
         : store                    ? "store"
                                    : "neither:\n" + bwd->source;
}

TEST(KernelReverse, LayoutBoxesOfProgramIdsSplitByDivisionAndTilesOfTwoAxes) {
  const std::vector<const char *> types = {"X=*fp32", "Y=*fp32", "H=i32", "N=i32", "sz=i32", "sh=i32", "sm=i32",
                                           "sd=i32"};
  // Attention's (batch, head) program split by // and %, rows of blocks of programs under a mask, a column tile.
  const std::string attention =
      "def k(X, Y, H, N, sz, sh, sm, sd, BM: tl.constexpr, D: tl.constexpr):\n"
      "    pm = tl.program_id(0)\n    hz = tl.program_id(1)\n    z = hz // H\n    h = hz % H\n"
      "    rows = pm * BM + tl.arange(0, BM)\n    cols = tl.arange(0, D)\n"
      "    o = z * sz + h * sh + rows[:, None] * sm + cols[None, :] * sd\n"
      "    x = tl.load(X + o, mask=rows[:, None] < N, other=0.0)\n    tl.store(Y + o, x * x, mask=rows[:, None] < N)\n";
  EXPECT_EQ(gradient_write_of(attention, types),
            "store where [N by sm, (tl.num_programs(1) + H - 1) // H by sz, H by sh, D by sd] apart, else atomic");
  // Only the quotient: the programs hz = 0 .. H - 1 meet at z = 0.
  const std::string quotient_only =
      "def k(X, Y, H, N, sz, sh, sm, sd, BM: tl.constexpr, D: tl.constexpr):\n"
      "    pm = tl.program_id(0)\n    z = tl.program_id(1) // H\n"
      "    rows = pm * BM + tl.arange(0, BM)\n    cols = tl.arange(0, D)\n"
      "    o = z * sz + rows[:, None] * sm + cols[None, :] * sd\n"
      "    x = tl.load(X + o, mask=rows[:, None] < N, other=0.0)\n    tl.store(Y + o, x * x, mask=rows[:, None] < N)\n";
  EXPECT_EQ(gradient_write_of(quotient_only, types), "atomic");
  // Two tiles along one axis: c + c2 repeats addresses whatever the strides.
  const std::string one_axis_twice =
      "def k(X, Y, H, N, sz, sh, sm, sd, BM: tl.constexpr, D: tl.constexpr):\n"
      "    r = tl.program_id(0)\n    c = tl.arange(0, BM)\n    c2 = tl.arange(0, BM) * sd\n"
      "    o = r * sm + c + c2\n    x = tl.load(X + o)\n    tl.store(Y + o, x * x)\n";
  EXPECT_EQ(gradient_write_of(one_axis_twice, types), "atomic");
  // A program axis the offset does not read: its programs share addresses.
  const std::string unread_axis =
      "def k(X, Y, H, N, sz, sh, sm, sd, BM: tl.constexpr, D: tl.constexpr):\n"
      "    rows = tl.program_id(0) * BM + tl.arange(0, BM)\n    cols = tl.arange(0, D)\n    j = tl.program_id(1)\n"
      "    o = rows[:, None] * sm + cols[None, :] * sd\n"
      "    x = tl.load(X + o, mask=rows[:, None] < N, other=0.0)\n    tl.store(Y + o + j * 0, x * x, mask=rows[:, None] < N)\n";
  EXPECT_EQ(gradient_write_of(unread_axis, types), "atomic");
}

// A tile every program loads alike, its lanes in two axes (`r[:, None] * K + r[None, :]`, a [K, K] weight): summed
// per program into a partial-sum row, deterministic, where the outer axis's coefficient keeps the rows apart; where
// rows overlap (a coefficient under the inner extent), lanes meet: atomic.
TEST(KernelReverse, TwoAxisTileEveryProgramLoadsIsPartialSummed) {
  const std::vector<const char *> types = {"X=*fp32", "Y=*fp32", "n=i32", "sm=i32", "steps=i32"};
  const std::string square =
      "def k(X, Y, n, sm, steps, K: tl.constexpr):\n    r = tl.arange(0, K)\n"
      "    w = tl.load(X + r[:, None] * K + r[None, :])\n"
      "    tl.store(Y + tl.program_id(0) * K + r, tl.sum(w * w, 1))\n";
  EXPECT_EQ(gradient_write_of(square, types), "store");
  std::string overlapping = square;
  overlapping.replace(overlapping.find("tl.arange(0, K)"), 15, "tl.arange(0, 16)");
  overlapping.replace(overlapping.find("r[:, None] * K"), 14, "r[:, None] * 8");
  EXPECT_EQ(gradient_write_of(overlapping, types), "atomic");
}

TEST(KernelReverse, LayoutBoxesWithALoopWalkingBlocks) {
  const std::vector<const char *> types = {"X=*fp32", "Y=*fp32", "n=i32", "sm=i32", "steps=i32"};
  // Column blocks of a block of rows walked by the loop (i * BC + lanes, under a mask): one index of the box.
  const std::string columns =
      "def k(X, Y, n, sm, steps, N: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):\n"
      "    rows = tl.program_id(0) * BR + tl.arange(0, BR)\n    acc = tl.zeros([BR], dtype=tl.float32)\n"
      "    for i in range(tl.cdiv(N, BC)):\n        cols = i * BC + tl.arange(0, BC)\n"
      "        x = tl.load(X + rows[:, None] * sm + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < N), "
      "other=0.0)\n        acc += tl.sum(x * x, 1)\n"
      "    tl.store(Y + rows, acc, mask=rows < n)\n";
  EXPECT_EQ(gradient_write_of(columns, types), "store where [n by sm, N by 1] apart, else atomic");
  // A loop moving a whole tile (t * BR * BC): t and the rows' lanes are one index, to the loop's end.
  const std::string tiles =
      "def k(X, Y, n, sm, steps, BR: tl.constexpr, BC: tl.constexpr):\n"
      "    pid = tl.program_id(0)\n    r = tl.arange(0, BR)\n    c = tl.arange(0, BC)\n"
      "    acc = tl.zeros([BR, BC], dtype=tl.float32)\n"
      "    for t in range(steps):\n        x = tl.load(X + pid * sm + t * BR * BC + r[:, None] * BC + c[None, :])\n"
      "        acc += x * x\n"
      "    tl.store(Y + pid * BR * BC + r[:, None] * BC + c[None, :], acc)\n";
  EXPECT_EQ(gradient_write_of(tiles, types),
            "store where [tl.num_programs(0) by sm, BR * steps by BC, BC by 1] apart, else atomic");
  // Pairs in a loop walking a row (a rotary kernel's x[2i], x[2i + 1]): the two loads and the loop's blocks are
  // indices of one box.
  const std::string pairs =
      "def k(X, Y, n, sm, steps, HALF: tl.constexpr, BC: tl.constexpr):\n    row = tl.program_id(0)\n"
      "    for start in range(0, HALF, BC):\n        d = start + tl.arange(0, BC)\n        m = d < HALF\n"
      "        x0 = tl.load(X + row * sm + d * 2, mask=m, other=0.0)\n"
      "        x1 = tl.load(X + row * sm + d * 2 + 1, mask=m, other=0.0)\n"
      "        tl.store(Y + row * HALF + d, x0 * x1, mask=m)\n";
  EXPECT_EQ(gradient_write_of(pairs, types), "store where [tl.num_programs(0) by sm, HALF by 2, 2 by 1] apart, else atomic");
  // The loop's blocks not starting at 0 (a start only the launch knows): not an index of the box.
  const std::string shifted =
      "def k(X, Y, n, sm, steps, N: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):\n"
      "    rows = tl.program_id(0) * BR + tl.arange(0, BR)\n    acc = tl.zeros([BR], dtype=tl.float32)\n"
      "    for i in range(steps, tl.cdiv(N, BC)):\n        cols = i * BC + tl.arange(0, BC)\n"
      "        x = tl.load(X + rows[:, None] * sm + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < N), "
      "other=0.0)\n        acc += tl.sum(x * x, 1)\n"
      "    tl.store(Y + rows, acc, mask=rows < n)\n";
  EXPECT_EQ(gradient_write_of(shifted, types), "atomic");
  // The loop inside another loop that does not move the addresses: each address is loaded in every outer
  // iteration, so the gradients add: in place where the flag says the program's addresses are its own.
  const std::string repeated =
      "def k(X, Y, n, sm, steps, N: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):\n"
      "    rows = tl.program_id(0) * BR + tl.arange(0, BR)\n    acc = tl.zeros([BR], dtype=tl.float32)\n"
      "    for rep in range(steps):\n        for i in range(tl.cdiv(N, BC)):\n"
      "            cols = i * BC + tl.arange(0, BC)\n"
      "            x = tl.load(X + rows[:, None] * sm + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < N), "
      "other=0.0)\n            acc += tl.sum(x * x, 1)\n"
      "    tl.store(Y + rows, acc, mask=rows < n)\n";
  EXPECT_EQ(gradient_write_of(repeated, types), "store where [n by sm, N by 1] apart, else atomic");
  // An integer offset the loop advances by its own step (a lowered block pointer's, after tl.advance): at each
  // read it is the loop variable, or the loop variable plus its start where the loop starts at 0.
  const std::string advanced =
      "def k(X, Y, n, sm, steps, N: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):\n"
      "    rows = tl.program_id(0) * BR + tl.arange(0, BR)\n    acc = tl.zeros([BR], dtype=tl.float32)\n"
      "    off = 0\n"
      "    for start in range(0, N, BC):\n        cols = off + tl.arange(0, BC)\n"
      "        x = tl.load(X + rows[:, None] * sm + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < N), "
      "other=0.0)\n        acc += tl.sum(x * x, 1)\n        off += BC\n"
      "    tl.store(Y + rows, acc, mask=rows < n)\n";
  EXPECT_EQ(gradient_write_of(advanced, types), "store where [n by sm, N by 1] apart, else atomic");
  // Advanced by another step than the loop's (two blocks a step): its values are not the loop variable's.
  std::string twice = advanced;
  twice.replace(twice.find("off += BC"), 9, "off += 2 * BC");
  EXPECT_EQ(gradient_write_of(twice, types), "atomic");
  // Read after the advance in the iteration: the next block's offset there.
  std::string late = advanced;
  late.replace(late.find("        off += BC\n"), 18, "");
  late.replace(late.find("        cols = off"), 8, "        off += BC\n        ");
  EXPECT_EQ(gradient_write_of(late, types), "atomic");
}

// The explanations of a kernel's backward: the max of a numerically stable softmax is proven to cancel out of
// what the kernel stores (its gradient is zero and not computed) only where it does.
std::string explanations_of(const std::string &source, const std::vector<std::pair<std::string, std::string>> &types) {
  auto p = parse_text(source);
  EXPECT_TRUE(p->ok()) << p->all_messages();
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  for (const auto &[n, t] : types) {
    std::string error;
    auto parsed = driver::parse_param_type(n + "=" + t, error);
    EXPECT_TRUE(parsed) << error;
    request.param_types[n] = parsed->second;
  }
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  EXPECT_TRUE(bwd) << p->all_messages();
  std::string all;
  for (const std::string &e : bwd ? bwd->explanations : std::vector<std::string>{}) all += e + "\n";
  return all;
}

// Which carried values the reversed loop recovers by inverting their update (LoopInversion.h), and which it tapes.
TEST(KernelReverse, InvertsOnlyExponentiallyScaledUpdates) {
  const std::vector<std::pair<std::string, std::string>> types = {{"X", "*fp32"}, {"Y", "*fp32"}, {"N", "i32"}};
  auto loop = [](const std::string &update) {
    return std::string(kHead) + "def k(X, Y, N, B: tl.constexpr):\n    o = tl.program_id(0) * B + tl.arange(0, B)\n"
           "    s = tl.zeros([B], dtype=tl.float32)\n    for i in range(0, N):\n"
           "        x = tl.load(X + i * B + o)\n" + update + "    tl.store(Y + o, s)\n";
  };
  const std::string inverted = "'s' is recovered in the reversed loop by inverting its update";
  const std::string taped = "'s' is taped to 's_tape'";
  // Exponential scales, through a broadcast, with the term on either side, subtracted, or none.
  for (const char *u : {"        s = s * tl.exp(x) + x\n", "        s = x * x + tl.exp2(-x) * s\n",
                        "        s = s * tl.math.exp(x) - x\n", "        s = s * tl.exp(x)\n",
                        "        a = tl.exp(tl.sum(x))\n        s = s * tl.broadcast_to(a, [B]) + x\n"}) {
    std::string e = explanations_of(loop(u), types);
    EXPECT_NE(e.find(inverted), std::string::npos) << u << e;
  }
  // A scale that can be 0 while its gradient is not, a term subtracted from it (the scale is negated), a carried
  // value read elsewhere in the body, a division: taped.
  for (const char *u : {"        s = s * x + x\n", "        s = x - s * tl.exp(x)\n",
                        "        s = s * tl.exp(x) + tl.sin(s)\n", "        s = s / tl.exp(x) + x\n"}) {
    std::string e = explanations_of(loop(u), types);
    EXPECT_NE(e.find(taped), std::string::npos) << u << e;
    EXPECT_EQ(e.find(inverted), std::string::npos) << u << e;
  }
}

TEST(KernelReverse, StabilizingMaxOnlyWhereItCancelsOut) {
  const std::vector<std::pair<std::string, std::string>> types = {{"X", "*fp32"}, {"Y", "*fp32"}, {"Z", "*fp32"}};
  const std::string head = std::string(kHead) + "def k(X, Y, Z, B: tl.constexpr):\n"
                           "    r = tl.arange(0, B)\n    x = tl.load(X + r[:, None] * B + r[None, :])\n";
  // Row softmax of a 2D tile: m[:, None] brings the reduced axis back.
  EXPECT_NE(explanations_of(head + "    m = tl.max(x, axis=1)\n    e = tl.exp(x - m[:, None])\n"
                                   "    tl.store(Y + r[:, None] * B + r[None, :], e / tl.sum(e, axis=1)[:, None])\n",
                            types)
                .find("line 7: 'm' = tl.max(...) only stabilizes"),
            std::string::npos);
  // The max is also stored: its gradient is real.
  EXPECT_EQ(explanations_of(head + "    m = tl.max(x, axis=1)\n    e = tl.exp(x - m[:, None])\n"
                                   "    tl.store(Y + r[:, None] * B + r[None, :], e / tl.sum(e, axis=1)[:, None])\n"
                                   "    tl.store(Z + r, m)\n",
                            types)
                .find("only stabilizes"),
            std::string::npos);
  // Normalised along the other axis: the shift does not cancel.
  EXPECT_EQ(explanations_of(head + "    m = tl.max(x, axis=1)\n    e = tl.exp(x - m[:, None])\n"
                                   "    tl.store(Y + r[:, None] * B + r[None, :], e / tl.sum(e, axis=0)[None, :])\n",
                            types)
                .find("only stabilizes"),
            std::string::npos);
  // In an if branch, merged into a value read after the if: the proof cannot see that use (this was a wrong
  // zero gradient through the max).
  EXPECT_EQ(explanations_of(head + "    if tl.load(Z) > 0:\n        m = tl.max(x, axis=1)\n    else:\n"
                                   "        m = tl.sum(x, axis=1)\n"
                                   "    tl.store(Y + r[:, None] * B + r[None, :], x * m[:, None])\n",
                            types)
                .find("only stabilizes"),
            std::string::npos);
  // Not normalised at all.
  EXPECT_EQ(explanations_of(head + "    m = tl.max(x, axis=1)\n"
                                   "    tl.store(Y + r[:, None] * B + r[None, :], tl.exp(x - m[:, None]))\n",
                            types)
                .find("only stabilizes"),
            std::string::npos);
}

TEST(KernelReverse, ImportsNamesUsedOnlyInsideLoops) {
  auto p = parse_text(std::string("import triton\nimport triton.language as tl\n"
                                  "from triton.language.extra import libdevice\n@triton.jit\n") +
                      "def k(X, Y, n, B: tl.constexpr):\n    acc = tl.zeros([B], dtype=tl.float32)\n"
                      "    for s in range(0, n, B):\n        c = s + tl.arange(0, B)\n"
                      "        acc += libdevice.tanh(tl.load(X + c, mask=c < n, other=0.0))\n"
                      "    tl.store(Y + tl.arange(0, B), acc)\n");
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  std::string error;
  for (const char *t : {"X=*fp32", "Y=*fp32", "n=i32"}) {
    auto parsed = driver::parse_param_type(t, error);
    request.param_types[parsed->first] = parsed->second;
  }
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  EXPECT_NE(bwd->source.find("from triton.language.extra import libdevice"), std::string::npos) << bwd->source;
}

TEST(KernelReverse, ReadsEverySavedStatistic) {
  // Two saved scalars stored one after the other, the first `1 / tl.sqrt(...)`
  // (rewritten to rsqrt, which removes a statement before the stores): both
  // are read back.
  auto p = parse_text(std::string(kHead) +
                      "def k(X, Y, A, R, N, B: tl.constexpr):\n    row = tl.program_id(0)\n    cols = tl.arange(0, B)\n"
                      "    pr = R + row\n    pa = A + row\n"
                      "    x = tl.load(X + row * N + cols, mask=cols < N, other=0.)\n"
                      "    r = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + 1.0)\n    a = tl.sum(x, axis=0)\n"
                      "    tl.store(pr, r)\n    tl.store(pa, a)\n"
                      "    tl.store(Y + row * N + cols, x * r + a, mask=cols < N)\n");
  ad::BackwardRequest request;
  request.function = "k";
  request.wrt = {"X"};
  std::string error;
  for (const char *t : {"X=*fp32", "Y=*fp32", "A=*fp32", "R=*fp32", "N=i32"}) {
    auto parsed = driver::parse_param_type(t, error);
    request.param_types[parsed->first] = parsed->second;
  }
  auto bwd = ad::differentiate(*p->module, p->sources, request, *p->diags);
  ASSERT_TRUE(bwd) << p->all_messages();
  EXPECT_NE(bwd->source.find("r = tl.load(pr)"), std::string::npos) << bwd->source;
  // `a` is read back, not computed again; the gradient needs only its shape
  // (a scalar, as its adjoint's: the assertion went), so no line reads it.
  EXPECT_EQ(bwd->source.find("\n    a = "), std::string::npos) << bwd->source;
  EXPECT_EQ(bwd->saved_outputs, (std::vector<std::string>{"A", "R"}));  // in the order of the values' names
}

}  // namespace tgrad::testing
