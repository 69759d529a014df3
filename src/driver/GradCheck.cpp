#include "src/driver/GradCheck.h"

#include <cmath>
#include <algorithm>
#include <random>
#include <set>

#include "src/interp/TensorOps.h"
#include "tgrad/emit/PythonPrinter.h"

namespace tgrad::driver {

using interp::Tensor;
using interp::TensorRef;
using interp::Value;

namespace {

// L = sum_o sum(out_o * w_o), accumulated in double.
double loss(const std::vector<Value> &outputs, const std::vector<std::vector<double>> &weights) {
  double l = 0;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor &t = *outputs[o].t;
    for (int64_t k = 0; k < t.size(); ++k) l += t.as_double(k) * weights[o][k];
  }
  return l;
}

Value with_element(const Value &v, int64_t k, double x) {
  auto t = std::make_shared<Tensor>(*v.t);
  t->f[k] = x;
  return Value::of_tensor(t);
}

// A parameter the forward's caller leaves to its default: the backward's
// parameters keep no defaults (its adjoints follow them), so the backward run
// here gets the forward's.
void give_backward_the_forward_defaults(const ast::Module &module, const std::string &forward, ad::Backward &bwd) {
  const ast::Function *f = module.find_function(forward);
  if (!f) return;
  std::set<std::string> kernels = {bwd.backward_name};
  for (const auto &o : bwd.owner_kernels) kernels.insert(o.name);
  if (!bwd.prologue_kernel.empty()) kernels.insert(bwd.prologue_kernel);
  for (auto &g : bwd.module->functions)
    if (kernels.count(g->name))
      for (ast::Param &p : g->params)
        for (const ast::Param &q : f->params)
          if (p.name == q.name && !p.default_value && q.default_value) p.default_value = ast::clone(*q.default_value);
}

// The value of an integer expression over a launch's arguments (an owner
// kernel's grid size: `tl.cdiv(M, BLOCK_SIZE_M)`), or nullopt where it reads
// something else.
std::optional<int64_t> launch_value(const ast::Expr &e, const interp::Launch &launch) {
  using namespace ast;
  if (auto *i = dyn_cast<IntLit>(&e)) return static_cast<int64_t>(i->value);
  if (auto *n = dyn_cast<Name>(&e)) {
    auto it = launch.args.find(n->id);
    if (it == launch.args.end()) return std::nullopt;
    const interp::KernelArg &a = it->second;
    if (a.kind == interp::KernelArg::Kind::Int) return a.n;
    if (a.kind == interp::KernelArg::Kind::Constexpr && a.constexpr_value.kind == Value::Kind::Int)
      return a.constexpr_value.n;
    return std::nullopt;
  }
  auto floor_div = [](int64_t x, int64_t y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); };
  if (auto *b = dyn_cast<BinOp>(&e)) {
    auto x = launch_value(*b->lhs, launch), y = launch_value(*b->rhs, launch);
    if (!x || !y) return std::nullopt;
    switch (b->op) {
      case BinaryOpKind::Add: return *x + *y;
      case BinaryOpKind::Sub: return *x - *y;
      case BinaryOpKind::Mul: return *x * *y;
      case BinaryOpKind::FloorDiv: return *y == 0 ? std::nullopt : std::optional<int64_t>(floor_div(*x, *y));
      case BinaryOpKind::Mod: return *y == 0 ? std::nullopt : std::optional<int64_t>(*x - floor_div(*x, *y) * *y);
      default: return std::nullopt;
    }
  }
  // tl.num_programs(a): the forward's grid (a layout flag's box of program ids).
  if (auto *c = dyn_cast<Call>(&e); c && c->args.size() == 1 && c->keywords.empty() &&
                                     emit::print_expr(*c->func) == "tl.num_programs")
    if (auto *axis = dyn_cast<IntLit>(c->args[0].get()); axis && axis->value < 3) return launch.grid[axis->value];
  if (auto *c = dyn_cast<Call>(&e); c && c->args.size() == 2 && c->keywords.empty()) {
    const std::string f = emit::print_expr(*c->func);
    auto x = launch_value(*c->args[0], launch), y = launch_value(*c->args[1], launch);
    if (!x || !y) return std::nullopt;
    if ((f == "tl.cdiv" || f == "triton.cdiv") && *y > 0) return floor_div(*x + *y - 1, *y);
    if (f == "min" || f == "tl.minimum") return std::min(*x, *y);
    if (f == "max" || f == "tl.maximum") return std::max(*x, *y);
  }
  return std::nullopt;
}

}  // namespace

std::optional<GradCheckResult> grad_check(const ast::Module &module, const SourceManager &sources,
                                          const ad::BackwardRequest &request, const std::map<std::string, Value> &inputs,
                                          const GradCheckOptions &options, DiagEngine &diags) {
  std::optional<ad::Backward> bwd = ad::differentiate(module, sources, request, diags);
  if (!bwd) return std::nullopt;
  interp::Memory memory;
  interp::RunOptions run;
  run.float64 = true;

  auto forward = [&](const std::map<std::string, Value> &args) {
    return interp::run_function(module, request.function, args, memory, run, diags);
  };
  std::optional<std::vector<Value>> outputs = forward(inputs);
  if (!outputs) return std::nullopt;
  for (const Value &o : *outputs)
    if (o.kind != Value::Kind::Tensor || !o.t->is_float()) {
      diags.error({}, "'" + request.function + "' returns " + o.describe() + "; the gradient check needs floating-point tensors");
      return std::nullopt;
    }

  // Random output weights: the upstream adjoints.
  std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ull + 0xC0FFEE);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<std::vector<double>> weights;
  std::map<std::string, Value> bwd_args = inputs;
  for (size_t o = 0; o < outputs->size(); ++o) {
    const Tensor &t = *(*outputs)[o].t;
    std::vector<double> w(t.size());
    for (double &x : w) x = dist(rng);
    weights.push_back(w);
    bwd_args[bwd->output_adjoints[o]] = interp::make_tensor(t.type.dtype, t.shape, w, true);
  }
  give_backward_the_forward_defaults(module, request.function, *bwd);
  std::optional<std::vector<Value>> adjoints =
      interp::run_function(*bwd->module, bwd->backward_name, bwd_args, memory, run, diags);
  if (!adjoints) return std::nullopt;
  if (adjoints->size() != request.wrt.size()) {
    diags.error({}, "internal error: the backward returned " + std::to_string(adjoints->size()) + " adjoints for " +
                        std::to_string(request.wrt.size()) + " inputs");
    return std::nullopt;
  }

  GradCheckResult result;
  result.backward_source = bwd->source;
  result.pass = true;
  for (size_t w = 0; w < request.wrt.size(); ++w) {
    const std::string &x = request.wrt[w];
    const Value &input = inputs.at(x);
    const Tensor &ad = *(*adjoints)[w].t;
    GradCheckArg arg{x, input.t->type_str(), 0, 0, false};
    double diff2 = 0, ref2 = 0;
    for (int64_t k = 0; k < input.t->size(); ++k) {
      double xk = input.t->f[k];
      double h = options.step * std::max(1.0, std::fabs(xk));
      std::map<std::string, Value> plus = inputs, minus = inputs;
      plus[x] = with_element(input, k, xk + h);
      minus[x] = with_element(input, k, xk - h);
      std::optional<std::vector<Value>> op = forward(plus), om = forward(minus);
      if (!op || !om) return std::nullopt;
      double fd = (loss(*op, weights) - loss(*om, weights)) / (2 * h);
      double a = ad.as_double(ad.size() == input.t->size() ? k : 0);
      diff2 += (a - fd) * (a - fd);
      ref2 += fd * fd;
      arg.max_abs_error = std::max(arg.max_abs_error, std::fabs(a - fd));
    }
    if (ad.size() != input.t->size()) {
      diags.error({}, "internal error: the adjoint of '" + x + "' has " + std::to_string(ad.size()) + " elements, '" + x +
                          "' has " + std::to_string(input.t->size()));
      return std::nullopt;
    }
    arg.relative_error = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-300);
    // An input the outputs do not depend on: its adjoint must be exactly zero.
    arg.pass = ref2 == 0 ? diff2 == 0 : arg.relative_error <= options.rtol;
    result.pass &= arg.pass;
    result.args.push_back(arg);
  }
  return result;
}

std::optional<GradCheckResult> grad_check_kernel(const ast::Module &module, const SourceManager &sources,
                                                 const ad::BackwardRequest &request, const interp::Launch &launch,
                                                 const interp::Memory &memory, const GradCheckOptions &options,
                                                 DiagEngine &diags, int64_t max_samples) {
  std::optional<ad::Backward> bwd = ad::differentiate(module, sources, request, diags);
  if (!bwd) return std::nullopt;
  interp::RunOptions run;
  run.float64 = true;
  auto buffer_of = [&](const std::string &param) -> size_t {
    auto it = launch.args.find(param);
    if (it == launch.args.end() || it->second.kind != interp::KernelArg::Kind::Buffer) return SIZE_MAX;
    return it->second.buffer;
  };
  for (const auto &g : bwd->gradient_buffers)
    if (buffer_of(g.first) == SIZE_MAX) {
      diags.error({}, "'" + g.first + "' needs a buffer: --arg " + g.first + "=DTYPE[...]");
      return std::nullopt;
    }
  // The first forward run also counts each loop's iterations: the bound a taped loop's backward needs.
  // And which elements it loads: a gradient buffer the protocol lets start
  // as anything ("any") must be written at those, the others having gradient zero.
  std::map<std::pair<int, int>, int64_t> loop_trips;
  std::map<size_t, std::set<int64_t>> loaded;
  run.loop_trips = &loop_trips;
  run.loaded = &loaded;
  interp::Memory after_forward = memory;
  if (!interp::run_kernel(module, launch, after_forward, run, diags)) return std::nullopt;
  run.loop_trips = nullptr;
  run.loaded = nullptr;

  // L = sum over the forward's outputs of sum(buffer * w). The outputs are
  // what the interpreter saw the original kernel write (every float buffer
  // whose contents changed), not what tgrad decided: an output the backward
  // leaves out still counts in the finite differences, so a gradient lost
  // through it shows as a failure. --no-grad outputs take no weight.
  std::set<size_t> outputs;
  for (const auto &[param, arg] : launch.args) {
    if (arg.kind != interp::KernelArg::Kind::Buffer) continue;
    if (std::find(request.no_grad.begin(), request.no_grad.end(), param) != request.no_grad.end()) continue;
    const interp::Buffer &before = memory.buffers()[arg.buffer], &after = after_forward.buffers()[arg.buffer];
    if (!sema::is_float(before.dtype)) continue;
    bool written = false;
    for (size_t i = 0; i < before.f.size() && !written; ++i)
      written = !(before.f[i] == after.f[i]) && !(std::isnan(before.f[i]) && std::isnan(after.f[i]));
    if (written) outputs.insert(arg.buffer);
  }
  for (size_t k = bwd->input_gradients; k < bwd->gradient_buffers.size(); ++k)
    outputs.insert(buffer_of(bwd->gradient_buffers[k].first));
  std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ull + 0xC0FFEE);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::map<size_t, std::vector<double>> weights;  // output buffer index -> weights
  for (size_t b : outputs) {
    std::vector<double> w(memory.buffers()[b].size());
    for (double &x : w) x = dist(rng);
    weights[b] = w;
  }
  auto forward_loss = [&](const interp::Memory &inputs) -> std::optional<double> {
    interp::Memory m = inputs;
    if (!interp::run_kernel(module, launch, m, run, diags)) return std::nullopt;
    double l = 0;
    for (const auto &[b, w] : weights)
      for (size_t i = 0; i < w.size(); ++i) l += m.buffers()[b].get(static_cast<int64_t>(i)) * w[i];
    return l;
  };

  // The backward: the forward's arguments, as the forward left them (a saved
  // output holds what the forward stored), plus gradient buffers (zeros for
  // the inputs, the weights for the outputs).
  interp::Memory m = after_forward;
  // An input updated in place is passed as it was before the kernel (the
  // backward replays the loads of it); its one gradient buffer starts as the
  // upstream gradient of its contents after.
  // One whose loads read it back after the kernel stored to it (a saved output) is passed as the forward left it.
  for (const std::string &p : bwd->in_place) {
    const size_t b = buffer_of(p);
    if (std::find(bwd->saved_outputs.begin(), bwd->saved_outputs.end(), p) == bwd->saved_outputs.end())
      m.buffers()[b] = memory.buffers()[b];
    if (!weights.count(b)) weights[b] = std::vector<double>(memory.buffers()[b].size(), 0.0);
  }
  give_backward_the_forward_defaults(module, request.function, *bwd);
  interp::Launch back = launch;
  back.kernel = bwd->backward_name;
  std::vector<size_t> input_gradient_buffers;
  for (size_t k = 0; k < bwd->gradient_buffers.size(); ++k) {
    const auto &[param, dparam] = bwd->gradient_buffers[k];
    interp::Buffer g = memory.buffers()[buffer_of(param)];
    g.name = dparam;
    // Input gradients start at zero only where the backward says they must;
    // elsewhere they are poisoned, so that an element it fails to write shows.
    const bool zeros = std::find(bwd->zero_initialized.begin(), bwd->zero_initialized.end(), param) !=
                       bwd->zero_initialized.end();
    const std::set<int64_t> &read = loaded[buffer_of(param)];
    for (size_t e = 0; e < g.f.size(); ++e)
      g.f[e] = k < bwd->input_gradients && !zeros && read.count(static_cast<int64_t>(e)) ? std::nan("") : 0.0;
    for (int64_t &x : g.i) x = 0;
    const bool in_place = std::find(bwd->in_place.begin(), bwd->in_place.end(), param) != bwd->in_place.end();
    if (k >= bwd->input_gradients || in_place) g.f = weights.at(buffer_of(param));
    // A consumed upstream gradient (an in-place input's among them) is a float32 copy the backward overwrites.
    for (const auto &c : bwd->consumed_upstream)
      if (c.first == param) g.dtype = sema::DType::FP32;
    interp::KernelArg a;
    a.kind = interp::KernelArg::Kind::Buffer;
    a.buffer = m.buffers().size();
    m.add(g);
    back.args[dparam] = a;
    if (k < bwd->input_gradients) input_gradient_buffers.push_back(a.buffer);
  }
  // Partial sums: fewer backward programs than forward ones (so that each
  // loops over several), zero-filled scratch rows, then the reduction.
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(launch.grid[0], 3));
  std::vector<std::pair<size_t, int64_t>> scratch;  // buffer index, numel
  auto int_arg = [](int64_t v, interp::KernelArg::Kind kind = interp::KernelArg::Kind::Int) {
    interp::KernelArg a;
    a.kind = kind;
    if (kind == interp::KernelArg::Kind::Constexpr) a.constexpr_value = interp::Value::of_int(v);
    else a.n = v;
    return a;
  };
  // A scratch buffer full of NaN (an integer one of -12345): the backward must write what it reads.
  auto poisoned_scratch = [&](const std::string &name, int64_t size, sema::DType dtype = sema::DType::FP32) {
    if (sema::is_float(dtype))
      m.add(interp::Buffer{name, dtype, {size}, std::vector<double>(static_cast<size_t>(size), std::nan("")), {}});
    else
      m.add(interp::Buffer{name, dtype, {size}, {}, std::vector<int64_t>(static_cast<size_t>(size), -12345)});
    interp::KernelArg a;
    a.kind = interp::KernelArg::Kind::Buffer;
    a.buffer = m.buffers().size() - 1;
    return a;
  };
  if (!bwd->partial_sums.empty()) {
    back.grid = {rows, 1, 1};
    for (const auto &p : bwd->partial_sums) {
      const int64_t numel = memory.buffers()[buffer_of(p.input)].size();
      // Poisoned: the backward must zero its rows itself.
      back.args[p.scratch] = poisoned_scratch(p.scratch, rows * numel);
      back.args[p.numel] = int_arg(numel);
      scratch.push_back({back.args[p.scratch].buffer, numel});
    }
    back.args[bwd->num_programs_param] = int_arg(launch.grid[0]);
  }
  // A tile's element count from its factors (numbers or constexpr names this launch gives values); nullopt,
  // with the error reported, where a constexpr has none.
  auto tile_elements = [&](const std::vector<std::string> &tile, const std::string &what) -> std::optional<int64_t> {
    int64_t elements = 1;
    for (const std::string &d : tile) {
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
        elements *= std::stoll(d);
        continue;
      }
      auto it = launch.args.find(d);
      if (it == launch.args.end() || it->second.kind != interp::KernelArg::Kind::Constexpr ||
          it->second.constexpr_value.kind != interp::Value::Kind::Int) {
        diags.error({}, what + " is sized by the constexpr '" + d + "': pass it");
        return std::nullopt;
      }
      elements *= it->second.constexpr_value.n;
    }
    return elements;
  };
  // Tapes: [programs, trips, numel(value)] each, poisoned (the backward writes before it reads).
  const int64_t programs = launch.grid[0] * launch.grid[1] * launch.grid[2];
  for (const ad::Backward::Tape &t : bwd->tapes) {
    // An entry holds the largest tile any specialization tapes under this name.
    int64_t numel = 0;
    std::vector<std::vector<std::string>> tiles = t.other_tile_shapes;
    tiles.push_back(t.tile_shape);
    for (const auto &tile : tiles) {
      std::optional<int64_t> elements = tile_elements(tile, "the tape of '" + t.value + "'");
      if (!elements) return std::nullopt;
      numel = std::max(numel, *elements);
    }
    auto most = loop_trips.find({t.loop_line, t.loop_column});
    const int64_t trips = std::max<int64_t>(1, most == loop_trips.end() ? 0 : most->second);
    back.args[t.scratch] = poisoned_scratch(t.scratch, programs * trips * numel, t.dtype);
    back.args[t.trips_param] = int_arg(trips);
  }
  // Saved tiles: [programs, numel(value)] each, poisoned; the prologue, on the forward's grid, writes them all.
  std::map<std::string, interp::KernelArg> saved;
  for (const ad::Backward::SavedTile &t : bwd->saved_tiles) {
    if (!t.like.empty()) {  // laid out like an output: as many elements (the backward kernel's, or the prologue's)
      const sema::DType dtype = t.dtype_of.empty() ? t.dtype : memory.buffers()[buffer_of(t.dtype_of)].dtype;
      saved[t.scratch] = poisoned_scratch(t.scratch, static_cast<int64_t>(memory.buffers()[buffer_of(t.like)].size()), dtype);
      if (t.by_backward_kernel) back.args[t.scratch] = saved[t.scratch];
      continue;
    }
    std::optional<int64_t> numel = tile_elements(t.tile_shape, "the saved tile '" + t.value + "'");
    if (!numel) return std::nullopt;
    saved[t.scratch] = poisoned_scratch(t.scratch, programs * *numel, t.dtype);
  }
  // Layout flags: 1 where this launch's strides keep each box's cells apart (the plain stores), else 0.
  for (const ad::Backward::LayoutAssumption &l : bwd->layout_assumptions) {
    std::vector<std::pair<int64_t, int64_t>> box;  // (stride, extent)
    bool known = true;
    for (const auto &[extent, stride] : l.extent_stride) {
      std::optional<int64_t> e = launch_value(*extent, launch), s = launch_value(*stride, launch);
      known &= e && s;
      if (!known) break;
      box.push_back({*s, *e});
    }
    const bool apart = known && ad::Backward::cells_apart(std::move(box));
    // (A flag several boxes share is 1 only where all are apart.)
    auto had = back.args.find(l.flag);
    const bool before = had == back.args.end() || had->second.n != 0;
    back.args[l.flag] = int_arg(apart && before ? 1 : 0);
  }
  if (!bwd->prologue_kernel.empty()) {
    interp::Launch prologue = back;
    prologue.kernel = bwd->prologue_kernel;
    for (const auto &[param, arg] : saved) prologue.args[param] = arg;
    if (!interp::run_kernel(*bwd->module, prologue, m, run, diags)) return std::nullopt;
  }
  if (bwd->backward_kernel_writes && !interp::run_kernel(*bwd->module, back, m, run, diags)) return std::nullopt;
  // Owner-computes kernels: the forward's grid with the summed axis replaced by the loop's iterations.
  for (const ad::Backward::OwnerKernel &o : bwd->owner_kernels) {
    interp::Launch owner = back;
    owner.kernel = o.name;
    for (const std::string &param : o.saved_tiles) owner.args[param] = saved.at(param);
    auto most = loop_trips.find({o.loop_line, o.loop_column});
    for (size_t a = 0; a < o.grid_sizes.size(); ++a) {
      if (!o.grid_sizes[a]) continue;
      std::optional<int64_t> size = launch_value(*o.grid_sizes[a], launch);
      if (!size) {
        diags.error({}, o.name + "'s grid size along axis " + std::to_string(a) + " (" +
                            emit::print_expr(*o.grid_sizes[a]) + ") is not computed from this launch's values");
        return std::nullopt;
      }
      owner.grid[a] = *size;
    }
    owner.grid[static_cast<size_t>(o.summed_axis)] = most == loop_trips.end() ? 0 : most->second;
    if (o.longest_first) std::swap(owner.grid[0], owner.grid[1]);  // (src/ad/reverse/LongestFirst.h)
    if (!o.programs_param.empty())
      owner.args[o.programs_param] = int_arg(launch.grid[static_cast<size_t>(o.summed_axis)]);
    if (!interp::run_kernel(*bwd->module, owner, m, run, diags)) return std::nullopt;
  }
  for (size_t k = 0; k < bwd->partial_sums.size(); ++k) {
    interp::Launch reduce;
    reduce.kernel = bwd->reduce_kernel;
    const int64_t block = ad::Backward::kReduceBlock, numel = scratch[k].second;
    reduce.grid = {(numel + block - 1) / block, 1, 1};
    reduce.args["partial"] = {interp::KernelArg::Kind::Buffer, scratch[k].first, 0, 0, {}};
    reduce.args["gradient"] = back.args.at(bwd->partial_sums[k].gradient);
    reduce.args["numel"] = int_arg(numel);
    reduce.args["rows"] = int_arg(rows);
    reduce.args["BLOCK"] = int_arg(block, interp::KernelArg::Kind::Constexpr);
    reduce.args["ROWS"] = int_arg(ad::Backward::kReduceRows, interp::KernelArg::Kind::Constexpr);
    if (!interp::run_kernel(*bwd->module, reduce, m, run, diags)) return std::nullopt;
  }

  GradCheckResult result;
  result.backward_source = bwd->source;
  result.pass = true;
  std::mt19937_64 pick(options.seed + 17);
  for (size_t w = 0; w < request.wrt.size(); ++w) {
    const std::string &x = request.wrt[w];
    const size_t b = buffer_of(x);
    const interp::Buffer &in = memory.buffers()[b];
    const interp::Buffer &ad = m.buffers()[input_gradient_buffers[w]];
    GradCheckArg arg{x, std::string(sema::short_name(in.dtype)) + interp::shape_str(in.shape), 0, 0, false};
    std::vector<int64_t> elements(static_cast<size_t>(in.size()));
    for (int64_t k = 0; k < in.size(); ++k) elements[static_cast<size_t>(k)] = k;
    std::shuffle(elements.begin(), elements.end(), pick);
    if (static_cast<int64_t>(elements.size()) > max_samples) elements.resize(static_cast<size_t>(max_samples));
    double diff2 = 0, ref2 = 0;
    for (int64_t k : elements) {
      double xk = in.f[static_cast<size_t>(k)];
      double h = options.step * std::max(1.0, std::fabs(xk));
      interp::Memory plus = memory, minus = memory;
      plus.buffers()[b].f[static_cast<size_t>(k)] = xk + h;
      minus.buffers()[b].f[static_cast<size_t>(k)] = xk - h;
      std::optional<double> lp = forward_loss(plus), lm = forward_loss(minus);
      if (!lp || !lm) return std::nullopt;
      double fd = (*lp - *lm) / (2 * h), a = ad.f[static_cast<size_t>(k)];
      diff2 += (a - fd) * (a - fd);
      ref2 += fd * fd;
      arg.max_abs_error = std::max(arg.max_abs_error, std::fabs(a - fd));
    }
    arg.relative_error = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-300);
    arg.pass = ref2 == 0 ? diff2 == 0 : arg.relative_error <= options.rtol;
    result.pass &= arg.pass;
    result.args.push_back(arg);
  }
  return result;
}

}  // namespace tgrad::driver
