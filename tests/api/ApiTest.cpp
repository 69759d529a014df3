// The public API (include/tgrad/tgrad.h) as a library user meets it: each
// stage's value, and errors as values of the right kind with their locations.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tgrad/tgrad.h"

namespace {

// A tile function, a kernel that calls a helper, and a hand-written backward
// beside the kernel.
constexpr const char *kKernels = R"(import triton
import triton.language as tl


@triton.jit
def square_sum(x, y):
    return tl.sum(x * x + y, axis=0)


@triton.jit
def _scale(v, s):
    return v * s


@triton.jit
def scale_fwd(X, Y, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, _scale(x, s), mask=mask)


@triton.jit
def scale_bwd(DY, DX, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(DX + offs, tl.load(DY + offs) * s)
)";

tgrad::KernelFile read(const std::string &text, const std::string &name = "mem.py") {
  tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read_text(text, name);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().render());
  return *file;
}

TEST(Api, ReadingAMissingFileIsAnInputErrorWithAMessage) {
  tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read("no/such/kernel.py");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().kind, tgrad::Error::Kind::Input);
  EXPECT_EQ(file.error().message, "cannot open 'no/such/kernel.py': No such file or directory");
  EXPECT_TRUE(file.error().diagnostics.empty());
  EXPECT_EQ(file.error().render(), "tgrad: error: cannot open 'no/such/kernel.py': No such file or directory\n");
}

TEST(Api, SyntaxErrorsAreLocatedDiagnostics) {
  tgrad::Result<tgrad::KernelFile> file =
      tgrad::KernelFile::read_text("import triton\n@triton.jit\ndef k(x):\n    return x +\n", "bad.py");
  ASSERT_FALSE(file.ok());
  const tgrad::Error &e = file.error();
  EXPECT_EQ(e.kind, tgrad::Error::Kind::Input);
  ASSERT_FALSE(e.diagnostics.empty());
  const tgrad::StoredDiagnostic &d = e.diagnostics[0];
  EXPECT_EQ(d.severity, tgrad::Severity::Error);
  EXPECT_EQ(d.file, "bad.py");
  EXPECT_EQ(d.line, 4);
  EXPECT_GT(d.column, 0);
  EXPECT_EQ(d.rendered.rfind("bad.py:4:" + std::to_string(d.column) + ": error: ", 0), 0u) << d.rendered;
  EXPECT_NE(d.rendered.find("    return x +\n"), std::string::npos) << "the source line is quoted";
}

TEST(Api, FunctionsAndPrintedSource) {
  tgrad::KernelFile file = read(kKernels);
  EXPECT_EQ(file.name(), "mem.py");
  EXPECT_EQ(file.function_names(), (std::vector<std::string>{"square_sum", "_scale", "scale_fwd", "scale_bwd"}));
  ASSERT_TRUE(file.function("scale_fwd").ok());
  tgrad::Result<const tgrad::ast::Function *> missing = file.function("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, tgrad::Error::Kind::Request);
  EXPECT_EQ(missing.error().message, "--fn nope: no @triton.jit function of that name in 'mem.py' (it has: square_sum, "
                                     "_scale, scale_fwd, scale_bwd)");
  EXPECT_EQ(tgrad::print_source(**file.function("_scale")), "@triton.jit\ndef _scale(v, s):\n    return v * s\n");
  EXPECT_NE(tgrad::print_source(file).find("def scale_bwd(DY, DX, n, s, BLOCK: tl.constexpr):"), std::string::npos);
}

TEST(Api, TheKernelToDifferentiateIsTheOneNotNamedAsABackward) {
  tgrad::KernelFile file = read(kKernels);
  tgrad::Result<tgrad::KernelChoice> choice = tgrad::choose_kernel(file);
  // square_sum, scale_fwd and scale_bwd are called by no other: two are not named as backwards.
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.error().kind, tgrad::Error::Kind::Request);

  tgrad::KernelFile two = read(R"(import triton
import triton.language as tl


@triton.jit
def k_fwd(X, n):
    tl.store(X + tl.arange(0, 4), tl.load(X + tl.arange(0, 4)) * 2.0)


@triton.jit
def k_bwd(X, n):
    tl.store(X + tl.arange(0, 4), tl.load(X + tl.arange(0, 4)) * 2.0)
)");
  tgrad::Result<tgrad::KernelChoice> chosen = tgrad::choose_kernel(two);
  ASSERT_TRUE(chosen.ok()) << chosen.error().render();
  EXPECT_EQ(chosen->name, "k_fwd");
  EXPECT_NE(chosen->note.find("k_bwd"), std::string::npos) << chosen->note;
}

TEST(Api, TypesOfATileFunction) {
  tgrad::KernelFile file = read(kKernels);
  tgrad::Result<tgrad::Types> types = tgrad::type(file, {"square_sum", {"x=fp32[N]", "y=fp32[N]"}, {}});
  ASSERT_TRUE(types.ok()) << types.error().render();
  EXPECT_GT(types->size(), 0u);
  const std::string dump = tgrad::dump_ast(**file.function("square_sum"), &*types);
  EXPECT_NE(dump.find("fp32[N]"), std::string::npos) << dump;

  tgrad::Result<tgrad::Types> bad = tgrad::type(file, {"square_sum", {"x=fp99[N]"}, {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, tgrad::Error::Kind::Request);
  EXPECT_EQ(bad.error().message.rfind("--arg x=fp99[N]: ", 0), 0u) << bad.error().message;

  tgrad::Result<tgrad::Types> unscoped = tgrad::type(file, {"", {"x=fp32[N]"}, {}});
  ASSERT_FALSE(unscoped.ok());
  EXPECT_EQ(unscoped.error().kind, tgrad::Error::Kind::Request);
}

TEST(Api, DifferentiatesATileFunction) {
  tgrad::KernelFile file = read(kKernels);
  tgrad::GradientRequest request;
  request.function = "square_sum";
  request.wrt = {"x", "1"};  // by name and by index
  request.types = {"x=fp32[N]", "y=fp32[N]"};
  request.command_line = "a recorded command";
  tgrad::Result<tgrad::Gradient> grad = tgrad::differentiate(file, request);
  ASSERT_TRUE(grad.ok()) << grad.error().render();
  EXPECT_EQ(grad->function(), "square_sum");
  EXPECT_EQ(grad->backward_name(), "square_sum_bwd");
  EXPECT_NE(grad->source().find("#   a recorded command\n"), std::string::npos);
  EXPECT_NE(grad->source().find("def square_sum_bwd(x, y, "), std::string::npos) << grad->source();
  EXPECT_NE(grad->source().find("    return bx, "), std::string::npos) << grad->source();
  EXPECT_TRUE(grad->explanations().empty());
  EXPECT_NE(grad->launch_protocol().find("\"backward\": \"square_sum_bwd\""), std::string::npos);
  tgrad::Result<std::string> torch = grad->torch_module("tgrad_ops");
  ASSERT_FALSE(torch.ok()) << "a tile function is no PyTorch op";
  EXPECT_EQ(torch.error().kind, tgrad::Error::Kind::Input);
  EXPECT_FALSE(torch.error().message.empty());
}

TEST(Api, RequestsThatDoNotFitAreRequestErrors) {
  tgrad::KernelFile file = read(kKernels);
  auto message = [&](tgrad::GradientRequest r) {
    tgrad::Result<tgrad::Gradient> g = tgrad::differentiate(file, r);
    EXPECT_FALSE(g.ok());
    if (g.ok()) return std::string();
    EXPECT_EQ(g.error().kind, tgrad::Error::Kind::Request);
    return g.error().message;
  };
  EXPECT_EQ(message({"scale_fwd", {"Q"}}), "--wrt Q: 'scale_fwd' has no parameter 'Q'");
  EXPECT_EQ(message({"scale_fwd", {"X", "BLOCK"}}), "--wrt X,BLOCK: 'BLOCK' is tl.constexpr and carries no gradient");
  EXPECT_EQ(message({"scale_fwd", {"X,0"}}), "--wrt X,0: 'X' is listed twice");
  EXPECT_EQ(message({"scale_fwd", {"99999999999999999999999999"}}),
            "--wrt 99999999999999999999999999: 'scale_fwd' has 5 parameters; index 99999999999999999999999999 is out "
            "of range");
  EXPECT_EQ(message({"scale_fwd", {}}), "--wrt needs at least one parameter");
  EXPECT_EQ(message({"scale_fwd", {"X"}, {}, {"BLOCK"}}), "-D BLOCK: expected NAME=VALUE");
}

TEST(Api, DifferentiatesAKernelAndWritesItsTorchModule) {
  tgrad::KernelFile file = read(kKernels);
  tgrad::Result<tgrad::Gradient> grad = tgrad::differentiate(file, {"scale_fwd", {"X"}});
  ASSERT_TRUE(grad.ok()) << grad.error().render();
  EXPECT_EQ(grad->backward_name(), "scale_fwd_bwd");
  EXPECT_NE(grad->source().find("def scale_fwd_bwd(X, Y, n, s, BLOCK: tl.constexpr, dX, dY):"), std::string::npos)
      << grad->source();
  EXPECT_FALSE(grad->explanations().empty());
  EXPECT_EQ(grad->backward().gradient_buffers.size(), 2u);
  tgrad::Result<std::string> torch = grad->torch_module(tgrad::op_namespace_for("out/scale-ops.py"));
  ASSERT_TRUE(torch.ok()) << torch.error().render();
  EXPECT_NE(torch->find("tgrad_scale_ops::scale_fwd_forward"), std::string::npos);
}

TEST(Api, ErrorsInAKernelAreLocatedAndLogged) {
  tgrad::KernelFile file = read(R"(import triton
import triton.language as tl


@triton.jit
def spin(X, n):
    x = tl.load(X)
    while x < n:
        x = x * 2.0
    tl.store(X, x)
)", "spin.py");
  tgrad::Result<tgrad::Gradient> grad = tgrad::differentiate(file, {"spin", {"X"}});
  ASSERT_FALSE(grad.ok());
  EXPECT_EQ(grad.error().kind, tgrad::Error::Kind::Input);
  ASSERT_FALSE(grad.error().diagnostics.empty());
  const tgrad::StoredDiagnostic &d = grad.error().diagnostics.back();
  EXPECT_EQ(d.file, "spin.py");
  EXPECT_GT(d.line, 0);
  // The file's log holds what the call reported.
  ASSERT_FALSE(file.diagnostics().empty());
  EXPECT_EQ(file.diagnostics().back().rendered, d.rendered);
  EXPECT_NE(file.rendered_diagnostics().find(d.rendered), std::string::npos);
}

TEST(Api, RunsAKernelInTheInterpreter) {
  tgrad::KernelFile file = read(kKernels);
  tgrad::LaunchRequest launch;
  launch.kernel = "scale_fwd";
  launch.grid = "2";
  launch.defines = {"BLOCK=8"};
  launch.args = {"X=fp32[10]:ones", "Y=fp32[10]:zeros", "n=10", "s=3.0"};
  ASSERT_TRUE(tgrad::validate_launch(file, launch).ok());
  tgrad::Result<tgrad::RunResult> ran = tgrad::run(file, launch);
  ASSERT_TRUE(ran.ok()) << ran.error().render();
  ASSERT_EQ(ran->buffers.size(), 2u);
  EXPECT_EQ(ran->buffers[1].name, "Y");
  EXPECT_EQ(ran->buffers[1].type(), "fp32[10]");
  EXPECT_EQ(ran->buffers[1].values, std::vector<double>(10, 3.0));

  launch.args.pop_back();
  tgrad::Status invalid = tgrad::validate_launch(file, launch);
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().kind, tgrad::Error::Kind::Request);
  EXPECT_EQ(invalid.error().message, "parameter 's' of 'scale_fwd' needs a value: --arg s=...");
}

TEST(Api, RunsATileFunctionAndChecksItsGradient) {
  tgrad::KernelFile file = read(kKernels);
  tgrad::LaunchRequest launch;
  launch.function = "square_sum";
  launch.args = {"x=fp32[4]:ones", "y=fp32[4]:zeros"};
  tgrad::Result<tgrad::RunResult> ran = tgrad::run(file, launch);
  ASSERT_TRUE(ran.ok()) << ran.error().render();
  ASSERT_EQ(ran->results.size(), 1u);
  ASSERT_TRUE(ran->results[0].tensor.has_value());
  EXPECT_EQ(ran->results[0].name, "result");
  EXPECT_EQ(ran->results[0].tensor->values, std::vector<double>{4.0});

  tgrad::CheckRequest check;
  check.launch.function = "square_sum";
  check.launch.args = {"x=fp32[8]", "y=fp32[8]"};
  check.wrt = {"x,y"};
  tgrad::Result<tgrad::GradientCheck> checked = tgrad::check_gradient(file, check);
  ASSERT_TRUE(checked.ok()) << checked.error().render();
  EXPECT_TRUE(checked->pass);
  ASSERT_EQ(checked->arguments.size(), 2u);
  EXPECT_EQ(checked->arguments[0].name, "x");
  EXPECT_LT(checked->arguments[0].relative_error, 1e-6);
}

TEST(Api, AnUnwritableNpyFileIsAnOutputError) {
  tgrad::Tensor t{"x", tgrad::sema::DType::FP32, {2}, {1.0, 2.0}};
  tgrad::Status written = tgrad::write_npy("/no/such/dir/x.npy", t);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().kind, tgrad::Error::Kind::Output);
  EXPECT_FALSE(written.error().message.empty());
}

TEST(Api, OpNamespaces) {
  EXPECT_EQ(tgrad::op_namespace_for("-"), "tgrad_stdin");
  EXPECT_EQ(tgrad::op_namespace_for("a/b/layer-norm.ops.py"), "tgrad_layer_norm_ops");
}

}  // namespace
