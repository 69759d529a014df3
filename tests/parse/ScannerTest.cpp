// The module scanner: which parts of an ordinary Python file are kept.
#include <gtest/gtest.h>

#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

using namespace ast;

std::vector<std::string> function_names(const Module &m) {
  std::vector<std::string> out;
  for (const auto &f : m.functions) out.push_back(f->name);
  return out;
}

TEST(Scanner, KeepsJitFunctionsAndSkipsOrdinaryPython) {
  auto p = parse_text(R"py(
import torch
import triton
import triton.language as tl

DEVICE = torch.device("cuda")
configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128) for w in (4, 8)]

class Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            y = {k: v for k, v in ctx.items()}
        return x

    @triton.jit
    def method_kernel(x):  # a jit function inside a class is not module level
        return x

def launcher(x):
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)
    try:
        kernel[grid](x)
    except Exception as e:
        print(f"failed: {e!r}")

@triton.jit
def kernel(X, BLOCK: tl.constexpr):
    pass

async def later():
    await thing

if __name__ == "__main__":
    launcher(torch.ones(3))
)py");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(function_names(*p->module), (std::vector<std::string>{"kernel"}));
  EXPECT_EQ(p->module->imports.size(), 3u);
  EXPECT_TRUE(p->diags->diagnostics().empty()) << p->all_messages();
}

TEST(Scanner, DecoratorStacksAreKeptAsText) {
  auto p = parse_text(R"py(
import triton
import triton.language as tl

@triton.autotune(
    configs=[
        triton.Config({'BLOCK_M': 128}, num_stages=3, num_warps=8),  # big
        triton.Config({'BLOCK_M': 64}, num_stages=4, num_warps=4),
    ],
    key=['M', 'N'],
)
@triton.heuristics({'EVEN': lambda args: args['M'] % args['BLOCK_M'] == 0})
@triton.jit(do_not_specialize=["M"])
def k(X, M, BLOCK_M: tl.constexpr, EVEN: tl.constexpr):
    pass
)py");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ASSERT_EQ(p->module->functions.size(), 1u);
  const Function &f = *p->module->functions[0];
  ASSERT_EQ(f.decorators.size(), 3u);
  EXPECT_EQ(f.decorators[0].kind, DecoratorKind::Autotune);
  EXPECT_EQ(f.decorators[0].name, "triton.autotune");
  EXPECT_NE(f.decorators[0].text.find("# big\n"), std::string::npos);
  EXPECT_EQ(f.decorators[0].span.begin, (SourcePos{5, 1}));
  EXPECT_EQ(f.decorators[0].span.end.line, 11);
  EXPECT_EQ(f.decorators[1].kind, DecoratorKind::Heuristics);
  EXPECT_EQ(f.decorators[1].text, "triton.heuristics({'EVEN': lambda args: args['M'] % args['BLOCK_M'] == 0})");
  EXPECT_EQ(f.decorators[2].kind, DecoratorKind::Jit);
  EXPECT_EQ(f.decorators[2].text, "triton.jit(do_not_specialize=[\"M\"])");
}

TEST(Scanner, JitFunctionsInsideModuleLevelIfAndTry) {
  auto p = parse_text(R"py(
import triton
import triton.language as tl

if hasattr(tl, "exp2"):
    @triton.jit
    def fast(x):
        return tl.exp2(x)
try:
    @triton.jit
    def tried(x):
        return x
except ImportError:
    pass
)py");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  EXPECT_EQ(function_names(*p->module), (std::vector<std::string>{"fast", "tried"}));
  EXPECT_EQ(p->module->functions[0]->name_span.begin, (SourcePos{7, 9}));
}

TEST(Scanner, CallFormOfJit) {
  auto p = parse_text(R"py(
import triton
import triton.language as tl

def _silu(x):
    return x * tl.sigmoid(x)

silu = triton.jit(_silu)
_silu = triton.jit(_silu)
)py");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ASSERT_EQ(p->module->functions.size(), 1u) << p->all_messages();  // the second call redefines the first
  EXPECT_EQ(p->module->functions[0]->jit_alias, "_silu");
}

TEST(Scanner, CallFormOfAnUnknownFunctionWarns) {
  auto p = parse_text("import triton\nk = triton.jit(nowhere)\n");
  EXPECT_TRUE(p->ok());
  EXPECT_EQ(p->messages(),
            (std::vector<std::string>{"t.py:2:1: warning: 'nowhere' is not a function defined above in this file; "
                                      "tgrad skips this triton.jit call"}));
}

TEST(Scanner, ModuleConstants) {
  auto p = parse_text(R"py(
import triton.language as tl
import triton
BLOCK: tl.constexpr = 128
EPS = tl.constexpr(1e-6)
LONG: triton.language.constexpr = 2 ** 10
PLAIN = 4
)py");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  ASSERT_EQ(p->module->constants.size(), 3u);
  EXPECT_EQ(p->module->constants[0].name, "BLOCK");
  EXPECT_EQ(p->module->constants[1].name, "EPS");
  EXPECT_EQ(p->module->constants[2].name, "LONG");
}

TEST(Scanner, ImportsKeepModulesAndAliases) {
  auto p = parse_text(
      "import triton.language as tl, math\nfrom .utils import (calculate_settings as cs,\n    softplus)\n"
      "from triton.language.extra.cuda import libdevice\nfrom .. import common\n");
  ASSERT_TRUE(p->ok()) << p->all_messages();
  const auto &imports = p->module->imports;
  ASSERT_EQ(imports.size(), 4u);
  EXPECT_FALSE(imports[0].is_from);
  EXPECT_EQ(imports[0].names, (std::vector<std::pair<std::string, std::string>>{{"triton.language", "tl"}, {"math", ""}}));
  EXPECT_EQ(imports[1].module, ".utils");
  EXPECT_EQ(imports[1].names,
            (std::vector<std::pair<std::string, std::string>>{{"calculate_settings", "cs"}, {"softplus", ""}}));
  EXPECT_EQ(imports[2].module, "triton.language.extra.cuda");
  EXPECT_EQ(imports[3].module, "..");
}

TEST(Scanner, UnknownDecoratorOnJitWarnsAndIsKept) {
  auto p = parse_text("import triton\n@libentry()\n@triton.jit\ndef k(x):\n    pass\n");
  EXPECT_TRUE(p->ok());
  ASSERT_EQ(p->module->functions.size(), 1u);
  EXPECT_EQ(p->module->functions[0]->decorators[0].text, "libentry()");
  EXPECT_EQ(p->messages(), (std::vector<std::string>{
                               "t.py:2:1: warning: decorator '@libentry' on @triton.jit function 'k' is not known to "
                               "tgrad; it is kept as text and its effect is ignored"}));
}

TEST(Scanner, AutotuneWithoutJitWarnsAndSkips) {
  auto p = parse_text("import triton\n@triton.autotune(configs=[], key=[])\ndef k(x):\n    pass\n");
  EXPECT_TRUE(p->ok());
  EXPECT_TRUE(p->module->functions.empty());
  ASSERT_EQ(p->messages().size(), 1u);
  EXPECT_NE(p->messages()[0].find("has no @triton.jit decorator"), std::string::npos);
}

TEST(Scanner, ErrorsInOneFunctionDoNotHideAnother) {
  auto p = parse_text(
      "import triton\n@triton.jit\ndef a(x):\n    y = (x +\n\n@triton.jit\ndef b(x):\n    with x:\n        pass\n");
  EXPECT_FALSE(p->ok());
  // The unclosed bracket swallows the rest of the file into `a`, as Python's
  // tokenizer would: one error, at the bracket.
  EXPECT_EQ(p->messages(), (std::vector<std::string>{"t.py:4:9: error: '(' was never closed"}));

  auto q = parse_text("import triton\n@triton.jit\ndef a(x):\n    y = x $ 1\n\n@triton.jit\ndef b(x):\n"
                      "    with x:\n        pass\n");
  EXPECT_EQ(q->messages(), (std::vector<std::string>{
                               "t.py:4:11: error: invalid character '$' in source",
                               "t.py:8:5: error: 'with' is not supported in a @triton.jit function"}));
}

}  // namespace
}  // namespace tgrad::testing

// Constants defined in the branches of a module-level if (or a try): the
// first definition is read, and the others are named in a warning.
TEST(Scanner, ConstantsInModuleLevelBranchesKeepTheFirst) {
  auto p = tgrad::testing::parse_text("import triton\nimport triton.language as tl\nif HAVE_TF32:\n"
                      "    PRECISION = tl.constexpr('tf32')\nelse:\n    PRECISION = tl.constexpr('ieee')\n");
  EXPECT_TRUE(p->ok()) << p->all_messages();
  ASSERT_EQ(p->module->constants.size(), 1u);
  EXPECT_EQ(p->module->constants[0].span.begin.line, 4);
  ASSERT_EQ(p->messages().size(), 2u);
  EXPECT_EQ(p->messages()[0], "t.py:6:5: warning: constant 'PRECISION' is defined again here (tgrad cannot tell which "
                              "module-level branch Python takes); tgrad uses the first definition");
}
