// Typing a kernel file (semantic analysis) and dumping its AST.
//
// Every expression gets a dtype and a symbolic shape (`tl.arange(0, BLOCK)`
// is int32[BLOCK], `x[:, None]` fp32[N, 1]), constexpr values, with Triton's
// type promotion; definite mistakes (shapes that cannot broadcast, tl.exp on
// fp16) are located errors.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"
#include "tgrad/ast/Ast.h"

namespace tgrad {

struct TypeRequest {
  // The function to type with the types below; "" types every jit function
  // of the file with no parameter types (then `types` and `defines` must be
  // empty).
  std::string function = {};
  // Parameter types in Triton's signature notation, NAME=TYPE: `X=*fp32` a
  // pointer, `n=i32` a scalar, `x=fp32[16, N]` a tile (a dimension may be a
  // name). `tgrad --arg`.
  std::vector<std::string> types = {};
  // tl.constexpr values, NAME=VALUE: 128, 0.5, True, None, tl.float16,
  // 'relu'. `tgrad -D`.
  std::vector<std::string> defines = {};
};

// The type of each expression analysed, as tgrad prints it ("fp32[N, 1]").
class Types {
 public:
  // "" for an expression not analysed or of unknown type.
  std::string of(const ast::Expr &e) const;
  size_t size() const { return types_.size(); }

 private:
  std::unordered_map<const ast::Expr *, std::string> types_;
  friend struct api_internal::Access;
};

// Types the function the request names (with the functions it calls), or
// every function. Errors in the kernel: an Error of kind Input, and the file's
// log holds them.
Result<Types> type(KernelFile &file, const TypeRequest &request);

// The AST of the file's jit code, one node per line with its @line:col
// (`tgrad FILE --dump-ast`), each expression followed by its type where
// `types` has one: the whole file, or one function.
std::string dump_ast(const KernelFile &file, const Types *types = nullptr);
std::string dump_ast(const ast::Function &function, const Types *types = nullptr);

}  // namespace tgrad
