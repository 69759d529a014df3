// Reverse-mode differentiation of a pure tile function (Tangent style).
//
//   def fn1(x, y): ... return z        -->   def fn1_bwd(x, y, bout): ... return bx, by
//
// The backward replays the primal statements (in A-normal form), then runs
// the adjoint statements in reverse order, one "# Grad of: <statement>"
// block per user statement. Adjoints are named b<name>; a value used more
// than once accumulates (`bx += ...`); an adjoint flowing into a broadcast
// operand is summed back to the operand's shape (unbroadcast) with a
// tl.static_assert on the shape it relies on. Rules come from one table
// (src/ad/adjoints/rules.py). Values that are not floating point (masks,
// comparisons, integers) carry no adjoint. No dead code is emitted.
//
// Kernels (pointer parameters, tl.load / tl.store): the backward kernel takes
// every forward argument plus d<ptr> for each differentiated input pointer
// and each stored-to output pointer. The adjoint of a store loads the
// upstream gradient under the store's mask (other=0); the adjoint of a load
// writes the gradient under the load's mask: a plain store where the access
// analysis proves each address belongs to one program and lane, an atomic
// add otherwise (src/ad/AccessAnalysis.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct BackwardRequest {
  std::string function;                     // the jit function to differentiate
  std::vector<std::string> wrt;             // parameter names, in the order the adjoints are returned
  sema::ParamTypes param_types;             // types of the parameters (tiles, scalars, constexprs)
  std::string command_line;                 // recorded in the output's header
};

struct Backward {
  // The backward function and the jit functions it calls, with imports: a
  // module that runs under Triton and in tgrad's interpreter.
  std::unique_ptr<ast::Module> module;
  std::string backward_name;                // "fn1_bwd"
  std::vector<std::string> output_adjoints; // the b<out> parameters, in the order of the outputs
  std::string source;                       // the module printed, with its header

  // Kernels: the gradient buffers the backward takes after the forward's
  // arguments, as (forward pointer, gradient pointer): first the --wrt
  // inputs in --wrt order, then the outputs in parameter order.
  std::vector<std::pair<std::string, std::string>> gradient_buffers;
  size_t input_gradients = 0;               // how many of them are inputs
  std::vector<std::string> explanations;    // --explain: each memory adjoint's decision and reason
};

std::optional<Backward> differentiate(const ast::Module &module, const SourceManager &sources,
                                      const BackwardRequest &request, DiagEngine &diags);

}  // namespace tgrad::ad
