// AstBuilder: ANTLR parse tree -> tgrad AST, for one chunk.
//
// The parse tree already encodes precedence (one grammar rule per level), so
// building is a direct walk. This is also where the Python constructs that a
// @triton.jit function may not use are rejected: each gets a located error
// that says what to write instead, and building continues so that one run
// reports every such construct. No ANTLR type leaves src/parse.
#pragma once

#include <memory>

#include "TileLangParser.h"
#include "src/parse/ChunkLocator.h"
#include "src/parse/ModuleScanner.h"
#include "tgrad/ast/Ast.h"

namespace tgrad::parse {

std::unique_ptr<ast::Function> build_function(tgrad_antlr::TileLangParser::FuncdefContext *ctx, Chunk &chunk,
                                              const ChunkLocator &locator, DiagEngine &diags);

// Returns false (after reporting) for a malformed import.
bool build_import(tgrad_antlr::TileLangParser::Import_stmtContext *ctx, const ChunkLocator &locator,
                  DiagEngine &diags, ast::Import &out);

// A module constant; null (after reporting) if the statement is not one.
ast::StmtPtr build_constant(tgrad_antlr::TileLangParser::Expr_stmtContext *ctx, const ChunkLocator &locator,
                            DiagEngine &diags, std::string &name);

}  // namespace tgrad::parse
