// Maps positions inside a parsed chunk back to the file. The module scanner
// hands the ANTLR parser one chunk of the file at a time (a function, an
// import, a constant), always starting at the beginning of a line, so only
// lines need shifting; ANTLR's 0-based columns become 1-based.
#pragma once

#include <string>

#include "TileLangLexer.h"
#include "TileLangParser.h"
#include "antlr4-runtime.h"
#include "tgrad/diag/Diagnostics.h"

namespace tgrad::parse {

// Number of code points in UTF-8 text (ANTLR counts columns in code points).
inline int code_points(const std::string &s) {
  int n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

struct ChunkLocator {
  int file_id = -1;
  int first_line = 1;  // file line of the chunk's line 1

  SourcePos pos(size_t chunk_line, size_t column0) const {
    return {first_line + static_cast<int>(chunk_line) - 1, static_cast<int>(column0) + 1};
  }

  SourceSpan span(const antlr4::Token *t) const {
    if (!t) return {};
    SourceSpan s{file_id, pos(t->getLine(), t->getCharPositionInLine()), {}};
    s.end = end_of(t);
    return s;
  }

  SourceSpan span(const antlr4::Token *start, const antlr4::Token *stop) const {
    if (!start) return {};
    // (The end of one token only: each end_of converts the token's text from code points.)
    const bool to_stop =
        stop && stop->getType() != antlr4::Token::EOF && stop->getTokenIndex() >= start->getTokenIndex();
    return {file_id, pos(start->getLine(), start->getCharPositionInLine()), end_of(to_stop ? stop : start)};
  }

  SourceSpan span(antlr4::ParserRuleContext *ctx) const { return span(ctx->getStart(), ctx->getStop()); }

  SourceSpan span(antlr4::tree::TerminalNode *node) const { return span(node->getSymbol()); }

 private:
  // The position just after the token's last character (multi-line strings
  // end on a later line).
  SourcePos end_of(const antlr4::Token *t) const {
    // A token the lexer read covers its input, whose indices count code points
    // as columns do: its end needs no text (converted from code points at every
    // getText). Not a string (it may span lines), nor one the token source made
    // up (NEWLINE, INDENT, DEDENT, EOF) or error recovery conjured (no input
    // indices): their text says where they end.
    const size_t type = t->getType(), start = t->getStartIndex(), stop = t->getStopIndex();
    if (type != tgrad_antlr::TileLangLexer::STRING && type != tgrad_antlr::TileLangLexer::NEWLINE &&
        type != tgrad_antlr::TileLangParser::INDENT && type != tgrad_antlr::TileLangParser::DEDENT &&
        type != antlr4::Token::EOF && start != INVALID_INDEX && stop != INVALID_INDEX && start <= stop)
      return pos(t->getLine(), t->getCharPositionInLine() + (stop - start + 1));
    std::string text = t->getText();
    size_t last_break = text.find_last_of('\n');
    if (last_break == std::string::npos)
      return pos(t->getLine(), t->getCharPositionInLine() + code_points(text));
    size_t breaks = 0;
    for (char c : text) breaks += (c == '\n');
    return pos(t->getLine() + breaks, code_points(text.substr(last_break + 1)));
  }
};

}  // namespace tgrad::parse
