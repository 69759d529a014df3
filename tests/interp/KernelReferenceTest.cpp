// The reference interpreter on every kernel and pure function of
// tests/kernels/*.py, against independent C++ references of the same math:
// plain loops over std::vector<double>, written from the kernels' code and
// comments; nothing in a reference is computed by the interpreter.
//
// Modes (the test parameter; every kernel test runs in both):
//   fp32  RunOptions{} (the default): the interpreter rounds every value to
//         its dtype (fp32, fp16, bf16) after every operation. The reference
//         computes in double and rounds only where the kernel narrows a value
//         on purpose (an fp16 store, a .to(tl.float16), tl.dot's tf32
//         operands), with its own rounding code below; where such a narrowing
//         feeds further math (fn1's tf32 operand, attention's fp16 p) the
//         value narrowed is computed with fp32 rounding, as the kernel holds
//         it. Tolerance 1e-5; an output the kernel stores as fp16 (bf16) is
//         held to one ulp per element and 2^-11 (2^-8) norm-wise instead (see
//         expect_close_narrow), except matmul's, which its inputs make exact.
//   fp64  RunOptions{.float64 = true}: the interpreter keeps every float in
//         double (no fp16 / tf32 rounding either); the reference is plain
//         double math. Tolerance 1e-12.
//
// Error metric: the norm-wise relative error ||got - ref||_2 / ||ref||_2 of
// one whole output (a matrix, a vector of row statistics). An element-wise
// relative error would be flaky on outputs near zero (the mean of symmetric
// data, gelu of a negative number, 1 + tanh(u) for u << 0), where an fp32
// rounding of 1e-8 absolute is a large fraction of the element; the
// norm-wise error weighs each error against the size of the whole result.
// Every measured error is printed ("[ measured ]" lines) and the largest per
// kernel output and mode is summarized at the end of the run.
//
// Inputs come from a fixed-seed std::mt19937 turned into doubles by our own
// code (std::uniform_real_distribution is implementation-defined), rounded to
// the buffer's dtype before either side sees them. Output buffers start
// filled with a sentinel: an element the kernel fails to write keeps it (a
// large error), and the padding of strided rows, or a buffer that a kernel
// must not write, is checked to still hold it. Inputs' row padding holds NaN,
// so a kernel reading past a row's end poisons its result.
//
// Sizes have ragged edges (not multiples of the blocks) and at least one exact
// multiple per kernel, small enough to keep the binary under ~20 s.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/parse/ParseHelpers.h"
#include "tgrad/interp/Interpreter.h"

namespace tgrad::testing {
namespace {

using interp::Buffer;
using interp::KernelArg;
using interp::Launch;
using interp::Memory;
using interp::RunOptions;
using interp::Value;
using sema::DType;

// ======================================================= reference rounding
// Written from the IEEE formats, independently of src/interp/TensorOps.cpp.

// fp32 -> IEEE binary16 bits, round to nearest even.
uint16_t half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                               // a normal half (>= 2^-14)
    a -= (127u - 15u) << 23;                                            // rebias the exponent
    a += 0xFFFu + ((a >> 13) & 1u);                                     // 23 -> 10 mantissa bits, ties to even
    return static_cast<uint16_t>(sign | (a >> 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: zero (the tie goes to even 0)
  // A subnormal half: a count of 2^-24 units.
  const uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // a = m * 2^(e-150) = (m >> shift) units of 2^-24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(m + 1024, e - 25);
  return (h & 0x8000u) ? -v : v;
}

// A value rounded to fp16 the way Triton converts: through fp32.
double to_fp16(double v) { return half_value(half_bits(static_cast<float>(v))); }
double to_fp32(double v) { return static_cast<double>(static_cast<float>(v)); }

// tf32 (what tl.dot's default input_precision does to fp32 operands): an fp32
// with its mantissa rounded to 10 bits, nearest even.
double to_tf32(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return f;
  u += 0xFFFu + ((u >> 13) & 1u);
  u &= 0xFFFFE000u;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16: the upper half of an fp32, round to nearest even.
double to_bf16(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return f;
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

double round_to(DType t, double v) {
  switch (t) {
    case DType::FP16: return to_fp16(v);
    case DType::BF16: return to_bf16(v);
    case DType::FP32: return to_fp32(v);
    default: return v;
  }
}

// ================================================================== modes

enum class Mode { FP32, FP64 };

const char *mode_name(Mode m) { return m == Mode::FP64 ? "fp64" : "fp32"; }
double tolerance(Mode m) { return m == Mode::FP64 ? 1e-12 : 1e-5; }

// ========================================================== inputs, memory

// Deterministic inputs: raw mt19937 words (fully specified by the standard)
// turned into doubles by our own arithmetic.
class Inputs {
 public:
  explicit Inputs(uint32_t seed) : gen_(seed) {}
  // Uniform in [lo, hi), with 53 random bits (so fp32 inputs use all their mantissa bits).
  double uniform(double lo, double hi) {
    const uint64_t hi27 = gen_() >> 5, lo26 = gen_() >> 6;
    return lo + (hi - lo) * static_cast<double>((hi27 << 26) | lo26) * 0x1p-53;
  }
  std::vector<double> uniform(size_t n, double lo, double hi, DType t = DType::FP32) {
    std::vector<double> v(n);
    for (double &x : v) x = round_to(t, uniform(lo, hi));
    return v;
  }
  // Multiples of 1/64 in [-1, 1]: 7 significant bits, exact in fp16 and tf32,
  // and sums of up to 4096 of their products are exact in fp32.
  std::vector<double> sixty_fourths(size_t n) {
    std::vector<double> v(n);
    for (double &x : v) x = static_cast<double>(static_cast<int>(gen_() % 129u) - 64) / 64.0;
    return v;
  }

 private:
  std::mt19937 gen_;
};

constexpr double kSentinel = -777.0;  // exact in fp16 too

// Host memory for one launch.
class Host {
 public:
  // An input buffer holding `values` (already rounded to `dtype`).
  size_t input(const std::string &name, DType dtype, const std::vector<double> &values) {
    Buffer b;
    b.name = name;
    b.dtype = dtype;
    b.shape = {static_cast<int64_t>(values.size())};
    b.f = values;
    mem.add(std::move(b));
    return mem.buffers().size() - 1;
  }
  // An output buffer of n elements, each holding the sentinel.
  size_t output(const std::string &name, DType dtype, size_t n) {
    return input(name, dtype, std::vector<double>(n, kSentinel));
  }
  const std::vector<double> &data(size_t buffer) const { return mem.buffers().at(buffer).f; }

  Memory mem;
};

// A dense rows x cols matrix laid out with row stride ld >= cols; the padding
// columns hold `fill`.
std::vector<double> strided(const std::vector<double> &dense, int64_t rows, int64_t cols, int64_t ld, double fill) {
  std::vector<double> out(static_cast<size_t>(rows * ld), fill);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * ld + c] = dense[r * cols + c];
  return out;
}

// The dense rows x cols matrix inside a buffer with row stride ld.
std::vector<double> dense(const std::vector<double> &data, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = data.at(r * ld + c);
  return out;
}

// Number of elements outside the rows x cols matrix (the padding columns)
// that no longer hold the sentinel.
int64_t padding_written(const std::vector<double> &data, int64_t rows, int64_t cols, int64_t ld) {
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = cols; c < ld; ++c) n += data.at(r * ld + c) != kSentinel;
  return n;
}

int64_t not_sentinel(const std::vector<double> &data) {
  return std::count_if(data.begin(), data.end(), [](double v) { return v != kSentinel; });
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Kernel arguments.
KernelArg Buf(size_t buffer) {
  KernelArg a;
  a.kind = KernelArg::Kind::Buffer;
  a.buffer = buffer;
  return a;
}
KernelArg Int(long long n) {
  KernelArg a;
  a.kind = KernelArg::Kind::Int;
  a.n = n;
  return a;
}
KernelArg Float(double x) {
  KernelArg a;
  a.kind = KernelArg::Kind::Float;
  a.x = x;
  return a;
}
KernelArg Const(Value v) {
  KernelArg a;
  a.kind = KernelArg::Kind::Constexpr;
  a.constexpr_value = std::move(v);
  return a;
}
KernelArg CInt(long long n) { return Const(Value::of_int(n)); }
KernelArg CBool(bool b) { return Const(Value::of_bool(b)); }
KernelArg CStr(const std::string &s) { return Const(Value::of_str(s)); }

Launch make_launch(const std::string &kernel, std::array<int64_t, 3> grid, std::map<std::string, KernelArg> args) {
  Launch l;
  l.kernel = kernel;
  l.grid = grid;
  l.args = std::move(args);
  return l;
}

// ============================================================== running

// tests/kernels/<stem>.py, parsed once.
const Parsed &kernel_file(const std::string &stem) {
  static std::map<std::string, std::unique_ptr<Parsed>> cache;
  auto &slot = cache[stem];
  if (!slot) {
    const std::string path = "tests/kernels/" + stem + ".py";
    const std::string text = read_file(path);
    EXPECT_FALSE(text.empty()) << "cannot read " << path;
    slot = parse_text(text, path);
    EXPECT_TRUE(slot->ok()) << slot->all_messages();
  }
  return *slot;
}

std::string rendered(const DiagEngine &diags) {
  std::string s;
  for (const Diagnostic &d : diags.diagnostics()) s += diags.render(d) + "\n";
  return s;
}

RunOptions options(Mode mode) {
  RunOptions o;
  o.float64 = mode == Mode::FP64;
  return o;
}

::testing::AssertionResult run(const Parsed &file, const Launch &launch, Host &host, Mode mode) {
  DiagEngine diags(file.sources);
  if (interp::run_kernel(*file.module, launch, host.mem, options(mode), diags) && !diags.has_errors())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << launch.kernel << " failed in the interpreter:\n" << rendered(diags);
}

// Calls a pure jit function; the results' values (one vector per result),
// or nullopt with a failure recorded.
std::optional<std::vector<std::vector<double>>> call(const Parsed &file, const std::string &fn,
                                                     const std::map<std::string, Value> &args, Mode mode,
                                                     const std::vector<interp::Shape> &shapes) {
  DiagEngine diags(file.sources);
  Memory mem;
  auto results = interp::run_function(*file.module, fn, args, mem, options(mode), diags);
  if (!results || diags.has_errors()) {
    ADD_FAILURE() << fn << " failed in the interpreter:\n" << rendered(diags);
    return std::nullopt;
  }
  if (results->size() != shapes.size()) {
    ADD_FAILURE() << fn << " returned " << results->size() << " values, expected " << shapes.size();
    return std::nullopt;
  }
  std::vector<std::vector<double>> out;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Value &v = (*results)[k];
    if (v.kind != Value::Kind::Tensor || !v.t->is_float() || v.t->shape != shapes[k]) {
      ADD_FAILURE() << fn << " result " << k << " is " << v.describe() << ", expected fp32"
                    << interp::shape_str(shapes[k]);
      return std::nullopt;
    }
    if (v.t->type.dtype != DType::FP32) ADD_FAILURE() << fn << " result " << k << " is " << v.t->type_str();
    out.push_back(v.t->f);
  }
  return out;
}

Value tile(const std::vector<double> &values, const interp::Shape &shape, Mode mode) {
  return interp::make_tensor(DType::FP32, shape, values, mode == Mode::FP64);
}

// ======================================================= error and report

// The largest error seen per "kernel output" and mode, printed at the end.
std::map<std::string, std::map<std::string, double>> &worst_errors() {
  static std::map<std::string, std::map<std::string, double>> m;
  return m;
}

class SummaryPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (worst_errors().empty()) return;
    std::cout << "\n[ measured ] largest norm-wise relative error per kernel output (tolerance: fp32 1e-5, "
                 "(fp16) outputs 2^-11, (bf16) 2^-8; fp64 1e-12)\n";
    std::cout << "[ measured ] " << std::left << std::setw(46) << "output" << std::setw(12) << "fp32" << "fp64\n";
    for (const auto &kv : worst_errors()) {
      std::cout << "[ measured ] " << std::left << std::setw(46) << kv.first;
      for (const char *m : {"fp32", "fp64"}) {
        auto it = kv.second.find(m);
        std::ostringstream cell;
        if (it != kv.second.end()) cell << std::scientific << std::setprecision(2) << it->second;
        else cell << "-";
        std::cout << std::setw(12) << cell.str();
      }
      std::cout << "\n";
    }
  }
};
// Registered before main() runs the tests (gtest_main).
::testing::Environment *const kSummary = ::testing::AddGlobalTestEnvironment(new SummaryPrinter);

// ||got - ref||_2 / ||ref||_2 (the absolute norm when ref is all zeros); NaN
// or a sentinel left in `got` gives NaN or a large value.
double relative_error(const std::vector<double> &got, const std::vector<double> &ref) {
  long double diff = 0, norm = 0;
  for (size_t k = 0; k < ref.size(); ++k) {
    long double d = static_cast<long double>(got[k]) - ref[k];
    diff += d * d;
    norm += static_cast<long double>(ref[k]) * ref[k];
  }
  if (std::isnan(static_cast<double>(diff))) return NAN;
  return static_cast<double>(norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff));
}

// Compares one output; records and prints the error; fails the test above
// the mode's tolerance (or `tol` when given).
void expect_close(const std::string &output, const std::string &detail, const std::vector<double> &got,
                  const std::vector<double> &ref, Mode mode, double tol = -1) {
  if (tol < 0) tol = tolerance(mode);
  ASSERT_EQ(got.size(), ref.size()) << output;
  const double err = relative_error(got, ref);
  double &worst = worst_errors()[output][mode_name(mode)];
  if (!(err <= worst)) worst = err;  // NaN sticks
  std::cout << "[ measured ] " << output << " " << detail << " " << mode_name(mode) << ": rel err " << std::scientific
            << std::setprecision(3) << err << std::defaultfloat << "\n";
  if (!(err <= tol)) {
    size_t at = 0;
    double far = -1;
    for (size_t k = 0; k < ref.size(); ++k) {
      double d = std::fabs(got[k] - ref[k]);
      if (std::isnan(d) || d > far) {
        far = std::isnan(d) ? INFINITY : d;
        at = k;
        if (std::isnan(d)) break;
      }
    }
    ADD_FAILURE() << output << " " << detail << " (" << mode_name(mode) << "): norm-wise relative error " << err
                  << " > " << tol << "; worst element " << at << ": got " << std::setprecision(17) << got[at]
                  << ", reference " << ref[at];
  }
}

// The spacing of fp16 / bf16 values around v, and their unit roundoff.
double ulp_of(DType t, double v) {
  const double a = std::fabs(v);
  if (t == DType::FP16 && a < 0x1p-14) return 0x1p-24;
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - (t == DType::FP16 ? 11 : 8));
}
double unit_roundoff(DType t) { return t == DType::FP16 ? 0x1p-11 : 0x1p-8; }

// An output the kernel stores as fp16 (or bf16). In fp64 mode nothing is
// rounded: the usual 1e-12. In fp32 mode the reference is rounded to the
// dtype as well, but the kernel rounds its fp32 value and the reference its
// double value, and where those straddle a tie they round to neighbouring
// values: one such element costs 2^-11 (bf16: 2^-8) of itself, over 1e-5
// norm-wise for a small output. So: every element within one ulp of the
// rounded reference, and the norm-wise error within the dtype's unit roundoff.
// The fp32 computation before the store is held to 1e-5 by the fp32-output
// cases of each kernel.
void expect_close_narrow(DType t, const std::string &output, const std::string &detail,
                         const std::vector<double> &got, const std::vector<double> &ref, Mode mode) {
  if (mode == Mode::FP64) return expect_close(output, detail, got, ref, mode);
  expect_close(output, detail, got, ref, mode, unit_roundoff(t));
  int64_t beyond_ulp = 0, differ = 0;
  for (size_t k = 0; k < ref.size() && k < got.size(); ++k) {
    differ += got[k] != ref[k];
    beyond_ulp += !(std::fabs(got[k] - ref[k]) <= ulp_of(t, ref[k]));
  }
  std::cout << "[ measured ] " << output << " " << detail << " fp32: " << differ << " of " << ref.size()
            << " elements one " << sema::short_name(t) << " ulp from the rounded reference\n";
  EXPECT_EQ(beyond_ulp, 0) << output << " " << detail << ": elements more than one ulp from the reference";
}

std::string dims(std::initializer_list<int64_t> ds) {
  std::string s;
  for (int64_t d : ds) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// ============================================================== fixture

class KernelReference : public ::testing::TestWithParam<Mode> {
 protected:
  Mode mode() const { return GetParam(); }
  bool f64() const { return GetParam() == Mode::FP64; }
  // A deliberate narrowing by the kernel (.to(tl.float16), an fp16 store):
  // rounds in fp32 mode; float64 mode keeps every value in double.
  double narrow_fp16(double v) const { return f64() ? v : to_fp16(v); }
  double narrow(DType t, double v) const { return f64() ? v : round_to(t, v); }
};

INSTANTIATE_TEST_SUITE_P(Modes, KernelReference, ::testing::Values(Mode::FP32, Mode::FP64),
                         [](const ::testing::TestParamInfo<Mode> &info) { return std::string(mode_name(info.param)); });

// ======================================================= vector_add.py

// add_kernel: out[i] = x[i] + y[i] for i < n_elements, one BLOCK_SIZE chunk
// per program.
TEST_P(KernelReference, VectorAdd) {
  const Parsed &file = kernel_file("vector_add");
  struct Case { int64_t n, block; };
  for (Case c : {Case{1000, 256}, Case{1024, 1024}, Case{1, 128}, Case{4097, 1024}}) {
    const std::string detail = "n=" + std::to_string(c.n) + " BLOCK=" + std::to_string(c.block);
    SCOPED_TRACE(detail);
    Inputs in(11 + c.n);
    std::vector<double> x = in.uniform(c.n, -2, 2), y = in.uniform(c.n, -2, 2);
    Host h;
    size_t X = h.input("x", DType::FP32, x), Y = h.input("y", DType::FP32, y), O = h.output("out", DType::FP32, c.n);
    ASSERT_TRUE(run(file,
                    make_launch("add_kernel", {cdiv(c.n, c.block), 1, 1},
                                {{"x_ptr", Buf(X)}, {"y_ptr", Buf(Y)}, {"out_ptr", Buf(O)}, {"n_elements", Int(c.n)},
                                 {"BLOCK_SIZE", CInt(c.block)}}),
                    h, mode()));
    std::vector<double> ref(c.n);
    for (int64_t i = 0; i < c.n; ++i) ref[i] = x[i] + y[i];
    expect_close("add_kernel out", detail, h.data(O), ref, mode());
  }
}

// ========================================================== softmax.py

// softmax_kernel: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)) per
// row, rows at their own strides.
TEST_P(KernelReference, Softmax) {
  const Parsed &file = kernel_file("softmax");
  struct Case { int64_t rows, cols, block, in_ld, out_ld; };
  for (Case c : {Case{37, 781, 1024, 781, 781}, Case{8, 128, 128, 131, 140}, Case{4, 1, 1, 2, 3},
                 Case{3, 1000, 1024, 1003, 1000}}) {
    const std::string detail = dims({c.rows, c.cols}) + " BLOCK=" + std::to_string(c.block);
    SCOPED_TRACE(detail);
    Inputs in(100 + c.cols);
    std::vector<double> x = in.uniform(c.rows * c.cols, -3, 3);
    for (int64_t r = 0; r < c.rows; ++r)  // rows far from 0: the max subtraction matters
      for (int64_t j = 0; j < c.cols; ++j) x[r * c.cols + j] = to_fp32(x[r * c.cols + j] + 20.0 * (r % 3));
    Host h;
    size_t I = h.input("in", DType::FP32, strided(x, c.rows, c.cols, c.in_ld, NAN));
    size_t O = h.output("out", DType::FP32, c.rows * c.out_ld);
    ASSERT_TRUE(run(file,
                    make_launch("softmax_kernel", {c.rows, 1, 1},
                                {{"out_ptr", Buf(O)}, {"in_ptr", Buf(I)}, {"in_row_stride", Int(c.in_ld)},
                                 {"out_row_stride", Int(c.out_ld)}, {"n_cols", Int(c.cols)},
                                 {"BLOCK_SIZE", CInt(c.block)}}),
                    h, mode()));
    std::vector<double> ref(c.rows * c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      const double *row = &x[r * c.cols];
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < c.cols; ++j) mx = std::max(mx, row[j]);
      for (int64_t j = 0; j < c.cols; ++j) sum += std::exp(row[j] - mx);
      for (int64_t j = 0; j < c.cols; ++j) ref[r * c.cols + j] = std::exp(row[j] - mx) / sum;
    }
    expect_close("softmax_kernel out", detail, dense(h.data(O), c.rows, c.cols, c.out_ld), ref, mode());
    EXPECT_EQ(padding_written(h.data(O), c.rows, c.cols, c.out_ld), 0) << "stores outside the rows";
  }
}

// ======================================================= layer_norm.py

// layer_norm_fwd_kernel, per row: mean = sum(x) / N, var = sum((x - mean)^2) / N
// (biased), rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * w + b; saves
// Mean[row] and Rstd[row].
TEST_P(KernelReference, LayerNorm) {
  const Parsed &file = kernel_file("layer_norm");
  struct Case { int64_t M, N, block, x_ld, y_ld; DType t; };  // t: X, W, B and Y
  const Case cases[] = {
      {37, 781, 256, 781, 800, DType::FP32},  // 781 = 3 * 256 + 13, Y rows padded
      {4, 1024, 1024, 1024, 1024, DType::FP32},
      {3, 3000, 1024, 3001, 3000, DType::FP32},
      {5, 7, 8, 9, 7, DType::FP32},
      {6, 300, 128, 300, 300, DType::FP16},  // the launcher's fp16 (Mean, Rstd stay fp32)
  };
  for (const Case &c : cases) {
    const std::string detail =
        dims({c.M, c.N}) + " BLOCK=" + std::to_string(c.block) + (c.t == DType::FP16 ? " fp16" : "");
    SCOPED_TRACE(detail);
    Inputs in(200 + c.N);
    std::vector<double> x(c.M * c.N);
    for (int64_t r = 0; r < c.M; ++r) {  // per-row offset and scale
      const double offset = in.uniform(-2, 2), scale = in.uniform(0.5, 2);
      for (int64_t j = 0; j < c.N; ++j) x[r * c.N + j] = round_to(c.t, offset + scale * in.uniform(-1, 1));
    }
    std::vector<double> w = in.uniform(c.N, 0.5, 1.5, c.t), b = in.uniform(c.N, -0.5, 0.5, c.t);
    const double eps = to_fp32(1e-5);
    Host h;
    size_t X = h.input("X", c.t, strided(x, c.M, c.N, c.x_ld, NAN));
    size_t Y = h.output("Y", c.t, c.M * c.y_ld);
    size_t W = h.input("W", c.t, w), B = h.input("B", c.t, b);
    size_t Mean = h.output("Mean", DType::FP32, c.M), Rstd = h.output("Rstd", DType::FP32, c.M);
    ASSERT_TRUE(run(file,
                    make_launch("layer_norm_fwd_kernel", {c.M, 1, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"W", Buf(W)}, {"B", Buf(B)}, {"Mean", Buf(Mean)},
                                 {"Rstd", Buf(Rstd)}, {"stride_x_row", Int(c.x_ld)}, {"stride_y_row", Int(c.y_ld)},
                                 {"N", Int(c.N)}, {"eps", Float(eps)}, {"BLOCK_SIZE", CInt(c.block)}}),
                    h, mode()));
    std::vector<double> ref_y(c.M * c.N), ref_mean(c.M), ref_rstd(c.M);
    for (int64_t r = 0; r < c.M; ++r) {
      const double *row = &x[r * c.N];
      double sum = 0, sq = 0;
      for (int64_t j = 0; j < c.N; ++j) sum += row[j];
      const double mean = sum / c.N;
      for (int64_t j = 0; j < c.N; ++j) sq += (row[j] - mean) * (row[j] - mean);
      const double rstd = 1.0 / std::sqrt(sq / c.N + eps);
      ref_mean[r] = mean;
      ref_rstd[r] = rstd;
      for (int64_t j = 0; j < c.N; ++j) ref_y[r * c.N + j] = narrow(c.t, (row[j] - mean) * rstd * w[j] + b[j]);
    }
    if (c.t == DType::FP32)
      expect_close("layer_norm_fwd_kernel Y", detail, dense(h.data(Y), c.M, c.N, c.y_ld), ref_y, mode());
    else
      expect_close_narrow(c.t, "layer_norm_fwd_kernel Y (fp16)", detail, dense(h.data(Y), c.M, c.N, c.y_ld), ref_y,
                          mode());
    expect_close("layer_norm_fwd_kernel Mean", detail, h.data(Mean), ref_mean, mode());
    expect_close("layer_norm_fwd_kernel Rstd", detail, h.data(Rstd), ref_rstd, mode());
    EXPECT_EQ(padding_written(h.data(Y), c.M, c.N, c.y_ld), 0) << "stores outside the rows";
  }
}

// ========================================================= rms_norm.py

// rms_norm_fwd_kernel, per row: rstd = 1 / sqrt(sum(x^2) / N + eps),
// y = x * rstd * w; saves Rstd[row].
TEST_P(KernelReference, RmsNorm) {
  const Parsed &file = kernel_file("rms_norm");
  struct Case { int64_t M, N, block, x_ld, y_ld; DType t; };  // t: X, W and Y
  const Case cases[] = {
      {37, 781, 1024, 781, 790, DType::FP32},  // ragged row, Y rows padded
      {4, 64, 64, 64, 64, DType::FP32},
      {3, 1000, 1024, 1000, 1000, DType::FP32},
      {2, 3, 4, 3, 3, DType::FP32},
      {5, 200, 256, 200, 200, DType::BF16},  // the launcher's bf16 (Rstd stays fp32)
  };
  for (const Case &c : cases) {
    const std::string detail =
        dims({c.M, c.N}) + " BLOCK=" + std::to_string(c.block) + (c.t == DType::BF16 ? " bf16" : "");
    SCOPED_TRACE(detail);
    Inputs in(300 + c.N);
    std::vector<double> x = in.uniform(c.M * c.N, -2, 2, c.t), w = in.uniform(c.N, -1.5, 1.5, c.t);
    const double eps = to_fp32(1e-6);
    Host h;
    size_t X = h.input("X", c.t, strided(x, c.M, c.N, c.x_ld, NAN));
    size_t W = h.input("W", c.t, w);
    size_t Y = h.output("Y", c.t, c.M * c.y_ld), Rstd = h.output("Rstd", DType::FP32, c.M);
    ASSERT_TRUE(run(file,
                    make_launch("rms_norm_fwd_kernel", {c.M, 1, 1},
                                {{"X", Buf(X)}, {"W", Buf(W)}, {"Y", Buf(Y)}, {"Rstd", Buf(Rstd)},
                                 {"stride_x_row", Int(c.x_ld)}, {"stride_y_row", Int(c.y_ld)}, {"N", Int(c.N)},
                                 {"eps", Float(eps)}, {"BLOCK_SIZE", CInt(c.block)}}),
                    h, mode()));
    std::vector<double> ref_y(c.M * c.N), ref_rstd(c.M);
    for (int64_t r = 0; r < c.M; ++r) {
      double sq = 0;
      for (int64_t j = 0; j < c.N; ++j) sq += x[r * c.N + j] * x[r * c.N + j];
      ref_rstd[r] = 1.0 / std::sqrt(sq / c.N + eps);
      for (int64_t j = 0; j < c.N; ++j) ref_y[r * c.N + j] = narrow(c.t, x[r * c.N + j] * ref_rstd[r] * w[j]);
    }
    if (c.t == DType::FP32)
      expect_close("rms_norm_fwd_kernel Y", detail, dense(h.data(Y), c.M, c.N, c.y_ld), ref_y, mode());
    else
      expect_close_narrow(c.t, "rms_norm_fwd_kernel Y (bf16)", detail, dense(h.data(Y), c.M, c.N, c.y_ld), ref_y,
                          mode());
    expect_close("rms_norm_fwd_kernel Rstd", detail, h.data(Rstd), ref_rstd, mode());
    EXPECT_EQ(padding_written(h.data(Y), c.M, c.N, c.y_ld), 0) << "stores outside the rows";
  }
}

// =========================================================== matmul.py

// matmul_kernel: C = act(A @ B) cast to fp16, act = relu or identity, over a
// 2-D grid of BLOCK_SIZE_M x BLOCK_SIZE_N tiles with a K loop.
//
// fp32 mode: inputs are multiples of 1/64 in [-1, 1], exact in fp16 and in
// tf32, whose products and sums are exact in the fp32 accumulator; so the
// only rounding is the kernel's final .to(tl.float16), which the reference
// applies too, and the two agree exactly whatever the order of summation.
// fp64 mode: arbitrary fp16 (or fp32) inputs, no rounding anywhere.
// One more case has arbitrary fp16 inputs in fp32 mode as well.
TEST_P(KernelReference, Matmul) {
  const Parsed &file = kernel_file("matmul");
  struct Case { int64_t M, N, K, bm, bn, bk; bool b_col_major; int64_t c_pad; DType in; bool random; };
  const Case cases[] = {
      {70, 45, 90, 32, 32, 32, false, 0, DType::FP16, false},  // ragged M, N and K
      {64, 64, 64, 32, 32, 32, false, 0, DType::FP16, false},  // exact multiples
      {37, 50, 20, 16, 32, 16, true, 3, DType::FP16, false},   // B column-major, C rows padded
      {33, 17, 40, 32, 16, 32, false, 0, DType::FP32, false},  // fp32 operands: tl.dot's tf32 path
      {10, 20, 30, 32, 32, 16, false, 0, DType::FP16, false},  // M, N < block: the % M, % N wrap
      // Arbitrary fp16 inputs in fp32 mode too: the fp32 sums are inexact, so
      // C is held to the fp16-output criterion (expect_close_narrow).
      {70, 45, 90, 32, 32, 32, false, 0, DType::FP16, true},
  };
  for (const Case &c : cases)
    for (const std::string act : {"", "relu"}) {
      const std::string detail = dims({c.M, c.N, c.K}) + " blocks " + dims({c.bm, c.bn, c.bk}) +
                                 (c.b_col_major ? " B^T-layout" : "") + (c.in == DType::FP32 ? " fp32-in" : "") +
                                 (c.random ? " random" : "") +
                                 " ACTIVATION='" + act + "'";
      SCOPED_TRACE(detail);
      Inputs in(400 + c.M + c.N);
      const bool exact = !f64() && !c.random;
      std::vector<double> a = exact ? in.sixty_fourths(c.M * c.K) : in.uniform(c.M * c.K, -1, 1, c.in);
      std::vector<double> b = exact ? in.sixty_fourths(c.K * c.N) : in.uniform(c.K * c.N, -1, 1, c.in);
      // b is K x N row-major; column-major storage is its transpose.
      std::vector<double> b_store = b;
      int64_t stride_bk = c.N, stride_bn = 1;
      if (c.b_col_major) {
        for (int64_t k = 0; k < c.K; ++k)
          for (int64_t n = 0; n < c.N; ++n) b_store[n * c.K + k] = b[k * c.N + n];
        stride_bk = 1;
        stride_bn = c.K;
      }
      const int64_t ldc = c.N + c.c_pad;
      Host h;
      size_t A = h.input("a", c.in, a), B = h.input("b", c.in, b_store);
      size_t C = h.output("c", DType::FP16, c.M * ldc);
      ASSERT_TRUE(run(file,
                      make_launch("matmul_kernel", {cdiv(c.M, c.bm), cdiv(c.N, c.bn), 1},
                                  {{"a_ptr", Buf(A)}, {"b_ptr", Buf(B)}, {"c_ptr", Buf(C)}, {"M", Int(c.M)},
                                   {"N", Int(c.N)}, {"K", Int(c.K)}, {"stride_am", Int(c.K)}, {"stride_ak", Int(1)},
                                   {"stride_bk", Int(stride_bk)}, {"stride_bn", Int(stride_bn)},
                                   {"stride_cm", Int(ldc)}, {"stride_cn", Int(1)}, {"BLOCK_SIZE_M", CInt(c.bm)},
                                   {"BLOCK_SIZE_N", CInt(c.bn)}, {"BLOCK_SIZE_K", CInt(c.bk)},
                                   {"ACTIVATION", CStr(act)}}),
                      h, mode()));
      std::vector<double> ref(c.M * c.N);
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < c.K; ++k) s += a[m * c.K + k] * b[k * c.N + n];
          if (act == "relu") s = std::max(s, 0.0);
          ref[m * c.N + n] = narrow_fp16(s);
        }
      const std::string name = act.empty() ? "matmul_kernel C" : "matmul_kernel C (relu)";
      if (c.random)
        expect_close_narrow(DType::FP16, name + " (fp16)", detail, dense(h.data(C), c.M, c.N, ldc), ref, mode());
      else  // an fp16 output held to 1e-5: exact by construction, see above
        expect_close(name, detail, dense(h.data(C), c.M, c.N, ldc), ref, mode());
      EXPECT_EQ(padding_written(h.data(C), c.M, c.N, ldc), 0) << "stores outside C's rows";
    }
}

// grouped_matmul_kernel: C = sigmoid(0.1 * A @ B) in fp16 with its programs
// renumbered by tl.swizzle2d. A tile the renumbering missed (or visited
// twice, leaving another unvisited) would stay zero: every element is
// compared. 5 x 3 tiles in groups of 2 rows leave a last group of one row.
TEST_P(KernelReference, GroupedMatmul) {
  const Parsed &file = kernel_file("matmul");
  const int64_t M = 77, N = 43, K = 40, block = 16;
  for (int64_t group : {1, 2, 3, 8}) {
    SCOPED_TRACE("GROUP_M=" + std::to_string(group));
    Inputs in(900 + group);
    std::vector<double> a = in.uniform(M * K, -1, 1, DType::FP16), b = in.uniform(K * N, -1, 1, DType::FP16);
    Host h;
    size_t A = h.input("a", DType::FP16, a), B = h.input("b", DType::FP16, b);
    size_t C = h.output("c", DType::FP16, M * N);
    ASSERT_TRUE(run(file,
                    make_launch("grouped_matmul_kernel", {cdiv(M, block), cdiv(N, block), 1},
                                {{"a_ptr", Buf(A)}, {"b_ptr", Buf(B)}, {"c_ptr", Buf(C)}, {"M", Int(M)}, {"N", Int(N)},
                                 {"K", Int(K)}, {"stride_am", Int(K)}, {"stride_ak", Int(1)}, {"stride_bk", Int(N)},
                                 {"stride_bn", Int(1)}, {"stride_cm", Int(N)}, {"stride_cn", Int(1)},
                                 {"BLOCK_SIZE_M", CInt(block)}, {"BLOCK_SIZE_N", CInt(block)},
                                 {"BLOCK_SIZE_K", CInt(block)}, {"GROUP_M", CInt(group)}}),
                    h, mode()));
    std::vector<double> ref(M * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[m * K + k] * b[k * N + n];
        ref[m * N + n] = narrow_fp16(1.0 / (1.0 + std::exp(-0.1 * s)));
      }
    expect_close_narrow(DType::FP16, "grouped_matmul_kernel C", "77x43x40", h.data(C), ref, mode());
  }
}

// tutorial_order_matmul_kernel: C = A @ B in fp16 on a 1-D grid whose one id
// each program turns into its tile's row and column in grouped order. Every
// element is compared, so a tile the ordering missed would show; 5 x 3
// tiles in groups of 2 rows leave a last group of one row.
TEST_P(KernelReference, TutorialOrderMatmul) {
  const Parsed &file = kernel_file("matmul");
  const int64_t M = 77, N = 43, K = 40, block = 16;
  for (int64_t group : {1, 2, 3, 8}) {
    SCOPED_TRACE("GROUP_SIZE_M=" + std::to_string(group));
    Inputs in(950 + group);
    std::vector<double> a = in.uniform(M * K, -1, 1, DType::FP16), b = in.uniform(K * N, -1, 1, DType::FP16);
    Host h;
    size_t A = h.input("a", DType::FP16, a), B = h.input("b", DType::FP16, b);
    size_t C = h.output("c", DType::FP16, M * N);
    ASSERT_TRUE(run(file,
                    make_launch("tutorial_order_matmul_kernel", {cdiv(M, block) * cdiv(N, block), 1, 1},
                                {{"a_ptr", Buf(A)}, {"b_ptr", Buf(B)}, {"c_ptr", Buf(C)}, {"M", Int(M)}, {"N", Int(N)},
                                 {"K", Int(K)}, {"stride_am", Int(K)}, {"stride_ak", Int(1)}, {"stride_bk", Int(N)},
                                 {"stride_bn", Int(1)}, {"stride_cm", Int(N)}, {"stride_cn", Int(1)},
                                 {"BLOCK_SIZE_M", CInt(block)}, {"BLOCK_SIZE_N", CInt(block)},
                                 {"BLOCK_SIZE_K", CInt(block)}, {"GROUP_SIZE_M", CInt(group)}}),
                    h, mode()));
    std::vector<double> ref(M * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[m * K + k] * b[k * N + n];
        ref[m * N + n] = narrow_fp16(s);
      }
    expect_close_narrow(DType::FP16, "tutorial_order_matmul_kernel C", "77x43x40", h.data(C), ref, mode());
  }
}

// leaky_matmul_kernel: C = leaky(A @ B) (the helper `leaky`: slope 0.01 below 0) in fp16 on a 2-D grid, and
// without the epilogue; ragged in M, N and K.
TEST_P(KernelReference, LeakyMatmul) {
  const Parsed &file = kernel_file("matmul");
  const int64_t M = 45, N = 37, K = 29, block = 16;
  for (const std::string act : {"leaky_relu", ""}) {
    SCOPED_TRACE("ACTIVATION=" + act);
    Inputs in(990);
    std::vector<double> a = in.uniform(M * K, -1, 1, DType::FP16), b = in.uniform(K * N, -1, 1, DType::FP16);
    Host h;
    size_t A = h.input("a", DType::FP16, a), B = h.input("b", DType::FP16, b);
    size_t C = h.output("c", DType::FP16, M * N);
    ASSERT_TRUE(run(file,
                    make_launch("leaky_matmul_kernel", {cdiv(M, block), cdiv(N, block), 1},
                                {{"a_ptr", Buf(A)}, {"b_ptr", Buf(B)}, {"c_ptr", Buf(C)}, {"M", Int(M)}, {"N", Int(N)},
                                 {"K", Int(K)}, {"stride_am", Int(K)}, {"stride_ak", Int(1)}, {"stride_bk", Int(N)},
                                 {"stride_bn", Int(1)}, {"stride_cm", Int(N)}, {"stride_cn", Int(1)},
                                 {"BLOCK_SIZE_M", CInt(block)}, {"BLOCK_SIZE_N", CInt(block)},
                                 {"BLOCK_SIZE_K", CInt(block)}, {"ACTIVATION", CStr(act)}}),
                    h, mode()));
    std::vector<double> ref(M * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[m * K + k] * b[k * N + n];
        ref[m * N + n] = narrow_fp16(act.empty() || s >= 0 ? s : 0.01 * s);
      }
    expect_close_narrow(DType::FP16, "leaky_matmul_kernel C", "45x37x29", h.data(C), ref, mode());
  }
}

// low_rank_kernel: Y = scale * (X @ A) @ B per block of rows, ragged in M, K and N (the last column tile masked).
TEST_P(KernelReference, LowRank) {
  const Parsed &file = kernel_file("matmul");
  const int64_t M = 37, K = 45, N = 70, R = 16, block = 16;
  Inputs in(991);
  // Multiples of 1/64: the first dot is exact in fp32; the second dot's left operand (fp32) is rounded to tf32 in
  // fp32 mode, as tl.dot does, and so in the reference.
  std::vector<double> x = in.sixty_fourths(M * K), a = in.sixty_fourths(K * R), b = in.sixty_fourths(R * N);
  Host h;
  size_t X = h.input("X", DType::FP32, x), A = h.input("A", DType::FP32, a), B = h.input("B", DType::FP32, b);
  size_t Y = h.output("Y", DType::FP32, M * N);
  ASSERT_TRUE(run(file,
                  make_launch("low_rank_kernel", {cdiv(M, block), 1, 1},
                              {{"X", Buf(X)}, {"A", Buf(A)}, {"B", Buf(B)}, {"Y", Buf(Y)}, {"M", Int(M)}, {"K", Int(K)},
                               {"N", Int(N)}, {"scale", Float(0.5)}, {"R", CInt(R)}, {"BLOCK_M", CInt(block)},
                               {"BLOCK_K", CInt(block)}, {"BLOCK_N", CInt(32)}}),
                  h, mode()));
  std::vector<double> ref(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t r = 0; r < R; ++r) {
        double xa = 0;
        for (int64_t k = 0; k < K; ++k) xa += x[m * K + k] * a[k * R + r];
        s += (mode() == Mode::FP64 ? 0.5 * xa : to_tf32(0.5 * xa)) * b[r * N + n];
      }
      ref[m * N + n] = s;
    }
  expect_close("low_rank_kernel Y", "37x45x70 R=16", h.data(Y), ref, mode());
}

// ========================================================== attention.py

// Reference attention for one launch. q: [Z][H][N][D], k, v: [Z][H][N][D]
// (dense, whatever layout the buffers use). Scores in the log2 domain,
// t_j = (q . k_j) * sm_scale * 1.44269504 (the kernel folds this truncated
// log2(e) into its scale; a reference with the exact log2(e) would differ by
// 6e-10 relative, over the fp64 tolerance), over the visible keys (j < N, and
// j <= i when causal). Out_i = sum_j 2^t_j v_j / sum_j 2^t_j and
// lse_i = ln(2) * log2(sum_j 2^t_j).
//
// fp64 (round_p false): the plain two-pass softmax.
// fp32 (round_p true): the kernel narrows p to fp16 before p @ V (not in the
// denominator), and p is relative to the running maximum of the key blocks
// seen so far, so the reference runs the same streaming update over blocks of
// block_n keys, rounding p to fp16 for the numerator only. The value narrowed
// is the one the kernel holds in fp32, p = fp32(exp2(fp32(t - m))) with
// t = fp32(fp32(q . k) * fp32(sm_scale * 1.44269504)): narrowing a p computed
// in double would, when p lies within an fp32 rounding of an fp16 tie, pick
// the other fp16 neighbour (seen: 2.4e-6 norm-wise). The rest is in double.
struct AttnDims { int64_t Z, H, N, D; };

void attention_reference(const AttnDims &d, const std::vector<double> &q, const std::vector<double> &k,
                         const std::vector<double> &v, double sm_scale, bool causal, bool round_p, int64_t block_n,
                         std::vector<double> &out, std::vector<double> &lse) {
  const double scale = sm_scale * 1.44269504;
  const double scale32 = to_fp32(to_fp32(sm_scale) * to_fp32(1.44269504));
  out.assign(d.Z * d.H * d.N * d.D, 0.0);
  lse.assign(d.Z * d.H * d.N, 0.0);
  std::vector<double> t(d.N), acc(d.D);
  for (int64_t zh = 0; zh < d.Z * d.H; ++zh) {
    const double *Q = &q[zh * d.N * d.D], *K = &k[zh * d.N * d.D], *V = &v[zh * d.N * d.D];
    for (int64_t i = 0; i < d.N; ++i) {
      const int64_t visible = causal ? i + 1 : d.N;  // keys 0 .. visible-1
      for (int64_t j = 0; j < visible; ++j) {
        double s = 0;
        for (int64_t e = 0; e < d.D; ++e) s += Q[i * d.D + e] * K[j * d.D + e];
        t[j] = round_p ? to_fp32(to_fp32(s) * scale32) : s * scale;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double m = -INFINITY, l = 0;
      if (!round_p) {
        for (int64_t j = 0; j < visible; ++j) m = std::max(m, t[j]);
        for (int64_t j = 0; j < visible; ++j) {
          const double p = std::exp2(t[j] - m);
          l += p;
          for (int64_t e = 0; e < d.D; ++e) acc[e] += p * V[j * d.D + e];
        }
      } else {
        for (int64_t start = 0; start < visible; start += block_n) {
          const int64_t end = std::min(start + block_n, visible);
          double m_new = m;
          for (int64_t j = start; j < end; ++j) m_new = std::max(m_new, t[j]);
          const double alpha = std::exp2(m - m_new);
          l *= alpha;
          for (double &a : acc) a *= alpha;
          for (int64_t j = start; j < end; ++j) {
            const double p = to_fp32(std::exp2(to_fp32(t[j] - m_new)));
            l += p;
            const double p16 = to_fp16(p);
            for (int64_t e = 0; e < d.D; ++e) acc[e] += p16 * V[j * d.D + e];
          }
          m = m_new;
        }
      }
      for (int64_t e = 0; e < d.D; ++e) out[(zh * d.N + i) * d.D + e] = acc[e] / l;
      lse[zh * d.N + i] = (m + std::log2(l)) * 0.6931471805599453;
    }
  }
}

// attn_fwd_kernel on `source` (the file's text): Q and Out in (Z, H, N, D)
// layout, K and V in (Z, N, H, D) layout (other strides), fp16 inputs; Out is
// fp32 (the kernel casts to Out's element type; an fp32 Out compares the fp32
// accumulator itself), plus one case with an fp16 Out as the launcher uses.
void check_attention(const Parsed &file, Mode mode) {
  struct Case { AttnDims d; int64_t bm, bn; DType out; };
  const Case cases[] = {
      {{1, 2, 100, 32}, 32, 32, DType::FP32},  // 100 = 3 * 32 + 4: ragged query and key blocks
      {{2, 1, 64, 16}, 16, 32, DType::FP32},   // BLOCK_M < BLOCK_N, exact multiples
      {{1, 1, 50, 32}, 64, 16, DType::FP16},   // one query block larger than N, fp16 Out
  };
  const bool f64 = mode == Mode::FP64;
  for (const Case &c : cases)
    for (bool causal : {false, true}) {
      const AttnDims &d = c.d;
      const std::string detail = "Z,H,N,D=" + dims({d.Z, d.H, d.N, d.D}) + " BLOCK_M,N=" + dims({c.bm, c.bn}) +
                                 (causal ? " causal" : " full") + (c.out == DType::FP16 ? " fp16-out" : "");
      SCOPED_TRACE(detail);
      Inputs in(500 + d.N + d.D);
      const int64_t size = d.Z * d.H * d.N * d.D;
      std::vector<double> q = in.uniform(size, -2, 2, DType::FP16), k = in.uniform(size, -2, 2, DType::FP16),
                          v = in.uniform(size, -1, 1, DType::FP16);
      // K and V stored as (Z, N, H, D).
      auto znhd = [&](const std::vector<double> &x) {
        std::vector<double> s(size);
        for (int64_t z = 0; z < d.Z; ++z)
          for (int64_t hh = 0; hh < d.H; ++hh)
            for (int64_t n = 0; n < d.N; ++n)
              for (int64_t e = 0; e < d.D; ++e)
                s[((z * d.N + n) * d.H + hh) * d.D + e] = x[((z * d.H + hh) * d.N + n) * d.D + e];
        return s;
      };
      const double sm_scale = to_fp32(1.0 / std::sqrt(static_cast<double>(d.D)));
      Host h;
      size_t Q = h.input("Q", DType::FP16, q), K = h.input("K", DType::FP16, znhd(k)),
             V = h.input("V", DType::FP16, znhd(v));
      size_t M = h.output("M", DType::FP32, d.Z * d.H * d.N), O = h.output("Out", c.out, size);
      const int64_t qz = d.H * d.N * d.D, qh = d.N * d.D, qm = d.D;  // (Z, H, N, D)
      const int64_t kz = d.N * d.H * d.D, kh = d.D, kn = d.H * d.D;  // (Z, N, H, D)
      ASSERT_TRUE(run(file,
                      make_launch("attn_fwd_kernel", {cdiv(d.N, c.bm), d.Z * d.H, 1},
                                  {{"Q", Buf(Q)},          {"K", Buf(K)},          {"V", Buf(V)},
                                   {"sm_scale", Float(sm_scale)},                  {"M", Buf(M)},
                                   {"Out", Buf(O)},        {"stride_qz", Int(qz)}, {"stride_qh", Int(qh)},
                                   {"stride_qm", Int(qm)}, {"stride_qk", Int(1)},  {"stride_kz", Int(kz)},
                                   {"stride_kh", Int(kh)}, {"stride_kn", Int(kn)}, {"stride_kk", Int(1)},
                                   {"stride_vz", Int(kz)}, {"stride_vh", Int(kh)}, {"stride_vn", Int(kn)},
                                   {"stride_vk", Int(1)},  {"stride_oz", Int(qz)}, {"stride_oh", Int(qh)},
                                   {"stride_om", Int(qm)}, {"stride_ok", Int(1)},  {"H", Int(d.H)},
                                   {"N_CTX", Int(d.N)},    {"HEAD_DIM", CInt(d.D)}, {"BLOCK_M", CInt(c.bm)},
                                   {"BLOCK_N", CInt(c.bn)}, {"IS_CAUSAL", CBool(causal)}}),
                      h, mode));
      std::vector<double> ref_out, ref_lse;
      attention_reference(d, q, k, v, sm_scale, causal, /*round_p=*/!f64, c.bn, ref_out, ref_lse);
      if (c.out == DType::FP16 && !f64)
        for (double &x : ref_out) x = to_fp16(x);
      const std::string tag = causal ? " (causal)" : " (full)";
      if (c.out == DType::FP16)
        expect_close_narrow(DType::FP16, "attn_fwd_kernel Out (fp16)" + tag, detail, h.data(O), ref_out, mode);
      else
        expect_close("attn_fwd_kernel Out" + tag, detail, h.data(O), ref_out, mode);
      expect_close("attn_fwd_kernel M" + tag, detail, h.data(M), ref_lse, mode);
    }
}

TEST_P(KernelReference, Attention) { check_attention(kernel_file("attention"), mode()); }

// ============================================================ misc_ops.py

// misc_ops_kernel, per row b and element i < n (grid-stride over blocks):
//   poly = x^3/4 + x^2/3 + x/2 + 1 (Horner), y = poly if x > 0 else poly/100,
//   y += (i & 0xFF) / 256 + 0.25, y *= scale (when scale != 1),
//   y = clamp(y, -clip, clip) when CLAMP, stored (as fp16 when OUT_FP16);
//   Partial[b * num_programs + pid] = 1.00001 * (sum of y over the blocks that
//   program pid visits: block_id = pid, pid + num_programs, ...).
TEST_P(KernelReference, MiscOps) {
  const Parsed &file = kernel_file("misc_ops");
  struct Case { int64_t B, N, block, n_prog; double scale, clip; bool clamp, out_fp16; };
  const Case cases[] = {
      {3, 5000, 256, 8, 0.5, 4.0, true, false},   // 20 blocks over 8 programs: 2-3 trips each
      {2, 1000, 128, 3, 1.0, 2.5, false, false},  // scale == 1: the runtime branch not taken
      {2, 100, 64, 3, 2.0, 1.5, true, true},      // more programs than blocks; fp16 out
      {1, 777, 256, 2, 1.0, 4.0, true, true},
      {2, 512, 256, 2, -1.5, 3.0, false, false},  // exact multiple, negative scale
  };
  for (const Case &c : cases) {
    std::ostringstream ds;
    ds << dims({c.B, c.N}) << " BLOCK=" << c.block << " programs=" << c.n_prog << " scale=" << c.scale
       << " clip=" << c.clip << " CLAMP=" << c.clamp << " OUT_FP16=" << c.out_fp16;
    const std::string detail = ds.str();
    SCOPED_TRACE(detail);
    Inputs in(600 + c.N);
    std::vector<double> x = in.uniform(c.B * c.N, -3, 3);
    const int64_t x_ld = c.N + 5, y_ld = c.N + 2;
    const DType y_type = c.out_fp16 ? DType::FP16 : DType::FP32;
    Host h;
    size_t X = h.input("X", DType::FP32, strided(x, c.B, c.N, x_ld, NAN));
    size_t Y = h.output("Y", y_type, c.B * y_ld), P = h.output("Partial", DType::FP32, c.B * c.n_prog);
    ASSERT_TRUE(run(file,
                    make_launch("misc_ops_kernel", {c.n_prog, c.B, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"Partial", Buf(P)}, {"n_elements", Int(c.N)},
                                 {"stride_xb", Int(x_ld)}, {"stride_yb", Int(y_ld)}, {"scale", Float(c.scale)},
                                 {"clip", Float(c.clip)}, {"BLOCK", CInt(c.block)}, {"CLAMP", CBool(c.clamp)},
                                 {"OUT_FP16", CBool(c.out_fp16)}}),
                    h, mode()));
    std::vector<double> ref_y(c.B * c.N), ref_p(c.B * c.n_prog, 0.0);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.N; ++i) {
        const double xi = x[b * c.N + i];
        const double poly = xi * xi * xi / 4 + xi * xi / 3 + xi / 2 + 1;
        double y = xi > 0 ? poly : poly * 0.01;
        y += static_cast<double>(i & 0xFF) / 256.0 + 0.25;
        y *= c.scale;
        if (c.clamp) y = std::min(std::max(y, -c.clip), c.clip);
        ref_y[b * c.N + i] = c.out_fp16 ? narrow_fp16(y) : y;
        ref_p[b * c.n_prog + (i / c.block) % c.n_prog] += y;
      }
    for (double &p : ref_p) p *= 1.0 + 1e-5;
    if (c.out_fp16)
      expect_close_narrow(DType::FP16, "misc_ops_kernel Y (fp16)", detail, dense(h.data(Y), c.B, c.N, y_ld), ref_y,
                          mode());
    else
      expect_close("misc_ops_kernel Y", detail, dense(h.data(Y), c.B, c.N, y_ld), ref_y, mode());
    expect_close("misc_ops_kernel Partial", detail, h.data(P), ref_p, mode());
    EXPECT_EQ(padding_written(h.data(Y), c.B, c.N, y_ld), 0) << "stores outside the rows";
  }
}

// mode_select_kernel: y = |x| (mode 0), x * x (mode 2), x otherwise.
TEST_P(KernelReference, ModeSelect) {
  const Parsed &file = kernel_file("misc_ops");
  for (int64_t sel : {0, 1, 2, 7}) {
    const int64_t n = 1000, block = 256;
    const std::string detail = "n=1000 BLOCK=256 mode=" + std::to_string(sel);
    SCOPED_TRACE(detail);
    Inputs in(700 + sel);
    std::vector<double> x = in.uniform(n, -3, 3);
    Host h;
    size_t X = h.input("X", DType::FP32, x), Y = h.output("Y", DType::FP32, n);
    ASSERT_TRUE(run(file,
                    make_launch("mode_select_kernel", {cdiv(n, block), 1, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"n_elements", Int(n)}, {"mode", Int(sel)},
                                 {"BLOCK", CInt(block)}}),
                    h, mode()));
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = sel == 0 ? std::fabs(x[i]) : sel == 2 ? x[i] * x[i] : x[i];
    expect_close("mode_select_kernel Y", detail, h.data(Y), ref, mode());
  }
}

// ========================================================= helper_call.py

double gelu_exact(double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); }
double gelu_tanh(double z) {
  return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
}
// d/dz of the exact gelu: Phi(z) + z * phi(z).
double gelu_grad(double z) {
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
}

// bias_gelu_kernel: z = x + bias[col]; Y = gelu(z) (exact with erf, or the
// tanh approximation when APPROX); G = d gelu / dz of the exact gelu when
// STORE_GRAD, else G is never written.
TEST_P(KernelReference, BiasGelu) {
  const Parsed &file = kernel_file("helper_call");
  struct Case { int64_t M, N, bm, bn, x_ld, y_ld, g_ld; DType xy; };
  const Case cases[] = {
      {37, 300, 32, 128, 300, 310, 305, DType::FP32},  // ragged in both directions, padded rows
      {16, 128, 16, 128, 128, 128, 128, DType::FP32},  // exact multiples
      {20, 70, 16, 32, 70, 70, 70, DType::FP16},       // fp16 X and Y (the kernel computes in fp32)
  };
  for (const Case &c : cases)
    for (bool approx : {false, true})
      for (bool store_grad : {false, true}) {
        std::ostringstream ds;
        ds << dims({c.M, c.N}) << " blocks " << dims({c.bm, c.bn}) << (c.xy == DType::FP16 ? " fp16" : "")
           << " APPROX=" << approx << " STORE_GRAD=" << store_grad;
        const std::string detail = ds.str();
        SCOPED_TRACE(detail);
        Inputs in(800 + c.M + c.N);
        std::vector<double> x = in.uniform(c.M * c.N, -3, 3, c.xy), bias = in.uniform(c.N, -1, 1, c.xy);
        Host h;
        size_t X = h.input("X", c.xy, strided(x, c.M, c.N, c.x_ld, NAN)), Bias = h.input("Bias", c.xy, bias);
        size_t Y = h.output("Y", c.xy, c.M * c.y_ld), G = h.output("G", DType::FP32, c.M * c.g_ld);
        ASSERT_TRUE(run(file,
                        make_launch("bias_gelu_kernel", {cdiv(c.M, c.bm), cdiv(c.N, c.bn), 1},
                                    {{"X", Buf(X)}, {"Bias", Buf(Bias)}, {"Y", Buf(Y)}, {"G", Buf(G)},
                                     {"M", Int(c.M)}, {"N", Int(c.N)}, {"stride_xm", Int(c.x_ld)},
                                     {"stride_ym", Int(c.y_ld)}, {"stride_gm", Int(c.g_ld)},
                                     {"APPROX", CBool(approx)}, {"STORE_GRAD", CBool(store_grad)},
                                     {"BLOCK_M", CInt(c.bm)}, {"BLOCK_N", CInt(c.bn)}}),
                        h, mode()));
        std::vector<double> ref_y(c.M * c.N), ref_g(c.M * c.N);
        for (int64_t r = 0; r < c.M; ++r)
          for (int64_t j = 0; j < c.N; ++j) {
            const double z = x[r * c.N + j] + bias[j];
            ref_y[r * c.N + j] = narrow(c.xy, approx ? gelu_tanh(z) : gelu_exact(z));
            ref_g[r * c.N + j] = gelu_grad(z);
          }
        const std::string fp16 = c.xy == DType::FP16 ? " (fp16)" : "";
        const std::string y_name = std::string("bias_gelu_kernel Y ") + (approx ? "tanh" : "erf") + fp16;
        if (c.xy == DType::FP16)
          expect_close_narrow(DType::FP16, y_name, detail, dense(h.data(Y), c.M, c.N, c.y_ld), ref_y, mode());
        else
          expect_close(y_name, detail, dense(h.data(Y), c.M, c.N, c.y_ld), ref_y, mode());
        EXPECT_EQ(padding_written(h.data(Y), c.M, c.N, c.y_ld), 0) << "stores outside Y's rows";
        if (store_grad) {
          const std::string g_name = std::string("bias_gelu_kernel G") + (c.xy == DType::FP16 ? " (fp16 inputs)" : "");
          expect_close(g_name, detail, dense(h.data(G), c.M, c.N, c.g_ld), ref_g, mode());
          EXPECT_EQ(padding_written(h.data(G), c.M, c.N, c.g_ld), 0) << "stores outside G's rows";
        } else {
          EXPECT_EQ(not_sentinel(h.data(G)), 0) << "G written although STORE_GRAD is False";
        }
      }
}

// The helpers of helper_call.py as pure tile functions on an fp32 tile.
TEST_P(KernelReference, HelperCallFunctions) {
  const Parsed &file = kernel_file("helper_call");
  for (int64_t n : {8, 256}) {
    const std::string detail = "x[" + std::to_string(n) + "]";
    SCOPED_TRACE(detail);
    Inputs in(900 + n);
    std::vector<double> x = in.uniform(n, -4, 4);
    const std::map<std::string, Value> args = {{"x", tile(x, {n}, mode())}};
    std::vector<double> gelu(n), tanh(n), approx(n), grad(n);
    for (int64_t i = 0; i < n; ++i) {
      gelu[i] = gelu_exact(x[i]);
      tanh[i] = std::tanh(x[i]);
      approx[i] = gelu_tanh(x[i]);
      grad[i] = gelu_grad(x[i]);
    }
    if (auto r = call(file, "_gelu", args, mode(), {{n}})) expect_close("_gelu", detail, (*r)[0], gelu, mode());
    if (auto r = call(file, "_tanh", args, mode(), {{n}})) expect_close("_tanh", detail, (*r)[0], tanh, mode());
    if (auto r = call(file, "_gelu_tanh", args, mode(), {{n}}))
      expect_close("_gelu_tanh", detail, (*r)[0], approx, mode());
    if (auto r = call(file, "_gelu_and_grad", args, mode(), {{n}, {n}})) {
      expect_close("_gelu_and_grad [0] (gelu)", detail, (*r)[0], gelu, mode());
      expect_close("_gelu_and_grad [1] (grad)", detail, (*r)[1], grad, mode());
    }
  }
}

// ================================================================= fn1.py

// fn1(x[n, n], y[n]) = a * b + c @ c with a = exp(x), b[i, j] = log(y[i]),
// c = a + b. In fp32 mode tl.dot rounds its fp32 operands to tf32 (10
// mantissa bits), so the reference's product uses tf32(c) too. It rounds the
// fp32 value the kernel holds, fp32(fp32(exp x) + fp32(log y)): rounding c
// computed in double instead would, for a c within an fp32 rounding of a tf32
// tie, pick the other tf32 neighbour, an error of 2^-11 on one operand (seen:
// 4e-6 norm-wise at n = 32). Everything else stays in double.
std::vector<double> fn1_reference(const std::vector<double> &x, const std::vector<double> &y, int64_t n,
                                  bool tf32) {
  std::vector<double> a(n * n), b(n * n), c(n * n), out(n * n);
  std::vector<double> cd(n * n);  // the dot's operand
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      a[i * n + j] = std::exp(x[i * n + j]);
      b[i * n + j] = std::log(y[i]);
      c[i * n + j] = a[i * n + j] + b[i * n + j];
      cd[i * n + j] = tf32 ? to_tf32(to_fp32(to_fp32(a[i * n + j]) + to_fp32(b[i * n + j]))) : c[i * n + j];
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += cd[i * n + k] * cd[k * n + j];
      out[i * n + j] = a[i * n + j] * b[i * n + j] + s;
    }
  return out;
}

// fn2(x[n], y[n])[i] = sum_j sigmoid(x[i] y[j]) * x[i] y[j].
std::vector<double> fn2_reference(const std::vector<double> &x, const std::vector<double> &y) {
  std::vector<double> out(x.size(), 0.0);
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < y.size(); ++j) {
      const double o = x[i] * y[j];
      out[i] += o / (1.0 + std::exp(-o));
    }
  return out;
}

TEST_P(KernelReference, Fn1Function) {
  const Parsed &file = kernel_file("fn1");
  for (int64_t n : {16, 32}) {
    const std::string detail = "x[" + dims({n, n}) + "] y[" + std::to_string(n) + "]";
    SCOPED_TRACE(detail);
    Inputs in(1000 + n);
    std::vector<double> x = in.uniform(n * n, -0.5, 0.5), y = in.uniform(n, 0.5, 1.5);  // log needs y > 0
    if (auto r = call(file, "fn1", {{"x", tile(x, {n, n}, mode())}, {"y", tile(y, {n}, mode())}}, mode(), {{n, n}}))
      expect_close("fn1", detail, (*r)[0], fn1_reference(x, y, n, !f64()), mode());
  }
}

TEST_P(KernelReference, Fn2Function) {
  const Parsed &file = kernel_file("fn1");
  for (int64_t n : {8, 64}) {
    const std::string detail = "x[" + std::to_string(n) + "] y[" + std::to_string(n) + "]";
    SCOPED_TRACE(detail);
    Inputs in(1100 + n);
    std::vector<double> x = in.uniform(n, -2, 2), y = in.uniform(n, -2, 2);
    if (auto r = call(file, "fn2", {{"x", tile(x, {n}, mode())}, {"y", tile(y, {n}, mode())}}, mode(), {{n}}))
      expect_close("fn2", detail, (*r)[0], fn2_reference(x, y), mode());
  }
}

// fn1_kernel / fn2_kernel: the same functions on one BLOCK-sized tile loaded
// from memory (row-major, contiguous).
TEST_P(KernelReference, Fn1Kernels) {
  const Parsed &file = kernel_file("fn1");
  for (int64_t n : {16, 32}) {
    const std::string detail = "BLOCK=" + std::to_string(n);
    SCOPED_TRACE(detail);
    Inputs in(1200 + n);
    std::vector<double> x = in.uniform(n * n, -0.5, 0.5), y = in.uniform(n, 0.5, 1.5);
    Host h;
    size_t X = h.input("X", DType::FP32, x), Y = h.input("Y", DType::FP32, y), O = h.output("Out", DType::FP32, n * n);
    ASSERT_TRUE(run(file,
                    make_launch("fn1_kernel", {1, 1, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"Out", Buf(O)}, {"BLOCK", CInt(n)}}),
                    h, mode()));
    expect_close("fn1_kernel Out", detail, h.data(O), fn1_reference(x, y, n, !f64()), mode());
  }
  for (int64_t n : {16, 128}) {
    const std::string detail = "BLOCK=" + std::to_string(n);
    SCOPED_TRACE(detail);
    Inputs in(1300 + n);
    std::vector<double> x = in.uniform(n, -2, 2), y = in.uniform(n, -2, 2);
    Host h;
    size_t X = h.input("X", DType::FP32, x), Y = h.input("Y", DType::FP32, y), O = h.output("Out", DType::FP32, n);
    ASSERT_TRUE(run(file,
                    make_launch("fn2_kernel", {1, 1, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"Out", Buf(O)}, {"BLOCK", CInt(n)}}),
                    h, mode()));
    expect_close("fn2_kernel Out", detail, h.data(O), fn2_reference(x, y), mode());
  }
}

// ======================================================== mixed_module.py

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// _silu_scale_fwd_kernel: y = scale * x * sigmoid(x); EVEN_N (set by the
// launcher's heuristic when N % BLOCK_N == 0) drops the masks.
TEST_P(KernelReference, SiluScaleForward) {
  const Parsed &file = kernel_file("mixed_module");
  struct Case { int64_t n, block; bool even; double scale; DType t; };
  const Case cases[] = {
      {3024, 1024, false, 0.5, DType::FP32}, {4096, 1024, true, 0.5, DType::FP32},
      {4096, 1024, false, -2.0, DType::FP32}, {1000, 256, false, 1.0, DType::FP16},
      {1024, 256, true, 0.75, DType::FP16},
  };
  for (const Case &c : cases) {
    std::ostringstream ds;
    ds << "N=" << c.n << " BLOCK_N=" << c.block << " EVEN_N=" << c.even << " scale=" << c.scale
       << (c.t == DType::FP16 ? " fp16" : "");
    const std::string detail = ds.str();
    SCOPED_TRACE(detail);
    Inputs in(1400 + c.n);
    std::vector<double> x = in.uniform(c.n, -4, 4, c.t);
    Host h;
    size_t X = h.input("X", c.t, x), Y = h.output("Y", c.t, c.n);
    ASSERT_TRUE(run(file,
                    make_launch("_silu_scale_fwd_kernel", {cdiv(c.n, c.block), 1, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"N", Int(c.n)}, {"scale", Float(c.scale)},
                                 {"BLOCK_N", CInt(c.block)}, {"EVEN_N", CBool(c.even)}}),
                    h, mode()));
    std::vector<double> ref(c.n);
    for (int64_t i = 0; i < c.n; ++i) ref[i] = narrow(c.t, c.scale * x[i] * sigmoid(x[i]));
    if (c.t == DType::FP16)
      expect_close_narrow(DType::FP16, "_silu_scale_fwd_kernel Y (fp16)", detail, h.data(Y), ref, mode());
    else
      expect_close("_silu_scale_fwd_kernel Y", detail, h.data(Y), ref, mode());
  }
}

// _silu_scale_bwd_kernel: dx = dy * scale * (s + x s (1 - s)), s = sigmoid(x).
TEST_P(KernelReference, SiluScaleBackward) {
  const Parsed &file = kernel_file("mixed_module");
  struct Case { int64_t n, block; double scale; };
  for (Case c : {Case{3024, 1024, 0.5}, Case{2048, 1024, -1.25}, Case{5, 16, 3.0}}) {
    std::ostringstream ds;
    ds << "N=" << c.n << " BLOCK_N=" << c.block << " scale=" << c.scale;
    const std::string detail = ds.str();
    SCOPED_TRACE(detail);
    Inputs in(1500 + c.n);
    std::vector<double> x = in.uniform(c.n, -4, 4), dy = in.uniform(c.n, -1, 1);
    Host h;
    size_t X = h.input("X", DType::FP32, x), DY = h.input("DY", DType::FP32, dy), DX = h.output("DX", DType::FP32, c.n);
    ASSERT_TRUE(run(file,
                    make_launch("_silu_scale_bwd_kernel", {cdiv(c.n, c.block), 1, 1},
                                {{"X", Buf(X)}, {"DY", Buf(DY)}, {"DX", Buf(DX)}, {"N", Int(c.n)},
                                 {"scale", Float(c.scale)}, {"BLOCK_N", CInt(c.block)}}),
                    h, mode()));
    std::vector<double> ref(c.n);
    for (int64_t i = 0; i < c.n; ++i) {
      const double s = sigmoid(x[i]);
      ref[i] = dy[i] * c.scale * (s + x[i] * s * (1.0 - s));
    }
    expect_close("_silu_scale_bwd_kernel DX", detail, h.data(DX), ref, mode());
  }
}

// _l2_normalize_kernel: y[r, :] = x[r, :] / sqrt(sum(x[r, :]^2) + EPS), with
// EPS = 1e-6 the module-level tl.constexpr.
TEST_P(KernelReference, L2Normalize) {
  const Parsed &file = kernel_file("mixed_module");
  struct Case { int64_t rows, n, block, x_ld, y_ld; };
  for (Case c : {Case{17, 777, 128, 780, 777}, Case{4, 128, 128, 128, 130}, Case{3, 1, 128, 1, 1}}) {
    const std::string detail = dims({c.rows, c.n}) + " BLOCK=" + std::to_string(c.block);
    SCOPED_TRACE(detail);
    Inputs in(1600 + c.n);
    std::vector<double> x = in.uniform(c.rows * c.n, -1, 1);
    Host h;
    size_t X = h.input("X", DType::FP32, strided(x, c.rows, c.n, c.x_ld, NAN));
    size_t Y = h.output("Y", DType::FP32, c.rows * c.y_ld);
    ASSERT_TRUE(run(file,
                    make_launch("_l2_normalize_kernel", {c.rows, 1, 1},
                                {{"X", Buf(X)}, {"Y", Buf(Y)}, {"stride_x", Int(c.x_ld)}, {"stride_y", Int(c.y_ld)},
                                 {"n", Int(c.n)}, {"BLOCK_SIZE", CInt(c.block)}}),
                    h, mode()));
    std::vector<double> ref(c.rows * c.n);
    for (int64_t r = 0; r < c.rows; ++r) {
      double sq = 0;
      for (int64_t j = 0; j < c.n; ++j) sq += x[r * c.n + j] * x[r * c.n + j];
      for (int64_t j = 0; j < c.n; ++j) ref[r * c.n + j] = x[r * c.n + j] / std::sqrt(sq + 1e-6);
    }
    expect_close("_l2_normalize_kernel Y", detail, dense(h.data(Y), c.rows, c.n, c.y_ld), ref, mode());
    EXPECT_EQ(padding_written(h.data(Y), c.rows, c.n, c.y_ld), 0) << "stores outside the rows";
  }
}

// The pure helpers of mixed_module.py: _plain (x * sigmoid(x), made a jit
// function by `_plain_jit = triton.jit(_plain)`) and _fast_exp (exp(x); the
// file defines it twice under a module-level if/else, both computing exp).
TEST_P(KernelReference, MixedModuleFunctions) {
  const Parsed &file = kernel_file("mixed_module");
  const int64_t n = 64;
  Inputs in(1700);
  std::vector<double> x = in.uniform(n, -4, 4);
  std::vector<double> silu(n), ex(n);
  for (int64_t i = 0; i < n; ++i) {
    silu[i] = x[i] * sigmoid(x[i]);
    ex[i] = std::exp(x[i]);
  }
  const std::map<std::string, Value> args = {{"x", tile(x, {n}, mode())}};
  if (auto r = call(file, "_plain", args, mode(), {{n}})) expect_close("_plain", "x[64]", (*r)[0], silu, mode());
  if (auto r = call(file, "_fast_exp", args, mode(), {{n}})) expect_close("_fast_exp", "x[64]", (*r)[0], ex, mode());
}

// Kernels call the helper by its jit name `_plain_jit`; run_function finds
// it by that name too.
TEST_P(KernelReference, MixedModuleFunctionByJitName) {
  const Parsed &file = kernel_file("mixed_module");
  const int64_t n = 16;
  Inputs in(1800);
  std::vector<double> x = in.uniform(n, -4, 4), silu(n);
  for (int64_t i = 0; i < n; ++i) silu[i] = x[i] * sigmoid(x[i]);
  if (auto r = call(file, "_plain_jit", {{"x", tile(x, {n}, mode())}}, mode(), {{n}}))
    expect_close("_plain_jit", "x[16]", (*r)[0], silu, mode());
}

// ================================================================ coverage

// Every @triton.jit function of tests/kernels/*.py has a reference above: a
// kernel or function added there must get one here.
TEST(KernelReferenceCoverage, EveryJitFunctionIsTested) {
  const std::map<std::string, std::set<std::string>> tested = {
      {"attention", {"attn_fwd_kernel"}},
      {"fn1", {"fn1", "fn2", "fn1_kernel", "fn2_kernel"}},
      {"helper_call", {"_gelu", "_tanh", "_gelu_tanh", "_gelu_and_grad", "bias_gelu_kernel"}},
      {"layer_norm", {"layer_norm_fwd_kernel"}},
      {"matmul", {"matmul_kernel", "grouped_matmul_kernel", "tutorial_order_matmul_kernel", "leaky",
                  "leaky_matmul_kernel", "low_rank_kernel"}},
      {"misc_ops", {"misc_ops_kernel", "mode_select_kernel"}},
      {"mixed_module",
       {"_plain", "_fast_exp", "_silu_scale_fwd_kernel", "_silu_scale_bwd_kernel", "_l2_normalize_kernel"}},
      {"rms_norm", {"rms_norm_fwd_kernel"}},
      {"softmax", {"softmax_kernel"}},
      {"vector_add", {"add_kernel"}},
  };
  for (const auto &kv : tested) {
    const Parsed &file = kernel_file(kv.first);
    std::set<std::string> found;
    for (const auto &f : file.module->functions) found.insert(f->name);
    EXPECT_EQ(found, kv.second) << "tests/kernels/" << kv.first << ".py";
  }
}

// ===================================================== reference helpers

// The reference's own fp16 and tf32 rounding, on values with known answers.
TEST(ReferenceRounding, Fp16) {
  EXPECT_EQ(to_fp16(1.0), 1.0);
  EXPECT_EQ(to_fp16(1.0 / 3.0), 0.333251953125);
  EXPECT_EQ(to_fp16(1.0 + 0x1p-11), 1.0);                   // tie: to even
  EXPECT_EQ(to_fp16(1.0 + 3 * 0x1p-11), 1.0 + 0x1p-9);      // tie: to even (up)
  EXPECT_EQ(to_fp16(1.0 + 0x1p-11 + 0x1p-20), 1.0 + 0x1p-10);  // above the tie
  EXPECT_EQ(to_fp16(65504.0), 65504.0);
  EXPECT_EQ(to_fp16(65519.0), 65504.0);
  EXPECT_EQ(to_fp16(65520.0), INFINITY);
  EXPECT_EQ(to_fp16(-0x1p-24), -0x1p-24);                // smallest subnormal
  EXPECT_EQ(to_fp16(0x1p-25), 0.0);                      // tie to even zero
  EXPECT_EQ(to_fp16(0x1p-25 + 0x1p-30), 0x1p-24);
  EXPECT_EQ(to_fp16(3 * 0x1p-25), 2 * 0x1p-24);           // subnormal tie to even
  EXPECT_EQ(to_fp16(0x1p-14 - 0x1p-30), 0x1p-14);         // rounds up into the normals
  EXPECT_EQ(to_fp16(-777.0), -777.0);
  EXPECT_TRUE(std::isnan(to_fp16(NAN)));
}

TEST(ReferenceRounding, Bf16) {
  EXPECT_EQ(to_bf16(1.0 + 0x1p-8), 1.0);               // tie: to even
  EXPECT_EQ(to_bf16(1.0 + 3 * 0x1p-8), 1.0 + 0x1p-6);  // tie: to even (up)
  EXPECT_EQ(to_bf16(1.0 + 0x1p-8 + 0x1p-20), 1.0 + 0x1p-7);
  EXPECT_EQ(to_bf16(-3.0), -3.0);
}

TEST(ReferenceRounding, Tf32) {
  EXPECT_EQ(to_tf32(1.0 + 0x1p-10), 1.0 + 0x1p-10);
  EXPECT_EQ(to_tf32(1.0 + 0x1p-11), 1.0);                // tie: to even
  EXPECT_EQ(to_tf32(1.0 + 3 * 0x1p-11), 1.0 + 0x1p-9);   // tie: to even (up)
  EXPECT_EQ(to_tf32(1.0 + 0x1p-11 + 0x1p-20), 1.0 + 0x1p-10);
  EXPECT_EQ(to_tf32(0.75), 0.75);
}

}  // namespace
}  // namespace tgrad::testing
