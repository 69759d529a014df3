// The source-level lowerings before typing (src/lower/): helpers that make
// tensor descriptors inlined with the descriptor test decided, a parameter
// rebound to its descriptor, block shapes chosen by a flag, and conditional
// expressions a specialization decides. Each result is compared, as an AST,
// with the kernel written out by hand.
#include <gtest/gtest.h>

#include "src/lower/BlockPointers.h"
#include "src/lower/FailingBranches.h"
#include "src/lower/InlineCalls.h"
#include "tests/parse/ParseHelpers.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad {
namespace {

using testing::parse_text;

const char kHeader[] = "import triton\nimport triton.language as tl\n\n";

// The function `name` of `actual` is `expected`'s function of that name.
void expect_function(const ast::Module &actual, const std::string &expected_source, const std::string &name) {
  auto expected = parse_text(kHeader + expected_source, "expected.py");
  ASSERT_TRUE(expected->ok()) << expected->all_messages();
  const ast::Function *a = actual.find_function(name);
  const ast::Function *e = expected->module->find_function(name);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(ast::equal(a->body, e->body)) << "got:\n" << emit::print_module(actual);
}

const char kDescriptorHelper[] = R"(
@triton.jit
def _descriptor_or_make(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)
)";

TEST(InlineCalls, HelperMakingADescriptorFromAParameterIsInlinedOnThePointerPath) {
  auto p = parse_text(std::string(kHeader) + kDescriptorHelper + R"(
@triton.jit
def k(X, Y, N, B: tl.constexpr):
    X = _descriptor_or_make(X, shape=[N], strides=[1], block_shape=[B])
    x = X.load([0])
    tl.store(Y + tl.arange(0, B), x)
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto inlined = lower::inline_memory_helpers(*p->module, "k", *p->diags);
  ASSERT_TRUE(inlined) << p->all_messages();
  expect_function(*inlined, R"(
@triton.jit
def k(X, Y, N, B: tl.constexpr):
    X = tl.make_tensor_descriptor(X, [N], [1], [B])
    x = X.load([0])
    tl.store(Y + tl.arange(0, B), x)
)", "k");
}

TEST(InlineCalls, AHelperReturningEarlyUnderALiteralFlagKeepsTheTakenReturn) {
  auto p = parse_text(std::string(kHeader) + R"(
@triton.jit
def _rows(base, T, CONTIG: tl.constexpr):
    if CONTIG:
        return tl.make_block_ptr(base, (T,), (1,), (0,), (16,), (0,))
    return tl.make_block_ptr(base, (T,), (2,), (0,), (16,), (0,))

@triton.jit
def k(X, Y, T):
    p = _rows(X, T, True)
    tl.store(Y + tl.arange(0, 16), tl.load(p, boundary_check=(0,)))
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto inlined = lower::inline_memory_helpers(*p->module, "k", *p->diags);
  ASSERT_TRUE(inlined) << p->all_messages();
  expect_function(*inlined, R"(
@triton.jit
def k(X, Y, T):
    p = tl.make_block_ptr(X, (T,), (1,), (0,), (16,), (0,))
    tl.store(Y + tl.arange(0, 16), tl.load(p, boundary_check=(0,)))
)", "k");
}

TEST(InlineCalls, KnownFlagsDecideConditionalExpressions) {
  auto p = parse_text(std::string(kHeader) + R"(
@triton.jit
def k(X, Y, FP8: tl.constexpr, A: tl.constexpr, B: tl.constexpr):
    r = tl.arange(0, A if FP8 else B)
    tl.store(Y + r, tl.load(X + r))
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  sema::ParamTypes known;
  known["FP8"] = sema::SType::of_bool(false);
  auto folded = lower::fold_decided_conditionals(*p->module, "k", known);
  ASSERT_TRUE(folded);
  expect_function(*folded, R"(
@triton.jit
def k(X, Y, FP8: tl.constexpr, A: tl.constexpr, B: tl.constexpr):
    r = tl.arange(0, B)
    tl.store(Y + r, tl.load(X + r))
)", "k");
  // Without a value nothing is decided.
  EXPECT_FALSE(lower::fold_decided_conditionals(*p->module, "k", {}));
}

TEST(BlockPointers, AParameterReboundToItsDescriptorGetsANameOfItsOwn) {
  auto p = parse_text(std::string(kHeader) + R"(
@triton.jit
def k(X, Y, N, B: tl.constexpr):
    X = tl.make_tensor_descriptor(X, [N], [1], [B])
    x = X.load([0])
    tl.store(Y + tl.arange(0, B), x)
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto lowered = lower::lower_block_pointers(*p->module, *p->diags, "k");
  ASSERT_TRUE(lowered) << p->all_messages();
  expect_function(*lowered, R"(
@triton.jit
def k(X, Y, N, B: tl.constexpr):
    X_desc_base = X
    X_desc_shape0 = N
    X_desc_stride0 = 1
    X_desc_index0 = 0 + tl.arange(0, B)
    x = tl.load(X_desc_base + X_desc_index0 * X_desc_stride0, mask=(X_desc_index0 >= 0) & (X_desc_index0 < X_desc_shape0), other=0.0)
    tl.store(Y + tl.arange(0, B), x)
)", "k");
}

TEST(BlockPointers, BlockShapesChosenByTheBranchesOfOneIfAreAConditionalExpression) {
  auto p = parse_text(std::string(kHeader) + R"(
@triton.jit
def k(V, Y, N, T: tl.constexpr, A: tl.constexpr, B: tl.constexpr):
    if T:
        V = tl.make_tensor_descriptor(V, [N, N], [N, 1], [A, B])
    else:
        V = tl.make_tensor_descriptor(V, [N, N], [N, 1], [B, A])
    v = V.load([0, 0])
    tl.store(Y, tl.sum(tl.sum(v, 1), 0))
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto lowered = lower::lower_block_pointers(*p->module, *p->diags, "k");
  ASSERT_TRUE(lowered) << p->all_messages();
  const std::string text = emit::print_module(*lowered);
  EXPECT_NE(text.find("tl.arange(0, A if T else B)"), std::string::npos) << text;
  EXPECT_NE(text.find("tl.arange(0, B if T else A)"), std::string::npos) << text;
}

TEST(BlockPointers, BlockShapesThatDifferOtherwiseAreALocatedError) {
  auto p = parse_text(std::string(kHeader) + R"(
@triton.jit
def k(V, W, Y, N, A: tl.constexpr, B: tl.constexpr):
    P = tl.make_tensor_descriptor(V, [N, N], [N, 1], [A, B])
    v = P.load([0, 0])
    P = tl.make_tensor_descriptor(W, [N, N], [N, 1], [B, A])
    w = P.load([0, 0])
    tl.store(Y, tl.sum(tl.sum(v, 1), 0) + tl.sum(tl.sum(w, 1), 0))
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_FALSE(lower::lower_block_pointers(*p->module, *p->diags, "k"));
  EXPECT_NE(p->all_messages().find("is given block pointers of block shapes [A, B] and [B, A]"), std::string::npos)
      << p->all_messages();
}

TEST(FailingBranches, ABranchThatRaisesBecomesAnAssertionOfTheConditionAvoidingIt) {
  // `raise` reads as a failing static assertion (src/parse/AstBuilder.cpp); the elif chain's last else, then a
  // then-branch that asserts False, and an if without else; a loop's body too.
  auto p = parse_text(std::string(kHeader) + R"(
@triton.jit
def act(x, MODE: tl.constexpr, CHECK: tl.constexpr):
    if MODE == "relu":
        y = tl.maximum(x, 0.0)
    elif MODE == "silu":
        y = x * tl.sigmoid(x)
    else:
        z = x
        raise ValueError(f"unsupported {MODE}")
    if CHECK:
        tl.static_assert(False, "no checks")
    else:
        y = y * 2.0
    for i in range(3):
        if i > CHECK:
            raise RuntimeError("too many")
    return y
)");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  auto asserted = lower::with_failing_branches_asserted(*p->module);
  ASSERT_TRUE(asserted);
  expect_function(*asserted, R"(
@triton.jit
def act(x, MODE: tl.constexpr, CHECK: tl.constexpr):
    if MODE == "relu":
        y = tl.maximum(x, 0.0)
    else:
        tl.static_assert(MODE == "silu", 'raise ValueError(f"unsupported {MODE}")')
        y = x * tl.sigmoid(x)
    tl.static_assert(not CHECK, "no checks")
    y = y * 2.0
    for i in range(3):
        tl.static_assert(not i > CHECK, 'raise RuntimeError("too many")')
    return y
)", "act");
  // Nothing to rewrite: no copy.
  auto plain = parse_text(std::string(kHeader) + "@triton.jit\ndef f(x, M: tl.constexpr):\n    if M:\n        x = x + 1\n    return x\n");
  ASSERT_TRUE(plain->ok()) << plain->all_messages();
  EXPECT_FALSE(lower::with_failing_branches_asserted(*plain->module));
}

}  // namespace
}  // namespace tgrad
