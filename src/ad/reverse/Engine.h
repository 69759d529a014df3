// The reverse-mode engine: its state and its operations, one class whose
// member functions live in the files of src/ad/reverse/ by responsibility:
//   src/ad/ReverseMode.cpp              the driver: types, A-normal form, the
//                                       tile function's sweep, differentiate_typed
//   src/ad/reverse/Stabilizers.cpp      the stabilizer proof (maxes with a zero gradient)
//   src/ad/reverse/StatementAdjoints.cpp  what the adjoint of one statement is:
//                                       rule instantiation, calls, scans, accumulation
//   src/ad/reverse/KernelPlan.cpp       a kernel's memory operations, activity,
//                                       saved values, the partial-sum layout
//   src/ad/reverse/MemoryAdjoints.cpp   where each memory gradient is written
//                                       (the decision: src/ad/reverse/MemorySchedule.h)
//   src/ad/reverse/KernelSweep.cpp      a kernel's reverse sweep over blocks and ifs
//   src/ad/reverse/LoopReversal.cpp     how loops are reversed: inverted, replayed, taped
//   src/ad/reverse/Finish.cpp           the output's finishing: imports, casts, the check
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "src/ad/AccessAnalysis.h"
#include "src/ad/Anf.h"
#include "src/ad/AnfWalk.h"
#include "src/ad/MemoryAccumulators.h"
#include "src/ad/SinglePass.h"
#include "src/ad/EpilogueReadBack.h"
#include "src/ad/SoftmaxStatistics.h"
#include "src/ad/reverse/AstHelpers.h"
#include "src/ad/reverse/DeadCode.h"
#include "tgrad/ad/Differentiate.h"

namespace tgrad::ad::reverse {

// A mask an adjoint is zero outside of (Engine::lane_masks_).
struct LaneMask {
  std::string cond;               // a name of the forward (a boolean tile)
  bool negated = false;           // zero where cond holds (the false branch of a where)
  const StmtList *block = nullptr;  // the sweep block the mask's name is read in
  bool operator==(const LaneMask &o) const { return cond == o.cond && negated == o.negated && block == o.block; }
  bool operator!=(const LaneMask &o) const { return !(*this == o); }
};

class Engine {
 public:
  // `forward`: differentiate this function in place of the module's function
  // of the request's name (its one-pass version).
  Engine(const Module &module, const SourceManager &sources, const BackwardRequest &request, DiagEngine &diags,
         const Function *forward = nullptr)
      : module_(module), sources_(sources), request_(request), diags_(diags), forward_(forward) {}

  bool differentiates_a_kernel() const { return kernel_; }
  // Some parameter types are representatives (src/ad/GenericTypes.h): the
  // backward must not depend on them.
  bool generic() const { return !request_.generic_params.empty(); }
  const sema::ParamTypes &backward_types() const { return bwd_types_; }

  std::optional<Backward> run();

 private:
  // A loop that loads, updates and stores back the same addresses carries
  // the value in a register instead (src/ad/MemoryAccumulators.h). Where the
  // rewritten kernel does not type (a store that broadcasts its value, say),
  // the kernel stays as written and the in-place check explains.
  void keep_accumulators_in_registers(const Function *&fn, std::optional<sema::TypeInfo> &types);

  void check_wrt(const Function &fn, const std::string &w);

  // The type of every SSA name: parameters and assignment targets.
  void record_name_types();
  // A name assigned on several paths (an if's branches, a loop's entry and
  // body) has one type, except where Triton makes a Python number a tensor
  // of the other side's type (`s = 0.0` on one branch, an fp32 sum on the
  // other): the tensor's type is the name's.
  void record_name_type(const std::string &n, const SType &t);
  void record_name_types(const StmtList &block);

  const SType *type_of_name(const std::string &n) const;
  // Whether a load's or a store's mask is None where this instance is typed (`mask_c = None` under a tl.constexpr
  // flag, FlagGems' bmm): the access is unmasked (a load of its upstream gradient takes no `other`, which Triton
  // refuses without a mask; no tl.where selects by it).
  bool mask_is_none(const std::string &mask) const {
    const SType *t = type_of_name(mask);
    return t && t->kind == SType::Kind::None;
  }

  static const Name *as_name(const Expr &e) { return dyn_cast<Name>(&e); }

  // ---------------------------------------------------------- operations

  struct Op {
    std::string key;                 // rule name
    std::vector<const Expr *> args;  // positional operands (receiver first for methods)
    std::vector<const Keyword *> kws;
    const Function *callee = nullptr;  // "jit call": the user's jit function
  };

  Op classify(const Expr &v);
  void operands_by_keyword(Op &op);

  // A one-instruction PTX approximation (`tanh.approx.f32 $0, $1;` on
  // args=[x]) differentiates as the function it approximates, on x. Sema
  // typed the call only when it is one (else its type is unknown and the
  // dependence check stops there).
  bool classify_approximation(const Call &c, Op &op);

  // ------------------------------------------------- dependence check

  // Activity must never stop silently. A value computed from one that
  // carries a gradient either carries one itself, or comes from an
  // operation whose gradient is zero by its nature: a comparison, a
  // conversion to an integer, argmax/argmin, a libdevice classification
  // (isnan, ...), an integer element of a helper's result. Anything else (a
  // call tgrad cannot resolve, a value whose type sema could not tell, a
  // bitcast to an integer) would drop the dependence and leave a zero
  // gradient without a word: it is a located error naming the construct.
  void check_dependence_kept(const std::string &target, const Expr &value, const std::string &operand);

  // The text a one-line span covers in the user's source, or "".
  std::string source_text(const SourceSpan &span) const;
  // Where an expression's type is unknown because a name it reads (a few steps back) is assigned values of two
  // types on the two branches of an if: which name, where and which types ("'p' is fp32 where `seqpos is not
  // None` (line 14) and int32 otherwise").
  std::optional<std::string> divergent_branch_types(const Expr &value);
  // A name the value derives from (a few steps back) whose definition calls a function the module keeps as host
  // Python (a @triton.constexpr_function that does not read as tile language): that name and the function.
  std::optional<std::pair<std::string, std::string>> host_function_behind(const Expr &value);
  // The first answer `look` gives for the names `value` reads and, a few A-normal-form steps back, the names their
  // definitions read (`look` gets each name once, with its definition or null).
  std::optional<std::string> search_upstream(
      const Expr &value, const std::function<std::optional<std::string>(const std::string &, const Expr *)> &look);

  // Whether a value of this type holds a tensor (tuples included).
  static bool holds_tensor(const SType &t);

  // A kernel's runtime parameters that it reads need their types (what
  // Triton's launcher would pass): without one, every later error would be
  // about a pointer tgrad cannot trace. Says which, and how to give it.
  bool report_untyped_parameters(const Function &fn);

  // A type with nothing unknown in it (tuples included).
  static bool is_known(const SType &t);

  // The first name `value` reads that is active, or "".
  static std::string first_active(const Expr &value, const std::set<std::string> &active);

  // ------------------------------------------------------- stabilizers

  // A numerically stabilizing max: `m = tl.max(x, axis)` whose every use
  // cancels out of what the function stores or returns, as in
  // `e = tl.exp(x - m); y = e / tl.sum(e, axis)` or
  // `s = x - m; y = s - tl.log(tl.sum(tl.exp(s), axis))`. Moving m by any c
  // (constant along the reduced axis) leaves the results unchanged, so the
  // gradient with respect to m is exactly zero: the backward neither
  // computes it nor routes it through the max. The proof follows each value
  // that depends on m through the straight-line statements of m's block,
  // tracking how it changes when m moves by c: not at all, by a shift
  // v + k*c, or by a scale v * base^(k*c). Anything it cannot follow (a
  // use in a loop, a store of a value that changes, a reduction along
  // another axis, an operation outside the table below) keeps the gradient.
  struct Motion {
    enum Kind { None, Shift, Scale } kind = None;
    double k = 0;          // the coefficient of c
    double base = 0;       // Scale: e or 2
    bool reduced = false;  // lacks m's reduced axis
  };

  // The statements of every block, with the block they sit in.
  static void collect_blocks(const StmtList &block, std::vector<const StmtList *> &out);

  std::optional<int64_t> reduce_axis(const Op &op);

  size_t rank_of(const Expr *e);

  // How `value` (assigned to a value of rank `rank`) moves, given how its
  // operands move; nullopt where the proof cannot follow it.
  std::optional<Motion> motion_of(const Expr &value, size_t rank, size_t full_rank, int64_t axis,
                                  const std::map<std::string, Motion> &moving);

  // The stabilizing maxes of a function body (see Motion).
  std::set<std::string> find_stabilizers(const StmtList &body, const std::set<std::string> &active);

  // ---------------------------------------------------------------- build

  std::optional<Backward> build();

  // `@triton.jit def <fn>_bwd(<forward parameters>, <extra>...):` with an
  // empty body; the name avoids the module's functions.
  std::unique_ptr<Function> backward_shell(const std::vector<std::string> &extra_params) const;

  // The common end of both paths: check the backward with sema (a failure is
  // tgrad's bug), drop no-op casts, cast returned adjoints back to their
  // inputs' dtypes, and assemble the module with the jit functions it calls
  // and the imports it needs.
  void finish(std::unique_ptr<Function> bwd, const sema::ParamTypes &bwd_types, bool cast_returned_adjoints,
              Backward &result);

  // ------------------------------------------------------------ kernels

  struct MemoryOp {
    const Stmt *stmt = nullptr;  // the ANF statement (at any depth)
    bool in_branch = false;      // inside a runtime if
    bool store = false;
    std::string pointer;         // the pointer operand (an SSA name)
    std::string base;            // its pointer parameter
    std::string value;           // store: the stored name ("" if a constant); load: the loaded name
    std::string mask;            // "" if unmasked
    std::string other;           // load: the `other` name, if a tensor
    const Call *call = nullptr;
    std::vector<std::pair<const If *, bool>> branches;  // the runtime ifs around it, and which branch (true: body)
    std::vector<const For *> loops;                     // the runtime loops around it, outermost first
    size_t loop_depth() const { return loops.size(); }
    // A store that is an atomic (its builtin, "tl.atomic_add"), or "". An
    // atomic add accumulates: the buffer ends as its initial contents plus
    // every program's additions, whatever their order, so each added value's
    // gradient is the upstream gradient at its addresses, as for a store.
    std::string atomic;
  };

  // Two stores of which at most one runs in any program: they sit in
  // different branches of one runtime if.
  static bool exclusive(const MemoryOp &a, const MemoryOp &b);
  // src/ad/reverse/InPlace.cpp: how many runtime loops two operations share; where they share exactly one,
  // whether each of its iterations loads and stores addresses of its own.
  static size_t shared_loops(const MemoryOp &a, const MemoryOp &b);
  static bool iterations_own_addresses(const MemoryOp &load, const MemoryOp &store, const AccessAnalysis &access);
  // Whether every access the kernel makes through `base` is a tl.atomic_add (its contents before the kernel pass
  // to its contents after unchanged).
  bool only_added_atomically(const std::string &base) const;

  static std::string name_or_empty(const Expr *e);

  // Walks the ANF kernel once: its loads and stores, every definition of
  // every name, and the statements that set a loop's carried values on entry.
  void collect(const StmtList &block, const AccessAnalysis &access, bool in_branch = false);

  const MemoryOp *memory_op(const Stmt *s) const;

  // Forward activity over the statement tree, to a fixed point (a loop's
  // carried values feed the next iteration).
  void propagate_activity(const StmtList &block, const std::set<std::string> &wrt, bool &changed);

  // Backward usefulness: active values that a stored output depends on.
  void propagate_usefulness(const StmtList &block, bool &changed);

  // Every name whose value depends on what the kernel loads through `base`,
  // through any operation (integer ones, comparisons, masks included).
  std::set<std::string> reached_by_loads_of(const std::string &base);

  // A --wrt pointer that reaches no store may still be read through
  // something tgrad does not type (a tensor descriptor made from it, a
  // call it cannot follow): then its loads are invisible, and a zero
  // gradient would be a guess. The pointer and the addresses derived from
  // it are followed; reaching a value of unknown type is a located error.
  void refuse_untraced_pointer(const std::string &w);

  // The zero-gradient audit: for each --wrt pointer, the stores its loaded
  // values reach. A gradient is zero only where they reach no store tgrad
  // differentiates: reaching none at all (or only --no-grad outputs) is a
  // warning and is marked in the launch protocol; reaching a store only
  // through operations without a gradient (a comparison, an index, a mask)
  // is an error, because a zero gradient there is almost always a mistake
  // in --wrt, and tgrad will not print a backward that silently ignores it.
  void audit_zero_gradients(Backward &result, const std::map<std::string, std::vector<const MemoryOp *>> &store_of,
                            const std::set<std::string> &no_grad);

  std::optional<Backward> build_kernel();

  // Values the forward stores, one scalar per program and unconverted
  // (`tl.store(Mean + row, mean)` with `row = tl.program_id(0)`, Mean a
  // pointer to mean's dtype, both at the kernel's top level): the backward
  // loads them (`mean = tl.load(Mean + row)`) instead of computing them
  // again, as a hand-written backward reads its saved statistics. The
  // protocol says so: such a buffer must hold what the forward stored. The
  // pointer's definition moves up to the value's. Where the saved value is
  // `1 / tl.sqrt(u)` it becomes `tl.math.rsqrt(u)`, whose adjoint reads only
  // the value itself, so that nothing before it is computed again. Returns
  // true if the ANF changed.
  bool find_saved_values();
  // An online softmax differentiated from the statistic the forward stores
  // (src/ad/SoftmaxStatistics.h): rewrites the A-normal form; true if it did.
  bool read_back_softmax_statistics();
  // An elementwise epilogue (relu) after a loop differentiated from the
  // output the forward stores (src/ad/EpilogueReadBack.h): rewrites the
  // A-normal form; true if it did.
  bool read_back_epilogues();
  // src/ad/StoredValueForwarding.h: loads that read back what the same program stored take the stored value;
  // whether any did.
  bool forward_stored_values();

  // The pointer parameters of the forward kernel and of the backward
  // (gradient buffers, scratch): the request's pointer types and `more`.
  std::set<std::string> pointer_params(const std::vector<std::string> &more = {}) const;

 public:
  // Joins the looped backward `result` and the backward `one` of the
  // kernel's one-pass version (SinglePass.h) under one kernel that takes the
  // same arguments and calls one or the other: the one-pass one when every
  // loop over the version's range runs once. Both are kept as jit functions
  // of their own. Where `one` is missing or needs other scratch buffers,
  // `result` stays as it is and --explain says why.
  void dispatch_by_row_length(Backward &result, std::optional<Backward> one, const sema::ParamTypes &one_types,
                              const SinglePassVersion &version, const std::string &why_not);

 private:
  // `v.dtype` of a loaded value v (a cast back to the load's dtype) reads
  // `p.dtype.element_ty` of its pointer instead, so that a load kept only for
  // its dtype is not replayed.
  void read_dtypes_from_pointers(StmtList &body);

  // True if the kernel reads no program id but axis 0's, and not the grid's
  // size: running it for program p inside a loop over p is then the same.
  bool programs_differ_only_by_axis_0(const StmtList &block) const;

  // The body becomes `for pid in range(tl.program_id(0), num_programs, tl.num_programs(0))`
  // with pid in place of tl.program_id(0) and the forward's program count in
  // place of tl.num_programs(0) (a forward whose programs differ by more
  // than tl.program_id(0) has no partial sums, so only the tapes' rows read
  // it: a row per forward program); each partial-sum row is set up before it.
  void loop_over_forward_programs(Function &bwd, const Backward &result, const std::map<std::string, std::string> &row_of);

  // The kernel that sums partial-sum rows into a gradient buffer.
  // The name of the emitted unbroadcast helper, added to the backward's
  // module on first use.
  std::string unbroadcast_helper();

  // Parses a jit function tgrad writes (`def` and the rest of its text) and
  // adds it to the backward's module, its first statement under `comment`.
  void add_support_function(const std::string &definition, const std::string &comment);

  std::string add_reduce_kernel(const std::string &wanted);
  // Moves the gradients the reverse loop scatters with atomics to
  // owner-computes kernels where that is valid (src/ad/reverse/OwnerComputes.h).
  void gather_by_owner(Function &bwd, const sema::ParamTypes &bwd_types, Backward &result, const AccessAnalysis &access);
  // An owner-computes kernel that alone writes a gradient flushes it with a plain store where each owner's
  // addresses are its own (AccessAnalysis::classify_owner_layout of the forward's load), not an atomic addition
  // into zeros: no zero fill, and no atomics.
  void store_owner_flushes(Function &bwd, Backward &result, const AccessAnalysis &access);
  // The gradient of `input` stored once per program and lane where the launch's strides keep the cells of
  // `layout` (AccessDecision::layout, taken) apart, added atomically into zeros else: a flag parameter
  // (`<input>_disjoint`, the one an equal box of `input` in `kernel` already has, else a fresh one appended to
  // `assumptions`; `kernel` "" the backward kernel) and the statement `if flag: <store> else: <add>`, whose test
  // names it. `zeros_anyway`: the store may not run (a runtime if), so the buffer keeps its zeros whatever the flag.
  StmtPtr store_where_apart(const std::string &input, const std::string &kernel,
                            std::vector<std::pair<ExprPtr, ExprPtr>> &&layout, StmtPtr store, StmtPtr add,
                            const std::function<std::string(const std::string &flag)> &comment,
                            std::vector<Backward::LayoutAssumption> &assumptions, bool zeros_anyway = false);
  // Where the backward kernel runs before the owners and computes the row statistics the prologue saves, it saves
  // them itself, at the rows of an output the forward stores in tiles of the statistic's shape (Backward::
  // SavedTile::like), and the prologue kernel goes.
  void fold_prologue(Function &bwd, Backward &result, const AccessAnalysis &access);
  // The emitted functions with their single-use temporaries folded into
  // their uses (src/ad/Readability.h), the user's names kept.
  // Splits the generated kernels' loops so that iterations whose masks hold in every lane run without them
  // (src/ad/reverse/MaskPeeling.h), after the readability pass: each copy of a loop's body reads as written.
  void peel_masks(Module &out, Backward &result);
  // `checked`: the types finish() found for the function `checked_fn` of `out`, where they are the ones
  // make_readable would find again (src/ad/reverse/Finish.cpp); else null.
  void make_readable(Module &out, const Backward &result, const Function *checked_fn,
                     const sema::TypeInfo *checked);

  void sweep_block(const StmtList &block, const AccessAnalysis &access, std::vector<std::string> &explanations);

  // A zero adjoint for `x`, to accumulate into inside a loop or an if. A
  // loop-carried variable keeps one type, and contributions to the adjoint
  // of a half-precision value come in float32 (a tl.dot's result): such an
  // adjoint accumulates in float32.
  ExprPtr zero_adjoint(const std::string &x);

  // Gives x an adjoint variable of its own, which a loop or an if can add
  // to in place: zeros where it has no adjoint yet, a copy where its adjoint
  // is another value's.
  void own_adjoint_variable(const std::string &x);

  // Values defined outside `block` whose adjoints the block adds to: their
  // adjoints must exist before it (a loop adds once per iteration, an if in
  // one branch only), as variables of their own.
  void prepare_outer_adjoints(const StmtList &block);

  // A runtime loop. Its carried float values must be additive accumulators
  // (acc = acc + t, acc = acc - t, acc = tl.dot(a, b, acc)), read nowhere
  // else in the body: their adjoint is then the same in every iteration, and
  // the backward loop runs forward, replaying each iteration's primal values
  // (induction variables and advancing pointers included) before its adjoints.
  void sweep_loop(const For &f, const AccessAnalysis &access, std::vector<std::string> &explanations);

  // Statements written as Python text (the tape's addressing): parsed like
  // the body of a jit function.
  StmtList parse_statements(const std::string &code);

  // A carried value's name as the user wrote it: `acc_2` -> `acc`.
  std::string user_name(const std::string &anf_name) const;

  // A loop whose carried values are taped: what the forward replay writes
  // and the reversed loop reads.
  struct TapedValue {
    std::string carried;  // the ANF name
    std::string scratch;  // the tape parameter
    std::string numel;    // the value's element count, as an expression
    std::string offsets;  // its elements' offsets in one tape entry, as an expression
    std::string cast;     // ".to(tl.float16)" where the value is not of the tape's type
    bool integer = false; // an integer tape: past the trip count it reads 0, not NaN
  };
  struct TapedLoop {
    std::vector<TapedValue> values;
    std::string start, stop, step;  // the loop's bounds, as expressions
    std::string row;                // this program's row of the tapes
    std::string trips;              // this program's trip count
    std::string trips_param;        // the bound on any program's trip count
    std::string forward_index, reverse_index, rev;
    bool assert_step = false;       // a constexpr step: assert that it is positive
    std::vector<std::string> positive_factors;  // tl.num_programs times these constexprs: assert each positive
    bool negative_step = false;     // a literal negative step: the loop counts down
  };

  // Tapes the backward writes but never reads, once dead code is gone: a
  // carried value whose adjoints do not need it (a running mean's update is
  // linear in it; an argmax index beside an online softmax feeds no
  // gradient). Their stores, parameters and, where a loop keeps no tape, its
  // trip-count bound go.
  void drop_unread_tapes(Function &bwd, Backward &result);
  // A loop that lost all its tapes: its comments no longer speak of them,
  // and the barrier between the tapes' writes and reads goes.
  void retitle_untaped_loops(StmtList &block, const std::set<std::string> &untaped_trips);

  // The comments a taped loop's replay and reversal carry, and those of a loop
  // without tapes (retitle_untaped_loops turns the first into the second).
  static constexpr const char *kTapeRowComment = "This program's row of the tapes of the loop below, and its trip count.";
  static constexpr const char *kTripCountComment = "The trip count of the loop below, for the reversed loop.";
  static constexpr const char *kReversalComment = "Iterations in reverse.";
  static std::string taped_reversal_comment(const std::string &trips_param) {
    return "Iterations in reverse; each starts from its incoming values on the tape (NaN past " + trips_param + ").";
  }

  // The address of a taped value's entry in iteration `index`.
  static std::string tape_address(const TapedLoop &L, const TapedValue &v, const std::string &index) {
    return v.scratch + " + (" + L.row + " * " + L.trips_param + " + " + index + ") * (" + v.numel + ") + " + v.offsets;
  }

  // A loop with carried values that are neither recomputed (inactive) nor
  // additive accumulators, such as the running max, sum and output of an
  // online softmax. Reversing it needs each iteration's incoming values:
  // the forward replay of the loop (earlier in the backward) writes them to
  // a tape, one scratch buffer per value (float32; integers of their own type), and the backward loop runs
  // the iterations in reverse, reading them back, then replaying the
  // iteration's primal values and its adjoints. The adjoint of a carried
  // value is carried by the reversed loop: at the end of an iteration's
  // body (its first adjoint statement), the carried adjoint becomes the
  // adjoint of the iteration's result, and starts again from zero for the
  // reads of the incoming value.
  // The step of a carried integer or pointer that each iteration moves by
  // the same amount (`offset = offset + BLOCK_N`, `ptrs += BLOCK_K * stride`,
  // a block pointer's tl.advance): the body assigns it once, from itself
  // plus or minus a value the loop does not assign. Its value in iteration k
  // is then its entry value + k * step, which the reversed loop computes.
  std::optional<std::string> induction_step(const For &f, const LoopCarried &c);

  // `e` written with names the loop does not assign: a literal, a name from
  // outside the loop, or arithmetic on those that A-normal form named inside
  // the body (`p += H * K` reads a temporary the body assigns once from H
  // and K); nullopt where it may change between iterations.
  std::optional<ExprPtr> loop_invariant(const Expr &e, const StmtList &body, std::map<std::string, int> &assigned,
                                        int depth);

  // Whether `e` is tl.num_programs(axis), possibly named, cast or
  // multiplied by positive integer literals or by tl.constexpr integers
  // (`NUM_SMS * BLOCK_ROW`, Liger's block rms norm; those go to `factors`,
  // for the backward to assert positive): a positive number of programs.
  bool counts_programs(const Expr &e, int depth, std::vector<std::string> &factors) const;

  void sweep_taped_loop(const For &f, const AccessAnalysis &access, std::vector<std::string> &explanations,
                        const std::set<std::string> &additive);

  // The forward replay of a taped loop: before each iteration, its incoming
  // values go to the tapes.
  void replay_taped_loop(const For &f, const TapedLoop &L, StmtList &dst);

  // The adjoint statements of a loop body or an if branch, swept into a
  // list of their own (with their own "Grad of" blocks) for the caller to
  // place.
  StmtList sweep_nested(const StmtList &block, const AccessAnalysis &access, std::vector<std::string> &explanations);

  // A runtime if: the condition is recomputed by the replay; each branch of
  // the backward replays its branch's primal values, then its adjoints.
  void sweep_if(const If &i, const AccessAnalysis &access, std::vector<std::string> &explanations);

  // The primal statements of a block, stores removed, each pointer's mirror
  // right after the pointer.
  void replay_block(const StmtList &src, StmtList &dst) {
    for (const StmtPtr &s : src) replay_stmt(*s, dst);
  }
  void replay_stmt(const Stmt &s, StmtList &dst);

  // The shape of a load's value as a tl.zeros tile's dims, or nullopt where
  // the tile's shape cannot be written (a symbolic dimension that is not a
  // name).
  std::optional<ExprList> register_tile_dims(const MemoryOp &op) const;
  // A broadcast load outside loops and ifs: its gradient is summed in a
  // register tile carried by the loop over the forward's programs, and
  // stored once, in the last iteration (its tile dims must exist).
  void register_partial(const MemoryOp &op, const std::string &bx, const std::string &comment);

  // The gradient pointer that mirrors `pointer`: the same offsets from
  // d<base>. Every definition of the pointer (a loop-carried pointer has two)
  // gets a mirror definition, emitted after it by the replay.
  ExprPtr dual(const std::string &pointer);
  // Replaces every pointer-typed name in `e` by its mirror.
  void mirror_pointers(ExprPtr &e);

  // A load through a pointer the kernel also stores to (an in-place update,
  // `x = tl.load(X + o)` ... `tl.store(X + o, f(x))`). The forward is then a
  // function from X's contents before to X's contents after, where the
  // elements no store writes pass through. It is differentiable by the
  // values alone when every load reads contents from before any store:
  // each load comes before each store in the program, and no loop runs a
  // store before a later iteration's load, unless every iteration touches
  // blocks of its own (the same offsets, moving with the loop). The
  // backward then keeps one gradient buffer for X: it holds the upstream
  // gradient of X after, each store's adjoint consumes its addresses (the
  // pass-through elements keep theirs), and each load's adjoint adds to it.
  // (Other programs' stores are not ordered with this program's loads: the
  // forward itself is only well defined when programs update elements of
  // their own.)
  // (A pointer outside --wrt whose loaded value is active only through
  // `other` needs the same order, but no gradient of its own: it stays an
  // output.)
  // src/ad/reverse/InPlace.cpp: the loads that read a buffer's final contents (final_reads_), then, per load of
  // a buffer the kernel also stores, whether what it reads is defined (or a located error).
  void find_final_reads(const AccessAnalysis &access);
  void check_in_place(const MemoryOp &load, const std::vector<const MemoryOp *> &stores, const AccessAnalysis &access,
                      bool differentiated);

  // The adjoint of a store to an output the forward may write more than once
  // at an address (consumed_): the upstream gradient at its addresses
  // belongs to this store if no later one overwrote them, and the later
  // ones' adjoints ran first and left zeros where they did. This one takes
  // what is there and leaves zeros for the earlier stores. Where programs
  // may share the addresses, one atomic exchange per element lets exactly
  // one of them take it. A store of a value without gradient takes nothing
  // but still leaves zeros.
  void consume_upstream(const MemoryOp &op);

  void load_adjoint(const MemoryOp &op, const AccessAnalysis &access, std::vector<std::string> &explanations);

  // The user's module plus the libdevice import: where the backward's names
  // resolve during its check.
  std::unique_ptr<Module> checking_module() const;


  static void add_libdevice_import(Module &m);

  // triton and tl, then each user import that binds a name the emitted
  // functions read (libdevice, math, ...), then libdevice if a rule needs it.
  void add_imports(Module &m, const std::unordered_set<std::string> &read);

  // The user's jit functions that a function reading `names` calls,
  // directly or not (the primal replay may), cloned into `out`.
  void add_called_functions(const std::unordered_set<std::string> &names, Module &out);

  void cast_results(Function &bwd, const sema::TypeInfo &info);

  std::string header() const;

  SourceSpan param_span(const std::string &p) const;

  // ------------------------------------------------------------- the sweep

  void begin_block(const Stmt *origin);

  static std::string first_line(const Stmt &s);

  void emit_stmt(StmtPtr s);

  void differentiate_stmt(const std::string &target, const Expr &value, const std::set<std::string> &active);

  // Adds a helper's backward (and the helpers it calls) to the emitted
  // functions; returns the name it is called by.
  std::string add_callee_backward(Backward &b);

  // y = g(a, b): differentiate g once per signature (g_bwd, emitted with the
  // backward) and take its adjoints: ba, bb = g_bwd(a, b, by).
  void differentiate_call(const Op &op, const std::string &target, const Expr &value, const std::set<std::string> &active);

  // The adjoint of an operation's result as an expression: its adjoint's
  // name, or for a tuple-valued operation (tl.split) a tuple with each
  // element's adjoint, zeros where none reached the element.
  ExprPtr adjoint_of_result(const std::string &target);

  // The adjoint of element k of the tuple `target`, if one reached it.
  std::optional<std::string> element_adjoint(const std::string &target, size_t k) const;

  // The combine function of the adjoint scans of a first-order recurrence
  // (ScanCombine.h): elements (a, b, c, d) are the maps v -> a*v + b and
  // v -> c*v + d of a carried value; combining composes them.
  std::string affine_scan_helper();

  // y = tl.associative_scan(x, axis, combine, reverse): the adjoint of a
  // running sum is a running sum from the other end; that of a first-order
  // recurrence h[t] = a[t] * h[t-1] + x[t] (outputs: the coefficients'
  // running product and h) is g[t] = bh[t] + a[t+1] * g[t+1], run the other
  // way, with bx = g and ba = g * h[t-1] (plus, where the product's adjoint
  // bp reached, G * p[t-1] with G the same recurrence of bp). Both are
  // scans of _tgrad_affine_scan, so no element is shifted by hand.
  void differentiate_scan(const Op &op, const std::string &target, const Expr &value);
  // tl.reduce over one tensor with a combine function that sums, multiplies, or takes the maximum or minimum: the
  // adjoint of tl.sum, tl.max, tl.min or a product; any other combine function is a located error.
  void differentiate_reduce(const Op &op, const std::string &target, const Expr &value);

  static bool n_active(const Expr &e, const std::set<std::string> &active);

  int64_t static_int(const Expr &e);

  // Template instantiation: bind the rule's parameters, evaluate its
  // constexpr ifs, emit its locals under fresh names and its b<param>
  // assignments as contributions.
  void instantiate(const Function &rule, const Op &op, const std::string &target, const Expr &value);

  struct Instance;  // one rule instantiated (src/ad/reverse/StatementAdjoints.cpp)

  bool is_active(const std::string &n) const { return carries_gradient(type_of_name(n)); }

  // Adds `e` to the adjoint of `x`, summed back to x's shape where the
  // operation broadcast x.
  // Contributions to x's adjoint that contribute() drops: an additive
  // accumulator's own term (its adjoint is loop-invariant), or a max whose
  // gradient is exactly zero (find_stabilizers).
  bool drops_contributions(const std::string &x) const { return frozen_.count(x) || stabilizers_.count(x); }

  void contribute(const std::string &x, ExprPtr e, const std::string &op, const std::string &y, const SourceSpan &span);

  // Lane masks, for NaN safety. An adjoint can be known to be zero outside
  // the lanes where a mask holds: it came through `tl.where(c, x, ...)`, or
  // is an upstream gradient loaded under a store's mask. The forward's values
  // in the other lanes were discarded and may be inf or NaN (a load's
  // `other=-inf`, `-inf - -inf`), and a rule multiplying them by the zero
  // adjoint there makes NaN (0 * inf), which a later sum spreads over every
  // lane. So a lane-wise rule's contribution from a masked adjoint is
  // selected under the mask (`tl.where(c, by * b, 0.0)`): exactly zero in
  // the discarded lanes, unchanged in the others.
  // Primal name -> the mask every contribution to its adjoint so far is
  // zero outside of (nullopt: some contribution is not).
  std::map<std::string, std::optional<LaneMask>> lane_masks_;
  // The mask a contribution to x from y's adjoint through `op` is zero
  // outside of, wrapping `e` in a tl.where where that is needed for it.
  std::optional<LaneMask> mask_contribution(const std::string &x, ExprPtr &e, const std::string &op,
                                            const std::string &y);
  // The forward's names whose values may be inf or NaN in the lanes it
  // discards (padding from `other=-inf` or no `other`, a log or a division
  // of padding), computed once (LaneMasks.cpp).
  // With `overflow`: also the values that overflow to inf for large real
  // inputs (exp), for masks that discard lanes of real data.
  const std::set<std::string> &padding_may_be_nonfinite(bool overflow);
  std::optional<std::set<std::string>> padding_nonfinite_, overflow_nonfinite_;
  // Whether a load of the forward takes this name as its mask (pads the lanes outside it).
  bool loads_pad_under(const std::string &mask) const;
  // Whether a contribution can be NaN where its adjoint is zero: it reads
  // such a name, or divides by (or takes a log of) a lane-varying value.
  bool may_make_nan(const Expr &contribution, bool overflow);
  // Whether `e` reads a tile of the forward (a value with lanes, not a scalar).
  bool reads_tile(const Expr &e);
  // Whether every statement of the function differentiated is lane-wise
  // (output lane i reads only lane i of each operand): a call of it then
  // carries a lane mask (contribute's op kLaneWiseCall).
  bool lane_wise_body();
  // The generic backward's helper that selects a contribution under a mask
  // where the mask has its shape, emitted on first use.
  std::string select_lanes_helper();
  static constexpr const char *kLaneWiseCall = "lane-wise jit call";

  // `v.to(w.dtype)` where v already has w's dtype: drop the cast. The casts taken out go to `removed`: `info`
  // names their nodes, which must not be freed while it is read (a new node at a freed one's address would
  // take its type).
  static void remove_noop_casts(StmtList &body, const sema::TypeInfo &info, std::vector<ExprPtr> &removed);
  // `x.to(T)` where x is `y.to(tl.float32)` of a float y of at most 32 bits (or tl.trans of one): `y.to(T)`,
  // the same value (the widening is exact), without the float32 tile in between (the upstream gradient of a
  // float16 output loaded, widened, then narrowed again for a tl.dot: attention's dO in the dK/dV owner).
  // Valid for every float dtype a generic backward serves. Where a load is widened in place
  // (`x = tl.load(...).to(tl.float32)`), the load gets a name of its own. New names from `names`.
  static void skip_exact_widenings(StmtList &body, const sema::TypeInfo &info, NameAllocator &names);

  const Module &module_;
  const SourceManager &sources_;
  const BackwardRequest &request_;
  DiagEngine &diags_;
  const Function *forward_ = nullptr;
  const Function *fn_ = nullptr;
  sema::ParamTypes bwd_types_;  // the backward kernel's parameter types, once built
  std::map<std::string, std::string> saved_;  // a value the forward stores -> the pointer it is stored through
  std::map<std::string, std::string> saved_dtype_;
  // Values the backward's replay defines by loading what the forward stored
  // (read_back_softmax_statistics), and why.
  std::vector<SoftmaxStatistics::ReadBack> read_back_;
  std::string read_back_explanation_;
  std::vector<std::string> epilogue_explanations_;
  std::vector<std::string> forwarding_explanations_;  // (forward_stored_values), for --explain  // (read_back_epilogues), for --explain
  std::vector<std::pair<SourceSpan, std::string>> notes_;  // Backward::notes
  std::vector<std::string> softmax_taped_under_;            // Backward::softmax_taped_under
  std::map<std::string, std::string> read_back_witnesses_;  // such a value, its pointer generic -> the dtype the backward asserts
  std::map<std::string, std::string> saved_base_;  // such a value -> the pointer parameter it is stored through
  AnfFunction anf_;
  sema::TypeInfo anf_types_;
  std::map<std::string, SType> name_types_;
  NameAllocator names_;
  std::vector<Backward::AtomicGradient> atomic_gradients_;  // each GradientWrite::Atomic emitted
  std::map<std::string, std::string> adjoint_;  // primal name -> adjoint name
  std::set<std::string> aliased_;               // adjoints that are another value's adjoint
  std::map<std::string, std::map<int64_t, std::string>> tuple_adjoint_;  // tuple name -> element -> adjoint
  struct CalleeBackward {
    std::string name;        // the backward's name
    bool lane_wise = false;  // the function is (Engine::lane_wise_body)
  };
  std::map<std::string, CalleeBackward> callee_backwards_;  // jit function signature -> its backward
  // Helpers a generic backward calls (_tgrad_unbroadcast, _tgrad_select_lanes):
  // defined once each, on first use, under a name the file must not take.
  std::string generic_helper(const char *helper, const std::string &definition, const std::string &comment);
  std::set<std::string> generic_helpers_;
  bool has_affine_scan_helper_ = false;
  std::vector<std::unique_ptr<Function>> extra_functions_;  // backwards of called jit functions
  std::vector<std::unique_ptr<Function>> owner_functions_;  // owner-computes kernels, emitted after the backward
  int depth_ = 0;
  bool kernel_ = false;                                     // differentiating a kernel (pointer parameters)
  std::map<std::string, std::string> gradient_buffer_;     // pointer parameter -> its gradient pointer
  std::map<std::string, std::string> dual_name_;           // pointer value -> its gradient pointer
  std::map<const Stmt *, StmtPtr> dual_defs_;              // a pointer's definition -> its mirror's definition
  std::map<std::string, int> loads_per_base_;              // pointer parameter -> loads through it
  std::map<std::string, std::set<std::string>> offset_keys_;  // pointer parameter -> the offsets of its loads
  std::map<std::string, std::set<std::string>> mask_keys_;    // pointer parameter -> the lanes its loads' masks keep
  struct RegisterPartial {
    std::string acc;      // the register tile
    ExprPtr init;         // tl.zeros(shape, dtype=tl.float32)
    std::string pointer;  // this program's row of the scratch buffer, at the load's offsets
    std::string mask;
  };
  std::vector<RegisterPartial> register_partials_;
  std::vector<std::pair<const If *, bool>> branch_path_;  // collect(): the runtime ifs around the statement
  std::vector<const For *> loop_path_;                     // collect(): the runtime loops around the statement
  std::set<std::string> in_place_;                         // inputs the kernel also stores to (one gradient buffer)
  // Loads that read a buffer back after this kernel stored to it, where no store can follow them: they read
  // the buffer's final contents (fused_add_rms_norm stores S = X + R in one loop and loads it in the next).
  std::set<const MemoryOp *> final_reads_;
  std::set<std::string> final_read_bases_;  // their buffers: the backward reads them as the forward left them
  std::set<std::string> initial_read_bases_;  // buffers loaded before a store that may overwrite what was read
  std::unique_ptr<Function> guarded_fn_;  // the forward with its early returns turned into ifs, if it has any
  std::unique_ptr<Function> split_fn_;    // ... and with `x = a if c else b` written as an if
  std::unique_ptr<Function> registers_fn_;  // ... and with its memory accumulators kept in registers
  std::vector<KeptAccumulator> kept_accumulators_;
  std::unique_ptr<Function> atomic_fn_;  // ... and with its additive updates of memory as atomic additions
  std::vector<KeptAccumulator> atomic_updates_;
  std::set<std::string> needs_zeros_;                      // inputs whose gradient buffers must start at zero
  std::vector<Backward::LayoutAssumption> layout_assumptions_;  // what plain gradient stores assume of strides
  std::map<std::string, std::string> consumed_;            // outputs whose upstream gradient the backward consumes -> why
  // Stores in a loop whose iterations are proven to write apart (AccessAnalysis::iterations_write_apart), for
  // --explain: (output, "line L: ..." text), said where the output's upstream gradient is not consumed after all.
  std::vector<std::pair<std::string, std::string>> stores_apart_;
  std::set<const MemoryOp *> consume_atomically_;          // stores of consumed outputs that programs may share
  // Such stores whose value differs between the programs that share its addresses (a race in the forward's own
  // output) -> the program axes along which it does: the backward is right only for one program along each (that
  // gets to the store) -> how that is checked: not at all (the conditions around the store read that axis, and a
  // launch may have more programs of which one gets there), by a device assertion (the store is under an if), or
  // also by the launch protocol before the launch.
  enum class RacyCheck { None, OnDevice, AtLaunch };
  std::map<const MemoryOp *, std::map<int, RacyCheck>> racy_axes_;
  std::set<std::string> partial_bases_;                    // inputs whose gradients go through partial sums
  std::map<std::string, std::string> partial_row_;         // such an input -> this program's partial-sum row
  std::map<std::string, std::string> shared_bases_;       // pointer parameters whose loads all add atomically -> why
  // Pointer parameters whose loads read disjoint addresses (AccessAnalysis::classify_layout_union) -> the loads'
  // pointers, in program order, and their one mask.
  std::map<std::string, std::pair<std::vector<std::string>, std::string>> disjoint_loads_;
  std::map<std::string, int> contributions_;               // pointer parameter -> gradients written so far
  std::vector<MemoryOp> memory_;
  std::optional<std::set<std::string>> kernel_reads_;       // every name the ANF kernel reads (computed once, if needed)
  std::optional<std::set<std::string>> loop_assigned_;     // names the ANF assigns inside a loop (once, if needed)
  std::map<std::string, std::vector<const Assign *>> defs_of_;  // name -> its definitions (any depth)
  std::map<const For *, std::vector<const Stmt *>> init_copy_;   // loop -> the statements setting its carried values
  std::set<std::string> active_, useful_;
  std::map<std::string, std::string> additive_update_;     // acc_3 (acc_2 + t) -> acc_2
  std::set<const Stmt *> carried_update_copy_;             // acc_2 = acc_3 of an additive accumulator
  std::set<std::string> frozen_;                           // adjoints that take no contributions now
  std::map<const For *, TapedLoop> taped_loops_;           // loops reversed with tapes
  std::map<const Stmt *, std::string> taped_update_copy_;  // acc_2 = acc_3 in such a loop -> acc_2
  std::vector<Backward::Tape> tapes_;
  std::set<const Stmt *> upstream_loads_;  // loads of upstream gradients nothing in the backward writes
  std::set<std::string> stabilizers_;                      // maxes whose gradient is exactly zero
  StmtList sweep_;
  StmtList *out_ = &sweep_;
  const Stmt *current_block_ = nullptr;
  std::string pending_comment_;
  bool uses_libdevice_ = false;
};

}  // namespace tgrad::ad::reverse
