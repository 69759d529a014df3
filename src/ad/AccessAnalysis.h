// Access analysis for memory adjoints: which programs and lanes of a kernel
// touch which addresses, decided from the index expressions (DESIGN.md §3).
//
// Over a kernel in A-normal form, every integer value gets an affine form in
// the program ids and the lanes of tl.arange tiles; every pointer value gets
// its base parameter and the affine form of its offset. A load's adjoint can
// then be written with a plain store when the pointer is provably injective
// (no two programs or lanes share an address), and needs an atomic add (or a
// reduction) otherwise. The proofs are deliberately narrow: a pattern that is
// not recognised is treated as shared, which costs speed, never correctness.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct AccessDecision {
  enum class Kind {
    Injective,          // one program and one lane per address: a plain store
    InjectiveAssuming,  // injective if `assumption` holds (checked with tl.device_assert)
    Shared,             // programs may share addresses: tl.atomic_add
  };
  Kind kind = Kind::Shared;
  std::string reason;               // for --explain and the generated comment
  ast::ExprPtr assumption;          // InjectiveAssuming: a boolean expression over kernel values
  std::string assumption_message;
};

class AccessAnalysis {
 public:
  AccessAnalysis(const ast::Function &anf_kernel, const std::map<std::string, sema::SType> &name_types);

  // The pointer parameter a pointer value is based on, or "" if unknown.
  std::string base_of(const std::string &pointer) const;
  // How the adjoint of a load through `pointer` (masked by `mask`, or "") can be written.
  AccessDecision classify(const std::string &pointer, const std::string &mask) const;

 private:
  struct Term {
    std::string coefficient;   // a known integer ("1", "256") or a name (a runtime scalar or constexpr)
    int64_t extent = 0;        // lanes: known extent (0 if symbolic)
    std::string extent_symbol; // lanes: symbolic extent
  };
  struct Affine {
    bool valid = true;                       // false: not an affine form we understand
    std::map<int, std::string> pid;          // program axis -> coefficient
    std::vector<Term> lanes;                 // arange terms
    std::vector<std::string> axes_of_lanes;  // per lane term: which broadcast axis it varies along
  };
  Affine affine(const std::string &name) const;

  const ast::Function &fn_;
  const std::map<std::string, sema::SType> &types_;
  std::map<std::string, const ast::Expr *> defs_;  // SSA name -> its defining value
};

}  // namespace tgrad::ad
