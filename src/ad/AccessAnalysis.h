// Access analysis for memory adjoints: which programs and lanes of a kernel
// touch which addresses, decided from the index expressions (DESIGN.md §3).
//
// Over a kernel in A-normal form, every integer value gets an affine form in
// the program ids and the lanes of tl.arange tiles; every pointer value gets
// its base parameter and the affine form of its offset. A load's adjoint can
// then be written with a plain store when the pointer is provably injective
// (no two programs or lanes share an address), and needs an atomic add (or a
// reduction) otherwise. A loop variable `v` of `range(lo, hi, step)` next to
// a `tl.arange(0, step)` tile (`cols = v + tl.arange(0, BLOCK)`, step ==
// BLOCK) walks disjoint blocks, which counts as one tile of lanes. The proofs
// are deliberately narrow: a pattern that is
// not recognised is treated as shared, which costs speed, never correctness.
#pragma once

#include <map>
#include <optional>
#include <set>
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
    Broadcast,          // no program id in the offset, lanes distinct: every program reads the same addresses
  };
  Kind kind = Kind::Shared;
  std::string reason;               // for --explain and the generated comment
  ast::ExprPtr assumption;          // InjectiveAssuming: a boolean expression over kernel values
  std::string assumption_message;
  std::string offset_key;           // the offset's affine form, as text: equal keys, equal address sets
  // Injective kinds: which lanes the mask keeps, as text ("" for all; equal
  // keys with equal offset keys, equal addresses written).
  std::string mask_key;
  // The offset walks the loop around the load (`start + tl.arange(0, BLOCK)`
  // in `range(lo, hi, BLOCK)`): each iteration reads addresses of its own.
  bool walks_loop = false;
  // Programs may meet at these addresses for certain: the offset lacks a
  // program id the kernel reads (every program, or every program along an
  // axis, touches the same addresses). Not set for offsets merely not
  // analysed.
  bool programs_share = false;
  // The program term is this grid-stride loop's variable (`for row in range(tl.program_id(0), n, tl.num_programs(0))`):
  // an injective offset then gives each of that loop's iterations addresses of its own.
  std::string grid_stride_var;
  // The loop whose variable the lanes walk (`v + tl.arange(0, B)` in `range(lo, hi, B)`), or "": each of its
  // iterations has addresses of its own.
  std::string walked_loop_var;
  // InjectiveAssuming by layout (AccessAnalysis::classify_layout): the offset is a sum of indices times strides,
  // each index over [0, extent): (extent, stride) for each, as expressions over the kernel's parameters and
  // tl.num_programs. Distinct programs and lanes have distinct index tuples; their addresses are distinct where
  // no two cells of that box of strides meet, which only the launch's values tell (the launch protocol's
  // "disjoint" check; no device assertion expresses it).
  std::vector<std::pair<ast::ExprPtr, ast::ExprPtr>> layout;
};

class AccessAnalysis {
 public:
  AccessAnalysis(const ast::Function &anf_kernel, const std::map<std::string, sema::SType> &name_types);

  // The pointer parameter a pointer value is based on, or "" if unknown.
  std::string base_of(const std::string &pointer) const;
  // How the adjoint of a load through `pointer` (masked by `mask`, or "") can be written.
  AccessDecision classify(const std::string &pointer, const std::string &mask) const;
  // Where classify finds the offset not analysed (program ids split by `//` and `%`, tiles of several
  // tl.arange axes, strides given at run time): whether it is a box of indices times strides, one index per
  // program axis (`pid`, or `pid // D` and `pid % D` both) or block of programs (`pid * B + tl.arange(0, B)`),
  // one per tile axis: then Injective where the strides are numbers that keep the box's cells apart,
  // InjectiveAssuming with `layout` set where they are given at run time. A loop around the load whose blocks walk a
  // tile axis (`i * B + tl.arange(0, B)` from i = 0 by 1, under a mask bound) is one index more (walks_loop set).
  // Nullopt where it is not such a box.
  std::optional<AccessDecision> classify_layout(const std::string &pointer, const std::string &mask) const;
  // classify_layout for the flush of an owner-computes kernel (src/ad/reverse/OwnerComputes.h) that sums the
  // forward's programs along `summed_axis` and makes each iteration of the loop over `loop_var` a program: the
  // offset of a load in that loop must not depend on the summed axis, and the loop's blocks (`v + tl.arange(0,
  // B)`, v from 0 by B, under a mask bound) are one index of the box.
  // `in_bounds`: pairs (i, B) of an index i whose lanes the flush keeps only where i < B (src/ad/reverse/ZeroLanes.h):
  // there `i % B` is i, where i is a block of programs or lanes (never negative).
  std::optional<AccessDecision> classify_owner_layout(
      const std::string &pointer, const std::string &mask, int summed_axis, const std::string &loop_var,
      const std::set<std::pair<std::string, std::string>> &in_bounds = {}) const;
  // Loads through one base at offsets that differ only by numbers the same everywhere (rotary embeddings' two
  // halves, `Q + o` and `Q + o + HALF`; pairs `X + 2 * i` and `X + 2 * i + 1`), under one mask: whether together
  // they give each address one program, lane and load. The shifts, in the order of `pointers`, must be 0, s, 2s, ...
  // (s a number, or a parameter for two loads): a box index over the loads of stride s joins the layout box of the
  // first load's offset (classify_layout), decided by numbers or left to the launch (`layout`); in a loop walking
  // blocks of a tile axis, its blocks are one index more. Nullopt otherwise.
  std::optional<AccessDecision> classify_layout_union(const std::vector<std::string> &pointers,
                                                      const std::string &mask) const;
  // How a load's gradient is written: classify, and where that finds the offset merely not analysed (not shared
  // for certain), classify_layout.
  AccessDecision classify_load(const std::string &pointer, const std::string &mask) const;
  // Whether, within one program, each iteration of the loop over `loop_var`
  // touches through `a` and `b` (two pointers off one base) addresses no
  // other iteration touches through either: both offsets are
  // k * (v + tl.arange(0, B)) with v stepping by B (or v * B + tl.arange(0, B)
  // with v stepping by 1), the same program terms and names, and integer
  // constants that differ by less than k. Rotary kernels read and write the
  // pairs `x + 2 * cols` and `x + 2 * cols + 1` so. Or, with the masks
  // `mask_a`, `mask_b` (names, or ""): both offsets v * C + lanes (+ S for
  // one of them, a name), the lanes masked by lanes < E, where E <= C and
  // S + E <= C (E = S = C // 2: the two halves of a head, unsloth's rope).
  bool iterations_touch_their_own(const std::string &a, const std::string &b, const std::string &loop_var,
                                  const std::string &mask_a = "", const std::string &mask_b = "") const;
  // Whether each iteration of the loop over `loop_var` touches through `a`
  // and `b` (one base, one mask) an address block of its own: both offsets
  // t * S + R + U with the same S and U, and R in [0, S) by the masks' bounds
  // and remainders (src/ad/AccessBlocks.cpp; fla's chunk reductions).
  bool iterations_own_blocks(const std::string &a, const std::string &b, const std::string &loop_var,
                             const std::string &mask_a, const std::string &mask_b) const;
  // Whether, within one program, two different iterations of the loop over `loop_var` (from 0) never write
  // one address through `pointer` under `mask`: the offset is c * o plus terms that are multiples of c * E plus
  // values the iterations share, where o = loop_var * B + tl.arange(0, B) with the loop stepping by 1, or
  // o = loop_var + tl.arange(0, B) with the loop stepping by B (disjoint ranges per iteration), and the
  // mask bounds o by E (`o < E`; not needed where no other term varies). Then an address's remainder modulo c * E
  // is c * o, which tells the iterations apart. A row-major tile whose column blocks the loop walks:
  // `DK + rows[:, None] * (H * K) + (i_k * BK + tl.arange(0, BK))[None, :]` under `... & (o_k[None, :] < K)`.
  bool iterations_write_apart(const std::string &pointer, const std::string &mask, const std::string &loop_var) const;

 private:
  // `selector`: an index more (stride text, extent), classify_layout_union's choice among shifted loads.
  std::optional<AccessDecision> layout_box(const std::string &pointer, const std::string &mask, int summed_axis,
                                           const std::string &loop_var,
                                           const std::pair<std::string, int64_t> *selector = nullptr) const;
  // iterations_own_blocks with masked indices read by their masks' bounds (`masks`) or by their lanes' extents.
  friend class OffsetPolynomials;  // src/ad/AccessBlocks.cpp: offsets as polynomials over bounded atoms
  bool blocks_by_bounds(const std::string &a, const std::string &b, const std::string &loop_var,
                        const std::string &mask_a, const std::string &mask_b, bool masks) const;
  struct Term {
    std::string coefficient;   // a known integer ("1", "256") or a name (a runtime scalar or constexpr)
    int64_t extent = 0;        // lanes: known extent (0 if symbolic)
    std::string extent_symbol; // lanes: symbolic extent
    bool walks_loop = false;   // merged with a loop variable stepping by the extent: unbounded
    std::string source;        // which values: "tl.arange(0, 128)", "+ start" once merged with a loop variable
    bool walks_programs = false;  // merged with a program id stepping by the extent (a 2-D grid's column blocks)
    std::string walked_var = {};  // walks_loop: that loop's variable
    int tile_axis = 0;            // the axis of the tile it varies along (`x[None, :]`: 1); layout analysis only
  };
  // `pid // divisor` (remainder false) or `pid % divisor` of the program id along `axis`, times `coefficient`:
  // formed only in layout analysis (general_).
  struct RadixTerm {
    int axis;
    std::string divisor;
    bool remainder;
    std::string coefficient;
  };
  struct LoopTerm {
    std::string var;          // the loop variable of `for var in range(lo, hi, step)`
    std::string coefficient;  // "1" or a name
  };
  struct Affine {
    bool valid = true;                       // false: not an affine form we understand
    std::map<int, std::string> pid;          // program axis -> coefficient
    std::vector<Term> lanes;                 // arange terms
    std::vector<LoopTerm> loops;             // loop-variable terms
    std::vector<RadixTerm> radix;            // program ids split by // and % (layout analysis only)
    bool shifted = false;                    // a value the same everywhere was added: the constant part is not tracked
    // What was added where shifted: names and literals, or "?" for anything else (a shifted form scaled).
    std::vector<std::string> shift_names;
    // A program term is a grid-stride loop's variable: each iteration of a
    // program also has values of its own.
    bool grid_stride = false;
    std::string grid_stride_var;  // that loop's variable
  };
  struct Loop {
    std::string lo, hi, step;  // the range's bounds as text ("0" when omitted, "1" for the step)
  };
  Affine affine(const std::string &name) const;
  bool from_parameters_only(const std::string &name, int depth = 0) const;
  // A form of program ids and lanes with positive coefficients (numbers, tl.constexpr parameters), nothing added.
  bool never_negative(const Affine &form) const;
  // A pointer's offset from its base parameter: the affine form, and the
  // parts the same in every program and lane (names or literals, as text).
  // Empty with `why` set where the chain from the base is not understood.
  // `one_program`: scalars computed before every loop are constants (uniform
  // parts by name), however they are computed.
  struct Offset {
    Affine form;
    std::vector<std::string> uniform_parts;
    bool untracked_shift = false;
    std::string why;  // non-empty: not analysed
  };
  Offset offset_of(const std::string &pointer, bool one_program) const;
  // A pointer a top-level loop `for v in range(0, n)` advances by a fixed step at the end of each iteration, read
  // only in that loop before the advance (`p = p + BLOCK_K * stride_ak`, the tutorial matmul's): at every read it is
  // `start + v * step`. Layout analysis only.
  struct Induction {
    std::string start;  // the pointer before the loop
    LoopTerm term;      // v times the step (a product of parameters and numbers, as text)
  };
  std::optional<Induction> induction(const std::string &pointer) const;
  // A name assigned twice, `x = start` (a name) at the top level and once in the body of a later top-level
  // `for v in range(...)`, by `x = x + step` or `x = next` with `next = x + step`, that assignment its iteration's
  // last read or write of x, and x read nowhere outside that loop: what induction and integer_induction share.
  struct Advanced {
    std::string start, var;
    const Loop *loop;
    const ast::Expr *step;
    bool through_name;  // `x = next`, not `x = x + step`
  };
  std::optional<Advanced> advanced_by_loop(const std::string &name) const;
  // An integer offset a top-level loop `for v in range(lo, hi, s)` advances by s (or by 0) at the end of each
  // iteration, as a lowered block pointer's offset is after `tl.advance(p, (0, s))`, started before the loop at
  // `lo` or at `a + lo` (`tl.advance(p, (0, lo))`, then the loop from lo), and read only in that loop before the
  // advance: at every read it is v, or a + v (its start where advanced by 0). Layout analysis only.
  std::optional<Affine> integer_induction(const std::string &name) const;
  // A scalar's value as a product of parameters and numbers ("BLOCK_K*stride_ak"), or none.
  std::optional<std::string> product_of_parameters(const std::string &name, int depth = 0) const;
  // An integer literal 0, or a name assigned one (never reassigned).
  bool is_zero(const ast::Expr &e) const;
  // The program axis a grid-stride loop (from tl.program_id(a) by
  // tl.num_programs(a)) deals its iterations over, or none.
  std::optional<int> grid_stride_axis(const Loop &loop) const;
  void collect(const ast::StmtList &block);
  std::string key(const Affine &a) const;
  // A coefficient's text, or its value where it names a constexpr with a known value.
  std::string value_of(const std::string &text) const;
  std::string resolve_copy(const std::string &text) const;
  bool merge_program_blocks(Affine &a, int axis) const;
  bool merge_loop_blocks(Affine &a) const;
  // The comparisons a mask is the conjunction of (`(i0 >= 0) & (i0 < n0)`, as lowered block pointers mask).
  // The comparisons a mask is the conjunction (`&`) of. Through `m[:, None]` (trailing new axes only: each axis of
  // m keeps its position) to m's own. `ranks`, where given: the rank at which each applies (its own, or the
  // broadcast's).
  std::vector<const ast::Compare *> mask_conjuncts(const std::string &mask, std::vector<size_t> *ranks = nullptr) const;
  // Where `mask` holds a conjunct `lanes < E` on the very tl.arange of `lane` (coefficient 1): E.
  std::optional<std::string> lane_bound(const std::string &mask, const Term &lane) const;
  bool masked_halves_own_iterations(const Offset &x, const Offset &y, const std::string &loop_var,
                                    const std::string &mask_x, const std::string &mask_y) const;

  // Layout analysis (classify_layout) is running: affine() also forms products of coefficients, `pid // D`,
  // `pid % D` and tile axes, which the other analyses do not read (they see such offsets as not analysed).
  mutable bool general_ = false;
  // classify_owner_layout's in_bounds, while it runs: `i % B` read as i.
  mutable std::set<std::pair<std::string, std::string>> in_bounds_;
  const ast::Function &fn_;
  const std::map<std::string, sema::SType> &types_;
  std::map<std::string, const ast::Expr *> defs_;  // SSA name -> its (first) defining value
  std::multimap<std::string, const ast::Expr *> all_defs_;  // SSA name -> every defining value
  std::set<std::string> redefined_;                // names assigned more than once: loop-carried values
  std::set<std::string> in_loops_;                 // names assigned inside a loop body
  int loop_depth_ = 0;                             // while collecting
  std::map<std::string, Loop> loops_;              // loop variable -> its range
  std::set<int> program_axes_;                     // axes of tl.program_id calls in the kernel (-1: not a literal)
};

}  // namespace tgrad::ad
