// IndentTokenSource: the token stream the TileLang parser reads.
//
// It wraps the ANTLR-generated lexer and applies Python's layout rules, which
// a context-free lexer cannot: line breaks inside (), [] and {} are dropped
// (implicit line joining); blank and comment-only lines vanish; one NEWLINE
// ends each logical line; a deeper indentation emits INDENT and a shallower
// one emits a DEDENT per closed level. The indentation of the chunk's first
// line is the base level (a jit function nested in a module-level `if` is
// indented).
//
// Layout errors (bad dedent, mixed tabs and spaces, unclosed or mismatched
// brackets, invalid characters, unterminated strings) are recorded with their
// exact position, and the source then ends the stream so the parser does not
// add follow-on noise. The parser glue decides how the recorded error and the
// parser's own first syntax error are reported (src/parse/Parser.cpp).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "TileLangLexer.h"
#include "TileLangParser.h"
#include "antlr4-runtime.h"
#include "src/parse/ChunkLocator.h"

namespace tgrad::parse {

class IndentTokenSource : public antlr4::TokenSource {
 public:
  IndentTokenSource(tgrad_antlr::TileLangLexer &lexer, const ChunkLocator &locator);

  std::unique_ptr<antlr4::Token> nextToken() override;
  size_t getLine() const override { return lexer_.getLine(); }
  size_t getCharPositionInLine() override { return lexer_.getCharPositionInLine(); }
  antlr4::CharStream *getInputStream() override { return lexer_.getInputStream(); }
  std::string getSourceName() override { return lexer_.getSourceName(); }
  antlr4::TokenFactory<antlr4::CommonToken> *getTokenFactory() override { return lexer_.getTokenFactory(); }

  bool failed() const { return error_.has_value(); }
  // The layout error that ended the stream, if any.
  const std::optional<Diagnostic> &error() const { return error_; }
  // True when that error is an opening bracket never closed: then whatever
  // the parser complained about first is its consequence, not a second error.
  bool failed_on_unclosed_bracket() const { return unclosed_bracket_; }

  // Limits that keep the recursive-descent parser and the recursive passes
  // over the AST far from the end of the stack on any input. Real kernels
  // stay far below them (Python itself allows 200 nested brackets).
  static constexpr size_t kMaxBracketDepth = 100;
  static constexpr size_t kMaxNestingOperators = 200;  // unary - + ~ not, **, if, lambda per line
  static constexpr size_t kMaxTokensPerLine = 10000;

 private:
  struct OpenBracket {
    std::string text;
    size_t line, column;
  };

  void fill();
  void on_first_token_of_line(const antlr4::Token &t);
  // `text`: the token's text, read once per token (ANTLR converts it from the
  // input's code points on every getText()).
  void track_bracket(const antlr4::Token &t, const std::string &text);
  void check_limits(const antlr4::Token &t, const std::string &text);
  void record_end(const antlr4::Token &t, const std::string &text);
  void finish(size_t line, size_t column);
  void fail(size_t line, size_t column, std::string message, size_t width = 1);
  void push_synthetic(size_t type, const std::string &text, size_t line, size_t column);

  tgrad_antlr::TileLangLexer &lexer_;
  ChunkLocator locator_;
  std::deque<std::unique_ptr<antlr4::Token>> pending_;
  std::vector<std::string> indents_;  // indentation strings; front is the base
  std::vector<OpenBracket> brackets_;
  std::string line_indent_;       // leading whitespace of the line the next token starts
  bool at_line_start_ = true;     // no token emitted yet on the current logical line
  size_t line_tokens_ = 0;        // tokens on the current logical line
  size_t line_nesting_ops_ = 0;   // operators on it that nest the parse (see limits)
  std::string previous_text_;     // text of the previous token on the line
  size_t previous_type_ = 0;
  size_t end_line_ = 1, end_column_ = 0;  // just after the last real token
  bool after_continuation_ = false;       // the previous raw token was a '\' line join
  size_t continuation_line_ = 0, continuation_column_ = 0;
  bool finished_ = false;
  std::optional<Diagnostic> error_;
  bool unclosed_bracket_ = false;
};

}  // namespace tgrad::parse
