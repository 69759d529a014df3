// tgrad's public C++ API: one header, one Bazel target (//:tgrad, an alias of //src:tgrad).
//
// Every stage of the `tgrad` command line is a call here; the command line
// (tools/cli/Main.cpp) is a client of this header and nothing else:
//
//   read       KernelFile::read(path, {include_dirs})       tgrad/api/KernelFile.h
//   print      print_source(file), choose_kernel(file)      tgrad/api/KernelFile.h
//   type       type(file, TypeRequest), dump_ast(...)       tgrad/api/Typing.h
//   backward   differentiate(file, GradientRequest)         tgrad/api/Gradient.h
//   emit       Gradient::source(), launch_protocol(),       tgrad/api/Gradient.h
//              torch_module(op_namespace)
//   run        run(file, LaunchRequest), write_npy(...)     tgrad/api/Run.h
//   check      check_gradient(file, CheckRequest)           tgrad/api/Check.h
//   compile    compile(file, CompileRequest): PTX + sidecar  tgrad/api/Compile.h
//
// Errors are values (tgrad/api/Result.h): each call returns a Result<T> or a
// Status, whose Error is either a request that does not fit (kind Request)
// or located diagnostics about the kernel (kind Input), rendered as the
// command line prints them: `file:line:col: error: message`, the source line,
// a caret. Nothing throws across the API. A KernelFile also keeps the log of
// every diagnostic its calls reported, warnings of successful calls included.
//
// Requests are plain structs whose every field has a default (`= {}`), so
// that `differentiate(file, {"scale_fwd", {"X"}})` may leave the rest out,
// also under -Wmissing-field-initializers.
//
// examples/cpp/ is a complete program: it differentiates a kernel and prints
// the backward and its launch protocol.
//
// The AST (tgrad/ast/), the diagnostics engine and the differentiator's
// result (tgrad/ad/Differentiate.h) are public too, for callers that walk
// the code or the backward's decisions.
#pragma once

#include "tgrad/api/Allocator.h"
#include "tgrad/api/Check.h"
#include "tgrad/api/Compile.h"
#include "tgrad/api/Gradient.h"
#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"
#include "tgrad/api/Run.h"
#include "tgrad/api/Typing.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/emit/AstDump.h"
#include "tgrad/emit/PythonPrinter.h"
#include "tgrad/parse/Parser.h"

namespace tgrad {

inline constexpr const char *kVersion = "0.1.0";

}  // namespace tgrad
