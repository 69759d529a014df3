// The diagnostics suite: each file in tests/diag/ is a malformed kernel file
// whose expected diagnostics are written at its top, one per line, as
//   # expect: LINE:COL: SEVERITY: MESSAGE
// The file's diagnostics must be exactly these, in order (file name left out).
#include <algorithm>

#include <gtest/gtest.h>

#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {
namespace {

const char *const kDiagDir = "tests/diag";

std::vector<std::string> diag_files() { return python_files(kDiagDir); }

std::vector<std::string> expectations(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  const std::string tag = "# expect: ";
  while (std::getline(in, line))
    if (line.rfind(tag, 0) == 0) out.push_back(line.substr(tag.size()));
  return out;
}

class DiagnosticsSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(DiagnosticsSuite, ReportsExactlyTheExpectedDiagnostics) {
  const std::string name = GetParam();
  const std::string path = std::string(kDiagDir) + "/" + name;
  const std::string text = read_file(path);
  std::vector<std::string> expected = expectations(text);
  ASSERT_FALSE(expected.empty()) << path << " has no '# expect:' lines";
  auto parsed = parse_text(text, name);
  std::vector<std::string> actual;
  for (const std::string &m : parsed->messages()) actual.push_back(m.substr(name.size() + 1));  // drop "name:"
  std::string expected_text, actual_text;
  for (const auto &e : expected) expected_text += e + "\n";
  for (const auto &a : actual) actual_text += a + "\n";
  EXPECT_EQ(expected_text, actual_text) << "Input: " << path;
  // An input with an expected error must fail to parse.
  bool expects_error = std::any_of(expected.begin(), expected.end(),
                                   [](const std::string &e) { return e.find(": error: ") != std::string::npos; });
  EXPECT_EQ(expects_error, !parsed->ok());
}

INSTANTIATE_TEST_SUITE_P(AllInputs, DiagnosticsSuite, ::testing::ValuesIn(diag_files()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string n = info.param.substr(0, info.param.size() - 3);
                           for (char &c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(DiagnosticsSuite, HasAtLeastTwentyInputs) { EXPECT_GE(diag_files().size(), 20u); }

TEST(DiagnosticRendering, ShowsLineAndCaretUnderTheColumn) {
  auto parsed = parse_text(jit_function("a = (x +\n"));
  ASSERT_FALSE(parsed->ok());
  std::string rendered = parsed->diags->render(parsed->diags->diagnostics()[0]);
  EXPECT_EQ(rendered,
            "t.py:6:9: error: '(' was never closed\n"
            "    a = (x +\n"
            "        ^\n");
}

TEST(DiagnosticRendering, UnderlinesASpanOnOneLine) {
  auto parsed = parse_text(jit_function("a = lambda q: q\n"));
  ASSERT_FALSE(parsed->ok());
  std::string rendered = parsed->diags->render(parsed->diags->diagnostics()[0]);
  EXPECT_NE(rendered.find("\n        ^~~~~~~~~~~\n"), std::string::npos) << rendered;
}

TEST(DiagnosticRendering, KeepsTabsSoTheCaretLinesUp) {
  SourceManager sm;
  int id = sm.add_file("k.py", "\tx = $\n");
  DiagEngine diags(sm);
  diags.error({id, {1, 6}, {1, 7}}, "invalid character");
  EXPECT_EQ(diags.render(diags.diagnostics()[0]), "k.py:1:6: error: invalid character\n\tx = $\n\t    ^\n");
}

TEST(DiagnosticRendering, ReportsSeveralErrorsInOneRun) {
  auto parsed = parse_text(jit_function("a = lambda q: q\nwith x:\n    pass\nglobal y\n"));
  EXPECT_EQ(parsed->messages().size(), 3u) << parsed->all_messages();
}

}  // namespace
}  // namespace tgrad::testing
