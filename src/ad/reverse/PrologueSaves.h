// What a prologue kernel saves once per forward program (or per element of a forward output) for the
// owner-computes kernels (src/ad/reverse/OwnerComputes.h), which would otherwise compute it again in every
// iteration of their loop over the forward's programs: row statistics (a reduction over tiles the program loads:
// FA2's rowsum(dO * O)) and tiles computed from several loads that the owners read only cast to a pointer's
// element type (the relu epilogue's masked upstream gradient, an operand of tl.dot).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad::reverse {

// A tile type's dimensions as factors (numbers or constexpr names); nullopt where one is neither (a computed size
// tgrad cannot write down).
std::optional<std::vector<std::string>> dimension_texts(const sema::SType &t);

// `scratch + o1 + o2 + ...`: a value saved laid out like a forward output, at that output's offsets (names).
ast::ExprPtr offset_address(const std::string &scratch, const std::vector<std::string> &offsets);

// Statements of `block` in order, with those of the ifs in it (the guard of a causal owner).
void flatten(const ast::StmtList &block, std::vector<const ast::Stmt *> &out);

// The names an owner's loop body computes in the forward program's prefix (`prefix`: the statements of the
// backward kernel before its reverse loop) that the rest of the body reads, that are vectors of floats, and whose
// computation reduces a tile (tl.sum, tl.max, tl.min): per-program row statistics worth saving.
std::vector<std::string> row_statistics(const ast::StmtList &loop_body, const std::set<const ast::Stmt *> &prefix,
                                        const std::function<const sema::SType *(const std::string &)> &type_of_name);

struct CastOperandTile {
  std::string pointer;               // P
  std::string mask;                  // the mask of the loads it is computed from, outside which it is 0
  std::string like;                  // the forward's pointer parameter one of them loads from
  std::vector<std::string> offsets;  // the names those loads add to their bases (parameters, or the prefix's)
};

// Tiles of the forward program's prefix that the owner's loop body reads only as `v.to(P.dtype.element_ty)` (one
// pointer parameter P of `types` for all its reads; `pointer_param` maps a pointer to the parameter it is computed
// from), computed from two loads or more, all under one mask with `other` 0 (v is 0 where the mask is false) and at
// one set of offsets, one of them through the upstream gradient of a forward output (`forward_pointers`, `input_of`:
// gradient -> its input), which that output's program alone stores: saved in P's element type, laid out like the
// output's tensor, at
// those offsets (names of `prologue_names` or parameters). `definition`: a name's one definition in the backward
// kernel, or null. value -> where and how it is saved.
std::map<std::string, CastOperandTile> cast_operand_tiles(
    const ast::StmtList &loop_body, const std::set<const ast::Stmt *> &prefix, const sema::ParamTypes &types,
    const std::function<const sema::SType *(const std::string &)> &type_of_name,
    const std::function<std::string(const std::string &)> &pointer_param, const std::set<std::string> &forward_pointers,
    const std::function<const ast::Expr *(const std::string &)> &definition, const std::set<std::string> &prologue_names,
    const std::map<std::string, std::string> &input_of);

}  // namespace tgrad::ad::reverse
