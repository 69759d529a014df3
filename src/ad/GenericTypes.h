// Differentiating without types: `tgrad kernel.py --wrt 0,1`.
//
// A Triton kernel is one source for every dtype and shape its callers use;
// its backward should be too. For each parameter the caller gave no type,
// tgrad decides from the code what it is (param_roles: a pointer when an
// address of a load, store or atomic derives from it, a tile in a function
// without pointers, else a runtime scalar), then differentiates with several
// representative types and keeps the backward only if every representative
// the forward accepts gives the same one (ast::equal, and the same launch
// protocol):
//   - pointers to floating-point data: *fp32, *fp16, *bf16, all alike first,
//     then each pointer alone with the other two (fp16 data with fp32
//     statistics); a type all alike that the forward accepts but whose
//     backward tgrad cannot write (a softmax statistic read back must be
//     float32) is tried with one pointer *fp32, and where no type all alike
//     serves, each with one pointer of another type is the representative;
//   - pointers whose loaded values become addresses or indices: *i32;
//   - runtime scalars: i32 and fp32 (fp32 first where the default is a float);
//   - tiles: ranks 0 to 2 (each dimension a symbol), then fp32, fp16, bf16.
// A representative the forward itself rejects (tl.exp on fp16, tl.dot of
// fp16 with fp32) is skipped: Triton would reject that launch too. Where
// two accepted representatives give different backwards, the backward
// depends on that parameter's type: a located error names it and asks for
// --arg. Backward::generic_types lists what was compared. With the
// environment variable TGRAD_DEBUG_TRIALS set, each trial's diagnostics are
// printed to standard error (why a representative was rejected); set to
// "source", each trial's backward too.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tgrad/ad/Differentiate.h"

namespace tgrad::ad {

// What a parameter is, as its uses say.
enum class ParamRole {
  Constexpr,       // annotated tl.constexpr
  DTypeConstexpr,  // annotated tl.constexpr, and used as a dtype: x.to(P), dtype=P
  Unused,          // read nowhere: needs no type
  FloatPointer,    // addresses derive from it
  IntegerPointer,  // addresses derive from it, and what it loads becomes an address or index
  Scalar,          // a runtime value of a kernel (a size, a stride, eps)
  Tile,            // a value of a function without pointers
};

// The role of each parameter of `fn`, in order. Calls of the module's other
// jit functions count: a parameter passed where the callee loads through it
// is a pointer. Where `known` gives tl.constexpr parameters values, an if on
// them counts only for the branch it takes (as Triton compiles it): fla's
// `seq_offsets` is a number without IS_SEQLEN_OFFSETS_TENSOR, a pointer with it.
//
// `memo`, where it serves `fn` of `module`, keeps what the walks of the
// function found for the next call.
class RoleMemo;
std::vector<ParamRole> param_roles(const ast::Module &module, const ast::Function &fn,
                                   const sema::ParamTypes &known = {}, RoleMemo *memo = nullptr);

// param_roles's walks of one function of one module, kept for the many
// questions the search for flags needing values asks about it: the roles
// under each combination of flag values it tries (hundreds of walks of the
// whole kernel for fla's NPU kernels, most of them alike). The roles with
// every branch counted do not depend on the values; those with the branches
// the values take depend only on which branch each if takes. Valid while the
// module and the function are alive and unchanged; other functions are not
// served. One thread's.
class RoleMemo {
 public:
  RoleMemo(const ast::Module &module, const ast::Function &fn) : module_(&module), fn_(&fn) {}
  bool serves(const ast::Module &module, const ast::Function &fn) const { return &module == module_ && &fn == fn_; }
  // The runtime scalars the function's code needs as floats (their representative is fp32 first), from one walk.
  const std::set<std::string> &float_scalars() const;

 private:
  friend std::vector<ParamRole> param_roles(const ast::Module &, const ast::Function &, const sema::ParamTypes &,
                                            RoleMemo *);
  const ast::Module *module_;
  const ast::Function *fn_;
  std::optional<std::vector<ParamRole>> every_branch_;
  std::map<std::string, std::vector<ParamRole>> taken_;  // by the branch each if takes, a letter per if
  mutable std::optional<std::set<std::string>> float_scalars_;
};

// The header line "# Generic: the same backward for x = *fp32, *fp16; ...".
std::string generic_types_line(const std::vector<std::pair<std::string, std::vector<std::string>>> &types);

// How a kernel accesses memory through each of its parameters, in order: an
// OR of PointerAccess bits (0 for a parameter no address derives from).
// Calls of the module's jit functions count. The torch module (--emit torch)
// gives a stored-to pointer a fresh output buffer, a copy of the caller's
// where the kernel also reads it or adds to it atomically.
enum PointerAccess : unsigned { kLoad = 1, kStore = 2, kAtomic = 4 };
std::vector<unsigned> pointer_accesses(const ast::Module &module, const ast::Function &fn);

// The length of a generated source's header: its leading comment lines
// (command line, Generic and Specialized lines).
// `given` with a uniform representative type of each runtime pointer and
// scalar it lacks: float pointers to `float_type`, index pointers *int32,
// scalars int32 (fp32 with a float default). Tiles and constexprs stay as
// given.
sema::ParamTypes uniform_representative(const ast::Module &module, const ast::Function &fn,
                                        const sema::ParamTypes &given, sema::DType float_type,
                                        RoleMemo *memo = nullptr);

size_t header_length(const std::string &source);

// The same code (ast::equal) and the same launch protocol.
bool same_backward(const Backward &a, const Backward &b);

// The backward for a request whose parameters all have types (given, or
// representatives chosen by differentiate()): ReverseMode.cpp.
std::optional<Backward> differentiate_typed(const ast::Module &module, const SourceManager &sources,
                                            const BackwardRequest &request, DiagEngine &diags);

}  // namespace tgrad::ad
