#include "src/ad/SpecializationFlags.h"

#include <functional>
#include <map>
#include <optional>
#include <set>

#include "src/ad/AnfWalk.h"
#include "src/ad/ConstexprPaths.h"
#include "src/ad/EarlyReturn.h"
#include "src/ad/GenericTypes.h"
#include "src/ad/MemoryAccumulators.h"
#include "tgrad/ast/Equal.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;
using sema::SType;

static bool is_flag_name(const Expr &e, const std::string &flag) {
  auto *n = dyn_cast<Name>(&e);
  return n && n->id == flag;
}

static std::string suffix_of(const std::string &text) {
  std::string out;
  for (char c : text)
    if (std::isalnum(static_cast<unsigned char>(c))) out += c;
  return out.empty() ? "other" : out;
}

// A literal, a negated integer, or a module constant bound to one
// (`_MODE_LLAMA: tl.constexpr = tl.constexpr(0)`): the literal; else null.
ExprPtr literal_of(const Expr &e, const Module &module, int depth) {
  if (depth > 8) return nullptr;
  if (isa<StrLit>(&e) || isa<IntLit>(&e) || isa<BoolLit>(&e)) return clone(e);
  if (auto *u = dyn_cast<UnaryOp>(&e); u && u->op == UnaryOpKind::Neg && isa<IntLit>(u->operand.get())) return clone(e);
  if (auto *c = dyn_cast<Call>(&e); c && emit::print_expr(*c->func) == "tl.constexpr" && c->args.size() == 1)
    return literal_of(*c->args[0], module, depth + 1);
  if (auto *n = dyn_cast<Name>(&e))
    for (const Constant &k : module.constants)
      if (k.name == n->id) {
        const Expr *value = nullptr;
        if (auto *a = dyn_cast<AnnAssign>(k.stmt.get())) value = a->value.get();
        if (auto *a = dyn_cast<Assign>(k.stmt.get())) value = a->value.get();
        return value ? literal_of(*value, module, depth + 1) : nullptr;
      }
  return nullptr;
}

// Whether `e` is `name is None` or `name is not None` (either way round).
static bool tests_against_none(const Expr &e, const std::string &name) {
  auto *c = dyn_cast<Compare>(&e);
  return c && c->comparators.size() == 1 && (c->ops[0] == CompareOpKind::Is || c->ops[0] == CompareOpKind::IsNot) &&
         ((is_flag_name(*c->left, name) && isa<NoneLit>(c->comparators[0].get())) ||
          (is_flag_name(*c->comparators[0], name) && isa<NoneLit>(c->left.get())));
}

std::vector<std::string> optional_pointers(const Function &fn) {
  std::vector<std::string> out;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const std::string &name = fn.params[k].name;
    if (fn.is_constexpr_param(k)) continue;
    bool tested = false;
    visit_exprs(fn.body, [&](const Expr &e) { tested |= tests_against_none(e, name); });
    if (tested) out.push_back(name);
  }
  return out;
}

void give_flag_value(sema::ParamTypes &types, const Flag &flag, const FlagValue &value) {
  types[flag.name] = value.untyped ? tensor_pointer_marker() : value.type;
}

SType tensor_pointer_marker() {
  SType t;
  t.not_none = true;
  return t;
}

bool is_tensor_pointer_marker(const SType &t) { return t.kind == SType::Kind::Unknown && t.not_none; }

// The values to differentiate `flag` with: each literal the function compares
// it with (==, !=) and one equal to none; else True and False.
Flag flag_values(const Module &module, const Function &fn, const std::string &flag) {
  Flag f{flag, {}};
  for (size_t k = 0; k < fn.params.size(); ++k)
    if (fn.params[k].name == flag && !fn.is_constexpr_param(k)) {
      // An optional pointer: None, or a tensor (typed by the generic trials).
      FlagValue none;
      none.type = SType::none();
      none.text = "None";
      none.suffix = "none";
      none.literal = std::make_unique<NoneLit>();
      f.values.push_back(std::move(none));
      FlagValue tensor;
      tensor.text = "a tensor";
      tensor.suffix = "tensor";
      tensor.untyped = true;
      f.values.push_back(std::move(tensor));
      f.is_mode = true;
      return f;
    }
  std::vector<ExprPtr> owned;
  std::vector<const Expr *> literals;
  std::string name = flag;  // the flag's name in the function visited (a helper's parameter)
  // Tested against None (`if act_func is not None:`): None is a value of its own, what a launch passes for
  // "none" (attorch's plain Linear), neither True nor False nor a string compared with.
  bool tested_against_none = false;
  std::function<void(const Expr &)> visit = [&](const Expr &e) {
    if (auto *c = dyn_cast<Compare>(&e); c && c->comparators.size() == 1 &&
                                         (c->ops[0] == CompareOpKind::Is || c->ops[0] == CompareOpKind::IsNot) &&
                                         ((is_flag_name(*c->left, name) && isa<NoneLit>(c->comparators[0].get())) ||
                                          (is_flag_name(*c->comparators[0], name) && isa<NoneLit>(c->left.get()))))
      tested_against_none = true;
    if (auto *c = dyn_cast<Compare>(&e); c && c->comparators.size() == 1 &&
                                         (c->ops[0] == CompareOpKind::Eq || c->ops[0] == CompareOpKind::NotEq)) {
      const Expr *other = is_flag_name(*c->left, name) ? c->comparators[0].get()
                          : is_flag_name(*c->comparators[0], name) ? c->left.get() : nullptr;
      ExprPtr literal = other ? literal_of(*other, module) : nullptr;
      if (literal) {
        bool seen = false;
        for (const Expr *l : literals) seen |= equal(*l, *literal);
        if (!seen) {
          literals.push_back(literal.get());
          owned.push_back(std::move(literal));
        }
      }
    }
  };
  // Bits the flag is tested for (`if STAGE & 1:` ... `if STAGE & 2:`, the
  // Triton tutorial's attention, launched with STAGE 1 and 3): every
  // combination of them is a value.
  uint64_t bits = 0;
  auto bit_tests = [&](const Expr &e) {
    auto *b = dyn_cast<BinOp>(&e);
    if (!b || b->op != BinaryOpKind::BitAnd) return;
    const Expr *mask = is_flag_name(*b->lhs, name) ? b->rhs.get() : is_flag_name(*b->rhs, name) ? b->lhs.get() : nullptr;
    if (auto *m = mask ? dyn_cast<IntLit>(mask) : nullptr) bits |= m->value;
  };
  auto visit_all = [&](const StmtList &body) {
    visit_exprs(body, visit);
    visit_exprs(body, bit_tests);
  };
  visit_all(fn.body);
  // A helper the flag is passed to compares it under its own name
  // (attorch's apply_act_func(x, ..., act_func, dropout)).
  for (const auto &[helper, param] : helpers_receiving_constexpr(module, fn, flag)) {
    name = param;
    visit_all(helper->body);
  }
  if (bits != 0 && __builtin_popcountll(bits) <= 4 &&
      std::all_of(literals.begin(), literals.end(), [](const Expr *l) { return isa<IntLit>(l); })) {
    // Each subset of the bits, smallest first, beside the literals compared with.
    for (uint64_t v = 0;; v = (v - bits) & bits) {
      bool seen = false;
      for (const Expr *l : literals) seen |= cast<IntLit>(l)->value == v;
      if (!seen) {
        owned.push_back(std::make_unique<IntLit>(v, ""));
        literals.push_back(owned.back().get());
      }
      if (v == bits) break;
    }
    std::sort(literals.begin(), literals.end(),
              [](const Expr *a, const Expr *b) { return cast<IntLit>(a)->value < cast<IntLit>(b)->value; });
  }
  auto none_value = [] {
    FlagValue fv;
    fv.type = SType::none();
    fv.text = "None";
    fv.suffix = "none";
    fv.literal = std::make_unique<NoneLit>();
    return fv;
  };
  // (With integer literals the other value's stand-in is already None: that branch serves it.)
  if (tested_against_none && (literals.empty() || isa<StrLit>(literals[0]))) f.values.push_back(none_value());
  f.is_mode = bits != 0 || literals.empty() || !(isa<IntLit>(literals[0]) || isa<UnaryOp>(literals[0]));
  if (literals.empty()) {
    for (bool v : {true, false}) {
      FlagValue fv;
      fv.type = SType::of_bool(v);
      fv.text = v ? "True" : "False";
      fv.suffix = v ? "true" : "false";
      fv.truth = v;
      f.values.push_back(std::move(fv));
    }
    return f;
  }
  for (const Expr *l : literals) {
    FlagValue fv;
    if (auto *s = dyn_cast<StrLit>(l)) {
      fv.type = SType::of_str(s->value);
      fv.text = "'" + s->value + "'";
      fv.suffix = suffix_of(s->value);
    } else if (isa<IntLit>(l) || isa<UnaryOp>(l)) {
      auto *u = dyn_cast<UnaryOp>(l);
      const auto v = static_cast<long long>(cast<IntLit>(u ? u->operand.get() : l)->value);
      fv.type = SType::of_int(u ? -v : v);
      fv.text = std::to_string(u ? -v : v);
      fv.suffix = u ? "minus" + std::to_string(v) : fv.text;
    } else {
      bool b = cast<BoolLit>(l)->value;
      fv.type = SType::of_bool(b);
      fv.text = b ? "True" : "False";
      fv.suffix = b ? "true" : "false";
    }
    fv.literal = clone(*l);
    f.values.push_back(std::move(fv));
  }
  // A value equal to none of them: the dispatcher's last branch.
  FlagValue other;
  other.type = isa<StrLit>(literals[0]) ? SType::of_str("") : SType::none();
  other.text = isa<StrLit>(literals[0]) ? "''" : "None";
  other.suffix = "other";
  f.values.push_back(std::move(other));
  return f;
}

// The forward typed with the first uniform representative it accepts
// (fp32, fp16, bf16 for the parameters given no type), else as given;
// nullopt where none types: Triton would not compile it.
std::optional<sema::TypeInfo> analyze_some_representative(const Module &module, const Function &fn,
                                                          const sema::ParamTypes &given,
                                                          bool *by_representative, RoleMemo *memo) {
  if (by_representative) *by_representative = false;
  for (sema::DType d : {sema::DType::FP32, sema::DType::FP16, sema::DType::BF16}) {
    SourceManager scratch;
    DiagEngine quiet(scratch);
    if (std::optional<sema::TypeInfo> info =
            sema::analyze(module, fn, uniform_representative(module, fn, given, d, memo), quiet)) {
      if (by_representative) *by_representative = true;
      return info;
    }
  }
  SourceManager scratch;
  DiagEngine quiet(scratch);
  return sema::analyze(module, fn, given, quiet);
}

using LocalSources = std::map<std::string, std::set<std::string>>;

// Each local tl.constexpr with the names its definitions read.
static LocalSources local_constexpr_sources(const Function &fn) {
  LocalSources sources;
  std::function<void(const StmtList &)> walk = [&](const StmtList &block) {
    for (const StmtPtr &st : block) {
      if (auto *a = dyn_cast<AnnAssign>(st.get()); a && a->value && is_constexpr_annotation(a->annotation.get())) {
        if (auto *n = dyn_cast<Name>(a->target.get())) reads(*a->value, sources[n->id]);
      } else if (auto *i = dyn_cast<If>(st.get())) {
        walk(i->body);
        walk(i->orelse);
      } else if (auto *f = dyn_cast<For>(st.get())) {
        walk(f->body);
      } else if (auto *w = dyn_cast<While>(st.get())) {
        walk(w->body);
      }
    }
  };
  walk(fn.body);
  return sources;
}

// `names` with, for each local tl.constexpr in it, the names its definitions read, to a fixed point: a condition on a
// local constexpr (`SHOULD_FUSE_MUL: tl.constexpr = FUSE_MUL_PRE or FUSE_MUL_POST`, unsloth's grouped GEMM) tests
// the flags it is computed from.
static void add_sources_of_locals(const LocalSources &sources, std::set<std::string> &names) {
  std::vector<std::string> pending(names.begin(), names.end());
  while (!pending.empty()) {
    const std::string n = pending.back();
    pending.pop_back();
    auto it = sources.find(n);
    if (it == sources.end()) continue;
    for (const std::string &m : it->second)
      if (names.insert(m).second) pending.push_back(m);
  }
}

// The constexpr flags whose guarded definitions need values.
// The names read in the conditions of the function's ifs, at any depth, and what the locals they read are computed
// from.
static std::set<std::string> names_read_in_conditions(const Function &fn) {
  std::set<std::string> in_conditions;
  std::function<void(const StmtList &)> conditions = [&](const StmtList &block) {
    for (const StmtPtr &st : block) {
      if (auto *i = dyn_cast<If>(st.get())) {
        reads(*i->cond, in_conditions);
        conditions(i->body);
        conditions(i->orelse);
      } else if (auto *f = dyn_cast<For>(st.get())) {
        conditions(f->body);
      } else if (auto *w = dyn_cast<While>(st.get())) {
        conditions(w->body);
      }
    }
  };
  conditions(fn.body);
  add_sources_of_locals(local_constexpr_sources(fn), in_conditions);
  return in_conditions;
}

// The constexpr parameters of `fn` without a value in `given` that a jit
// helper it calls tests in an if (under its own name or the same). A helper
// is differentiated as a tile function, where an if on a constexpr needs the
// value, so the kernel's flag that feeds it does.
std::vector<std::string> flags_tested_in_helpers(const Module &module, const Function &fn,
                                                 const sema::ParamTypes &given) {
  std::vector<std::string> out;
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const std::string &flag = fn.params[k].name;
    if (!fn.is_constexpr_param(k) || given.count(flag)) continue;
    for (const auto &[helper, param] : helpers_receiving_constexpr(module, fn, flag))
      if (names_read_in_conditions(*helper).count(param)) {
        out.push_back(flag);
        break;
      }
  }
  return out;
}

// Whether any condition (of an if, or of a conditional expression), in the
// function or in any function of the module (a helper given the flag as an
// argument of the same name), reads one of fn's constexpr parameters that
// `given` has no value for.
static bool reads_unvalued_flag(const Module &module, const Function &fn, const sema::ParamTypes &given) {
  std::set<std::string> unvalued;
  for (size_t k = 0; k < fn.params.size(); ++k)
    if (fn.is_constexpr_param(k) && !given.count(fn.params[k].name)) unvalued.insert(fn.params[k].name);
  if (unvalued.empty()) return false;
  std::set<std::string> in_conditions;
  auto expression = [&](const Expr &e) {
    visit_expr(e, [&](const Expr &sub) {
      if (auto *c = dyn_cast<IfExp>(&sub)) reads(*c->cond, in_conditions);
    });
  };
  std::function<void(const StmtList &)> block = [&](const StmtList &stmts) {
    for (const StmtPtr &st : stmts) {
      if (auto *a = dyn_cast<Assign>(st.get())) expression(*a->value);
      if (auto *a = dyn_cast<AugAssign>(st.get())) expression(*a->value);
      if (auto *a = dyn_cast<AnnAssign>(st.get()); a && a->value) expression(*a->value);
      if (auto *e = dyn_cast<ExprStmt>(st.get())) expression(*e->value);
      if (auto *r = dyn_cast<Return>(st.get()); r && r->value) expression(*r->value);
      if (auto *i = dyn_cast<If>(st.get())) {
        reads(*i->cond, in_conditions);
        block(i->body);
        block(i->orelse);
      }
      if (auto *f = dyn_cast<For>(st.get())) {
        expression(*f->iter);
        block(f->body);
      }
      if (auto *w = dyn_cast<While>(st.get())) {
        reads(*w->cond, in_conditions);
        block(w->body);
      }
    }
  };
  block(fn.body);
  for (const auto &f : module.functions) block(f->body);
  add_sources_of_locals(local_constexpr_sources(fn), in_conditions);
  for (const std::string &n : in_conditions)
    if (unvalued.count(n)) return true;
  return !flags_tested_in_helpers(module, fn, given).empty();
}

std::vector<std::string> flags_needing_values(const Module &module, const Function &fn, const BackwardRequest &request,
                                              RoleMemo *memo) {
  sema::ParamTypes given;
  for (size_t k = 0; k < fn.params.size(); ++k)
    if (fn.is_constexpr_param(k))
      if (auto it = request.param_types.find(fn.params[k].name); it != request.param_types.end()) given[it->first] = it->second;
  // The runtime parameters as the first uniform representative the forward
  // accepts types them: which names change type with a flag depends on them.
  for (const auto &kv : request.param_types) given.insert(kv);
  // A flag is a constexpr parameter without a value that some condition
  // reads: with none, nothing below can find one, and the analyses it runs
  // (several passes of sema over the whole function) are skipped.
  if (!reads_unvalued_flag(module, fn, given)) return {};
  bool by_representative = false;
  std::optional<sema::TypeInfo> info = analyze_some_representative(module, fn, given, &by_representative, memo);
  const std::set<std::string> in_conditions = names_read_in_conditions(fn);
  // Flags without which the forward does not type as the backward types it
  // (its parameters typed; without them the analysis leaves them unknown, and
  // unknown types hide what a flag changes: fla's T, int32 or int64 by
  // IS_VARLEN, made every address after it unknown). Where the forward does
  // not type with every flag free at all (ttt's `i_last = (BT - 1) if ... else
  // (T % BT - 1)` is an int32 or an int64 by IS_VARLEN), any value that lets
  // it type counts. differentiate() then adds the flags their values reveal.
  //
  // `flags_letting(types)`: the unvalued flags read in conditions with some value of which `types` holds.
  auto flags_letting = [&](const std::function<bool(const sema::ParamTypes &)> &types) {
    std::vector<std::string> out;
    for (size_t k = 0; k < fn.params.size(); ++k) {
      const std::string &name = fn.params[k].name;
      if (!fn.is_constexpr_param(k) || !in_conditions.count(name) || given.count(name)) continue;
      for (const FlagValue &v : flag_values(module, fn, name).values) {
        sema::ParamTypes with = given;
        with[name] = v.type;  // (a tl.constexpr flag: never an optional pointer)
        if (types(with)) {
          out.push_back(name);
          break;
        }
      }
    }
    return out;
  };
  auto flags_that_let_it_type = [&]() {
    return flags_letting([&](const sema::ParamTypes &with) {
      bool typed = false;
      return analyze_some_representative(module, fn, with, &typed, memo) && (typed || !info);
    });
  };
  if (!info) return flags_that_let_it_type();
  // Reverse mode keeps memory accumulators in registers first: a load under
  // a flag's if then starts the carried value under the same if before the
  // loop, a definition the flag guards (src/ad/MemoryAccumulators.h).
  std::vector<KeptAccumulator> kept;
  std::unique_ptr<Function> registers = keep_memory_accumulators_in_registers(fn, *info, kept);
  std::optional<sema::TypeInfo> registers_info;
  if (registers) registers_info = analyze_some_representative(module, *registers, given);
  const Function &guarded = registers_info ? *registers : fn;
  std::vector<std::string> flags;
  const LocalSources guarded_sources = local_constexpr_sources(guarded);
  for (const Expr *cond : constexpr_guarded_conditions(guarded, registers_info ? *registers_info : *info)) {
    std::set<std::string> read;
    reads(*cond, read);
    add_sources_of_locals(guarded_sources, read);
    for (size_t k = 0; k < fn.params.size(); ++k)
      if (fn.is_constexpr_param(k) && read.count(fn.params[k].name) && !given.count(fn.params[k].name) &&
          std::find(flags.begin(), flags.end(), fn.params[k].name) == flags.end())
        flags.push_back(fn.params[k].name);
  }
  // A flag that decides whether a parameter is a pointer or a number (fla's
  // rotary: `o_t + seq_offsets` without IS_SEQLEN_OFFSETS_TENSOR,
  // `o_t + tl.load(seq_offsets + i_n)` with it): each value types it anew.
  for (size_t k = 0; k < fn.params.size(); ++k) {
    const std::string &name = fn.params[k].name;
    if (!fn.is_constexpr_param(k) || !in_conditions.count(name) || given.count(name) ||
        std::find(flags.begin(), flags.end(), name) != flags.end())
      continue;
    sema::ParamTypes with = given, without = given;
    with[name] = SType::of_bool(true);
    without[name] = SType::of_bool(false);
    if (param_roles(module, fn, with, memo) != param_roles(module, fn, without, memo)) flags.push_back(name);
  }
  // A flag choosing a dtype (`dtype = tl.float8e5 if FP8_OUTPUT else tl.float16`,
  // the Triton tutorial's attention): what is computed in that dtype, and its
  // casts, differ with each value.
  visit_exprs(fn.body, [&](const Expr &e) {
    auto *i = dyn_cast<IfExp>(&e);
    if (!i || !is_tl_dtype(i->then_value.get()) || !is_tl_dtype(i->else_value.get())) return;
    std::set<std::string> read;
    reads(*i->cond, read);
    for (size_t k = 0; k < fn.params.size(); ++k)
      if (fn.is_constexpr_param(k) && read.count(fn.params[k].name) && !given.count(fn.params[k].name) &&
          std::find(flags.begin(), flags.end(), fn.params[k].name) == flags.end())
        flags.push_back(fn.params[k].name);
  });
  // Flags a helper tests (its ifs need them: a helper is a tile function).
  for (const std::string &name : flags_tested_in_helpers(module, fn, given))
    if (std::find(flags.begin(), flags.end(), name) == flags.end()) flags.push_back(name);
  // A flag whose value decides whether the forward compiles in a half-precision type (Liger's kl_div: `if
  // log_target: ... tl.exp(y_true)`, which Triton refuses for bf16): unvalued, sema types both branches and
  // refuses that type for every value, so a bf16 model's launch without log_target would be refused too.
  // Specialized, each value's forward is typed alone, and the values whose forward compiles serve the type.
  for (sema::DType d : {sema::DType::FP16, sema::DType::BF16}) {
    auto types_with = [&](const sema::ParamTypes &g) {
      SourceManager scratch;
      DiagEngine quiet(scratch);
      return sema::analyze(module, fn, uniform_representative(module, fn, g, d, memo), quiet).has_value();
    };
    if (types_with(given)) continue;
    for (const std::string &name : flags_letting(types_with))
      if (std::find(flags.begin(), flags.end(), name) == flags.end()) flags.push_back(name);
  }
  // Typed only with its parameters unknown, the forward showed no flag: those
  // that let it type as the backward types it. Where it showed some, those
  // come first, and their values reveal the rest.
  if (flags.empty() && !by_representative) return flags_that_let_it_type();
  return flags;
}

}  // namespace tgrad::ad
