// tgrad as a C++ library: differentiate a Triton kernel and print its
// backward and the launch protocol a launcher needs to run it.
//
//   bazel run //examples/cpp:differentiate_kernel                # examples/gelu_bias.py's kernel, wrt X and B
//   bazel-bin/examples/cpp/differentiate_kernel FILE KERNEL WRT  # another kernel: WRT as --wrt takes it ("X,B")
//
// It prints the backward (Triton source), a line "# Launch protocol:", then
// the protocol (JSON, include/tgrad/launch_protocol.schema.json): what
// `tgrad FILE --kernel KERNEL --wrt WRT` and `... --emit json` print. Every
// call returns a value or an error; nothing throws.
#include <iostream>
#include <string>

#include "tgrad/tgrad.h"

int main(int argc, char **argv) {
  if (argc != 1 && argc != 4) {
    std::cerr << "usage: " << argv[0] << " [FILE KERNEL WRT]\n";
    return 2;
  }
  const std::string path = argc == 4 ? argv[1] : "examples/gelu_bias.py";

  // 1. Read the kernel file. Its imports of the user's own modules would be
  //    looked for in ReadOptions::include_dirs, then beside the file.
  tgrad::Result<tgrad::KernelFile> file = tgrad::KernelFile::read(path);
  if (!file) {
    // Located diagnostics, rendered as a compiler's: file:line:col: error: ...
    std::cerr << file.error().render();
    return 1;
  }

  // 2. The request: the command line's --kernel, --wrt, (--arg, -D, --no-grad).
  //    No types: the backward is generic, one source for fp32, fp16 and bf16.
  tgrad::GradientRequest request;
  request.function = argc == 4 ? argv[2] : "bias_gelu_kernel";
  request.wrt = {argc == 4 ? argv[3] : "X,B"};
  request.command_line = "tgrad " + path + " --kernel " + request.function + " --wrt " + request.wrt[0];

  // 3. Differentiate. An Error of kind Request is a request that does not fit
  //    the kernel (a parameter it lacks); kind Input, errors in the kernel.
  tgrad::Result<tgrad::Gradient> grad = tgrad::differentiate(*file, request);
  if (!grad) {
    std::cerr << grad.error().render();
    return 1;
  }
  // Warnings of the successful calls stay in the file's log.
  for (const tgrad::StoredDiagnostic &d : file->diagnostics()) std::cerr << d.rendered;

  // 4. Emit: the backward's source and its launch protocol.
  std::cout << grad->source() << "# Launch protocol:\n" << grad->launch_protocol();
  return 0;
}
