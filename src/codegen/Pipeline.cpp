// libdevice, the optimization pipeline and PTX emission.
#include "src/codegen/Pipeline.h"

#include <cstdlib>

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetOptions.h"

namespace tgrad::codegen {

std::string libdevice_path() {
  if (const char *p = std::getenv("TGRAD_LIBDEVICE")) return p;
  return "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string &arch, std::string &error) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  const std::string triple = "nvptx64-nvidia-cuda";
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return nullptr;
  llvm::TargetOptions options;
  // Triton's default: fused multiply-add where the code multiplies and adds.
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, arch, "+ptx80", options, std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine) error = "cannot make an NVPTX target machine for " + arch;
  return machine;
}

bool link_and_optimize(llvm::Module &module, llvm::TargetMachine &machine, std::string &error) {
  bool calls_libdevice = false;
  for (const llvm::Function &f : module) calls_libdevice |= f.isDeclaration() && f.getName().starts_with("__nv_");
  if (calls_libdevice) {
    const std::string path = libdevice_path();
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer) {
      error = "cannot read libdevice '" + path + "': " + buffer.getError().message();
      return false;
    }
    llvm::Expected<std::unique_ptr<llvm::Module>> lib = llvm::parseBitcodeFile(**buffer, module.getContext());
    if (!lib) {
      error = "cannot parse libdevice '" + path + "': " + llvm::toString(lib.takeError());
      return false;
    }
    (*lib)->setTargetTriple(module.getTargetTriple());
    (*lib)->setDataLayout(module.getDataLayout());
    if (llvm::Linker::linkModules(module, std::move(*lib), llvm::Linker::LinkOnlyNeeded)) {
      error = "cannot link libdevice";
      return false;
    }
  }
  // Denormals are kept (libdevice's __nvvm_reflect("__CUDA_FTZ") is 0), as Triton does.
  module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
  // Only the kernels are entry points: libdevice's functions inline and go.
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && f.getCallingConv() != llvm::CallingConv::PTX_Kernel)
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  std::string verify;
  llvm::raw_string_ostream vs(verify);
  if (llvm::verifyModule(module, &vs)) {
    error = "the backend made invalid LLVM IR (a bug in tgrad): " + verify;
    return false;
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&machine);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
  return true;
}

std::string emit_ptx(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::SmallString<4096> ptx;
  llvm::raw_svector_ostream out(ptx);
  llvm::legacy::PassManager passes;
  machine.addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::AssemblyFile);
  passes.run(module);
  return std::string(ptx.str());
}

}  // namespace tgrad::codegen
