// Differentiating a tile function or a kernel, and what the backward is
// emitted as: Triton source, its launch protocol (JSON), a PyTorch module.
//
//   tgrad::GradientRequest request;
//   request.function = "bias_gelu_kernel";
//   request.wrt = {"X", "B"};
//   tgrad::Result<tgrad::Gradient> grad = tgrad::differentiate(*file, request);
//   if (grad) std::cout << grad->source();
//
// A tile function `def f(x, y): ... return z` gets `def f_bwd(x, y, bz): ...
// return bx, by`; a kernel gets a backward kernel that takes every forward
// argument plus a gradient buffer d<ptr> per differentiated input and stored
// output (and, where its schedule needs them, more kernels, scratch buffers and
// tapes, all in the launch protocol). Without types the backward is generic:
// one source for every dtype and shape the forward accepts (README.md, "Types
// are optional"); without constexpr values it dispatches on the flags it
// depends on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tgrad/ad/Differentiate.h"
#include "tgrad/api/KernelFile.h"
#include "tgrad/api/Result.h"

namespace tgrad {

namespace api_internal {
struct GradientState;
}

// What to differentiate: the command line's `tgrad FILE --kernel NAME --wrt
// ... [--arg ...] [-D ...] [--no-grad ...] [--deterministic]`, as a value.
struct GradientRequest {
  // The tile function or kernel; "" for the file's one kernel (choose_kernel).
  std::string function = {};
  // The parameters to differentiate with respect to, by name or index, in the
  // order the adjoints are returned. An entry may list several, separated by
  // commas ("X,B"), as --wrt takes them.
  std::vector<std::string> wrt = {};
  // Parameter types, NAME=TYPE (TypeRequest::types); leave out for the
  // generic backward.
  std::vector<std::string> types = {};
  // tl.constexpr values, NAME=VALUE (TypeRequest::defines); leave out for a
  // backward that serves every value.
  std::vector<std::string> defines = {};
  // Kernels: output pointers that carry no upstream gradient (statistics
  // saved for the backward): they get no gradient buffer.
  std::vector<std::string> no_grad = {};
  // Prefer schedules whose gradients are bitwise identical run to run
  // (ad::BackwardRequest::deterministic).
  bool deterministic = false;
  // Kernels: tl.constexpr parameters that only tile the computation (block
  // sizes): the forward computes the same outputs for any power of two in
  // them, as an autotuner's configs must. The torch module may then launch
  // each backward kernel with values of its own, tuned for the backward
  // (ad::BackwardRequest::tiling). Entries may list several, comma-separated.
  std::vector<std::string> tiling = {};
  // The command recorded in the header of the emitted source, after
  // "Regenerate it with": "" for none.
  std::string command_line = {};
};

// A backward: its source and the facts a launcher needs. Copies share it.
class Gradient {
 public:
  const std::string &function() const;       // the forward ("bias_gelu_kernel")
  const std::string &backward_name() const;  // its backward ("bias_gelu_kernel_bwd")
  // The backward as Triton source, with the jit helpers it calls and its
  // imports: a module that runs under Triton (`tgrad ... --emit python`).
  const std::string &source() const;
  // The launch protocol (`--emit json`, include/tgrad/launch_protocol.schema.json):
  // each parameter's role, the kernels to launch in order and their grids,
  // scratch buffers and tapes with their shapes, the memory-adjoint decisions.
  std::string launch_protocol() const;
  // Kernels: a Python module that makes the kernel a PyTorch op with autograd
  // (`--emit torch`), its ops in torch.ops.<op_namespace>. An Error of kind
  // Input for a tile function, or a launch value the module cannot express.
  Result<std::string> torch_module(const std::string &op_namespace) const;
  // Kernels: the tl.constexpr parameters the kernel uses as block sizes (a
  // tl.arange extent, a tl.zeros or tl.full shape), without a -D value: the
  // candidates for GradientRequest::tiling, in parameter order.
  std::vector<std::string> block_size_constexprs() const;
  // Why each memory adjoint is a store, a partial sum or an atomic
  // (`--explain`); empty for a tile function.
  const std::vector<std::string> &explanations() const;
  // Everything differentiation decided (gradient buffers, partial sums,
  // owner-computes kernels, tapes), and the backward's AST.
  const ad::Backward &backward() const;

 private:
  explicit Gradient(std::shared_ptr<const api_internal::GradientState> state) : state_(std::move(state)) {}
  std::shared_ptr<const api_internal::GradientState> state_;
  friend struct api_internal::Access;
};

// Differentiates. A request that does not fit the function (a --wrt name it
// does not have, a constexpr in --wrt, a type tgrad cannot read): an Error of
// kind Request. Errors in the kernel: kind Input, located, and in the file's
// log with the warnings of a backward that succeeds.
Result<Gradient> differentiate(KernelFile &file, const GradientRequest &request);

// The op namespace the command line gives the torch module written to (or,
// without -o, read from) `path`: "tgrad_" and the file's stem with every
// character other than a letter or digit made '_' (layer_norm_ops.py:
// tgrad_layer_norm_ops), "tgrad_stdin" for "-". Two modules made from
// kernels of one name then do not collide.
std::string op_namespace_for(const std::string &path);

}  // namespace tgrad
