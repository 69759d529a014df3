// Layout boxes (AccessAnalysis::classify_layout, classify_owner_layout): offsets that are sums of indices times
// strides given at run time, one index per program axis (pid, or pid // D and pid % D together), per block of
// programs and per tile axis; each address is one program's and lane's where the box's strides keep its cells apart,
// which the launch decides (the backward's layout flags, Backward::LayoutAssumption).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "src/ad/AccessAnalysis.h"
#include "src/ad/AccessText.h"
#include "src/ad/AnfWalk.h"
#include "tgrad/ad/Differentiate.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::ad {

using namespace ast;
using namespace access_text;

namespace {

// An expression of a coefficient or extent text: a product of integers and names ("BLOCK_M*stride_qm").
ExprPtr product_expr(const std::string &text) { return text_expr(text); }

// Sets a flag or a set of the analysis for the scope of a query (mutable state the affine forms read), and clears it
// after.
template <class T>
struct Scoped {
  T &held;
  Scoped(T &h, T value) : held(h) { held = std::move(value); }
  ~Scoped() { held = T{}; }
};

ExprPtr num_programs(int axis) {
  ExprList args;
  args.push_back(std::make_unique<IntLit>(static_cast<uint64_t>(axis), ""));
  return std::make_unique<Call>(std::make_unique<Attribute>(std::make_unique<Name>("tl"), "num_programs"),
                                std::move(args), std::vector<Keyword>{});
}

}  // namespace

AccessDecision AccessAnalysis::classify_load(const std::string &pointer, const std::string &mask) const {
  AccessDecision d = classify(pointer, mask);
  if (d.kind != AccessDecision::Kind::Shared || d.programs_share) return d;
  if (std::optional<AccessDecision> layout = classify_layout(pointer, mask)) return std::move(*layout);
  return d;
}

std::optional<AccessDecision> AccessAnalysis::classify_layout(const std::string &pointer, const std::string &mask) const {
  if (std::optional<AccessDecision> d = layout_box(pointer, mask, -1, "")) return d;
  // A loop around the load walking blocks of one of its tile axes (`i * B + tl.arange(0, B)`, i from 0 by 1, or
  // `v + tl.arange(0, B)`, v from 0 by B): the loop's blocks are one index of the box, and each iteration reads
  // addresses of its own.
  std::string walked;
  {
    Scoped<bool> general(general_, true);
    Offset chain = offset_of(pointer, false);
    if (chain.why.empty() && chain.form.valid && chain.form.loops.size() == 1) walked = chain.form.loops[0].var;
  }
  if (walked.empty()) return std::nullopt;
  std::optional<AccessDecision> d = layout_box(pointer, mask, -1, walked);
  if (d) {
    d->walks_loop = true;
    d->walked_loop_var = walked;
  }
  return d;
}

std::optional<AccessDecision> AccessAnalysis::classify_owner_layout(
    const std::string &pointer, const std::string &mask, int summed_axis, const std::string &loop_var,
    const std::set<std::pair<std::string, std::string>> &in_bounds) const {
  if (summed_axis < 0 || loop_var.empty()) return std::nullopt;
  Scoped<std::set<std::pair<std::string, std::string>>> bounds(in_bounds_, in_bounds);
  return layout_box(pointer, mask, summed_axis, loop_var);
}

std::optional<AccessDecision> AccessAnalysis::classify_layout_union(const std::vector<std::string> &pointers,
                                                                   const std::string &mask) const {
  if (pointers.size() < 2) return std::nullopt;
  Scoped<bool> general(general_, true);
  // The same affine form; the parts the same everywhere the same but for one shift each (none for the first).
  std::vector<Offset> chains;
  for (const std::string &p : pointers) {
    chains.push_back(offset_of(p, false));
    const Offset &c = chains.back();
    if (!c.why.empty() || !c.form.valid || c.untracked_shift || key(c.form) != key(chains[0].form)) return std::nullopt;
  }
  std::multiset<std::string> common(chains[0].uniform_parts.begin(), chains[0].uniform_parts.end());
  std::vector<std::string> shifts = {"0"};
  for (size_t k = 1; k < chains.size(); ++k) {
    std::multiset<std::string> parts(chains[k].uniform_parts.begin(), chains[k].uniform_parts.end());
    for (const std::string &c : common) {
      auto it = parts.find(c);
      if (it == parts.end()) return std::nullopt;
      parts.erase(it);
    }
    if (parts.size() != 1) return std::nullopt;
    std::string shift = value_of(resolve_copy(*parts.begin()));
    if (!integer_text(shift) && !quotient_sides(shift)) {  // (`HEAD_DIM // 2` written inline: one quotient)
      std::optional<std::string> product = product_of_parameters(shift);
      if (!product) return std::nullopt;
      shift = *product;
    }
    shifts.push_back(shift);
  }
  // 0, s, 2s, ...: numbers in that progression, or two loads 0 and s.
  std::string stride = shifts[1];
  if (chains.size() > 2) {
    std::optional<long long> s = integer_text(stride);
    if (!s || *s <= 0) return std::nullopt;
    for (size_t k = 0; k < shifts.size(); ++k)
      if (integer_text(shifts[k]) != std::optional<long long>(*s * static_cast<long long>(k))) return std::nullopt;
  } else if (std::optional<long long> s = integer_text(stride); s && *s <= 0) {
    return std::nullopt;
  }
  const std::pair<std::string, int64_t> selector{stride, static_cast<int64_t>(pointers.size())};
  // In a loop walking blocks of a tile axis (the pairs of a rotary kernel's column blocks): that loop's blocks are
  // one index more (classify_layout).
  if (chains[0].form.loops.size() > 1) return std::nullopt;
  const std::string walked = chains[0].form.loops.empty() ? "" : chains[0].form.loops[0].var;
  std::optional<AccessDecision> d = layout_box(pointers[0], mask, -1, walked, &selector);
  if (d && !walked.empty()) {
    d->walks_loop = true;
    d->walked_loop_var = walked;
  }
  return d;
}

std::optional<AccessDecision> AccessAnalysis::layout_box(const std::string &pointer, const std::string &mask,
                                                          int summed_axis, const std::string &loop_var,
                                                          const std::pair<std::string, int64_t> *selector) const {
  Scoped<bool> general(general_, true);
  Offset chain = offset_of(pointer, false);
  if (!chain.why.empty() || !chain.form.valid) return std::nullopt;
  const Affine &form = chain.form;
  // A loop moving the addresses, or a grid-stride loop standing for a program id: not this analysis's.
  // A loop moving the addresses (but the owners' loop, whose iterations become programs), or a grid-stride loop
  // standing for a program id: not this analysis's.
  const bool owner = summed_axis >= 0;
  const bool walked = !owner && !loop_var.empty();  // a loop walking blocks of a tile axis: one index more
  if (form.grid_stride || form.loops.size() != (owner || walked ? 1u : 0u)) return std::nullopt;
  if (walked && form.loops[0].var != loop_var) return std::nullopt;
  if (owner && (form.loops[0].var != loop_var || form.pid.count(summed_axis) ||
                std::any_of(form.radix.begin(), form.radix.end(), [&](const RadixTerm &r) { return r.axis == summed_axis; })))
    return std::nullopt;

  // The tile axes the pointer varies along: each must be one lane term's, and each lane term on its own axis.
  auto ptr_type = types_.find(pointer);
  if (ptr_type == types_.end() || !ptr_type->second.is_tensor()) return std::nullopt;
  std::set<int> varying_axes, lane_axes;
  for (size_t k = 0; k < ptr_type->second.shape.size(); ++k)
    if (const sema::Dim &d = ptr_type->second.shape[k]; !(d.value && *d.value == 1)) varying_axes.insert(static_cast<int>(k));
  for (const Term &lane : form.lanes) {
    // (A 1-D pointer tile's lanes vary along its axis 0 however they were formed.)
    const int axis = ptr_type->second.shape.size() == 1 ? 0 : lane.tile_axis;
    if (!lane_axes.insert(axis).second || lane.coefficient == "0") return std::nullopt;
  }
  if (lane_axes != varying_axes) return std::nullopt;
  const bool two_d = ptr_type->second.shape.size() > 1;

  // A value the layout check reads must be a launch value: a number, a parameter, or a grid size.
  std::set<std::string> params;
  for (const Param &p : fn_.params) params.insert(p.name);
  auto launch_value = [&](const std::string &text) {
    if (text.empty()) return false;
    auto known = [&](const std::string &t) { return integer_text(t) || params.count(t); };
    for (const std::string &factor : coefficient_factors(text)) {
      auto q = quotient_sides(factor);
      if (q ? !(known(q->first) && known(q->second)) : !known(factor)) return false;
    }
    return true;
  };
  // A product's factors by their values where -D gave them.
  auto product_value = [&](const std::string &text) {
    std::string out = "1";
    for (const std::string &factor : coefficient_factors(text)) out = multiply_coefficients(out, value_of(factor));
    return out;
  };
  // The bound a mask puts on a unit index: a conjunct `x < E` where x is that lane tile, plus `pid * B` where it
  // walks blocks of programs along `axis`.
  auto mask_bound = [&](const Term &lane, int axis, const std::string &block, const std::string &walked = "",
                        const std::string &walked_step = "1") -> std::optional<std::string> {
    std::vector<size_t> ranks;
    const std::vector<const Compare *> conjuncts = mask_conjuncts(mask, &ranks);
    for (size_t k = 0; k < conjuncts.size(); ++k) {
      const Compare *cmp = conjuncts[k];
      if (cmp->ops.size() != 1 || cmp->ops[0] != CompareOpKind::Lt) continue;
      auto *lhs = dyn_cast<Name>(cmp->left.get());
      std::optional<std::string> bound = scalar_text(*cmp->comparators[0]);
      if (!lhs || !bound) continue;
      // (A mask of another rank broadcasts along other axes than its lanes name; one made by `m[:, None]` has
      // that subscript's rank, its lanes where m's are.)
      if (ranks[k] != ptr_type->second.shape.size()) continue;
      Affine x = affine(lhs->id);
      if (!walked.empty() && (x.loops.size() != 1 || x.loops[0].var != walked ||
                              product_value(x.loops[0].coefficient) != product_value(walked_step)))
        continue;
      if (!x.valid || x.shifted || x.loops.size() != (walked.empty() ? 0u : 1u) || !x.radix.empty() || x.lanes.size() != 1 ||
          x.lanes[0].coefficient != "1" || x.lanes[0].source != lane.source ||
          (two_d && x.lanes[0].tile_axis != lane.tile_axis))
        continue;
      if (axis < 0 ? !x.pid.empty() : (x.pid.size() != 1 || !x.pid.count(axis) || value_of(x.pid.at(axis)) != value_of(block)))
        continue;
      return resolve_copy(*bound);
    }
    return std::nullopt;
  };
  auto extent_text = [](const Term &t) { return t.extent ? std::to_string(t.extent) : t.extent_symbol; };
  // The bound of `v * B + lanes` in the owners' loop written the tutorial's way, `lanes < E - v * B`: E.
  auto remaining_bound = [&](const Term &lane, const std::string &block) -> std::optional<std::string> {
    for (const Compare *cmp : mask_conjuncts(mask)) {
      if (cmp->ops.size() != 1 || cmp->ops[0] != CompareOpKind::Lt) continue;
      auto *lhs = dyn_cast<Name>(cmp->left.get());
      auto *rhs = dyn_cast<Name>(cmp->comparators[0].get());
      auto lhs_type = lhs ? types_.find(lhs->id) : types_.end();
      if (!rhs || lhs_type == types_.end() || lhs_type->second.shape.size() != ptr_type->second.shape.size()) continue;
      Affine x = affine(lhs->id);
      if (!x.valid || x.shifted || !x.loops.empty() || !x.pid.empty() || !x.radix.empty() || x.lanes.size() != 1 ||
          x.lanes[0].coefficient != "1" || x.lanes[0].source != lane.source ||
          (two_d && x.lanes[0].tile_axis != lane.tile_axis))
        continue;
      auto rest = defs_.find(rhs->id);
      auto *sub = rest != defs_.end() && !redefined_.count(rhs->id) ? dyn_cast<BinOp>(rest->second) : nullptr;
      auto *done = sub && sub->op == BinaryOpKind::Sub ? dyn_cast<Name>(sub->rhs.get()) : nullptr;
      std::optional<std::string> total = sub ? scalar_text(*sub->lhs) : std::nullopt;
      auto walked = done ? defs_.find(done->id) : defs_.end();
      auto *product = walked != defs_.end() && !redefined_.count(done->id) ? dyn_cast<BinOp>(walked->second) : nullptr;
      if (!total || !product || product->op != BinaryOpKind::Mul) continue;
      const Expr *v = product->lhs.get(), *b = product->rhs.get();
      if (!ad::is_name(v, loop_var)) std::swap(v, b);
      std::optional<std::string> b_text = scalar_text(*b);
      if (!ad::is_name(v, loop_var) || !b_text || value_of(*b_text) != value_of(block)) continue;
      return resolve_copy(*total);
    }
    return std::nullopt;
  };
  // The bound the flush's lanes are kept under (in_bounds_, ZeroLanes.h) of `pid * B + lanes` along `axis`.
  auto kept_bound = [&](const Term &lane, int axis, const std::string &block) -> std::optional<std::string> {
    for (const auto &[index, bound] : in_bounds_) {
      Affine x = affine(index);
      if (x.valid && !x.shifted && x.loops.empty() && x.radix.empty() && x.lanes.size() == 1 &&
          x.lanes[0].coefficient == "1" && x.lanes[0].source == lane.source && x.pid.size() == 1 && x.pid.count(axis) &&
          value_of(x.pid.at(axis)) == value_of(block))
        return resolve_copy(bound);
    }
    return std::nullopt;
  };

  struct Index {
    std::string stride;  // a product text
    ExprPtr extent;
    std::optional<long long> extent_number;
    std::string what;    // for the reason
    int64_t least = 1;   // what the extent is at least (a block of programs: its lanes), where not a number
  };
  std::vector<Index> box;
  std::vector<bool> lane_used(form.lanes.size(), false);
  std::set<int> axes_seen;
  for (const auto &[axis, coefficient] : form.pid) {
    if (axis < 0) return std::nullopt;
    // `pid * B + tl.arange(0, B)` times a stride: one index over the blocks' rows.
    bool merged = false;
    for (size_t k = 0; k < form.lanes.size() && !merged; ++k) {
      const Term &lane = form.lanes[k];
      const std::string extent = extent_text(lane);
      if (lane_used[k] || extent.empty() || lane.tile_axis < 0 ||
          multiply_coefficients(product_value(lane.coefficient), value_of(extent)) != product_value(coefficient))
        continue;
      lane_used[k] = merged = true;
      std::optional<std::string> bound = mask_bound(lane, axis, extent);
      if (!bound) bound = kept_bound(lane, axis, extent);
      if (bound) {
        if (!launch_value(value_of(*bound))) return std::nullopt;
        box.push_back({lane.coefficient, product_expr(value_of(*bound)), integer_text(value_of(*bound)),
                       "program_id(" + std::to_string(axis) + ") * " + extent + " + " + lane.source + " < " + *bound});
      } else {
        if (!launch_value(value_of(extent))) return std::nullopt;
        box.push_back({lane.coefficient,
                       std::make_unique<BinOp>(BinaryOpKind::Mul, num_programs(axis), product_expr(value_of(extent))),
                       std::nullopt, "program_id(" + std::to_string(axis) + ") * " + extent + " + " + lane.source});
        if (lane.extent > 1) box.back().least = lane.extent;  // (one program at least: its lanes)
      }
    }
    if (!merged) box.push_back({coefficient, num_programs(axis), std::nullopt, "program_id(" + std::to_string(axis) + ")"});
    axes_seen.insert(axis);
  }
  // `pid // D` and `pid % D` of one axis, both: the pair tells the programs along it apart.
  std::map<int, std::vector<const RadixTerm *>> radix_of;
  for (const RadixTerm &r : form.radix) radix_of[r.axis].push_back(&r);
  for (const auto &[axis, terms] : radix_of) {
    if (axis < 0 || terms.size() != 2 || terms[0]->remainder == terms[1]->remainder ||
        value_of(terms[0]->divisor) != value_of(terms[1]->divisor) || axes_seen.count(axis))
      return std::nullopt;
    const RadixTerm &quotient = terms[0]->remainder ? *terms[1] : *terms[0];
    const RadixTerm &remainder = terms[0]->remainder ? *terms[0] : *terms[1];
    const std::string divisor = value_of(quotient.divisor);
    if (!launch_value(divisor)) return std::nullopt;
    // cdiv(num_programs, D) quotients, D remainders.
    ExprPtr quotients = std::make_unique<BinOp>(
        BinaryOpKind::FloorDiv,
        std::make_unique<BinOp>(BinaryOpKind::Sub,
                                std::make_unique<BinOp>(BinaryOpKind::Add, num_programs(axis), product_expr(divisor)),
                                std::make_unique<IntLit>(1, "")),
        product_expr(divisor));
    const std::string p = "program_id(" + std::to_string(axis) + ")";
    box.push_back({quotient.coefficient, std::move(quotients), std::nullopt, p + " // " + quotient.divisor});
    box.push_back({remainder.coefficient, product_expr(divisor), integer_text(divisor), p + " % " + quotient.divisor});
    axes_seen.insert(axis);
  }
  // The owners' loop: `v + tl.arange(0, B)` with v stepping by B from 0, bounded by the mask; each iteration is
  // an owner program, whose rows these are. (Or a loop around a load walking the blocks of a tile axis: each
  // iteration its own block.)
  if (owner || walked) {
    auto loop = loops_.find(loop_var);
    if (loop == loops_.end() || !(loop->second.lo == "0" || (defs_.count(loop->second.lo) && is_zero(Name(loop->second.lo)))))
      return std::nullopt;
    bool merged = false;
    for (size_t k = 0; k < form.lanes.size() && !merged; ++k) {
      const Term &lane = form.lanes[k];
      const std::string extent = extent_text(lane);
      if (lane_used[k] || extent.empty() || lane.tile_axis < 0) continue;
      // `v + tl.arange(0, B)` with v stepping by B, or `v * B + tl.arange(0, B)` with v stepping by 1 (a pointer the
      // loop advances by B times the lanes' stride: Induction).
      const bool by_block = value_of(loop->second.step) == value_of(extent) &&
                            product_value(lane.coefficient) == product_value(form.loops[0].coefficient);
      const bool by_one = value_of(loop->second.step) == "1" &&
                          multiply_coefficients(product_value(lane.coefficient), value_of(extent)) ==
                              product_value(form.loops[0].coefficient);
      if (!by_block && !by_one) continue;
      std::optional<std::string> bound = by_block ? mask_bound(lane, -1, "", loop_var) : remaining_bound(lane, extent);
      if (!bound && by_one) bound = mask_bound(lane, -1, "", loop_var, extent);  // `(v * B + lanes) < E`
      // Unmasked, a walking loop's blocks end with its range: `v * B + lanes` < hi * B.
      if (!bound && by_one && walked && launch_value(value_of(loop->second.hi)))
        bound = multiply_coefficients(value_of(loop->second.hi), value_of(extent));
      if (!bound || !launch_value(value_of(*bound))) return std::nullopt;
      lane_used[k] = merged = true;
      box.push_back({lane.coefficient, product_expr(value_of(*bound)), integer_text(value_of(*bound)),
                     loop_var + (by_one ? " * " + extent : std::string()) + " + " + lane.source + " < " + *bound});
    }
    if (!merged && walked && value_of(loop->second.step) == "1" && launch_value(value_of(loop->second.hi))) {
      // `for t in range(n)` moving a whole tile (`t * STRIDE + ...`): t is an index of extent n.
      const std::string hi = value_of(loop->second.hi);
      box.push_back({form.loops[0].coefficient, product_expr(hi), integer_text(hi), loop_var + " < " + hi});
      merged = true;
    }
    if (!merged) return std::nullopt;
  }
  // Every program axis the kernel reads (but the one the owners sum over) must tell its programs apart here.
  for (int axis : program_axes_)
    if (axis != summed_axis && (axis < 0 || !axes_seen.count(axis))) return std::nullopt;
  if (axes_seen.empty() && !owner) return std::nullopt;
  for (size_t k = 0; k < form.lanes.size(); ++k) {
    if (lane_used[k]) continue;
    const Term &lane = form.lanes[k];
    std::optional<std::string> bound = mask_bound(lane, -1, "");
    const std::string extent = bound ? value_of(*bound) : value_of(extent_text(lane));
    if (!launch_value(extent)) return std::nullopt;
    box.push_back({lane.coefficient, product_expr(extent), integer_text(extent),
                   lane.source + (bound ? " < " + *bound : std::string())});
  }
  if (selector)
    box.push_back({selector->first, std::make_unique<IntLit>(static_cast<uint64_t>(selector->second), ""),
                   selector->second, "which of " + std::to_string(selector->second) + " loads shifted by " +
                                         selector->first});
  for (Index &i : box) {
    i.stride = product_value(i.stride);
    if (!launch_value(i.stride)) return std::nullopt;
  }

  AccessDecision d;
  d.offset_key = key(form);
  std::vector<std::string> uniform_parts = chain.uniform_parts;
  std::sort(uniform_parts.begin(), uniform_parts.end());
  for (const std::string &u : uniform_parts) d.offset_key += "+" + u;
  if (chain.untracked_shift) d.offset_key += "+shift@" + pointer;
  d.mask_key = mask.empty() ? "" : "mask " + mask;
  std::string terms;
  for (const Index &i : box) terms += (terms.empty() ? "" : " + ") + ("(" + i.what + ") * " + i.stride);
  // Strides and extents all numbers: decided here.
  bool numbers = true;
  std::vector<std::pair<int64_t, int64_t>> known;  // (stride, extent)
  for (const Index &i : box) {
    std::optional<long long> stride = integer_text(i.stride);
    numbers &= stride.has_value() && i.extent_number.has_value();
    if (stride && i.extent_number) known.push_back({*stride, *i.extent_number});
  }
  if (numbers) {
    if (!Backward::cells_apart(std::move(known))) return std::nullopt;
    d.kind = AccessDecision::Kind::Injective;
    d.reason = "offset = " + terms + ": each address belongs to one program and lane (the strides keep the cells apart)";
    return d;
  }
  // Strides all numbers, some extents not: the cells meet for certain where they meet at the least extents; and
  // where only the index of the strictly largest stride has an unknown extent, which no smaller index reaches past,
  // that extent does not matter (a box of a row of pairs, `X + 2 * offs` and `X + 2 * offs + 1`, under `offs < n`).
  if (std::all_of(box.begin(), box.end(), [](const Index &i) { return integer_text(i.stride).has_value(); })) {
    std::vector<std::pair<int64_t, int64_t>> least;
    size_t largest = 0;
    for (size_t k = 0; k < box.size(); ++k) {
      const int64_t stride = std::llabs(*integer_text(box[k].stride));
      least.push_back({stride, box[k].extent_number ? *box[k].extent_number : box[k].least});
      if (stride > least[largest].first) largest = k;
    }
    if (!Backward::cells_apart(least)) return std::nullopt;
    bool decided = true;
    for (size_t k = 0; k < box.size(); ++k)
      if (k != largest) decided &= box[k].extent_number.has_value() && least[k].first < least[largest].first;
    if (decided) {
      least[largest].second = 2;  // (any extent past 1: nothing lies beyond the largest stride)
      if (!Backward::cells_apart(std::move(least))) return std::nullopt;
      d.kind = AccessDecision::Kind::Injective;
      d.reason = "offset = " + terms + ": each address belongs to one program and lane (the strides keep the cells "
                 "apart, whatever the extent of the index of the largest stride)";
      return d;
    }
  }
  d.kind = AccessDecision::Kind::InjectiveAssuming;
  d.reason = "offset = " + terms + ": each address belongs to one program and lane where these strides keep the "
             "indices' cells apart (no overlap), which the launcher checks";
  for (Index &i : box) d.layout.emplace_back(std::move(i.extent), product_expr(i.stride));
  return d;
}

}  // namespace tgrad::ad
