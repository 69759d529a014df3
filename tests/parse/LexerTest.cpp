// The lexer and the indentation-aware token source: Python's layout rules
// (INDENT/DEDENT, implicit and explicit line joining, blank and comment
// lines), literals, and the layout errors with their positions.
#include <gtest/gtest.h>

#include "TileLangLexer.h"
#include "TileLangParser.h"
#include "src/parse/IndentTokenSource.h"

namespace tgrad::parse {
namespace {

using tgrad_antlr::TileLangLexer;
using tgrad_antlr::TileLangParser;

struct Lexed {
  std::string tokens;  // space-separated; layout tokens as <NL> <IN> <DE> <EOF>
  std::vector<std::string> errors;
};

Lexed lex(const std::string &text) {
  SourceManager sm;
  int id = sm.add_file("t.py", text);
  DiagEngine diags(sm);
  antlr4::ANTLRInputStream input(text);
  TileLangLexer lexer(&input);
  lexer.removeErrorListeners();
  IndentTokenSource source(lexer, ChunkLocator{id, 1});
  Lexed out;
  for (int guard = 0; guard < 10000; ++guard) {
    std::unique_ptr<antlr4::Token> t = source.nextToken();
    std::string s;
    switch (t->getType()) {
      case TileLangLexer::NEWLINE: s = "<NL>"; break;
      case TileLangParser::INDENT: s = "<IN>"; break;
      case TileLangParser::DEDENT: s = "<DE>"; break;
      case antlr4::Token::EOF: s = "<EOF>"; break;
      default: s = t->getText();
    }
    out.tokens += (out.tokens.empty() ? "" : " ") + s;
    if (t->getType() == antlr4::Token::EOF) break;
  }
  if (source.error()) diags.report(*source.error());
  for (const Diagnostic &d : diags.diagnostics()) {
    std::string r = diags.render(d);
    out.errors.push_back(r.substr(0, r.find('\n')));
  }
  return out;
}

// Token types of a single-line input, by the lexer alone.
std::vector<size_t> types(const std::string &text) {
  antlr4::ANTLRInputStream input(text);
  TileLangLexer lexer(&input);
  std::vector<size_t> out;
  for (auto t = lexer.nextToken(); t->getType() != antlr4::Token::EOF; t = lexer.nextToken())
    out.push_back(t->getType());
  return out;
}

TEST(Layout, IndentAndDedent) {
  EXPECT_EQ(lex("def f(x):\n    if x:\n        y = 1\n    return y\n").tokens,
            "def f ( x ) : <NL> <IN> if x : <NL> <IN> y = 1 <NL> <DE> return y <NL> <DE> <EOF>");
}

TEST(Layout, SeveralDedentsAtOnce) {
  EXPECT_EQ(lex("a:\n  b:\n    c\nd\n").tokens, "a : <NL> <IN> b : <NL> <IN> c <NL> <DE> <DE> d <NL> <EOF>");
}

TEST(Layout, DedentsAtEndOfInputWithoutFinalNewline) {
  EXPECT_EQ(lex("a:\n    b").tokens, "a : <NL> <IN> b <NL> <DE> <EOF>");
}

TEST(Layout, BlankAndCommentLinesAreInvisible) {
  EXPECT_EQ(lex("a:\n\n    # comment\n  \n    b  # trailing\n\n# at column 0\n    c\n").tokens,
            "a : <NL> <IN> b <NL> c <NL> <DE> <EOF>");
}

TEST(Layout, ImplicitLineJoiningInsideBrackets) {
  EXPECT_EQ(lex("x = f(a,\n      b[1,\n2],\n   {c})\ny\n").tokens,
            "x = f ( a , b [ 1 , 2 ] , { c } ) <NL> y <NL> <EOF>");
}

TEST(Layout, BackslashContinuation) {
  EXPECT_EQ(lex("x = a + \\\n    b\ny\n").tokens, "x = a + b <NL> y <NL> <EOF>");
}

TEST(Layout, CommentInsideBracketsDoesNotEndTheLine) {
  EXPECT_EQ(lex("x = (a,  # first\n     b)\n").tokens, "x = ( a , b ) <NL> <EOF>");
}

TEST(Layout, IndentedFirstLineIsTheBaseLevel) {
  EXPECT_EQ(lex("    def f():\n        pass\n").tokens, "def f ( ) : <NL> <IN> pass <NL> <DE> <EOF>");
}

TEST(Layout, TabsCountAsTheirOwnIndentation) {
  EXPECT_EQ(lex("a:\n\tb\n\tc\n").tokens, "a : <NL> <IN> b <NL> c <NL> <DE> <EOF>");
}

TEST(Layout, WindowsAndOldMacLineEndings) {
  EXPECT_EQ(lex("a:\r\n    b\r\nc\rd\n").tokens, "a : <NL> <IN> b <NL> <DE> c <NL> d <NL> <EOF>");
}

TEST(Layout, FormFeedDoesNotCountAsIndentation) {
  EXPECT_EQ(lex("a:\n    b\n\f    c\n").tokens, "a : <NL> <IN> b <NL> c <NL> <DE> <EOF>");
}

TEST(Layout, MultiLineStringIsOneToken) {
  Lexed l = lex("x = '''a\n  b\nc'''\ny\n");
  EXPECT_EQ(l.tokens, "x = '''a\n  b\nc''' <NL> y <NL> <EOF>");
}

TEST(LayoutErrors, DedentToUnknownLevel) {
  Lexed l = lex("a:\n    b\n  c\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:3:3: error: unindent does not match any outer indentation level");
}

TEST(LayoutErrors, TabsAndSpacesMixedInconsistently) {
  Lexed l = lex("a:\n\tb\n        c\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:3:1: error: inconsistent use of tabs and spaces in indentation");
}

TEST(LayoutErrors, UnclosedBracketPointsAtTheOpening) {
  Lexed l = lex("x = f(a,\n  [b, c]\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:1:6: error: '(' was never closed");
}

TEST(LayoutErrors, MismatchedClosingBracket) {
  Lexed l = lex("x = [a,\n  b)\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:2:4: error: closing ')' does not match opening '[' on line 1");
}

TEST(LayoutErrors, UnmatchedClosingBracket) {
  Lexed l = lex("x = a)\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:1:6: error: unmatched ')'");
}

TEST(LayoutErrors, InvalidCharacter) {
  Lexed l = lex("x = a $ b\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:1:7: error: invalid character '$' in source");
}

TEST(LayoutErrors, UnterminatedString) {
  Lexed l = lex("x = 'abc\ny = 1\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:1:5: error: unterminated string literal");
}

TEST(LayoutErrors, LineContinuationAtEndOfInput) {
  Lexed l = lex("x = a + \\\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_EQ(l.errors[0], "t.py:1:9: error: unexpected end of input after line continuation '\\'");
}

TEST(LayoutErrors, StreamEndsAfterAnError) {
  EXPECT_EQ(lex("x = a)\ny = b\n").tokens, "x = a <EOF>");
}

TEST(LayoutErrors, DeepBracketNestingIsRefused) {
  Lexed l = lex("x = " + std::string(150, '(') + "a" + std::string(150, ')') + "\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_NE(l.errors[0].find("too many nested brackets"), std::string::npos);
}

TEST(LayoutErrors, LongUnaryChainsAreRefused) {
  Lexed l = lex("x = " + std::string(300, '-') + "a\n");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_NE(l.errors[0].find("nested too deeply"), std::string::npos);
}

TEST(Literals, Numbers) {
  for (const char *n : {"0", "42", "1_000", "0xFF", "0X7f_ff", "0o17", "0b1010", "1.", ".5", "1.5", "1e-5", "1E+10",
                        "1_000.000_1e1_0", "0.", "3j", "1.5e3J"}) {
    std::vector<size_t> t = types(n);
    ASSERT_EQ(t.size(), 1u) << n;
    EXPECT_EQ(t[0], static_cast<size_t>(TileLangLexer::NUMBER)) << n;
  }
}

TEST(Literals, Strings) {
  for (const char *s : {"'a'", "\"a\"", "'it\\'s'", "\"\"\"doc\"\"\"", "'''x'''", "r'\\d'", "R\"x\"", "b'x'",
                        "f'{x}'", "rb'x'", "Br'x'", "u'x'", "'\\\\'", "\"a#b\""}) {
    std::vector<size_t> t = types(s);
    ASSERT_EQ(t.size(), 1u) << s;
    EXPECT_EQ(t[0], static_cast<size_t>(TileLangLexer::STRING)) << s;
  }
}

TEST(Literals, KeywordsAreNotNames) {
  EXPECT_NE(types("def")[0], static_cast<size_t>(TileLangLexer::NAME));
  EXPECT_EQ(types("define")[0], static_cast<size_t>(TileLangLexer::NAME));
  EXPECT_EQ(types("_x1")[0], static_cast<size_t>(TileLangLexer::NAME));
}

TEST(Literals, OperatorsTakeTheLongestMatch) {
  EXPECT_EQ(lex("a //= b ** c >>= d != e\n").tokens, "a //= b ** c >>= d != e <NL> <EOF>");
}

}  // namespace
}  // namespace tgrad::parse
