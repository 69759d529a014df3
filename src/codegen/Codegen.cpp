// compile_kernel: the kernel specialized and typed, lowered to LLVM IR
// (Lower.h), optimized and emitted (Pipeline.h), with its sidecar.
#include "src/codegen/Codegen.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Metadata.h"
#include "llvm/Support/raw_ostream.h"
#include "src/codegen/Emitter.h"
#include "src/codegen/Lower.h"
#include "src/codegen/Pipeline.h"
#include "src/lower/BlockPointers.h"
#include "src/lower/InlineCalls.h"
#include "src/lower/SourceRewrites.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::codegen {

using sema::DType;
using sema::SType;

namespace {

// Triton's signature notation of a parameter type: "*fp32", "i32", "fp32".
std::string signature_type(const sema::ElemType &e) {
  std::string s;
  switch (e.dtype) {
    case DType::Int1: s = "i1"; break;
    case DType::Int8: s = "i8"; break;
    case DType::Int16: s = "i16"; break;
    case DType::Int32: s = "i32"; break;
    case DType::Int64: s = "i64"; break;
    case DType::UInt8: s = "u8"; break;
    case DType::UInt16: s = "u16"; break;
    case DType::UInt32: s = "u32"; break;
    case DType::UInt64: s = "u64"; break;
    default: s = sema::short_name(e.dtype);
  }
  return (e.is_pointer ? "*" : "") + s;
}

// The kernel's parameters checked against the types given: the runtime
// ones, in order, with their types; false after reporting what is missing.
bool runtime_params(const ast::Function &fn, const CompileOptions &o, std::vector<size_t> &runtime, DiagEngine &diags) {
  bool ok = true;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const ast::Param &p = fn.params[k];
    auto it = o.params.find(p.name);
    if (fn.is_constexpr_param(k)) {
      if (it == o.params.end() && !p.default_value) {
        diags.error(p.span, "tl.constexpr parameter '" + p.name + "' needs a value to compile: -D " + p.name + "=...");
        ok = false;
      }
      continue;
    }
    if (it == o.params.end() || !it->second.is_tensor() || !it->second.shape.empty()) {
      diags.error(p.span, "parameter '" + p.name + "' needs a type to compile: --arg " + p.name +
                              "=TYPE (*fp32 a pointer, i32 or fp32 a scalar)");
      ok = false;
      continue;
    }
    const sema::ElemType &e = it->second.elem;
    if (sema::is_fp8(e.dtype)) {
      diags.error(p.span, "'" + p.name + "' is " + e.str() + ": tgrad's PTX backend does not compile fp8 values yet");
      ok = false;
      continue;
    }
    if (!e.is_pointer && e.dtype == DType::Int1) {
      diags.error(p.span, "a bool parameter ('" + p.name + "') is not supported by the PTX backend yet");
      ok = false;
      continue;
    }
    runtime.push_back(k);
  }
  for (const auto &given : o.params) {
    const std::string &name = given.first;
    const bool known =
        std::any_of(fn.params.begin(), fn.params.end(), [&](const ast::Param &p) { return p.name == name; });
    if (!known) {
      diags.error(fn.name_span, "'" + fn.name + "' has no parameter '" + name + "'");
      ok = false;
    }
  }
  return ok;
}

// The widest chunk a thread holds (Layout.h): 16 bytes of the narrowest
// dtype the kernel's pointers address.
int64_t max_chunk(const ast::Function &fn, const CompileOptions &o) {
  int64_t narrowest = 0;
  for (const ast::Param &p : fn.params) {
    auto it = o.params.find(p.name);
    if (it == o.params.end() || !it->second.is_tensor() || !it->second.elem.is_pointer) continue;
    const int64_t bytes = std::max(1, sema::bits(it->second.elem.dtype) / 8);
    narrowest = narrowest == 0 ? bytes : std::min(narrowest, bytes);
  }
  return narrowest == 0 ? 4 : 16 / narrowest;
}

}  // namespace

std::string CompiledKernel::metadata_json() const {
  nlohmann::ordered_json j;
  j["kernel"] = name;
  j["params"] = nlohmann::ordered_json::array();
  for (const KernelParam &p : params) j["params"].push_back({{"name", p.name}, {"type", p.type}});
  j["num_warps"] = num_warps;
  j["threads_per_cta"] = num_warps * 32;
  j["shared_bytes"] = shared_bytes;
  j["arch"] = arch;
  return j.dump(2) + "\n";
}

std::optional<CompiledKernel> compile_kernel(const ast::Module &written_module, const CompileOptions &o,
                                             DiagEngine &diags) {
  const int errors = diags.error_count();
  std::unique_ptr<ast::Module> rewritten = lower::with_source_rewrites(written_module);  // (src/lower/SourceRewrites.h)
  const ast::Module &user_module = rewritten ? *rewritten : written_module;
  // The kernel as the interpreter runs it: memory helpers inlined, block pointers lowered.
  std::unique_ptr<ast::Module> inlined = lower::inline_memory_helpers(user_module, o.kernel, diags, o.params), lowered;
  if (diags.error_count() > errors) return std::nullopt;
  const ast::Module *module =
      lower::with_block_pointers_lowered(inlined ? *inlined : user_module, o.kernel, diags, lowered);
  if (!module) return std::nullopt;
  const ast::Function *fn = module->find_function(o.kernel);
  if (!fn) {
    diags.error({}, "no @triton.jit function '" + o.kernel + "'");
    return std::nullopt;
  }
  std::vector<size_t> runtime;
  if (!runtime_params(*fn, o, runtime, diags)) return std::nullopt;
  std::optional<sema::TypeInfo> types = sema::analyze(*module, *fn, o.params, diags);
  if (!types) return std::nullopt;
  // fp8 values (a cast to tl.float8e4nv): not lowered yet; the first is reported where it is made.
  bool fp8 = false;
  for (const ast::StmtPtr &s : fn->body)
    ast::visit_stmt_exprs(*s, [&](const ast::Expr &e) {
      const sema::SType *t = types->type_of(&e);
      if (!fp8 && !ast::isa<ast::Name>(&e) && t && t->is_tensor() && sema::is_fp8(t->elem.dtype)) {
        diags.error(e.span, "this is " + t->elem.str() + ": tgrad's PTX backend does not compile fp8 values yet");
        fp8 = true;
      }
    });
  if (fp8) return std::nullopt;

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = make_target_machine(o.arch, error);
  if (!machine) {
    diags.error({}, error);
    return std::nullopt;
  }
  CompiledKernel out;
  out.name = fn->name;
  out.num_warps = o.num_warps;
  out.arch = o.arch;
  for (size_t k : runtime)
    out.params.push_back({fn->params[k].name, signature_type(o.params.at(fn->params[k].name).elem)});

  std::map<std::string, Pattern> pinned;
  for (int attempt = 0; attempt < 8; ++attempt) {
    llvm::LLVMContext context;
    llvm::Module m(fn->name, context);
    m.setTargetTriple(machine->getTargetTriple().str());
    m.setDataLayout(machine->createDataLayout());
    Emitter scratch_types(m, nullptr, o.num_warps, 1);
    std::vector<llvm::Type *> params;
    for (size_t k : runtime) params.push_back(scratch_types.type_of(o.params.at(fn->params[k].name).elem));
    auto *f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(context), params, false),
                                     llvm::Function::ExternalLinkage, fn->name, m);
    f->setCallingConv(llvm::CallingConv::PTX_Kernel);
    // .maxntid: the launch's block size, which lets ptxas budget registers for it.
    llvm::NamedMDNode *annotations = m.getOrInsertNamedMetadata("nvvm.annotations");
    auto i32 = [&](int v) {
      return llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(context), v));
    };
    annotations->addOperand(
        llvm::MDNode::get(context, {llvm::ValueAsMetadata::get(f), llvm::MDString::get(context, "kernel"), i32(1)}));
    annotations->addOperand(llvm::MDNode::get(
        context, {llvm::ValueAsMetadata::get(f), llvm::MDString::get(context, "maxntidx"), i32(o.num_warps * 32)}));

    Emitter emitter(m, f, o.num_warps, max_chunk(*fn, o));
    emitter.builder().SetInsertPoint(llvm::BasicBlock::Create(context, "entry", f));
    Lowering lowering(emitter, *module, *types, pinned);
    for (size_t i = 0; i < runtime.size(); ++i) {
      const std::string &name = fn->params[runtime[i]].name;
      f->getArg(static_cast<unsigned>(i))->setName(name);
      lowering.bind(name, emitter.splat(o.params.at(name).elem, {}, f->getArg(static_cast<unsigned>(i))));
    }
    try {
      lowering.lower_kernel(*fn);
    } catch (const Unsupported &u) {
      diags.error(u.span, u.message);
      return std::nullopt;
    }
    if (!lowering.weakened().empty()) {
      for (const auto &[name, p] : lowering.weakened()) pinned[name] = p;
      continue;
    }
    emitter.finish_shared();
    out.shared_bytes = emitter.shared_bytes();
    if (!link_and_optimize(m, *machine, error)) {
      diags.error(fn->name_span, error);
      return std::nullopt;
    }
    if (o.emit_ptx) {
      out.text = emit_ptx(m, *machine);
    } else {
      llvm::raw_string_ostream s(out.text);
      m.print(s, nullptr);
    }
    return out;
  }
  diags.error(fn->name_span,
              "the backend could not settle the layout facts of this kernel's variables (a bug in tgrad)");
  return std::nullopt;
}

}  // namespace tgrad::codegen
