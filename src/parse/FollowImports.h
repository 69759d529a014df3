// Jit functions and constants imported from the user's own modules.
//
// Real kernels span files (`from .utils import softplus`, `from
// ..ops.utils import calculate_settings`). Like a C compiler's include path,
// tgrad looks for such a module relative to the importing file (leading
// dots), then in each search directory (`-I DIR`), the importing file's
// directory and its package root (the parent of the outermost directory
// that holds an __init__.py). A module found there is read; the names the
// import asks for that are jit functions or module constants are added to
// the importing module (functions under their `as` name, marked with the
// module they came from), together with the jit functions and constants of
// that module they may call, and its Triton imports. Triton's own modules,
// Python's math and modules that are not found are left alone (sema and
// the differentiator then say what they cannot follow).
#pragma once

#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"

namespace tgrad::parse {

// `path` is the importing file's path ("" for standard input: only the
// search directories apply). Errors in a followed module are reported
// against that file.
void follow_imports(ast::Module &module, const std::string &path, const std::vector<std::string> &search_dirs,
                    SourceManager &sources, DiagEngine &diags);

}  // namespace tgrad::parse
