#include "src/ad/Specialize.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/ConstexprPaths.h"
#include "src/ad/EarlyReturn.h"
#include "src/ad/WhileLoops.h"
#include "src/ad/GenericTypes.h"
#include "src/ad/MemoryAccumulators.h"
#include "src/ad/SpecializationFlags.h"
#include "src/lower/BlockPointers.h"
#include "src/lower/InlineCalls.h"
#include "src/lower/SourceRewrites.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;
using sema::SType;

namespace {

struct Specialization {
  std::vector<size_t> choice;  // per flag, the index of its value
  Backward backward;
  // Its gradient buffers' names where they differ from the dispatcher's
  // (A-normal form may have taken `ddA_cumsum_ptr_2` in one specialization
  // and not in another, so the name for d(dA_cumsum_ptr) differs).
  std::map<std::string, std::string> to_dispatcher;
  std::string dispatcher_name(const std::string &param) const {
    auto it = to_dispatcher.find(param);
    return it == to_dispatcher.end() ? param : it->second;
  }
};

// Appends `'name'` to a list for a message ("'a', 'b'"), unless it is there.
void add_quoted(std::string &list, const std::string &name) {
  if (list.find("'" + name + "'") == std::string::npos) list += (list.empty() ? "'" : ", '") + name + "'";
}

// Renames calls and definitions of the functions in `renamed` within `f`.
void rename_calls(Function &f, const std::map<std::string, std::string> &renamed) {
  rewrite_exprs(f.body, [&](ExprPtr &e) {
    if (auto *n = dyn_cast<Name>(e.get()))
      if (auto it = renamed.find(n->id); it != renamed.end()) n->id = it->second;
  });
}

class Specializer {
 public:
  Specializer(const Module &module, const SourceManager &sources, const BackwardRequest &request, DiagEngine &diags,
              const Function &fn, std::vector<Flag> flags)
      : module_(module), sources_(sources), request_(request), diags_(diags), fn_(fn), flags_(std::move(flags)) {
    // The forward as reverse mode types it: early returns guarded, and
    // `x = a if c else b` an if, whose paths must agree on x's type as
    // Triton's ternary with a runtime condition requires (ttt's `i_last =
    // (BT - 1) if ... else (T % BT - 1)` does not compile where T is int64).
    guarded_ = guard_early_returns(fn_);
    split_ = conditional_assignments_as_ifs(guarded_ ? *guarded_ : fn_);
  }

  // Specialized to read an online softmax's stored statistic (differentiate_lowered): the specializations where
  // ifs still hide the softmax, whose backwards would need its tape, get none where others read the statistic (one
  // launch protocol cannot both hold a tape and not); a launch with their values stops at a static assertion.
  void drop_taped_softmax() { drop_taped_softmax_ = true; }

  std::optional<Backward> run() {
    if (!differentiate_all()) return std::nullopt;
    if (drop_taped_softmax_) drop_taped_specializations();
    // A flag that leaves an input unloaded drops its partial sums: with the
    // union given to every specialization, its rows stay zero there instead.
    std::vector<std::string> with_partial_sums;
    for (const std::string &w : request_.wrt)
      for (const Specialization &s : specs_)
        for (const auto &p : s.backward.partial_sums)
          if (p.input == w && std::find(with_partial_sums.begin(), with_partial_sums.end(), w) == with_partial_sums.end())
            with_partial_sums.push_back(w);
    // (A specialization that has them all is the same with the union given.)
    request_.partial_sums_for = with_partial_sums;
    for (Specialization &s : specs_)
      if (s.backward.partial_sums.size() != with_partial_sums.size()) {
        std::optional<Backward> again = differentiate_one(s.choice);
        if (!again) return std::nullopt;
        s.backward = std::move(*again);
      }
    // Warnings once, from the first.
    bool all_same = true;
    for (const Specialization &s : specs_) all_same &= same_backward(specs_[0].backward, s.backward);
    all_same &= invalid_.empty() && taped_.empty();  // else the dispatcher refuses the values it has no backward of
    if (all_same) return std::move(specs_[0].backward);
    std::optional<Backward> out = combine_dropping_conflicts();
    if (out) note_owner_computes(*out);
    return out;
  }

 private:
  // The specializations whose backward still tapes the softmax, moved to taped_, where some other reads the
  // statistic (drop_taped_softmax()); a warning lists them.
  void drop_taped_specializations() {
    if (std::none_of(specs_.begin(), specs_.end(), [](const Specialization &s) { return s.backward.softmax_taped == 0; }))
      return;
    std::string listed, flags;
    size_t count = 0;
    for (auto it = specs_.begin(); it != specs_.end();) {
      if (it->backward.softmax_taped == 0) {
        ++it;
        continue;
      }
      if (count++ < 4) listed += (listed.empty() ? "" : "; ") + assignment(it->choice);
      for (const std::string &f : it->backward.softmax_taped_under)
        if (std::none_of(flags_.begin(), flags_.end(), [&](const Flag &g) { return g.name == f; })) add_quoted(flags, f);
      taped_.push_back(it->choice);
      it = specs_.erase(it);
    }
    if (count)
      diags_.warning(fn_.name_span, "no backward of '" + fn_.name + "' with " + listed +
                                        (count > 4 ? " (and " + std::to_string(count - 4) + " more)" : "") +
                                        ": there ifs on " + flags + " hide its online softmax, whose backward would "
                                        "need a tape the backwards for the other values do not (they read the "
                                        "stored row statistic), so a launch with them stops at a tl.static_assert; "
                                        "give them with -D for a backward of their own");
  }

  // One dispatcher launches every specialization's backward, so none has owner-computes kernels of its own
  // (differentiate_one). Where the first specialization that adds with atomics, differentiated alone, gathers
  // some of those gradients in owner-computes kernels, the values given with -D would: a note says so.
  void note_owner_computes(Backward &out) {
    if (!request_.owner_computes || out.atomic_gradients.empty()) return;
    const Specialization *atomic = &specs_[0];
    for (const Specialization &sp : specs_)
      if (!sp.backward.atomic_gradients.empty()) {
        atomic = &sp;
        break;
      }
    BackwardRequest alone = request_;
    for (size_t k = 0; k < flags_.size(); ++k) give_flag_value(alone.param_types, flags_[k], flags_[k].values[atomic->choice[k]]);
    DiagEngine quiet(sources_);
    std::optional<Backward> single = differentiate_generic(module_, sources_, alone, quiet);
    std::string gathered;
    if (single)
      for (const Backward::OwnerKernel &o : single->owner_kernels)
        for (const std::string &input : o.inputs) add_quoted(gathered, input);
    if (!gathered.empty())
      out.notes.push_back({fn_.name_span, "the backward, one per value of " + flag_list() + ", adds gradients with "
                                          "tl.atomic_add that owner-computes kernels gather without atomics in a "
                                          "backward of one specialization (with " + assignment(atomic->choice) +
                                          ", those of " + gathered + "); one dispatcher cannot launch them: give " +
                                          flag_list() + " with -D for that backward"});
  }

  // One backward per combination of the flags' values, in specs_.
  bool differentiate_all() {
    size_t combinations = 1;
    for (const Flag &f : flags_) combinations *= f.values.size();
    if (combinations > kMaxSpecializations) {
      diags_.error(fn_.name_span, "the backward of '" + fn_.name + "' depends on the values of " + flag_list() +
                                      " (" + std::to_string(combinations) + " combinations): give them with -D" +
                                      flag_examples());
      return false;
    }
    if (combinations > kQuietSpecializations)
      diags_.warning(fn_.name_span, "the backward of '" + fn_.name + "' holds one specialization per combination of " +
                                        flag_list() + " (" + std::to_string(combinations) +
                                        "): give the values you launch with by -D for one short backward");
    // Which values the forward compiles with: typed as the backward will be
    // where any combination types so, else as leniently as without flags.
    bool strict = false;
    for (std::vector<size_t> c(flags_.size(), 0);;) {
      if ((strict = forward_compiles(c, true))) break;
      size_t k = 0;
      while (k < flags_.size() && ++c[k] == flags_[k].values.size()) c[k++] = 0;
      if (k == flags_.size()) break;
    }
    std::vector<size_t> choice(flags_.size(), 0);
    while (true) {
      if (forward_compiles(choice, strict)) {
        std::optional<Backward> b = differentiate_one(choice);
        if (!b) return false;
        specs_.push_back({choice, std::move(*b), {}});
      } else {
        invalid_.push_back(choice);
      }
      size_t k = 0;
      while (k < flags_.size() && ++choice[k] == flags_[k].values.size()) choice[k++] = 0;
      if (k == flags_.size()) break;
    }
    if (specs_.empty()) {
      // No value makes a valid forward: the errors of the first are the user's.
      differentiate_one(invalid_.front());
      return false;
    }
    // Values the kernel names (not "any other value") with which tgrad finds
    // the forward does not type: Triton may compile them all the same
    // (tgrad reads less than Triton does), and a launch with them would stop
    // at the dispatcher's static assertion. The user hears of it now.
    std::string refused;
    size_t count = 0;
    for (const std::vector<size_t> &c : invalid_) {
      bool named = true;
      for (size_t k = 0; k < flags_.size(); ++k) named &= flags_[k].values[c[k]].suffix != "other";
      if (named && count++ < 4) refused += (refused.empty() ? "" : "; ") + assignment(c);
    }
    if (count)
      diags_.warning(fn_.name_span, "no backward of '" + fn_.name + "' with " + refused +
                                        (count > 4 ? " (and " + std::to_string(count - 4) + " more)" : "") +
                                        ": the forward does not type with these values as tgrad reads it, so a "
                                        "launch with them stops at a tl.static_assert; give them with -D to see why");
    return true;
  }

  // Whether the forward itself is valid Triton with the flags' values
  // `choice` (fla's `if ACTIVATION == 'swish': ... elif ACTIVATION ==
  // 'sigmoid': ...` leaves the gate undefined for any other value: Triton
  // refuses that launch, so it needs no backward).
  bool forward_compiles(const std::vector<size_t> &choice, bool strict) const {
    sema::ParamTypes given = request_.param_types;
    for (size_t k = 0; k < flags_.size(); ++k) give_flag_value(given, flags_[k], flags_[k].values[choice[k]]);
    const Function &as_typed = split_ ? *split_ : guarded_ ? *guarded_ : fn_;
    // Strict: with the parameters typed as the backward types them (the
    // lenient fallback leaves them unknown, and unknown types agree with
    // anything).
    bool typed = false;
    const bool types = analyze_some_representative(module_, as_typed, given, &typed).has_value();
    return strict ? typed : types;
  }

  // The backward with the flags' values `choice`; its errors, if any, reported.
  std::optional<Backward> differentiate_one(const std::vector<size_t> &choice) {
    BackwardRequest r = request_;
    r.owner_computes = false;  // one dispatcher launches every specialization's backward
    for (size_t k = 0; k < flags_.size(); ++k) give_flag_value(r.param_types, flags_[k], flags_[k].values[choice[k]]);
    DiagEngine quiet(sources_);
    std::optional<Backward> b = differentiate_generic(module_, sources_, r, quiet);
    if (!b) {
      for (const Diagnostic &d : quiet.diagnostics()) diags_.report(d);
      diags_.note(fn_.name_span, "while differentiating '" + fn_.name + "' with " + assignment(choice) +
                                     " (one backward per value of " + flag_list() + "); " + how_to_give() + " otherwise");
    }
    return b;
  }

  // The types of `param` the dispatcher serves. A parameter may be a pointer
  // with some flag values and a number with others (fla's seq_offsets): of
  // each kind, the types every specialization taking that kind serves (a
  // saved output read back as float32 by one specialization is float32 for
  // all), in the first one's order.
  //
  // A specialization whose forward itself refuses a type (Liger's kl_div with log_target: tl.exp of a bf16 tile)
  // does not keep the others from serving it: Triton refuses that launch of the forward too.
  std::vector<std::string> served_by_all(const std::string &param) const {
    auto types_of = [&](const std::vector<std::pair<std::string, std::vector<std::string>>> &all) {
      for (const auto &[name, types] : all)
        if (name == param) return types;
      return std::vector<std::string>{};
    };
    std::vector<std::string> out;
    for (const bool pointers : {true, false}) {
      auto of_kind = [&](const std::string &t) { return (t.rfind('*', 0) == 0) == pointers; };
      // Per specialization that takes it as this kind: the types it serves, and those its forward refuses.
      std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> each;
      std::vector<std::string> candidates;  // in order of first appearance
      for (const Specialization &s : specs_) {
        std::vector<std::string> served;
        for (const std::string &t : types_of(s.backward.generic_types))
          if (of_kind(t)) served.push_back(t);
        if (served.empty()) continue;
        for (const std::string &t : served)
          if (std::find(candidates.begin(), candidates.end(), t) == candidates.end()) candidates.push_back(t);
        each.push_back({std::move(served), types_of(s.backward.forward_rejected_types)});
      }
      for (const std::string &t : candidates)
        if (std::all_of(each.begin(), each.end(), [&](const auto &e) {
              auto has = [&](const std::vector<std::string> &v) { return std::find(v.begin(), v.end(), t) != v.end(); };
              return has(e.first) || has(e.second);
            }))
          out.push_back(t);
    }
    return out;
  }

  // The position of a parameter of the forward (past the last for another name).
  size_t param_index(const std::string &name) const {
    for (size_t k = 0; k < fn_.params.size(); ++k)
      if (fn_.params[k].name == name) return k;
    return fn_.params.size();
  }

  // How a user fixes the values: -D for tl.constexpr flags; for an optional pointer, its type (a tensor's) with --arg.
  std::string how_to_give() const {
    std::string flags, pointers;
    for (const Flag &f : flags_) {
      if (f.is_optional_pointer())
        pointers += (pointers.empty() ? "" : " ") + std::string("--arg ") + f.name + "=*fp32";
      else
        flags += (flags.empty() ? "'" : ", '") + f.name + "'";
    }
    if (pointers.empty()) return "give " + flags + " with -D";
    const std::string typed = "give the optional pointers a type (" + pointers + ", for a backward of tensors only)";
    return flags.empty() ? typed : "give " + flags + " with -D, and " + typed.substr(5);
  }

  std::string flag_list() const {
    std::string s;
    for (size_t k = 0; k < flags_.size(); ++k) s += (k ? ", '" : "'") + flags_[k].name + "'";
    return s;
  }
  // " (the values the kernel tests: act_func = 'sigmoid', 'tanh' or another;
  // dropout = True or False; for example -D act_func="'sigmoid'" -D
  // dropout=True)": what to write, for a user who does not know the flags.
  std::string flag_examples() const {
    std::string values, example;
    for (size_t k = 0; k < flags_.size(); ++k) {
      const Flag &f = flags_[k];
      values += (k ? "; " : "") + f.name + " = ";
      for (size_t v = 0; v < f.values.size(); ++v) {
        const bool other = f.values[v].suffix == "other";
        values += (v == 0 ? "" : v + 1 == f.values.size() ? " or " : ", ") +
                  (other ? std::string("another value") : f.values[v].text);
      }
      const FlagValue &first = f.values.front();
      const bool quoted = first.text.size() > 1 && first.text.front() == '\'';
      example += " -D " + f.name + "=" + (quoted ? "\"" + first.text + "\"" : first.text);
    }
    return " (the values the kernel tests: " + values + "; for example" + example + ")";
  }
  std::string assignment(const std::vector<size_t> &choice) const {
    std::string s;
    for (size_t k = 0; k < flags_.size(); ++k) {
      const FlagValue &v = flags_[k].values[choice[k]];
      if (v.untyped) {  // an optional pointer given a tensor
        s += (k ? ", " : "") + flags_[k].name + " " + v.text;
        continue;
      }
      if (v.suffix != "other") {
        s += (k ? ", " : "") + flags_[k].name + "=" + v.text;
        continue;
      }
      // The stand-in for every value the kernel compares with none of (the dispatcher's last branch).
      std::string compared;
      for (const FlagValue &o : flags_[k].values)
        if (&o != &v) compared += (compared.empty() ? "" : ", ") + o.text;
      s += (k ? ", " : "") + flags_[k].name + " other than " + compared;
    }
    return s;
  }
  std::string suffix(const std::vector<size_t> &choice) const {
    std::string s;
    for (size_t k = 0; k < flags_.size(); ++k) s += "_" + flags_[k].name + "_" + flags_[k].values[choice[k]].suffix;
    return s;
  }

  bool fail(const Specialization &a, const Specialization &b, const std::string &what) {
    if (quiet_merge_) return false;
    diags_.error(fn_.name_span, "the backward of '" + fn_.name + "' with " + assignment(a.choice) + " and with " +
                                    assignment(b.choice) + " differ in " + what +
                                    ", which one launch protocol cannot serve: " + how_to_give());
    return false;
  }

  // One launch protocol for every specialization: the union of what they
  // take. A flag may add an output (`if STORE_MEAN: tl.store(Mean + row,
  // mean)`) or a partial sum or a tape; the dispatcher takes them all and
  // passes each specialization the arguments it has. The launcher provides
  // every buffer whatever the flag: a gradient buffer no specialization
  // writes under this flag's value starts at zero (zero_initialized is a
  // union too), an upstream gradient or scratch it does not read is unused.
  bool merge_protocols(Backward &out, std::unique_ptr<Function> &signature) {
    for (Specialization &s : specs_) s.to_dispatcher.clear();
    const Backward &first = specs_[0].backward;
    const Function *shell = first.module->find_function(first.backward_name);
    const size_t forward_params = fn_.params.size();
    for (const Specialization &s : specs_) {
      const Function *f = s.backward.module->find_function(s.backward.backward_name);
      if (!shell || !f || f->params.size() < forward_params) return fail(specs_[0], s, "their arguments");
      if (s.backward.input_gradients != first.input_gradients)
        return fail(specs_[0], s, "the gradients they compute (" + std::to_string(first.input_gradients) + " and " +
                                      std::to_string(s.backward.input_gradients) + " of the --wrt inputs)");
      for (size_t k = 0; k < forward_params; ++k)
        if (f->params[k].name != fn_.params[k].name) return fail(specs_[0], s, "their arguments");
    }
    // Gradient buffers: the --wrt inputs (the same in all), then every output
    // in parameter order; each under the name the first specialization having
    // it gave it.
    out.gradient_buffers.assign(first.gradient_buffers.begin(), first.gradient_buffers.begin() + first.input_gradients);
    for (Specialization &s : specs_)
      for (size_t k = 0; k < first.input_gradients; ++k)
        if (s.backward.gradient_buffers[k].second != first.gradient_buffers[k].second)
          s.to_dispatcher[s.backward.gradient_buffers[k].second] = first.gradient_buffers[k].second;
    std::vector<std::pair<std::string, std::string>> outputs;
    for (Specialization &s : specs_)
      for (size_t k = s.backward.input_gradients; k < s.backward.gradient_buffers.size(); ++k) {
        const auto &g = s.backward.gradient_buffers[k];
        bool seen = false;
        for (const auto &o : outputs) {
          if (o.first == g.first && o.second != g.second) s.to_dispatcher[g.second] = o.second;
          seen |= o.first == g.first;
        }
        if (!seen) outputs.push_back(g);
      }
    std::stable_sort(outputs.begin(), outputs.end(),
                     [&](const auto &a, const auto &b) { return param_index(a.first) < param_index(b.first); });
    out.gradient_buffers.insert(out.gradient_buffers.end(), outputs.begin(), outputs.end());
    out.input_gradients = first.input_gradients;
    // Partial sums change the backward's grid (G programs, each looping over
    // forward programs) and each program zeroes its own scratch rows: every
    // specialization must have the same ones. Tapes: the union, in order of
    // first appearance (a tape one specialization does not use is scratch
    // it never touches).
    // An input updated in place has one gradient buffer that holds the upstream gradient of its new contents on
    // entry. A specialization that neither loads nor stores it leaves that buffer as it is: its contents pass
    // through, and so does their gradient. One that loads it without updating it would overwrite the buffer
    // with its own gradient: refused.
    for (const Specialization &s : specs_)
      for (const std::string &x : s.backward.in_place)
        if (std::find(out.in_place.begin(), out.in_place.end(), x) == out.in_place.end()) out.in_place.push_back(x);
    for (const Specialization &s : specs_)
      for (const std::string &x : out.in_place) {
        const Backward &b = s.backward;
        if (std::find(b.in_place.begin(), b.in_place.end(), x) != b.in_place.end()) continue;
        const bool untouched =
            std::any_of(b.zero_gradients.begin(), b.zero_gradients.end(), [&](const auto &z) { return z.first == x; }) &&
            std::none_of(b.gradient_buffers.begin() + static_cast<long>(b.input_gradients), b.gradient_buffers.end(),
                         [&](const auto &g) { return g.first == x; });
        if (!untouched) return fail(specs_[0], s, "the inputs they update in place ('" + x + "')");
      }
    out.partial_sums = first.partial_sums;
    out.num_programs_param = first.num_programs_param;
    out.reduce_kernel = first.reduce_kernel;
    for (const Specialization &s : specs_) {
      const Backward &b = s.backward;
      if (b.partial_sums.size() != first.partial_sums.size() || b.num_programs_param != first.num_programs_param)
        return fail(specs_[0], s, "their partial sums");
      for (size_t k = 0; k < b.partial_sums.size(); ++k)
        if (b.partial_sums[k].input != first.partial_sums[k].input || b.partial_sums[k].scratch != first.partial_sums[k].scratch)
          return fail(specs_[0], s, "their partial sums");
    }
    for (const Specialization &s : specs_) {
      for (const Backward::Tape &t : s.backward.tapes) {
        bool seen = false;
        for (Backward::Tape &u : out.tapes) {
          if (u.scratch != t.scratch) continue;
          if (u.trips_param != t.trips_param || u.dtype != t.dtype) return fail(specs_[0], s, "their tapes");
          seen = true;
          // One entry holds a tile of either shape with as many elements ([BK, BV]
          // in one specialization, [BV, BK] in another: a state stored
          // transposed); another element count makes the entry the largest.
          if (sorted(u.tile_shape) == sorted(t.tile_shape)) continue;
          bool known = false;
          for (const auto &o : u.other_tile_shapes) known |= sorted(o) == sorted(t.tile_shape);
          if (!known) u.other_tile_shapes.push_back(t.tile_shape);
        }
        if (!seen) out.tapes.push_back(t);
      }
    }
    // Layout flags: the union (a specialization whose store of a gradient needs none does not take it).
    for (const Specialization &s : specs_) {
      Backward flags_only;
      flags_only.layout_assumptions = s.backward.layout_assumptions;
      out.add_buffer_needs(flags_only);
    }
    // A specialization that writes a gradient without the flag (atomically, or not at all: an input it does not
    // load) needs its zeros whatever the flag.
    for (Backward::LayoutAssumption &l : out.layout_assumptions)
      for (const Specialization &s : specs_)
        if (std::none_of(s.backward.layout_assumptions.begin(), s.backward.layout_assumptions.end(),
                         [&](const Backward::LayoutAssumption &o) { return o.input == l.input; }))
          l.zeros_anyway = true;
    // The dispatcher's signature, in the order a single backward's would be.
    const std::vector<std::string> extra = out.parameters_after_forward();
    // Every argument of every specialization has its place, and no two take the same one.
    for (const Specialization &s : specs_) {
      const Function *f = s.backward.module->find_function(s.backward.backward_name);
      std::set<std::string> taken;
      for (size_t k = forward_params; k < f->params.size(); ++k) {
        const std::string name = s.dispatcher_name(f->params[k].name);
        if (std::find(extra.begin(), extra.end(), name) == extra.end() || !taken.insert(name).second)
          return fail(specs_[0], s, "their arguments ('" + f->params[k].name + "')");
      }
    }
    signature = clone_signature(*shell);
    signature->params.resize(forward_params);
    for (const std::string &e : extra) signature->params.push_back(Param{e, {}, nullptr, nullptr});
    return true;
  }

  // A specialization's assertion that one program stores along an axis (src/ad/reverse/MemoryAdjoints.cpp: a store
  // of the forward's programs' own values at shared addresses) holds for the launches with its flag values only: a
  // launch protocol check of it (BackwardJson.cpp reads the assertions whose message starts "tgrad: ") would refuse
  // the launches of every other value too (fla's token shift in training, whose decoding branch stores the state).
  // The device assertion stays; its message names the values.
  void only_this_specialization(StmtList &block, const std::vector<size_t> &choice) const {
    rewrite_exprs(block, [&](ExprPtr &e) {
      auto *c = dyn_cast<Call>(e.get());
      if (!c || c->args.size() != 2 || emit::print_expr(*c->func) != "tl.device_assert") return;
      auto *m = dyn_cast<StrLit>(c->args[1].get());
      static const std::string racy = "tgrad: programs along axis ";
      if (m && m->value.rfind(racy, 0) == 0)
        c->args[1] = std::make_unique<StrLit>("tgrad, with " + assignment(choice) + ": " + m->value.substr(7), "");
    });
  }

  // if FLAG: ... / if FLAG == 'a': ... elif ...: the calls for flag k onwards.
  StmtList dispatch(size_t k, std::vector<size_t> &choice) const {
    StmtList out;
    if (k == flags_.size()) {
      for (const Specialization &s : specs_)
        if (s.choice == choice) {
          ExprList args;
          const Function *f = s.backward.module->find_function(s.backward.backward_name);
          for (const Param &p : f->params) args.push_back(std::make_unique<Name>(s.dispatcher_name(p.name)));
          out.push_back(std::make_unique<ExprStmt>(std::make_unique<Call>(
              std::make_unique<Name>(s.backward.backward_name + suffix(choice)), std::move(args), std::vector<Keyword>{})));
          return out;
        }
      // Values with which the forward does not type (for tl.constexpr
      // parameters of any value: `[BT, BV]` against `[BT, BK]` types only where
      // BK == BV), or whose backward would tape a softmax the others read
      // from its statistic: no backward, and a message that says how to get one.
      const bool taped = std::find(taped_.begin(), taped_.end(), choice) != taped_.end();
      const bool unmerged = std::find(unmerged_.begin(), unmerged_.end(), choice) != unmerged_.end();
      ExprList args;
      args.push_back(std::make_unique<BoolLit>(false));
      args.push_back(std::make_unique<StrLit>(
          "tgrad found no backward of " + fn_.name + " with " + assignment(choice) +
              (taped ? ": there its online softmax is hidden by ifs on other tl.constexpr parameters and would need "
                       "a tape; "
               : unmerged ? ": its backward needs a launch protocol (tapes, partial sums, arguments) the others do not "
                            "share; "
                     : ": the forward does not type with them for every value of its other tl.constexpr parameters; ") +
              "regenerate it with their values given by -D",
          ""));
      out.push_back(std::make_unique<ExprStmt>(std::make_unique<Call>(
          std::make_unique<Attribute>(std::make_unique<Name>("tl"), "static_assert"), std::move(args), std::vector<Keyword>{})));
      return out;
    }
    const Flag &f = flags_[k];
    // Built from the last value (the else) backwards into an elif chain.
    StmtList tail;
    for (size_t v = f.values.size(); v-- > 0;) {
      choice[k] = v;
      StmtList body = dispatch(k + 1, choice);
      if (v + 1 == f.values.size()) {
        tail = std::move(body);
        continue;
      }
      ExprPtr cond;
      if (f.values[v].literal) {
        ExprList rhs;
        rhs.push_back(clone(*f.values[v].literal));
        const CompareOpKind op = isa<NoneLit>(f.values[v].literal.get()) ? CompareOpKind::Is : CompareOpKind::Eq;
        cond = std::make_unique<Compare>(std::make_unique<Name>(f.name), std::vector<CompareOpKind>{op}, std::move(rhs));
      } else {
        cond = std::make_unique<Name>(f.name);
      }
      auto node = std::make_unique<If>(std::move(cond), std::move(body), std::move(tail));
      tail = StmtList{};
      tail.push_back(std::move(node));
    }
    return tail;
  }

  // combine(), where the specializations cannot share one launch protocol, without those that conflict with the
  // most others (the Triton tutorial's attention with FP8_OUTPUT and STAGE 0, a combination no launch uses, tapes
  // one loop where the others tape two): a launch with their values stops at the dispatcher's static assertion,
  // and a warning names them. Where the conflicts remain, the first one's error.
  std::optional<Backward> combine_dropping_conflicts() {
    quiet_merge_ = true;
    std::optional<Backward> out = combine();
    while (!out && specs_.size() > 2) {
      std::vector<size_t> conflicts(specs_.size(), 0);
      std::vector<Specialization> all = std::move(specs_);
      for (size_t i = 0; i < all.size(); ++i)
        for (size_t j = i + 1; j < all.size(); ++j) {
          specs_.clear();
          specs_.push_back(std::move(all[i]));
          specs_.push_back(std::move(all[j]));
          Backward scratch;
          std::unique_ptr<Function> signature;
          const bool merged = merge_protocols(scratch, signature);
          all[i] = std::move(specs_[0]);
          all[j] = std::move(specs_[1]);
          if (!merged) ++conflicts[i], ++conflicts[j];
        }
      specs_ = std::move(all);
      const size_t worst = static_cast<size_t>(std::max_element(conflicts.begin(), conflicts.end()) - conflicts.begin());
      if (conflicts[worst] == 0) break;
      unmerged_.push_back(specs_[worst].choice);
      specs_.erase(specs_.begin() + static_cast<long>(worst));
      out = combine();
    }
    quiet_merge_ = false;
    if (!out) return combine();  // reports the conflict left
    if (!unmerged_.empty()) {
      std::string listed;
      for (size_t k = 0; k < unmerged_.size() && k < 4; ++k) listed += (k ? "; " : "") + assignment(unmerged_[k]);
      if (unmerged_.size() > 4) listed += " (and " + std::to_string(unmerged_.size() - 4) + " more)";
      diags_.warning(fn_.name_span, "no backward of '" + fn_.name + "' with " + listed + ": its backward needs a "
                                    "launch protocol (tapes, partial sums, arguments) the others do not share, so a "
                                    "launch with them stops at a tl.static_assert; " + how_to_give() +
                                    " for a backward of their own");
    }
    return out;
  }

  std::optional<Backward> combine() {
    Backward out;
    out.specializations = specs_.size();
    std::unique_ptr<Function> kernel;
    if (!merge_protocols(out, kernel)) return std::nullopt;
    out.module = std::make_unique<Module>();
    const Backward &first = specs_[0].backward;
    out.module->imports = first.module->imports;
    for (const Constant &c : first.module->constants)
      out.module->constants.push_back({c.name, c.span, clone(*c.stmt), c.imported});
    // A function that every specialization having it has unchanged (a
    // helper's backward, the partial sums' reduction) is emitted once.
    std::set<std::string> shared, differing;
    std::vector<const Function *> shared_order;
    for (const Specialization &s : specs_)
      for (const auto &f : s.backward.module->functions) {
        if (f->name == s.backward.backward_name || differing.count(f->name)) continue;
        bool same = true;
        for (const Specialization &t : specs_) {
          const Function *g = t.backward.module->find_function(f->name);
          same &= !g || equal(*f, *g);
        }
        if (!same) {
          differing.insert(f->name);
        } else if (shared.insert(f->name).second) {
          shared_order.push_back(f.get());
        }
      }
    for (const Function *f : shared_order) out.module->functions.push_back(clone(*f));
    for (const Specialization &s : specs_) {
      std::map<std::string, std::string> renamed;
      for (const auto &f : s.backward.module->functions)
        if (!shared.count(f->name)) renamed[f->name] = f->name + suffix(s.choice);
      for (const auto &f : s.backward.module->functions) {
        if (shared.count(f->name)) continue;
        std::unique_ptr<Function> g = clone(*f);
        g->name = renamed.at(f->name);
        rename_calls(*g, renamed);
        only_this_specialization(g->body, s.choice);
        if (f->name == s.backward.backward_name && !g->body.empty())
          g->body.front()->leading_comment = "The backward with " + assignment(s.choice) + ".";
        out.module->functions.push_back(std::move(g));
      }
      for (const Import &imp : s.backward.module->imports) {
        bool seen = false;
        for (const Import &have : out.module->imports)
          seen |= have.module == imp.module && have.names == imp.names && have.is_from == imp.is_from;
        if (!seen) out.module->imports.push_back(imp);
      }
    }
    // The dispatcher: the backward's own name, every specialization's arguments.
    std::vector<size_t> choice(flags_.size(), 0);
    kernel->body = dispatch(0, choice);
    kernel->body.front()->leading_comment =
        "One backward per value of " + flag_list() + ": Triton compiles only the one this launch's value selects.";
    out.module->functions.push_back(std::move(kernel));

    // The protocol: shared parts from the first; what any specialization
    // needs of a buffer, for all.
    out.backward_name = first.backward_name;
    out.output_adjoints = first.output_adjoints;
    out.generic_types = first.generic_types;
    for (auto &[name, served] : out.generic_types)
      if (std::vector<std::string> all = served_by_all(name); !all.empty()) served = all;
    // An optional pointer is typed only where it is a tensor: the types those specializations serve.
    for (const Flag &f : flags_) {
      if (!f.is_optional_pointer()) continue;
      if (std::any_of(out.generic_types.begin(), out.generic_types.end(), [&](const auto &g) { return g.first == f.name; }))
        continue;
      std::vector<std::string> served = served_by_all(f.name);
      if (served.empty()) continue;
      auto at = std::find_if(out.generic_types.begin(), out.generic_types.end(),
                             [&](const auto &g) { return param_index(g.first) > param_index(f.name); });
      out.generic_types.insert(at, {f.name, served});
    }
    for (const Specialization &s : specs_) {
      for (const std::string &e : s.backward.explanations) out.explanations.push_back(assignment(s.choice) + ": " + e);
      for (const auto &n : s.backward.notes)
        if (std::none_of(out.notes.begin(), out.notes.end(), [&](const auto &o) {
              return o.second == n.second && o.first.begin == n.first.begin;
            }))
          out.notes.push_back(n);
      for (const std::string &f : s.backward.softmax_taped_under)
        if (std::find(out.softmax_taped_under.begin(), out.softmax_taped_under.end(), f) ==
            out.softmax_taped_under.end())
          out.softmax_taped_under.push_back(f);
      out.softmax_taped += s.backward.softmax_taped;
      // A consumed upstream gradient is a float32 copy for every
      // specialization: one launch protocol passes one buffer.
      out.add_buffer_needs(s.backward);
    }
    // A gradient that is zero in every specialization.
    for (const auto &z : first.zero_gradients) {
      bool everywhere = true;
      for (const Specialization &s : specs_) {
        bool here = false;
        for (const auto &y : s.backward.zero_gradients) here |= y.first == z.first;
        everywhere &= here;
      }
      if (everywhere) out.zero_gradients.push_back(z);
    }
    // The header of the first (command line, Generic line with every
    // specialization's types), then the module.
    std::string header = first.source.substr(0, header_length(first.source));
    if (const size_t g = header.find("# Generic: the same backward for"); g != std::string::npos && !out.generic_types.empty()) {
      const size_t end = header.find('\n', g);
      header = header.substr(0, g) + generic_types_line(out.generic_types) +
               (end == std::string::npos ? std::string() : header.substr(end + 1));
    }
    std::string values;
    for (const Flag &f : flags_) {
      values += (values.empty() ? "" : "; ") + f.name + " =";
      for (size_t v = 0; v < f.values.size(); ++v)
        values += (v ? ", " : " ") + (f.values[v].literal || f.values[v].truth || f.values[v].untyped ||
                                                  f.values[v].type.kind == SType::Kind::Bool
                                          ? f.values[v].text
                                          : std::string("any other value"));
    }
    header += "# Specialized: one backward per value of " + values + ".\n";
    out.source = header + emit::print_module(*out.module);
    return out;
  }

  const Module &module_;
  const SourceManager &sources_;
  BackwardRequest request_;
  DiagEngine &diags_;
  const Function &fn_;
  std::vector<Flag> flags_;
  std::vector<Specialization> specs_;
  std::vector<std::vector<size_t>> invalid_;  // values with which the forward itself does not compile
  std::vector<std::vector<size_t>> taped_;    // values dropped by drop_taped_softmax()
  std::vector<std::vector<size_t>> unmerged_;  // values dropped by combine_dropping_conflicts()
  bool quiet_merge_ = false;                   // merge_protocols' conflicts not reported (a trial)
  bool drop_taped_softmax_ = false;
  std::unique_ptr<Function> guarded_, split_;  // fn_ as reverse mode types it (null: unchanged)
};

// The literal of a constexpr value given with -D: a string, number, bool
// or dtype; null for other kinds (None, a symbol).
ExprPtr literal_of_value(const sema::SType &t) {
  using Kind = sema::SType::Kind;
  if (!t.known && t.kind != Kind::DType) return nullptr;
  switch (t.kind) {
    case Kind::Str: return std::make_unique<StrLit>(t.s, "");
    case Kind::Bool: return std::make_unique<BoolLit>(t.b);
    case Kind::Float: return std::make_unique<FloatLit>(t.x, "");
    case Kind::Int: {
      ExprPtr magnitude = std::make_unique<IntLit>(static_cast<uint64_t>(t.n < 0 ? -t.n : t.n), "");
      return t.n < 0 ? std::make_unique<UnaryOp>(UnaryOpKind::Neg, std::move(magnitude)) : std::move(magnitude);
    }
    case Kind::DType:
      if (t.dtype_is_pointer || t.dtype_is_tensor_type) return nullptr;
      return std::make_unique<Attribute>(std::make_unique<Name>("tl"), sema::tl_name(t.dtype));
    default: return nullptr;
  }
}

// A backward made with a constexpr's value given (-D ACTIVATION="'relu'")
// is right for that value only, yet keeps the parameter: launchers pass the
// forward's arguments through, and a launch with another value would get
// the gradient of another specialization, silently. So each kernel tgrad
// emits asserts the values it was made for, and Triton refuses such a
// launch when it compiles it. (The specializer's own values need no
// assertion: its dispatcher calls each specialization under its value.)
void assert_given_constexprs(const Function &forward, const BackwardRequest &request, Backward &out) {
  std::vector<std::pair<std::string, StmtPtr>> checks;  // (the parameter, its assertion)
  for (size_t k = 0; k < forward.params.size(); ++k) {
    const std::string &p = forward.params[k].name;
    auto it = request.param_types.find(p);
    if (!forward.is_constexpr_param(k) || it == request.param_types.end()) continue;
    ExprPtr value = literal_of_value(it->second);
    if (!value) continue;
    // (A string value in single quotes, as -D takes it: torch.compile's copy of a kernel's source, in
    // PyTorch 2.11, drops the backslashes of escaped double quotes in a string, which then ends early.)
    auto *str = dyn_cast<StrLit>(value.get());
    const std::string text = p + "=" + (str && str->value.find_first_of("'\\") == std::string::npos
                                            ? "'" + str->value + "'"
                                            : emit::print_expr(*value));
    ExprList args;
    ExprList compared;
    compared.push_back(std::move(value));
    args.push_back(std::make_unique<Compare>(std::make_unique<Name>(p), std::vector<CompareOpKind>{CompareOpKind::Eq},
                                             std::move(compared)));
    args.push_back(std::make_unique<StrLit>("tgrad: this backward was generated for " + text +
                                                " (-D); regenerate it for the value you launch with", ""));
    checks.push_back({p, std::make_unique<ExprStmt>(std::make_unique<Call>(
                             std::make_unique<Attribute>(std::make_unique<Name>("tl"), "static_assert"), std::move(args),
                             std::vector<Keyword>{}))});
  }
  if (checks.empty() || !out.module) return;
  std::set<std::string> kernels = {out.backward_name, out.prologue_kernel};
  for (const Backward::OwnerKernel &o : out.owner_kernels) kernels.insert(o.name);
  const std::string before = emit::print_module(*out.module);
  bool changed = false;
  for (auto &f : out.module->functions) {
    if (!kernels.count(f->name)) continue;
    StmtList mine;
    for (const auto &[p, check] : checks)
      for (size_t k = 0; k < f->params.size(); ++k)
        if (f->params[k].name == p && f->is_constexpr_param(k)) mine.push_back(clone(*check));
    if (mine.empty()) continue;
    f->body.insert(f->body.begin(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
    changed = true;
  }
  // The header (everything the source holds before the module) stays.
  if (changed && out.source.size() >= before.size() &&
      out.source.compare(out.source.size() - before.size(), before.size(), before) == 0)
    out.source = out.source.substr(0, out.source.size() - before.size()) + emit::print_module(*out.module);
}

}  // namespace

static std::optional<Backward> differentiate_lowered(const Module &user_module, const SourceManager &sources,
                                                     const BackwardRequest &request, DiagEngine &diags);

std::optional<Backward> differentiate(const Module &written_module, const SourceManager &sources,
                                      const BackwardRequest &request, DiagEngine &diags) {
  std::unique_ptr<Module> rewritten = lower::with_source_rewrites(written_module);  // (src/lower/SourceRewrites.h)
  const Module &user_module = rewritten ? *rewritten : written_module;
  // Which --wrt parameters some specialization loads through, on the kernel
  // as written (inlining folds the branches -D values decide).
  BackwardRequest with_pointers = request;
  // (Only an untyped --wrt parameter is given a role by the generic trials, src/ad/GenericTypes.cpp: where
  // every one has its type, which roles the kernel's parameters play is not needed.)
  const bool wrt_typed = std::all_of(request.wrt.begin(), request.wrt.end(),
                                     [&](const std::string &w) { return request.param_types.count(w) > 0; });
  if (const Function *written = wrt_typed ? nullptr : user_module.find_function(request.function)) {
    sema::ParamTypes runtime_only = request.param_types;
    for (size_t k = 0; k < written->params.size(); ++k)
      if (written->is_constexpr_param(k)) runtime_only.erase(written->params[k].name);
    const std::vector<ParamRole> roles = param_roles(user_module, *written, runtime_only);
    for (size_t k = 0; k < written->params.size(); ++k)
      if (roles[k] == ParamRole::FloatPointer &&
          std::find(request.wrt.begin(), request.wrt.end(), written->params[k].name) != request.wrt.end())
        with_pointers.pointers_in_some_specialization.insert(written->params[k].name);
  }
  return differentiate_lowered(user_module, sources, with_pointers, diags);
}

// differentiate() once the kernel's pointers are known. Helpers that access
// memory are inlined first (src/lower/InlineCalls.h: a helper may make and
// return a block pointer), then block pointers become pointer arithmetic
// (src/lower/BlockPointers.h).
static std::optional<Backward> differentiate_lowered(const Module &user_module, const SourceManager &sources,
                                                     const BackwardRequest &request, DiagEngine &diags) {
  std::unique_ptr<Module> inlined = lower::inline_memory_helpers(user_module, request.function, diags, request.param_types), lowered;
  if (diags.has_errors()) return std::nullopt;
  const Module *lowered_or_inlined =
      lower::with_block_pointers_lowered(inlined ? *inlined : user_module, request.function, diags, lowered);
  if (!lowered_or_inlined) return std::nullopt;
  // While loops that step one variable become counted for loops (src/ad/WhileLoops.h) for every stage that reads
  // the kernel: the flags' and the generic trials' analyses type the loop as reverse mode differentiates it.
  std::unique_ptr<Module> counted;
  if (const Function *written = lowered_or_inlined->find_function(request.function))
    if (std::unique_ptr<Function> rewritten = while_loops_as_counted_fors(*written)) {
      counted = clone(*lowered_or_inlined);
      for (size_t k = 0; k < lowered_or_inlined->functions.size(); ++k)
        if (lowered_or_inlined->functions[k].get() == written) counted->functions[k] = std::move(rewritten);
      lowered_or_inlined = counted.get();
    }
  const Module &module = *lowered_or_inlined;
  // TGRAD_DEBUG_LOWERED: the kernel as differentiated, helpers inlined and block pointers lowered.
  if (std::getenv("TGRAD_DEBUG_LOWERED") && &module != &user_module) std::cerr << emit::print_module(module);
  const Function *fn = module.find_function(request.function);
  if (!fn) return differentiate_generic(module, sources, request, diags);
  RoleMemo roles(module, *fn);
  std::vector<std::string> names = flags_needing_values(module, *fn, request, &roles);
  const std::vector<std::string> first_found = names;
  // A flag's need can hide behind another's: while IS_VARLEN changes T's
  // type, what `if USE_G: b_g = tl.load(...) else: b_g = None` leaves has no
  // type to compare, and USE_G shows up only once IS_VARLEN has a value. So
  // the flags found so far get each of their values in turn, and the flags
  // those reveal join, until none is new (or there are too many to try:
  // the Specializer then names them).
  for (bool grew = !names.empty(); grew;) {
    grew = false;
    std::vector<Flag> flags;
    size_t combinations = 1;
    for (const std::string &n : names) {
      flags.push_back(flag_values(module, *fn, n));
      combinations *= std::max<size_t>(1, flags.back().values.size());
    }
    if (combinations > kMaxSpecializations) break;
    for (size_t index = 0; index < combinations && !grew; ++index) {
      BackwardRequest with = request;
      for (size_t k = 0, rest = index; k < flags.size(); ++k) {
        const size_t count = std::max<size_t>(1, flags[k].values.size());
        if (!flags[k].values.empty()) give_flag_value(with.param_types, flags[k], flags[k].values[rest % count]);
        rest /= count;
      }
      for (const std::string &n : flags_needing_values(module, *fn, with, &roles))
        if (std::find(names.begin(), names.end(), n) == names.end()) {
          names.push_back(n);
          grew = true;
        }
    }
  }
  auto attempt_with = [&](const BackwardRequest &r, const std::vector<std::string> &flag_names, DiagEngine &d,
                          bool for_statistics) -> std::optional<Backward> {
    if (flag_names.empty()) return differentiate_generic(module, sources, r, d);
    std::vector<Flag> flags;
    for (const std::string &n : flag_names) flags.push_back(flag_values(module, *fn, n));
    Specializer specializer(module, sources, r, d, *fn, std::move(flags));
    if (for_statistics) specializer.drop_taped_softmax();
    return specializer.run();
  };
  auto attempt = [&](const std::vector<std::string> &flag_names, DiagEngine &d,
                     bool for_statistics = false) -> std::optional<Backward> {
    return attempt_with(request, flag_names, d, for_statistics);
  };
  std::optional<Backward> out;
  // Past the cap, the flags only a helper tests are left out first: where
  // that helper's result carries no gradient (fla's gated activations pass
  // six flags to helpers whose ifs touch nothing differentiated), no value is
  // needed, and where it does, differentiating the helper without the value
  // stops with a located error, reported as the cap's error below.
  auto combinations_of = [&](const std::vector<std::string> &flag_names) {
    size_t n = 1;
    for (const std::string &f : flag_names) n *= std::max<size_t>(1, flag_values(module, *fn, f).values.size());
    return n;
  };
  std::vector<std::string> used;             // the flags `out` is specialized on
  std::vector<Diagnostic> pending;           // the diagnostics of the attempt `out` comes from
  auto keep = [&](const DiagEngine &d) { pending.assign(d.diagnostics().begin(), d.diagnostics().end()); };
  if (combinations_of(names) > kMaxSpecializations) {
    sema::ParamTypes given_flags;
    for (size_t k = 0; k < fn->params.size(); ++k)
      if (auto it = request.param_types.find(fn->params[k].name); fn->is_constexpr_param(k) && it != request.param_types.end())
        given_flags.insert(*it);
    const std::vector<std::string> helper_flags = flags_tested_in_helpers(module, *fn, given_flags);
    std::vector<std::string> without_helpers;
    for (const std::string &n : names)
      if (std::find(helper_flags.begin(), helper_flags.end(), n) == helper_flags.end()) without_helpers.push_back(n);
    if (without_helpers.size() < names.size() && combinations_of(without_helpers) <= kMaxSpecializations) {
      DiagEngine quiet(sources);
      out = attempt(without_helpers, quiet);
      if (out) {
        keep(quiet);
        used = without_helpers;
      }
    }
  }
  if (!out && names == first_found) {
    DiagEngine direct(sources);
    out = attempt(names, direct);
    keep(direct);
    used = names;
  } else if (!out) {
    // The flags the values revealed, else (where a revealed flag leaves an
    // input of --wrt unloaded in a specialization, which the generic typing
    // cannot type) the flags found first; the first attempt's errors where
    // neither differentiates.
    DiagEngine revealed(sources), first(sources);
    out = attempt(names, revealed);
    const bool by_revealed = out.has_value();
    if (!out) out = attempt(first_found, first);
    const DiagEngine &kept = by_revealed || !out ? revealed : first;
    keep(kept);
    used = by_revealed ? names : first_found;
  }
  // An online softmax hidden by ifs on tl.constexpr flags without values keeps a tape that grows with the loop's
  // trips times the programs (the Triton tutorial's attention without -D: `if STAGE & 1:` around its loop,
  // `warp_specialize` and `IS_HOPPER` in it; O(N^2) numbers per head). Where those flags are modes (True or
  // False, strings, bits tested: every value they take has a specialization), the backward is tried specialized
  // on them too, where each specialization's ifs fold away and its softmax reads the stored statistic. Kept where
  // fewer of its specializations hold a tape. Flags compared with numbers they also compute with (`BLOCK_M ==
  // 128` beside `tl.arange(0, BLOCK_M)`) stay generic: one value each would not serve the others.
  if (out && out->softmax_taped > 0) {
    std::vector<std::string> with = used;
    const std::set<std::string> constexprs = constexpr_params(*fn);
    for (const std::string &f : out->softmax_taped_under) {
      if (std::find(with.begin(), with.end(), f) != with.end() || request.param_types.count(f)) continue;
      if (constexprs.count(f) && flag_values(module, *fn, f).is_mode) with.push_back(f);
    }
    if (with.size() > used.size() && combinations_of(with) <= kMaxSpecializations) {
      DiagEngine quiet(sources);
      std::optional<Backward> specialized = attempt(with, quiet, true);
      if (specialized &&
          specialized->softmax_taped * out->specializations < out->softmax_taped * specialized->specializations) {
        out = std::move(specialized);
        keep(quiet);
      }
    }
  }
  // Pointers tested against None whose None-ness the backward depends on (`w = 1 if W is None else tl.load(...)`:
  // the branches' types differ, so no one backward serves both): one backward per case, dispatched on `W is None`.
  // Only where the backward without them fails: a test the backward can keep (skip_rows_kernel's `if MASK is not
  // None:` around its work) stays one backward.
  // A pointer given a type (--arg W=*fp32) is a tensor: not None there.
  if (const std::vector<std::string> optional = optional_pointers(*fn); !out && !optional.empty()) {
    BackwardRequest tensors = request;
    std::vector<std::string> with = used;
    for (const std::string &p : optional) {
      auto given = tensors.param_types.find(p);
      if (given == tensors.param_types.end())
        with.push_back(p);
      else if (given->second.is_tensor() && given->second.elem.is_pointer)
        given->second.not_none = true;
    }
    if (combinations_of(with) <= kMaxSpecializations) {
      DiagEngine specialized(sources);
      if (std::optional<Backward> b = attempt_with(tensors, with, specialized, false)) {
        out = std::move(b);
        keep(specialized);
        used = with;
      }
    }
  }
  for (const Diagnostic &d : pending) diags.report(d);
  if (out) assert_given_constexprs(*fn, request, *out);
  if (out && &module != &user_module) out->forward = std::shared_ptr<const Function>(clone(*fn).release());
  if (out)
    for (const auto &[at, note] : out->notes) diags.note(at, note);
  if (out && request.deterministic)
    for (const Backward::AtomicGradient &a : out->atomic_gradients)
      diags.warning(a.load, "--deterministic: the gradient of '" + a.input +
                                "' through this load is still added with tl.atomic_add from several programs, so its "
                                "bits may differ from run to run (" + a.reason +
                                "); tgrad has no deterministic schedule for it yet");
  return out;
}

}  // namespace tgrad::ad
