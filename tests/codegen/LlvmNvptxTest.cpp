// The LLVM 19 dependency (Debian's llvm-19-dev, wrapped as @llvm) links and
// provides the NVPTX back end that src/codegen will use: the target is
// registered, an sm_90 target machine can be made, and a trivial kernel
// lowers to PTX that names that architecture and that ptxas assembles.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

namespace {

TEST(LlvmNvptx, TargetIsRegisteredAndEmitsPtxForSm90) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  const std::string triple = "nvptx64-nvidia-cuda";
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  ASSERT_NE(target, nullptr) << error;
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, "sm_90", "+ptx80", llvm::TargetOptions(), std::nullopt));
  ASSERT_NE(machine, nullptr);

  llvm::LLVMContext context;
  llvm::Module module("m", context);
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());
  auto *fn_type = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {llvm::PointerType::get(context, 1)}, false);
  auto *fn = llvm::Function::Create(fn_type, llvm::Function::ExternalLinkage, "store_one", module);
  fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", fn));
  b.CreateStore(llvm::ConstantFP::get(llvm::Type::getFloatTy(context), 1.0), fn->getArg(0));
  b.CreateRetVoid();

  llvm::SmallString<1024> ptx;
  llvm::raw_svector_ostream out(ptx);
  llvm::legacy::PassManager passes;
  ASSERT_FALSE(machine->addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::AssemblyFile));
  passes.run(module);
  const std::string text(ptx.str());
  EXPECT_NE(text.find(".target sm_90"), std::string::npos) << text;
  EXPECT_NE(text.find(".entry store_one"), std::string::npos) << text;

  // ptxas from the CUDA toolkit (preinstalled on this kind of machine) accepts it.
  const char *ptxas = "/usr/local/cuda/bin/ptxas";
  ASSERT_EQ(access(ptxas, X_OK), 0) << ptxas << " is missing: the CUDA toolkit is part of the build environment";
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string file = dir + "/store_one.ptx";
  {
    std::ofstream f(file);
    f << text;
  }
  const std::string command = std::string(ptxas) + " -arch=sm_90 " + file + " -o " + dir + "/store_one.cubin 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
