// From the kernel's LLVM module to PTX: libdevice linked in, LLVM's O3
// pipeline (with NVPTX's own passes: NVVMReflect resolves libdevice's
// __nvvm_reflect queries), then the NVPTX code generator.
#pragma once

#include <memory>
#include <string>

#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace tgrad::codegen {

// Where CUDA's libdevice is read from: $TGRAD_LIBDEVICE, else the toolkit's.
std::string libdevice_path();

// An NVPTX target machine for `arch` ("sm_90"); null with `error` set.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string &arch, std::string &error);

// Links the libdevice functions the module calls, internalizes everything
// but the kernels, and runs O3. False with `error` set.
bool link_and_optimize(llvm::Module &module, llvm::TargetMachine &machine, std::string &error);

// The module as PTX text.
std::string emit_ptx(llvm::Module &module, llvm::TargetMachine &machine);

}  // namespace tgrad::codegen
