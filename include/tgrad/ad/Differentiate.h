// Reverse-mode differentiation of a pure tile function (Tangent style).
//
//   def fn1(x, y): ... return z        -->   def fn1_bwd(x, y, bout): ... return bx, by
//
// The backward replays the primal statements (in A-normal form), then runs
// the adjoint statements in reverse order, one "# Grad of: <statement>"
// block per user statement. Adjoints are named b<name>; a value used more
// than once accumulates (`bx += ...`); an adjoint flowing into a broadcast
// operand is summed back to the operand's shape (unbroadcast) with a
// tl.static_assert on the shape it relies on. Rules come from one table
// (src/ad/adjoints/rules.py). Values that are not floating point (masks,
// comparisons, integers) carry no adjoint. No dead code is emitted.
//
// Kernels (pointer parameters, tl.load / tl.store): the backward kernel takes
// every forward argument plus d<ptr> for each differentiated input pointer
// and each stored-to output pointer. The adjoint of a store loads the
// upstream gradient under the store's mask (other=0); the adjoint of a load
// writes the gradient under the load's mask: a plain store where the access
// analysis proves each address belongs to one program and lane, a per-program
// partial sum plus a reduction kernel where every program loads the same
// addresses (weights), an atomic add otherwise (src/ad/AccessAnalysis.h).
// Runtime loops and ifs are reversed as DESIGN.md §3 describes: see
// src/ad/ReverseMode.cpp.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tgrad/ast/Ast.h"
#include "tgrad/diag/Diagnostics.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct BackwardRequest {
  std::string function;                     // the jit function to differentiate
  std::vector<std::string> wrt;             // parameter names, in the order the adjoints are returned
  sema::ParamTypes param_types;             // types of the parameters (tiles, scalars, constexprs)
  std::string command_line;                 // recorded in the output's header
  // Kernels: output pointers that carry no upstream gradient (statistics
  // saved for the backward, as PyTorch's ctx.mark_non_differentiable): they
  // get no gradient buffer, and their stores no adjoint.
  std::vector<std::string> no_grad = {};
  // Parameters the caller gave no type: differentiate() picks representative
  // types for them (src/ad/GenericTypes.h) and sets these for its trial runs;
  // callers leave them empty. The backward must then be the same for every
  // representative: no cast dropped because a dtype happened to match, half
  // precision adjoints accumulated in float32 whatever the input's dtype.
  std::set<std::string> generic_params = {};
  // --wrt parameters the kernel loads through in some specialization of its
  // constexprs (found on the kernel as written, before -D values fold its
  // branches): where this specialization does not load through one, it is
  // still a pointer, with gradient zero. Set by differentiate(); callers
  // leave it empty.
  std::set<std::string> pointers_in_some_specialization = {};
  // Tile parameters among them, whose shapes are unknown too: every
  // unbroadcast is left to the emitted helper _tgrad_unbroadcast, resolved
  // when Triton compiles the backward for its operands' shapes.
  bool generic_shapes = false;
  // Kernels: --wrt inputs that get partial sums even where this kernel does
  // not load them (set by the specializer, src/ad/Specialize.cpp: where a
  // flag's value leaves W unloaded, W's partial-sum rows stay zero, so that
  // every specialization has the same partial sums and one launch protocol
  // serves them all). Callers leave it empty.
  std::vector<std::string> partial_sums_for = {};
  // Kernels: whether a gradient the reverse loop scatters with atomics may
  // move to an owner-computes kernel of its own (Backward::OwnerKernel).
  // Cleared where one backward function must serve several forwards (the
  // specializer's dispatcher over flag values, the row-length dispatcher).
  bool owner_computes = true;
  // Prefer schedules whose gradients are bitwise identical run to run: where
  // an owner-computes kernel needs values only the forward's loop computes
  // (a matmul's relu epilogue), a prologue kernel saves them per forward
  // program (Backward::saved_tiles) instead of leaving the gradient to
  // atomics from every program. Off by default: at small reduction tiles the
  // owners reading the saved float32 tiles are slower than the atomics
  // (bench/RESULTS.md).
  bool deterministic = false;
  // Kernels: tl.constexpr parameters the user declares to only tile the
  // computation (`--tiling BLOCK_SIZE_M,BLOCK_SIZE_N`): the forward's outputs
  // are the same for any power of two in them. Not used by differentiation;
  // the launch protocol records it ("tiling") and the torch module tunes
  // those values for the backward's kernels instead of holding them to the
  // forward's autotune configs (src/driver/TorchRuntime.py).
  std::vector<std::string> tiling = {};
};

struct Backward {
  // The backward function and the jit functions it calls, with imports: a
  // module that runs under Triton and in tgrad's interpreter.
  std::unique_ptr<ast::Module> module;
  // The forward function as differentiated where it differs from the user's
  // (block pointers lowered, helpers that access memory inlined:
  // src/lower/): the launch protocol reads its loops. Null otherwise.
  std::shared_ptr<const ast::Function> forward;
  std::string backward_name;                // "fn1_bwd"
  std::vector<std::string> output_adjoints; // the b<out> parameters, in the order of the outputs
  std::string source;                       // the module printed, with its header

  // Kernels: the gradient buffers the backward takes after the forward's
  // arguments, as (forward pointer, gradient pointer): first the --wrt
  // inputs in --wrt order, then the outputs in parameter order.
  std::vector<std::pair<std::string, std::string>> gradient_buffers;
  size_t input_gradients = 0;               // how many of them are inputs
  std::vector<std::string> explanations;    // --explain: each memory adjoint's decision and reason
  // Worth saying without --explain (a faster backward that -D values would
  // give): where, and what. differentiate() reports them as notes.
  std::vector<std::pair<SourceSpan, std::string>> notes;
  // An online softmax kept with its taped backward because ifs on
  // tl.constexpr parameters without values hide it (one of the notes): those
  // parameters, and how many of the backward's specializations (of
  // `specializations`) keep such a tape.
  std::vector<std::string> softmax_taped_under;
  size_t softmax_taped = 0;
  size_t specializations = 1;
  // Inputs whose gradient buffers must start at zero (atomics, or adds in
  // place before any plain store); the others' buffers may hold anything.
  std::vector<std::string> zero_initialized;

  // Weights that every program loads (a norm's W and B): instead of atomics
  // from every program, the backward runs on a grid of its own, G programs
  // (any G <= the forward's number of programs along axis 0), each looping
  // over the forward's programs program_id(0), program_id(0) + G, ... and
  // adding those gradients to its own row of a float32 scratch buffer of
  // [G, numel(input)] (each program zeroes its row first); then
  // `reduce_kernel` writes the sum of the G rows to the gradient buffer.
  // Deterministic, and contention-free.
  struct PartialSum {
    std::string input;     // the forward's pointer parameter ("W")
    std::string gradient;  // its gradient buffer ("dW")
    std::string scratch;   // the backward's scratch-buffer parameter ("dW_partial")
    std::string numel;     // the backward's parameter for numel(input): the scratch's row length ("W_numel")
  };
  std::vector<PartialSum> partial_sums;
  std::string num_programs_param;  // the forward's grid size along axis 0, a parameter of the backward
  std::string reduce_kernel;       // reduce_kernel(partial, gradient, numel, rows, BLOCK: tl.constexpr, ROWS: tl.constexpr)
  // The blocks the JSON recommends: grid cdiv(numel, BLOCK), ROWS rows of the scratch per step.
  static constexpr int kReduceBlock = 32;
  static constexpr int kReduceRows = 64;

  // Owner-computes kernels (src/ad/reverse/OwnerComputes.h): where the
  // backward's reverse loop would add a gradient tile with atomics from every
  // program that read it, a kernel of its own computes each tile once, in the
  // program that owns it. Its grid is the forward's with the axis the tile's
  // addresses do not depend on (`summed_axis`) replaced by the iterations of
  // the forward's loop; each program loops over the forward's programs along
  // that axis (`programs_param`: the forward's grid size there), sums their
  // contributions in registers and writes the tile once. Launched after the
  // backward kernel (when `backward_kernel_writes`), in order.
  struct OwnerKernel {
    std::string name;            // "matmul_kernel_bwd_da_ptr"
    // The gradient buffers it writes ("da_ptr"; several where they share the
    // loop and the axis, as attention's dK and dV do) and the forward's
    // pointers whose gradients those are ("a_ptr"), in the same order.
    std::vector<std::string> gradients;
    std::vector<std::string> inputs;
    int summed_axis = 0;         // the forward's grid axis each program loops over
    std::string programs_param;  // its parameter for the forward's grid size along that axis ("": none, below)
    // Where the forward's 1-D grid enumerates a 2-D one in grouped order
    // (src/ad/reverse/GroupedOrder.h), the owner's grid is that 2-D grid's,
    // not the forward's: per axis, its size over launch values
    // (`tl.cdiv(M, BLOCK_SIZE_M)`), null for the summed axis, which the
    // loop's iterations replace. The kernel computes the count it loops over
    // itself, so `programs_param` is "". Empty: the forward's grid.
    std::vector<std::shared_ptr<const ast::Expr>> grid_sizes;
    // Axes 0 and 1 of its grid swapped (src/ad/reverse/LongestFirst.h): the sizes above (the forward's grid with
    // the summed axis replaced) are launched as (size 1, size 0, size 2), so that its longest programs start first.
    bool longest_first = false;
    int loop_line = 0, loop_column = 0;  // the forward's loop whose iterations the grid enumerates
    std::string loop_range;      // "range(0, tl.cdiv(K, BLOCK_SIZE_K))"
    // The backward kernel as the owner was cut from it, up to and with that
    // loop (its body emptied): where the launch protocol reads the trip
    // count when the forward has several loops at the loop's position (one
    // helper inlined twice: the two stages of a causal attention).
    std::shared_ptr<const ast::Function> loop_context;
    bool plain_store = false;    // writes with tl.store (else one tl.atomic_add per element and owner)
    std::vector<std::string> saved_tiles;  // the SavedTile scratch parameters it reads (after programs_param)
    std::string why;             // for --explain and the protocol
  };
  std::vector<OwnerKernel> owner_kernels;
  // Where what an owner adds needs values only the forward's loop computes
  // (the relu epilogue's adjoint needs the accumulator), a prologue kernel
  // over the forward's grid replays that loop once per program and saves
  // those values, and the owners read them instead of replaying it once per
  // owner and program. Each saved value has a scratch buffer of
  // [programs, numel(value)] of its own dtype (`programs`: the forward's grid
  // size over all axes, index (pid0 * grid1 + pid1) * grid2 + pid2), which the
  // prologue writes entirely before the owners read it. Launched before the
  // backward kernel and the owners.
  struct SavedTile {
    std::string scratch;                  // the parameter of the prologue and owners ("baccumulator_2_saved")
    std::string value;                    // the value saved ("baccumulator_2")
    std::vector<std::string> tile_shape;  // its element count, as factors: numbers or constexpr parameter names
    sema::DType dtype = sema::DType::FP32;
    // Where not "": the value is saved at the offsets of this output of the forward, into a scratch laid out like
    // it, where the owners read it, whatever their block sizes. Either a row statistic (whose store of a tile of
    // the value's shape gives each row one program and lane: attention's logsumexp M) that the backward kernel
    // saves (`by_backward_kernel`: no prologue, the backward kernel runs before the owners, on the forward's grid
    // at any block sizes of its own), or a tile the prologue saves at the addresses the forward's loads of it read
    // (`dtype_of`: the relu epilogue's masked upstream gradient, like the output C).
    std::string like;
    bool by_backward_kernel = false;
    // Where not "": the tile is saved in the element type of this pointer parameter, the type its every use casts
    // it to (the relu epilogue's masked upstream gradient, an operand of tl.dot in B's dtype): `dtype` is that
    // parameter's as typed here, and a launch allocates the scratch in the dtype of the tensor it passes there.
    std::string dtype_of;
  };
  std::string prologue_kernel;            // "" where no owner needs one
  std::vector<SavedTile> saved_tiles;
  // False where owner-computes kernels write every gradient: the backward
  // kernel itself is not emitted nor launched.
  bool backward_kernel_writes = true;

  // Loops that carry values which are neither recomputed nor additive (the
  // running max, sum and output of online softmax): the backward runs such a
  // loop forward once, writing each iteration's incoming values to a tape,
  // then runs it in reverse, reading them back. One float32 scratch buffer
  // per taped value (integer ones: of their type), of [programs, trips, numel(value)]: `programs` is the
  // forward's grid size over all axes, `trips` the value of the backward's
  // `trips_param` argument, which must be at least the most iterations any
  // program runs of the loop. Past it the backward reads NaN, so too small
  // a value shows as NaN gradients, never as a silently wrong one.
  struct Tape {
    std::string scratch;                  // the backward's parameter ("acc_tape")
    std::string value;                    // the carried value ("acc")
    std::vector<std::string> tile_shape;  // its element count, as factors: numbers or constexpr parameter names
    // Where one backward serves several flag values (a dispatcher), the
    // shapes other specializations tape under this name with another element
    // count ([BK] with NORMK, [BV] without): an entry holds the largest.
    std::vector<std::vector<std::string>> other_tile_shapes;
    std::string trips_param;              // the backward's parameter for the bound on the trip count
    int loop_line = 0, loop_column = 0;   // the forward's loop
    std::string loop_range;               // "range(0, hi, BLOCK_N)"
    // The tape's element type: FP32 for floating-point values, Int32/Int64
    // for integers carried beside them (an argmax index, a column offset),
    // Int8 for booleans.
    sema::DType dtype = sema::DType::FP32;
  };
  std::vector<Tape> tapes;

  // Outputs the forward may write more than once at an address (several
  // stores, a store repeated by a loop, or one every program runs), with
  // why: only the last value written has a gradient, so the backward
  // consumes the upstream gradient (each store's adjoint, in reverse order,
  // takes it and leaves zeros). Their gradient buffers are float32 copies
  // of the upstream gradient, which the backward overwrites.
  std::vector<std::pair<std::string, std::string>> consumed_upstream;

  // Inputs the kernel also stores to, updating them in place: each has one
  // gradient buffer (among the inputs'), which holds the upstream gradient
  // of the contents after the kernel on entry (a float32 copy, consumed as
  // above) and the gradient of the contents before it on return. The
  // backward reads the input as it was before the kernel.
  std::vector<std::string> in_place;

  // Output pointers whose contents the backward reads: the values the
  // forward stored there (a norm's Mean and Rstd), loaded instead of
  // computed again. The caller passes them as the forward left them.
  std::vector<std::string> saved_outputs;

  // Gradients the backward still adds with tl.atomic_add from several
  // programs (the access analysis found no owner, no partial sums and no
  // plain store for them): their bits may differ from run to run. With
  // BackwardRequest::deterministic, differentiate() warns at each one's load.
  struct AtomicGradient {
    std::string input;   // the forward's pointer parameter ("b_ptr")
    SourceSpan load;     // the forward's load whose gradient that is
    std::string reason;  // why no other schedule applies
  };
  std::vector<AtomicGradient> atomic_gradients;

  // Gradients written with plain stores where each address is one program's and lane's only for strides that
  // keep a box of indices apart (AccessDecision::layout: `(pid // H) * stride_z + (pid % H) * stride_h + rows *
  // stride_m + cols`), else (an expanded view: stride 0) added atomically: the kernel chooses by `flag`, a runtime
  // parameter the launcher sets to 1 where the box's cells are apart ({"disjoint": [extents, strides]}). The
  // gradient buffer starts at zero, which a launcher may skip where the flag is 1 and the forward loads every element
  // (and no store runs under a runtime if: zeros_anyway).
  struct LayoutAssumption {
    std::string input;  // the forward's pointer parameter whose gradient is stored so
    std::string kernel;  // the kernel that stores it ("": the backward kernel)
    std::string flag;    // the kernels' parameter: 1 where the cells are apart
    std::vector<std::pair<std::shared_ptr<const ast::Expr>, std::shared_ptr<const ast::Expr>>> extent_stride;
    // A store it guards runs under a runtime if: elements a skipped branch does not store keep the buffer's zeros,
    // which no launcher may then skip, whatever the flag.
    bool zeros_anyway = false;
  };
  std::vector<LayoutAssumption> layout_assumptions;
  // Whether no two cells of a box of indices i_k in [0, extent_k) at sum(i_k * stride_k) meet, given (stride,
  // extent) pairs: by increasing |stride|, each beyond the reach of the smaller ones (PyTorch's non-overlapping
  // test; the protocol's {"disjoint": ...}).
  static bool cells_apart(std::vector<std::pair<int64_t, int64_t>> stride_extent);

  // --wrt inputs whose gradient is provably zero (what they load reaches no
  // differentiated store), with the reason. The backward does not write
  // their gradient buffers: they are listed in zero_initialized too.
  std::vector<std::pair<std::string, std::string>> zero_gradients;

  // Kernels: the backward's parameters after the forward's, in order: the
  // gradient buffers, the partial sums' scratch buffers and row lengths,
  // num_programs_param, the tapes' scratch buffers, then their trip bounds
  // (each once).
  std::vector<std::string> parameters_after_forward() const;

  // Adds what `other`, a backward launched in this one's place under some
  // condition (a flag's value, rows that fit one block), needs of the
  // launcher's buffers: zeroed gradient buffers, consumed (float32-copied)
  // upstream gradients and saved outputs, each once, in order of first
  // appearance.
  void add_buffer_needs(const Backward &other);

  // Parameters given no type, with the types tgrad differentiated them with
  // and got this same backward for ("*fp32", "*fp16", "*bf16"; "fp32[x0]",
  // "fp32[x0, x1]"): the first is the representative the others were
  // compared with. Empty when every parameter had a type.
  std::vector<std::pair<std::string, std::vector<std::string>>> generic_types;
  // Of the types tried for a parameter, those with which the forward itself does not compile (tl.exp of a bf16
  // tile): Triton refuses such a launch too, so this backward need not serve them. A dispatcher over flag values
  // serves a type where each specialization serves it or its forward refuses it.
  std::vector<std::pair<std::string, std::vector<std::string>>> forward_rejected_types;
};

std::optional<Backward> differentiate(const ast::Module &module, const SourceManager &sources,
                                      const BackwardRequest &request, DiagEngine &diags);

}  // namespace tgrad::ad
