#include "tgrad/parse/Parser.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "TileLangLexer.h"
#include "TileLangParser.h"
#include "antlr4-runtime.h"
#include "src/parse/AstBuilder.h"
#include "src/parse/IndentTokenSource.h"
#include "src/parse/ModuleScanner.h"

namespace tgrad::parse {

using tgrad_antlr::TileLangLexer;
using tgrad_antlr::TileLangParser;

namespace {

// Turns ANTLR's syntax errors into tgrad diagnostics with messages in the
// words of Python's ("expected ':'", "unexpected indent"). Only the first
// error of a chunk is kept: later ones are usually its echoes.
class SyntaxErrorListener : public antlr4::BaseErrorListener {
 public:
  SyntaxErrorListener(const ChunkLocator &locator, const IndentTokenSource &source)
      : loc_(locator), source_(source) {}

  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending, size_t line, size_t column,
                   const std::string &msg, std::exception_ptr) override {
    if (error_ || source_.failed()) return;
    SourceSpan span{loc_.file_id, loc_.pos(line, column), loc_.pos(line, column + 1)};
    if (offending && offending->getType() != antlr4::Token::EOF && offending->getType() != TileLangLexer::NEWLINE &&
        offending->getType() != TileLangParser::INDENT && offending->getType() != TileLangParser::DEDENT)
      span = loc_.span(offending);
    error_ = Diagnostic{Severity::Error, span, message(recognizer, offending, msg)};
  }

  const std::optional<Diagnostic> &error() const { return error_; }

 private:
  // Grammar token names in words: NAME -> "a name".
  static std::string readable(const std::string &token_name) {
    if (token_name == "NAME") return "a name";
    if (token_name == "NUMBER") return "a number";
    if (token_name == "STRING") return "a string";
    if (token_name == "NEWLINE") return "end of line";
    if (token_name == "INDENT" || token_name == "DEDENT") return "";  // not nameable in words
    return token_name;
  }

  static std::string describe(antlr4::Token *t) {
    if (!t) return "input";
    switch (t->getType()) {
      case antlr4::Token::EOF: return "end of input";
      case TileLangLexer::NEWLINE: return "end of line";
      case TileLangParser::INDENT: return "indent";
      case TileLangParser::DEDENT: return "dedent";
      default: return "'" + t->getText() + "'";
    }
  }

  // " after 'if' statement on line 7": the statement that owns the suite
  // being parsed (else/elif clauses are rules of their own), in file lines.
  std::string after_what(antlr4::ParserRuleContext *ctx) const {
    if (!dynamic_cast<TileLangParser::SuiteContext *>(ctx)) return "";
    auto *owner = dynamic_cast<antlr4::ParserRuleContext *>(ctx->parent);
    if (!owner) return "";
    const std::string line = std::to_string(loc_.pos(owner->getStart()->getLine(), 0).line);
    if (dynamic_cast<TileLangParser::FuncdefContext *>(owner)) return " after function definition on line " + line;
    if (dynamic_cast<TileLangParser::ClassdefContext *>(owner)) return " after class definition on line " + line;
    return " after '" + owner->getStart()->getText() + "' statement on line " + line;
  }

  std::string message(antlr4::Recognizer *recognizer, antlr4::Token *offending, const std::string &msg) const {
    if (offending && offending->getType() == TileLangParser::INDENT) return "unexpected indent";
    auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
    antlr4::misc::IntervalSet expected;
    if (parser) expected = parser->getExpectedTokens();
    if (expected.contains(static_cast<size_t>(TileLangParser::INDENT)))
      return "expected an indented block" + (parser ? after_what(parser->getContext()) : std::string());
    // "missing ':' at 'x'": name the missing token.
    if (msg.rfind("missing ", 0) == 0) {
      std::string what = readable(msg.substr(8, msg.find(" at ") - 8));
      return "invalid syntax: expected " + what + " before " + describe(offending);
    }
    // A short list of literal alternatives reads well: "expected ')' or ','".
    if (parser && !expected.isEmpty() && expected.size() <= 3) {
      std::string list;
      bool all_literal = true;
      const antlr4::dfa::Vocabulary &vocab = parser->getVocabulary();
      std::vector<ssize_t> types = expected.toList();
      for (size_t i = 0; i < types.size(); ++i) {
        std::string name = vocab.getLiteralName(types[i]);
        if (name.empty()) name = readable(vocab.getSymbolicName(types[i]));
        if (name.empty()) {
          all_literal = false;
          break;
        }
        if (i) list += i + 1 == types.size() ? " or " : ", ";
        list += name;
      }
      if (all_literal) return "invalid syntax: expected " + list + ", found " + describe(offending);
    }
    return "invalid syntax: unexpected " + describe(offending);
  }

  const ChunkLocator &loc_;
  const IndentTokenSource &source_;
  std::optional<Diagnostic> error_;
};

// The first byte offset where `text` is not valid UTF-8, or npos.
size_t invalid_utf8_offset(const std::string &text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > text.size()) return i;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid too.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += n;
  }
  return std::string::npos;
}

bool check_encoding(const SourceManager &sources, int file_id, DiagEngine &diags) {
  const std::string &text = sources.text(file_id);
  size_t bad = invalid_utf8_offset(text);
  if (bad == std::string::npos) return true;
  int line = 1;
  while (line < sources.line_count(file_id) && sources.line_start(file_id, line + 1) <= bad) ++line;
  int column = 1;
  for (size_t i = sources.line_start(file_id, line); i < bad; ++i)
    column += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
  diags.error({file_id, {line, column}, {line, column + 1}}, "file is not valid UTF-8");
  return false;
}

// The token source's layout error and the parser's first syntax error, in
// source order. An unclosed bracket explains anything the parser saw after
// it, so then it is reported alone.
void report_layout_and_syntax_errors(const IndentTokenSource &source, const SyntaxErrorListener &listener,
                                     DiagEngine &diags) {
  const std::optional<Diagnostic> &layout = source.error();
  const std::optional<Diagnostic> &syntax = listener.error();
  if (layout && (source.failed_on_unclosed_bracket() || !syntax)) return diags.report(*layout);
  if (!layout) {
    if (syntax) diags.report(*syntax);
    return;
  }
  auto before = [](const SourcePos &a, const SourcePos &b) {
    return a.line < b.line || (a.line == b.line && a.column < b.column);
  };
  bool syntax_first = before(syntax->span.begin, layout->span.begin);
  diags.report(syntax_first ? *syntax : *layout);
  diags.report(syntax_first ? *layout : *syntax);
}

void parse_chunk(Chunk &chunk, int file_id, DiagEngine &diags, ast::Module &module) {
  if (chunk.kind == Chunk::Kind::HostBlock) {  // a module-level if/try binding host values: kept as text
    for (const std::string &name : chunk.bound_names) module.host_definitions.push_back({name, chunk.text});
    return;
  }
  if (chunk.kind == Chunk::Kind::HostName) {  // Python, not tile language: kept as text
    module.host_names.push_back(chunk.host_name);
    if (!chunk.conditional) module.host_definitions.push_back({chunk.host_name, chunk.text});
    return;
  }
  if (chunk.kind == Chunk::Kind::Alias) {  // NAME = a.b.c: resolved like an import
    // After a jit function of that name (`if not SUPPORTED: def gather(...)`
    // / `else: gather = tl.gather`): the later binding wins, as between
    // two definitions of a function.
    for (auto f = module.functions.begin(); f != module.functions.end(); ++f)
      if ((*f)->name == chunk.host_name) {
        diags.warning(chunk.span, "'" + chunk.host_name + "' is bound again here (to " + chunk.alias_of + ")" +
                                      (chunk.conditional ? " (tgrad cannot tell which module-level branch Python takes)" : "") +
                                      "; tgrad uses this later binding");
        diags.note((*f)->name_span, "the jit function '" + chunk.host_name + "' defined earlier is here");
        module.functions.erase(f);
        break;
      }
    ast::Import alias;
    alias.span = chunk.span;
    alias.assignment = true;
    alias.module = chunk.alias_of;
    alias.names = {{chunk.alias_of, chunk.host_name}};
    alias.conditional = chunk.conditional;
    alias.group = chunk.group;
    module.imports.push_back(std::move(alias));
    return;
  }
  ChunkLocator locator{file_id, chunk.first_line};
  antlr4::ANTLRInputStream input(chunk.text);
  TileLangLexer lexer(&input);
  lexer.removeErrorListeners();
  IndentTokenSource source(lexer, locator);
  antlr4::CommonTokenStream tokens(&source);
  TileLangParser parser(&tokens);
  parser.removeErrorListeners();
  SyntaxErrorListener listener(locator, source);
  parser.addErrorListener(&listener);
  // A Python function Triton calls while compiling (@triton.constexpr_function) may use what tile language does
  // not have (comprehensions, `math.log2`): where it does not read as tile language, it is kept as host Python,
  // its errors unreported (Triton runs it as Python; a kernel whose gradient depends on it says so).
  const bool compile_time_helper =
      chunk.kind == Chunk::Kind::Function &&
      std::any_of(chunk.decorators.begin(), chunk.decorators.end(),
                  [](const ast::Decorator &d) { return d.kind == ast::DecoratorKind::ConstexprFunction; });
  DiagEngine trial(diags.sources());
  DiagEngine &sink = compile_time_helper ? trial : diags;
  auto keep_as_host_python = [&](const std::string &name) {
    module.host_names.push_back(name);
    if (!chunk.conditional) module.host_definitions.push_back({name, chunk.text});
  };
  // Reports the chunk's syntax errors; true if there were any.
  auto report_syntax_errors = [&]() {
    report_layout_and_syntax_errors(source, listener, sink);
    return source.failed() || listener.error().has_value();
  };

  // Two-stage parsing: SLL prediction is linear and decides every valid
  // chunk of this grammar; only when it gives up (a syntax error, or an input
  // SLL cannot decide) does the chunk run again under full LL with the error
  // listener, which is what reports the located syntax error.
  auto parse = [&](auto rule) {
    auto *simulator = parser.getInterpreter<antlr4::atn::ParserATNSimulator>();
    simulator->setPredictionMode(antlr4::atn::PredictionMode::SLL);
    parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
    try {
      return (parser.*rule)();
    } catch (const antlr4::ParseCancellationException &) {
      tokens.seek(0);
      parser.reset();
      simulator->setPredictionMode(antlr4::atn::PredictionMode::LL);
      parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
      return (parser.*rule)();
    }
  };

  switch (chunk.kind) {
    case Chunk::Kind::Function: {
      TileLangParser::Function_chunkContext *tree = parse(&TileLangParser::function_chunk);
      if (report_syntax_errors()) {
        if (compile_time_helper) keep_as_host_python(chunk.host_name);
        return;
      }
      std::unique_ptr<ast::Function> f = build_function(tree->funcdef(), chunk, locator, sink);
      if (compile_time_helper && trial.has_errors()) {
        keep_as_host_python(chunk.host_name);
        return;
      }
      const std::string defined_as = f->name;
      f->conditional = chunk.conditional;
      f->group = chunk.group;
      if (!chunk.rename_to.empty()) f->name = chunk.rename_to;
      const std::string binding = chunk.rename_to.empty() ? "" : " (bound by `" + f->name + " = " + defined_as + "`)";
      // Alternatives in the branches of one module-level if (`if TRITON3: def softplus ... else: def softplus
      // ...`): the later in use, the earlier kept as its alternative; sema::supersede_fallback_functions may
      // choose that one, where only it compiles with Triton 3.
      for (auto &existing : module.functions)
        if (existing->name == f->name && existing->conditional && f->conditional && existing->group == f->group) {
          diags.warning(f->name_span, "jit function '" + f->name + "' is defined again here" + binding +
                                          ", in another branch of the same module-level if (tgrad cannot tell which "
                                          "branch Python takes): tgrad uses the definition whose code Triton 3 has "
                                          "functions for, else this later one");
          diags.note(existing->name_span, "the earlier definition of '" + f->name + "' is here");
          f->alternative = std::move(existing);
          existing = std::move(f);
          return;
        }
      // A later definition replaces an earlier one, as in Python.
      for (auto &existing : module.functions)
        if (existing->name == f->name) {
          diags.warning(f->name_span, "jit function '" + f->name + "' is defined again here" + binding +
                                          " (tgrad cannot tell which module-level branch Python takes); tgrad uses "
                                          "this later definition");
          diags.note(existing->name_span, "the earlier definition of '" + f->name + "' is here");
          existing = std::move(f);
          return;
        }
      module.functions.push_back(std::move(f));
      return;
    }
    case Chunk::Kind::Import: {
      TileLangParser::Import_chunkContext *tree = parse(&TileLangParser::import_chunk);
      if (report_syntax_errors()) return;
      ast::Import imp;
      imp.conditional = chunk.conditional;
      imp.group = chunk.group;
      if (build_import(tree->import_stmt(), locator, diags, imp)) module.imports.push_back(std::move(imp));
      return;
    }
    case Chunk::Kind::HostName:
    case Chunk::Kind::HostBlock:
    case Chunk::Kind::Alias: return;  // above
    case Chunk::Kind::Constant: {
      TileLangParser::Constant_chunkContext *tree = parse(&TileLangParser::constant_chunk);
      if (report_syntax_errors()) return;
      ast::Constant c;
      c.stmt = build_constant(tree->expr_stmt(), locator, diags, c.name);
      if (!c.stmt) return;
      c.span = c.stmt->span;
      // Defined again in another branch of a module-level if or try: Python
      // takes one branch, on the host; tgrad keeps the first (the try's body,
      // the if's first branch) and says so.
      for (const ast::Constant &existing : module.constants)
        if (existing.name == c.name) {
          const std::string why =
              chunk.conditional ? " (tgrad cannot tell which module-level branch Python takes)" : "";
          diags.warning(c.span, "constant '" + c.name + "' is defined again here" + why + "; tgrad uses the first definition");
          diags.note(existing.span, "the first definition of '" + c.name + "' is here");
          return;
        }
      module.constants.push_back(std::move(c));
      return;
    }
  }
}

}  // namespace

std::unique_ptr<ast::Module> parse_module(const SourceManager &sources, int file_id, DiagEngine &diags) {
  // ANTLR's prediction cache (the generated parser's static DFA) is shared
  // by every parser and updated while parsing: one parse at a time (the
  // generic-type trials differentiate on several threads, and reverse mode
  // parses the code it emits).
  static std::mutex one_parse_at_a_time;
  std::lock_guard<std::mutex> lock(one_parse_at_a_time);
  auto module = std::make_unique<ast::Module>();
  module->file_id = file_id;
  if (!check_encoding(sources, file_id, diags)) return module;
  std::vector<Chunk> chunks = scan_module(sources, file_id, diags);
  for (Chunk &chunk : chunks) parse_chunk(chunk, file_id, diags, *module);
  return module;
}

}  // namespace tgrad::parse
