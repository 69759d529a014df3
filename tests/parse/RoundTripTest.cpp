// The round-trip property over every test kernel: parse(print(ast)) equals
// ast (structurally, ignoring locations), and printing is idempotent.
#include <algorithm>

#include <gtest/gtest.h>

#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

std::vector<std::string> kernel_files() { return python_files("tests/kernels"); }

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, ParsePrintParseIsTheSameTree) {
  const std::string path = "tests/kernels/" + GetParam();
  auto first = parse_text(read_file(path), path);
  ASSERT_TRUE(first->ok()) << first->all_messages();
  ASSERT_FALSE(first->module->functions.empty()) << path << " has no jit function";

  const std::string printed = emit::print_module(*first->module);
  auto second = parse_text(printed, "printed.py");
  ASSERT_TRUE(second->ok()) << second->all_messages() << "\nPrinted:\n" << printed;
  EXPECT_TRUE(ast::equal(*first->module, *second->module)) << "Printed:\n" << printed;
  EXPECT_EQ(printed, emit::print_module(*second->module)) << "printing is not idempotent";
}

TEST_P(RoundTrip, EachFunctionAloneRoundTrips) {
  const std::string path = "tests/kernels/" + GetParam();
  auto parsed = parse_text(read_file(path), path);
  ASSERT_TRUE(parsed->ok()) << parsed->all_messages();
  for (const auto &f : parsed->module->functions) {
    std::string text = "import triton\nimport triton.language as tl\n\n" + emit::print_function(*f);
    auto again = parse_text(text, f->name + ".py");
    ASSERT_TRUE(again->ok()) << again->all_messages() << text;
    ASSERT_EQ(again->module->functions.size(), 1u) << text;
    EXPECT_TRUE(ast::equal(*f, *again->module->functions[0])) << text;
  }
}

TEST_P(RoundTrip, ClonesAreEqual) {
  const std::string path = "tests/kernels/" + GetParam();
  auto parsed = parse_text(read_file(path), path);
  ASSERT_TRUE(parsed->ok()) << parsed->all_messages();
  for (const auto &f : parsed->module->functions) {
    ast::StmtList copy = ast::clone(f->body);
    EXPECT_TRUE(ast::equal(copy, f->body)) << f->name;
  }
}

INSTANTIATE_TEST_SUITE_P(TestKernels, RoundTrip, ::testing::ValuesIn(kernel_files()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param.substr(0, info.param.size() - 3);
                         });

TEST(RoundTrip, AllTestKernelsAreFound) { EXPECT_GE(kernel_files().size(), 10u); }

TEST(RoundTrip, EqualityNoticesDifferences) {
  auto a = parse_text(jit_function("return a * (b + c)\n"));
  auto b = parse_text(jit_function("return a * b + c\n"));
  auto c = parse_text(jit_function("return a * (b + c)  # same tree, other layout\n"));
  ASSERT_TRUE(a->ok() && b->ok() && c->ok());
  EXPECT_FALSE(ast::equal(*a->module, *b->module));
  EXPECT_TRUE(ast::equal(*a->module, *c->module));
}

}  // namespace
}  // namespace tgrad::testing
