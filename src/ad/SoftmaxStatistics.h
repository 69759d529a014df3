// An online softmax's backward from the statistics the forward stores
// (DESIGN.md §3, "statistics instead of tapes").
//
// A flash-attention forward runs an online softmax over the key blocks:
//
//     m_ij = tl.maximum(m_i, tl.max(qk, 1))
//     p = tl.math.exp2(qk - m_ij[:, None])
//     alpha = tl.math.exp2(m_i - m_ij)
//     l_i = l_i * alpha + tl.sum(p, 1)
//     acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
//     m_i = m_ij
//
// and after the loop stores out = acc / l_i[:, None] and the row statistic
// lse = (m_i + tl.math.log2(l_i)) * K. Reversing that loop as written needs
// the running max of every iteration (a tape) and acc, l_i recovered by
// division. Neither is needed. Write c for the stored statistic in the
// loop's log domain (lse / K = m + log2 l, final values). Both outputs are
// invariant under a shift of the scores' reference point, so
//
//     out = sum_j exp2(qk_j - c) v_j / L,    lse = (c + log2 L) * K,
//     L = sum_j exp2(qk_j - c)
//
// hold with c taken as a constant: the gradient of the outputs with respect
// to the inputs is the same whether c moves with them or not. With c read
// back from what the forward stored, L = 1 (up to rounding), and the
// backward needs out and L only at that point: there
//     d(acc / L) = d acc - out dL,   d log2 L = dL / ln 2
// so the kernel this module writes for the engine to differentiate is
//
//     c = <stored statistic> / K              (read back: no gradient)
//     o = <stored output>                     (read back: no gradient)
//     for ...:  p = exp2(qk - c[:, None]);  l_i = l_i + tl.sum(p, 1)
//               acc = acc + tl.dot(p.to(...), v)
//     out = acc - o * (l_i - 1)[:, None];  lse = (c + (l_i - 1) / ln 2) * K
//
// which has the forward's values (to rounding) and the forward's first
// derivatives at the point the forward ran: additive accumulators only, so
// the reversed loop needs no tape, carries nothing but gradients, and its
// iterations are independent (owner-computes can gather dK and dV). This is
// the FA2 backward's dS = P * (dP - rowsum(dO * O)), derived. The one
// approximation is the same as a hand-written FA2 backward's: `o` is the
// output as stored (rounded to its dtype).
//
// Conditions checked: the loop has exactly that shape (exp or exp2, the
// matching log); the max, the exponentials and the carried values are read
// nowhere else; after the loop the three are read only by `out` and `lse`,
// each stored once at the top level, with addresses and masks computable
// before the loop; every row whose output is stored has its statistic
// stored (the output's mask implies the statistic's); the statistic's buffer
// is typed float32 (--arg M=*fp32: read back exactly). Elsewhere the kernel
// is left as it is.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/ad/Anf.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct SoftmaxStatistics {
  // The placeholders the rewritten kernel defines before the loop (`c`,
  // `o`), each with the load the backward's replay defines it by instead,
  // and the pointer parameter that load reads.
  struct ReadBack {
    std::string value;
    ast::ExprPtr load;
    std::string base;
    bool exact = true;  // read back at the dtype it was computed in (the statistic); false: rounded (the output)
  };
  std::vector<ReadBack> read_back;
  // Values the backward reads only for their shape or dtype (`x.shape` in an
  // unbroadcast, `by.to(x.dtype)`), each with a placeholder of the same type
  // (shape and dtype derive from the same initial value whatever the
  // parameters' dtypes): reading the placeholder's instead keeps the loop's
  // replay, which computes them, out of the backward.
  std::map<std::string, std::string> witnesses;
  std::string explanation;
};

struct SoftmaxStatisticsContext {
  // The builtin a call's callee resolves to ("tl.exp2", "math.exp2", "tl.dot"), or "".
  std::function<std::string(const ast::Call &)> builtin;
  // A name's type, or null.
  std::function<const sema::SType *(const std::string &)> type_of;
  // Whether a pointer parameter's type is a representative of several.
  std::function<bool(const std::string &)> generic;
};

// Rewrites the first top-level loop of `anf` that runs an online softmax
// whose statistic the kernel stores, as above; nullopt (and `anf`
// unchanged) where there is none. New names come from `names`. Where a loop
// runs an online softmax that cannot be rewritten, `declined` (if given)
// gets why, for --explain.
// `flags_at` (if given) gets the loop's position where the reason is tl.constexpr
// values not given (-D would let tgrad read the statistic): worth a note;
// `flags` (if given) the tl.constexpr parameters those values are of.
std::optional<SoftmaxStatistics> read_softmax_statistics(AnfFunction &anf, const SoftmaxStatisticsContext &context,
                                                         NameAllocator &names, std::string *declined = nullptr,
                                                         SourceSpan *flags_at = nullptr,
                                                         std::vector<std::string> *flags = nullptr);

}  // namespace tgrad::ad
