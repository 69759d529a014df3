// tools/runner's buffers: the seeded fills are the ones `tgrad run` makes
// for the same specs (the same generator per buffer, rounded to the dtype
// the same way), so the runner and the interpreter start from the same
// inputs; .npy files round-trip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tgrad/tgrad.h"
#include "tools/runner/Buffers.h"

namespace {

TEST(RunnerBuffers, SeededFillsAreTheInterpretersInputs) {
  // A kernel that writes nothing: `tgrad run` reports its buffers as it drew them.
  tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read_text(
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef nop(A, B, C, D, E):\n    pass\n", "nop.py");
  ASSERT_TRUE(file) << file.error().render();
  const std::vector<std::pair<std::string, std::string>> specs = {{"fp32", "fp32[3,50]"},
                                                                  {"fp16", "fp16[100]:uniform(-4,4)"},
                                                                  {"bf16", "bf16[7,9]"},
                                                                  {"i64", "int64[64]:uniform(0,781)"},
                                                                  {"fp32", "fp32[5]:ones"}};
  tgrad::LaunchRequest request;
  request.kernel = "nop";
  request.grid = "1";
  request.seed = 7;
  const char *names[] = {"A", "B", "C", "D", "E"};
  for (size_t k = 0; k < specs.size(); ++k) request.args.push_back(std::string(names[k]) + "=" + specs[k].second);
  tgrad::Result<tgrad::RunResult> ran = tgrad::run(*file, request);
  ASSERT_TRUE(ran) << ran.error().render();
  ASSERT_EQ(ran->buffers.size(), specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    tgrad::runner::Buffer b = tgrad::runner::make_buffer(names[k], specs[k].first, specs[k].second, 7, k);
    const tgrad::Tensor &t = ran->buffers[k];
    ASSERT_EQ(b.shape, t.shape) << names[k];
    for (size_t i = 0; i < t.values.size(); ++i)
      ASSERT_EQ(tgrad::runner::element(b, static_cast<int64_t>(i)), t.values[i]) << names[k] << "[" << i << "]";
  }
}

TEST(RunnerBuffers, NpyRoundTrip) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  for (const char *type : {"fp32", "fp16", "bf16", "i32"}) {
    tgrad::runner::Buffer b = tgrad::runner::make_buffer(
        "X", type, std::string(type == std::string("i32") ? "int32" : type) + "[4,6]:uniform(-3,3)", 1, 0);
    tgrad::runner::save(b, dir);
    tgrad::runner::Buffer back = tgrad::runner::make_buffer("X", type, dir + "/X.npy", 0, 0);
    ASSERT_EQ(back.shape, b.shape) << type;
    for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(tgrad::runner::element(back, i), tgrad::runner::element(b, i)) << type;
  }
}

}  // namespace
