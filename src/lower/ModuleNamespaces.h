// Calls into a user module imported as a namespace, made calls of the copies tgrad read.
//
// `from flag_gems.utils import triton_lang_extension as tle` then `tle.program_id(0)`: tgrad reads that module
// (src/parse/FollowImports.h) and copies what the importer reads from it as `tle_program_id`, recorded in
// Module::module_namespaces. The stages that type, differentiate and compile a kernel call that copy:
//
//   pid = tle.program_id(0)   ==>   pid = tle_program_id(0)
//
// (a function's own variable of the alias's name is left alone). `--emit source` prints the code as written; a
// backward that replays the call calls the copy, which it defines beside itself as it does an imported helper.
#pragma once

#include <memory>

#include "tgrad/ast/Ast.h"

namespace tgrad::lower {

// The module with every `alias.NAME` of a namespace import that was copied rewritten as above; null where none is.
std::unique_ptr<ast::Module> with_namespace_calls_resolved(const ast::Module &module);

}  // namespace tgrad::lower
