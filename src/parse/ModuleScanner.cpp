#include "src/parse/ModuleScanner.h"

#include <map>

#include "TileLangLexer.h"
#include "antlr4-runtime.h"
#include "src/parse/ChunkLocator.h"

namespace tgrad::parse {

using tgrad_antlr::TileLangLexer;

namespace {

struct Tok {
  size_t type;
  std::string text;
  int line;       // 1-based
  int column;     // 0-based, code points
  size_t start;   // code point index into the input
  size_t stop;
  int end_line;   // line of the token's last character
};

struct LogicalLine {
  size_t first, last;  // token indices, inclusive
};

class Scanner {
 public:
  Scanner(const SourceManager &sources, int file_id, DiagEngine &diags)
      : sources_(sources), file_id_(file_id), diags_(diags), input_(sources.text(file_id)) {}

  std::vector<Chunk> run() {
    lex();
    scan_block(0, lines_.size(), /*top_level=*/true);
    return std::move(chunks_);
  }

 private:
  void lex() {
    TileLangLexer lexer(&input_);
    lexer.removeErrorListeners();  // INVALID_CHAR catches every character
    int depth = 0;
    bool line_open = false;
    for (;;) {
      std::unique_ptr<antlr4::Token> t = lexer.nextToken();
      if (t->getType() == antlr4::Token::EOF) break;
      if (t->getChannel() != antlr4::Token::DEFAULT_CHANNEL) continue;  // '\' line joins
      std::string text = t->getText();
      if (t->getType() == TileLangLexer::NEWLINE) {
        if (depth == 0 && line_open) {
          lines_.back().last = toks_.size() - 1;
          line_open = false;
        }
        continue;
      }
      int breaks = 0;
      for (char c : text) breaks += (c == '\n');
      toks_.push_back({t->getType(), text, static_cast<int>(t->getLine()),
                       static_cast<int>(t->getCharPositionInLine()), t->getStartIndex(), t->getStopIndex(),
                       static_cast<int>(t->getLine()) + breaks});
      if (!line_open) {
        lines_.push_back({toks_.size() - 1, toks_.size() - 1});
        line_open = true;
      }
      if (text == "(" || text == "[" || text == "{") ++depth;
      if ((text == ")" || text == "]" || text == "}") && depth > 0) --depth;
    }
    if (line_open) lines_.back().last = toks_.size() - 1;
  }

  const Tok &first(size_t line) const { return toks_[lines_[line].first]; }
  size_t size(size_t line) const { return lines_[line].last - lines_[line].first + 1; }
  const std::string &word(size_t line, size_t i) const {
    static const std::string none;
    return i < size(line) ? toks_[lines_[line].first + i].text : none;
  }

  SourceSpan span_of(size_t first_tok, size_t last_tok) const {
    const Tok &a = toks_[first_tok], &b = toks_[last_tok];
    SourceSpan s{file_id_, {a.line, a.column + 1}, {}};
    if (b.end_line == b.line)
      s.end = {b.line, b.column + 1 + code_points(b.text)};
    else
      s.end = {b.end_line, code_points(b.text.substr(b.text.find_last_of('\n') + 1)) + 1};
    return s;
  }

  std::string text_of(size_t first_tok, size_t last_tok) {
    return input_.getText(antlr4::misc::Interval(toks_[first_tok].start, toks_[last_tok].stop));
  }

  // Whole source lines [first_line, last_line].
  std::string lines_text(int first_line, int last_line) const {
    size_t begin = sources_.line_start(file_id_, first_line);
    size_t end = sources_.line_start(file_id_, last_line + 1);
    return sources_.text(file_id_).substr(begin, end - begin);
  }

  void add_chunk(Chunk::Kind kind, size_t first_line_index, size_t end_line_index, std::vector<ast::Decorator> decos,
                 std::string alias = "") {
    Chunk c;
    c.kind = kind;
    c.first_line = first(first_line_index).line;
    c.text = lines_text(c.first_line, toks_[lines_[end_line_index - 1].last].end_line);
    c.decorators = std::move(decos);
    c.jit_alias = std::move(alias);
    chunks_.push_back(std::move(c));
  }

  // A module-level if/try statement: its first line, the line after its last branch, and the chunks before it
  // (those after it are its branches').
  struct Compound {
    size_t first_line, end_line, chunks_before;
  };

  // Statements of one block: lines [b, e) whose first token is at the
  // block's column; deeper lines belong to the statement above them.
  void scan_block(size_t b, size_t e, bool top_level) {
    std::vector<size_t> decorator_lines;
    size_t k = b;
    std::optional<Compound> compound;  // a module-level if/try statement in progress
    auto close_compound = [&](size_t line) {
      if (!compound || line < compound->end_line) return;
      host_block(*compound);
      compound.reset();
    };
    while (k < e) {
      close_compound(k);
      const int column = first(k).column;
      size_t body_end = k + 1;
      while (body_end < e && first(body_end).column > column) ++body_end;
      const std::string &w = word(k, 0);
      if (w == "@") {
        decorator_lines.push_back(k);
        k = body_end;
        continue;
      }
      if (w != "def") warn_about_orphan_jit(decorator_lines, k);
      if (w == "def") {
        const size_t before = chunks_.size();
        on_def(k, body_end, decorator_lines);
        if (chunks_.size() > before && chunks_.back().kind == Chunk::Kind::Function) {
          chunks_.back().conditional = !top_level;
          chunks_.back().group = top_level ? 0 : group_;
        }
        if (chunks_.size() > before && chunks_.back().kind == Chunk::Kind::HostName) chunks_.back().conditional = !top_level;
      } else if (w == "if" || w == "elif" || w == "else" || w == "try" || w == "except" || w == "finally") {
        if (top_level && (w == "if" || w == "try")) {  // a new compound statement
          ++group_;
          size_t end_line = body_end;  // through its elif/else/except/finally branches
          while (end_line < e && first(end_line).column == column &&
                 (word(end_line, 0) == "elif" || word(end_line, 0) == "else" || word(end_line, 0) == "except" ||
                  word(end_line, 0) == "finally")) {
            ++end_line;
            while (end_line < e && first(end_line).column > column) ++end_line;
          }
          compound = Compound{k, end_line, chunks_.size()};
        }
        if (body_end > k + 1) scan_block(k + 1, body_end, /*top_level=*/false);
      } else if (w == "import" || w == "from") {
        // Imports inside module-level if/try blocks too (`try: from
        // triton.language.extra.libdevice import tanh` / `except: ...`).
        add_chunk(Chunk::Kind::Import, k, k + 1, {});
        chunks_.back().conditional = !top_level;
        chunks_.back().group = top_level ? 0 : group_;
      } else {
        // Constants inside module-level if/try blocks too (`if IS_TF32_SUPPORTED:
        // PRECISION = tl.constexpr('tf32')` / `else: ...`).
        const size_t before = chunks_.size();
        on_simple_statement(k);
        if (chunks_.size() > before) {
          chunks_.back().conditional = !top_level;
          if (chunks_.back().kind == Chunk::Kind::Alias) chunks_.back().group = top_level ? 0 : group_;
        }
      }
      decorator_lines.clear();
      k = body_end;
    }
    warn_about_orphan_jit(decorator_lines, e);
    close_compound(e);
  }

  // The host values a module-level if/try statement binds (`if cond: NUM_STAGES_OPTIONS = [1] else: ...`, as the
  // tutorial attention's autotune configs read): the whole statement, as text, defines each of them for the host
  // code a generated module carries (the branch is Python's to take).
  void host_block(const Compound &compound) {
    Chunk block;
    block.kind = Chunk::Kind::HostBlock;
    block.first_line = first(compound.first_line).line;
    block.text = lines_text(block.first_line, toks_[lines_[compound.end_line - 1].last].end_line);
    for (size_t c = compound.chunks_before; c < chunks_.size(); ++c)
      if (chunks_[c].kind == Chunk::Kind::HostName &&
          std::find(block.bound_names.begin(), block.bound_names.end(), chunks_[c].host_name) == block.bound_names.end())
        block.bound_names.push_back(chunks_[c].host_name);
    if (!block.bound_names.empty()) chunks_.push_back(std::move(block));
  }

  // `@triton.jit` above something that is not a function (a class, the end
  // of the file): tgrad has nothing to keep, and says so.
  void warn_about_orphan_jit(const std::vector<size_t> &decorator_lines, size_t next_line) {
    for (size_t line : decorator_lines) {
      ast::Decorator d = make_decorator(line);
      if (d.kind != ast::DecoratorKind::Jit) continue;
      std::string what = next_line < lines_.size() && word(next_line, 0) == "class" ? "decorates a class"
                         : next_line < lines_.size() && word(next_line, 0) == "async"
                             ? "decorates an async function"
                             : "is not followed by a function definition";
      diags_.warning(d.span, "'@" + d.name + "' " + what + "; tgrad skips it");
    }
  }

  ast::Decorator make_decorator(size_t line) {
    ast::Decorator d;
    const LogicalLine &l = lines_[line];
    d.span = span_of(l.first, l.last);
    if (size(line) > 1) d.text = text_of(l.first + 1, l.last);
    // The dotted name right after '@'.
    for (size_t i = 1; i < size(line); i += 2) {
      if (toks_[l.first + i].type != TileLangLexer::NAME) break;
      if (!d.name.empty()) d.name += '.';
      d.name += toks_[l.first + i].text;
      if (word(line, i + 1) != ".") break;
    }
    if (d.name == "triton.jit" || d.name == "jit")
      d.kind = ast::DecoratorKind::Jit;
    else if (d.name == "triton.autotune" || d.name == "autotune")
      d.kind = ast::DecoratorKind::Autotune;
    else if (d.name == "triton.heuristics" || d.name == "heuristics")
      d.kind = ast::DecoratorKind::Heuristics;
    else if (d.name == "triton.constexpr_function" || d.name == "constexpr_function" || d.name == "tl.constexpr" ||
             d.name == "triton.language.constexpr" || d.name == "constexpr")
      d.kind = ast::DecoratorKind::ConstexprFunction;
    else
      d.kind = ast::DecoratorKind::Other;
    return d;
  }

  void on_def(size_t k, size_t body_end, const std::vector<size_t> &decorator_lines) {
    std::vector<ast::Decorator> decos;
    for (size_t line : decorator_lines) decos.push_back(make_decorator(line));
    bool jit = false, triton_decorated = false;
    for (const ast::Decorator &d : decos) {
      jit |= d.kind == ast::DecoratorKind::Jit || d.kind == ast::DecoratorKind::ConstexprFunction;
      triton_decorated |= d.kind != ast::DecoratorKind::Other;
    }
    const std::string &name = word(k, 1);
    if (jit) {
      for (const ast::Decorator &d : decos)
        if (d.kind == ast::DecoratorKind::Other)
          diags_.warning(d.span, "decorator '@" + d.name + "' on @triton.jit function '" + name +
                                     "' is not known to tgrad; it is kept as text and its effect is ignored");
      jit_defs_[name] = JitDef{k, body_end, decos};
      add_chunk(Chunk::Kind::Function, k, body_end, std::move(decos));
      chunks_.back().host_name = name;  // (a compile-time helper that is Python, not tile language, keeps it)
      return;
    }
    if (triton_decorated) {
      for (const ast::Decorator &d : decos)
        if (d.kind != ast::DecoratorKind::Other)
          diags_.warning(d.span, "'@" + d.name + "' on '" + name +
                                     "', which has no @triton.jit decorator: tgrad skips this function");
      return;
    }
    // An undecorated function may still become jit through `alias = triton.jit(name)`.
    if (decos.empty()) plain_defs_[name] = {k, body_end};
    // Constants may call it on the host (`tl.constexpr(_generate_asm(1))`),
    // and decorators (an autotune config maker, a heuristic).
    add_host_name(k, name, decorator_lines.empty() ? k : decorator_lines.front(), body_end);
  }

  // A host binding of lines [from, end): its name, and its text for the
  // --emit torch module, which copies those its decorators read.
  void add_host_name(size_t k, const std::string &name, size_t from, size_t end) {
    Chunk host;
    host.kind = Chunk::Kind::HostName;
    host.first_line = first(k).line;
    host.host_name = name;
    host.text = lines_text(first(from).line, toks_[lines_[end - 1].last].end_line);
    chunks_.push_back(std::move(host));
  }

  // `NAME: tl.constexpr = v`, `NAME = tl.constexpr(v)`, `ALIAS = triton.jit(NAME)`, at module level or in a
  // module-level if/try block.
  void on_simple_statement(size_t k) {
    if (first(k).type != TileLangLexer::NAME) return;
    // Position after a `tl.constexpr` / `triton.language.constexpr` starting at i, or 0.
    auto after_constexpr = [&](size_t i) -> size_t {
      if (word(k, i) == "tl" && word(k, i + 1) == "." && word(k, i + 2) == "constexpr") return i + 3;
      if (word(k, i) == "triton" && word(k, i + 1) == "." && word(k, i + 2) == "language" && word(k, i + 3) == "." &&
          word(k, i + 4) == "constexpr")
        return i + 5;
      return 0;
    };
    size_t after;
    if (word(k, 1) == ":" && (after = after_constexpr(2)) && word(k, after) == "=") {
      add_chunk(Chunk::Kind::Constant, k, k + 1, {});
      return;
    }
    if (word(k, 1) == "=" && (after = after_constexpr(2)) && word(k, after) == "(") {
      add_chunk(Chunk::Kind::Constant, k, k + 1, {});
      return;
    }
    // ALIAS = a.b.c, a dotted name (`triton_tanh = libdevice.tanh`,
    // `tanh = tl.extra.cuda.libdevice.tanh`): another name for what a.b.c is,
    // which sema resolves like an import (Triton's modules, or unknown).
    if (word(k, 1) == "=" && size(k) >= 5 && size(k) % 2 == 1) {
      std::string dotted = word(k, 2);
      bool chain = toks_[lines_[k].first + 2].type == TileLangLexer::NAME;
      for (size_t i = 3; chain && i < size(k); i += 2) {
        chain = word(k, i) == "." && toks_[lines_[k].first + i + 1].type == TileLangLexer::NAME;
        dotted += "." + word(k, i + 1);
      }
      if (chain) {
        Chunk alias;
        alias.kind = Chunk::Kind::Alias;
        alias.first_line = first(k).line;
        alias.host_name = word(k, 0);
        alias.alias_of = dotted;
        alias.span = span_of(lines_[k].first, lines_[k].last);
        chunks_.push_back(std::move(alias));
        return;
      }
    }
    // ALIAS = NAME, NAME a jit function above: a copy named ALIAS.
    if (word(k, 1) == "=" && size(k) == 3 && first(k).type == TileLangLexer::NAME) {
      auto jit = jit_defs_.find(word(k, 2));
      if (jit == jit_defs_.end()) {
        add_host_name(k, word(k, 0), k, k + 1);
        return;
      }
      add_chunk(Chunk::Kind::Function, jit->second.def_line, jit->second.body_end, jit->second.decorators);
      chunks_.back().rename_to = word(k, 0);
      return;
    }
    // ALIAS = triton.jit(NAME)
    size_t i = 2;
    if (word(k, 1) != "=" && word(k, 1) != ":") return;
    if (word(k, i) == "triton" && word(k, i + 1) == ".") i += 2;
    if (word(k, 1) != "=" || word(k, i) != "jit" || word(k, i + 1) != "(" || word(k, i + 3) != ")" || size(k) != i + 4) {
      add_host_name(k, word(k, 0), k, k + 1);  // a plain variable (`_NUM_REG = 1`, `x: int = 2`): a host value
      return;
    }
    const std::string &target = word(k, i + 2);
    auto it = plain_defs_.find(target);
    if (it == plain_defs_.end()) {
      diags_.warning(span_of(lines_[k].first, lines_[k].last),
                     "'" + target + "' is not a function defined above in this file; tgrad skips this triton.jit call");
      return;
    }
    add_chunk(Chunk::Kind::Function, it->second.first, it->second.second, {}, word(k, 0));
  }

  const SourceManager &sources_;
  int file_id_;
  DiagEngine &diags_;
  antlr4::ANTLRInputStream input_;
  std::vector<Tok> toks_;
  std::vector<LogicalLine> lines_;
  std::vector<Chunk> chunks_;
  int group_ = 0;  // module-level if/try statements seen so far
  std::map<std::string, std::pair<size_t, size_t>> plain_defs_;  // name -> [def line, body end)
  // The jit functions above, by name, for `alias = name`: lines [def_line, body_end) and decorators.
  struct JitDef {
    size_t def_line, body_end;
    std::vector<ast::Decorator> decorators;
  };
  std::map<std::string, JitDef> jit_defs_;
};

}  // namespace

std::vector<Chunk> scan_module(const SourceManager &sources, int file_id, DiagEngine &diags) {
  return Scanner(sources, file_id, diags).run();
}

}  // namespace tgrad::parse
