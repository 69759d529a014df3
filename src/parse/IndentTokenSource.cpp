#include "src/parse/IndentTokenSource.h"

namespace tgrad::parse {

using tgrad_antlr::TileLangLexer;
using tgrad_antlr::TileLangParser;

namespace {

// Indentation is the whitespace after the last form feed: Python ignores a
// form feed's column when it measures indentation.
std::string without_form_feeds(const std::string &indent) {
  size_t last_feed = indent.find_last_of('\f');
  return last_feed == std::string::npos ? indent : indent.substr(last_feed + 1);
}

// The leading whitespace of the line a NEWLINE token ends on.
std::string indent_after_newline(const std::string &newline_text) {
  size_t last_break = newline_text.find_last_of("\r\n");
  return without_form_feeds(last_break == std::string::npos ? newline_text : newline_text.substr(last_break + 1));
}

const char *closing_for(const std::string &open) {
  if (open == "(") return ")";
  if (open == "[") return "]";
  return "}";
}

}  // namespace

IndentTokenSource::IndentTokenSource(TileLangLexer &lexer, const ChunkLocator &locator)
    : lexer_(lexer), locator_(locator) {
  // The chunk starts at a line start; its first line's leading whitespace is
  // skipped by the lexer, so read it off the input.
  std::string text = lexer_.getInputStream()->toString();
  size_t n = 0;
  while (n < text.size() && (text[n] == ' ' || text[n] == '\t' || text[n] == '\f')) ++n;
  line_indent_ = without_form_feeds(text.substr(0, n));
}

std::unique_ptr<antlr4::Token> IndentTokenSource::nextToken() {
  while (pending_.empty()) fill();
  std::unique_ptr<antlr4::Token> t = std::move(pending_.front());
  pending_.pop_front();
  return t;
}

void IndentTokenSource::push_synthetic(size_t type, const std::string &text, size_t line, size_t column) {
  // The token needs a source: ANTLR's error recovery copies it when it
  // conjures up a missing token.
  auto t = std::make_unique<antlr4::CommonToken>(std::make_pair(this, lexer_.getInputStream()), type,
                                                 antlr4::Token::DEFAULT_CHANNEL, 0, 0);
  t->setText(text);
  t->setLine(line);
  t->setCharPositionInLine(column);
  pending_.push_back(std::move(t));
}

void IndentTokenSource::fail(size_t line, size_t column, std::string message, size_t width) {
  SourceSpan span{locator_.file_id, locator_.pos(line, column), locator_.pos(line, column + width)};
  error_ = Diagnostic{Severity::Error, span, std::move(message)};
  // End the stream: after a layout error the parser would only add noise.
  pending_.clear();
  finished_ = true;
  push_synthetic(antlr4::Token::EOF, "<EOF>", line, column);
}

void IndentTokenSource::finish(size_t line, size_t column) {
  if (!brackets_.empty()) {
    const OpenBracket &b = brackets_.back();
    unclosed_bracket_ = true;
    return fail(b.line, b.column, "'" + b.text + "' was never closed");
  }
  if (!at_line_start_) push_synthetic(TileLangLexer::NEWLINE, "\n", line, column);
  for (size_t i = 1; i < indents_.size(); ++i) push_synthetic(TileLangParser::DEDENT, "<dedent>", line, column);
  indents_.resize(std::min<size_t>(indents_.size(), 1));
  push_synthetic(antlr4::Token::EOF, "<EOF>", line, column);
  finished_ = true;
}

void IndentTokenSource::fill() {
  if (finished_) {
    // The parser may ask past EOF; keep answering EOF.
    push_synthetic(antlr4::Token::EOF, "<EOF>", end_line_, end_column_);
    return;
  }
  std::unique_ptr<antlr4::Token> t = lexer_.nextToken();
  const size_t type = t->getType();
  if (type == antlr4::Token::EOF) {
    if (after_continuation_)
      return fail(continuation_line_, continuation_column_, "unexpected end of input after line continuation '\\'");
    // Tokens that close the input sit at the end of its last token, so a
    // diagnostic about them ("expected an indented block") quotes a real line.
    return finish(end_line_, end_column_);
  }
  if (type == TileLangLexer::LINE_CONTINUATION) {
    after_continuation_ = true;
    continuation_line_ = t->getLine();
    continuation_column_ = t->getCharPositionInLine();
    return;
  }
  after_continuation_ = false;

  if (type == TileLangLexer::NEWLINE) {
    if (!brackets_.empty()) return;  // implicit line joining
    line_indent_ = indent_after_newline(t->getText());
    if (at_line_start_) return;  // blank or comment-only line
    at_line_start_ = true;
    line_tokens_ = line_nesting_ops_ = 0;
    previous_text_.clear();
    previous_type_ = 0;
    push_synthetic(TileLangLexer::NEWLINE, "\n", t->getLine(), t->getCharPositionInLine());
    return;
  }

  if (type == TileLangLexer::INVALID_CHAR) {
    std::string text = t->getText();
    std::string message = "invalid character '" + text + "' in source";
    if (text == "\\") message = "unexpected character after line continuation '\\'";
    return fail(t->getLine(), t->getCharPositionInLine(), message);
  }
  if (type == TileLangLexer::UNTERMINATED_STRING)
    return fail(t->getLine(), t->getCharPositionInLine(), "unterminated string literal");

  if (at_line_start_) {
    on_first_token_of_line(*t);
    if (failed()) return;
    at_line_start_ = false;
  }
  std::string text = t->getText();
  check_limits(*t, text);
  if (failed()) return;
  track_bracket(*t, text);
  if (failed()) return;
  record_end(*t, text);
  previous_text_ = std::move(text);
  previous_type_ = type;
  pending_.push_back(std::move(t));
}

void IndentTokenSource::on_first_token_of_line(const antlr4::Token &t) {
  const size_t line = t.getLine(), column = t.getCharPositionInLine();
  if (indents_.empty()) {  // the chunk's first token fixes the base level
    indents_.push_back(line_indent_);
    return;
  }
  const std::string &current = indents_.back();
  if (line_indent_ == current) return;
  // Tabs and spaces mixed so that neither indentation extends the other:
  // their relative depth depends on the tab width, so Python refuses it.
  auto extends = [](const std::string &longer, const std::string &shorter) {
    return longer.compare(0, shorter.size(), shorter) == 0;
  };
  if (!extends(line_indent_, current) && !extends(current, line_indent_))
    return fail(line, 0, "inconsistent use of tabs and spaces in indentation", column);
  if (line_indent_.size() > current.size()) {
    indents_.push_back(line_indent_);
    push_synthetic(TileLangParser::INDENT, "<indent>", line, column);
    return;
  }
  while (indents_.size() > 1 && indents_.back().size() > line_indent_.size()) {
    indents_.pop_back();
    push_synthetic(TileLangParser::DEDENT, "<dedent>", line, column);
  }
  if (indents_.back() != line_indent_) {
    if (indents_.back().size() == line_indent_.size())
      return fail(line, 0, "inconsistent use of tabs and spaces in indentation", column);
    return fail(line, column, "unindent does not match any outer indentation level");
  }
}

void IndentTokenSource::record_end(const antlr4::Token &t, const std::string &text) {
  size_t last_break = text.find_last_of('\n');
  if (last_break == std::string::npos) {
    end_line_ = t.getLine();
    end_column_ = t.getCharPositionInLine() + code_points(text);
    return;
  }
  end_line_ = t.getLine();
  for (char c : text) end_line_ += (c == '\n');
  end_column_ = code_points(text.substr(last_break + 1));
}

void IndentTokenSource::check_limits(const antlr4::Token &t, const std::string &text) {
  if (++line_tokens_ > kMaxTokensPerLine)
    return fail(t.getLine(), t.getCharPositionInLine(),
                "logical line too long: more than " + std::to_string(kMaxTokensPerLine) + " tokens");
  // A + - ~ is unary where an operand is expected: at the start of the line or
  // after an operator, an opening bracket, a comma or a keyword. (Asked only
  // of those three tokens: it compares the previous token with a dozen words.)
  auto operand_expected = [&] {
    return previous_text_.empty() ||
           (previous_type_ != TileLangLexer::NAME && previous_type_ != TileLangLexer::NUMBER &&
            previous_type_ != TileLangLexer::STRING && previous_text_ != ")" && previous_text_ != "]" &&
            previous_text_ != "}") ||
           previous_text_ == "not" || previous_text_ == "and" || previous_text_ == "or" || previous_text_ == "in" ||
           previous_text_ == "is" || previous_text_ == "return" || previous_text_ == "if" || previous_text_ == "else";
  };
  bool nests = text == "not" || text == "**" || text == "if" || text == "lambda" ||
               ((text == "-" || text == "+" || text == "~") && operand_expected());
  if (nests && ++line_nesting_ops_ > kMaxNestingOperators)
    return fail(t.getLine(), t.getCharPositionInLine(),
                "expression nested too deeply: more than " + std::to_string(kMaxNestingOperators) +
                    " unary, '**', 'not' or conditional operators in one line; split it into several assignments");
  if ((text == "(" || text == "[" || text == "{") && brackets_.size() >= kMaxBracketDepth)
    return fail(t.getLine(), t.getCharPositionInLine(),
                "too many nested brackets (more than " + std::to_string(kMaxBracketDepth) + ")");
}

void IndentTokenSource::track_bracket(const antlr4::Token &t, const std::string &text) {
  if (text == "(" || text == "[" || text == "{") {
    brackets_.push_back({text, t.getLine(), t.getCharPositionInLine()});
    return;
  }
  if (text != ")" && text != "]" && text != "}") return;
  if (brackets_.empty())
    return fail(t.getLine(), t.getCharPositionInLine(), "unmatched '" + text + "'");
  const OpenBracket &open = brackets_.back();
  if (text != closing_for(open.text)) {
    std::string message = "closing '" + text + "' does not match opening '" + open.text + "'";
    if (open.line != t.getLine())
      message += " on line " + std::to_string(locator_.pos(open.line, open.column).line);
    return fail(t.getLine(), t.getCharPositionInLine(), message);
  }
  brackets_.pop_back();
}

}  // namespace tgrad::parse
