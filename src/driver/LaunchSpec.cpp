#include "src/driver/LaunchSpec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "src/driver/Npy.h"

namespace tgrad::driver {

using interp::Value;
using sema::DType;

namespace {

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parse_int(const std::string &s, long long &out) {
  if (s.empty()) return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (errno || *end != '\0') return false;
  out = v;
  return true;
}

bool parse_double(const std::string &s, double &out) {
  if (s.empty()) return false;
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || *end != '\0') return false;
  out = v;
  return true;
}

bool valid_name(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// Splits "NAME=VALUE"; sets error mentioning `flag` if malformed.
bool split_assignment(const std::string &text, const std::string &flag, std::string &name, std::string &value,
                      std::string &error) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    error = flag + " " + text + ": expected NAME=VALUE";
    return false;
  }
  name = trim(text.substr(0, eq));
  value = trim(text.substr(eq + 1));
  if (!valid_name(name)) {
    error = flag + " " + text + ": '" + name + "' is not a valid parameter name";
    return false;
  }
  if (value.empty()) {
    error = flag + " " + text + ": missing value for '" + name + "'";
    return false;
  }
  return true;
}

const char *kDtypeList = "fp16, bf16, fp32, fp64, int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64";

}  // namespace

std::optional<std::pair<std::string, Value>> parse_define(const std::string &text, std::string &error) {
  std::string name, v;
  if (!split_assignment(text, "-D", name, v, error)) return std::nullopt;
  long long n;
  double x;
  if (parse_int(v, n)) return std::make_pair(name, Value::of_int(n));
  if (parse_double(v, x)) return std::make_pair(name, Value::of_float(x));
  if (v == "True" || v == "False") return std::make_pair(name, Value::of_bool(v == "True"));
  if (v == "None") return std::make_pair(name, Value::none());
  if (std::optional<DType> d = sema::parse_dtype(v)) return std::make_pair(name, Value::of_dtype(*d));
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
    return std::make_pair(name, Value::of_str(v.substr(1, v.size() - 2)));
  error = "-D " + text + ": '" + v +
          "' is not a value tgrad understands (an integer, a float, True, False, None, a dtype such as tl.float16, "
          "or a quoted string)";
  return std::nullopt;
}

std::optional<std::pair<std::string, ArgSpec>> parse_arg(const std::string &text, std::string &error) {
  std::string name, v;
  if (!split_assignment(text, "--arg", name, v, error)) return std::nullopt;
  ArgSpec spec;
  if (v == "None") {
    spec.kind = ArgSpec::Kind::None;
    return std::make_pair(name, spec);
  }
  if (parse_int(v, spec.n)) {
    spec.kind = ArgSpec::Kind::Int;
    return std::make_pair(name, spec);
  }
  if (parse_double(v, spec.x)) {
    spec.kind = ArgSpec::Kind::Float;
    return std::make_pair(name, spec);
  }
  auto fail = [&](const std::string &why) -> std::optional<std::pair<std::string, ArgSpec>> {
    error = "--arg " + text + ": " + why;
    return std::nullopt;
  };
  size_t open = v.find('['), close = v.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return fail("expected a number, None or a buffer DTYPE[d0,d1,...] (for example fp32[1024])");
  std::string dtype = trim(v.substr(0, open));
  std::optional<DType> d = sema::parse_dtype(dtype);
  if (!d) return fail("unknown dtype '" + dtype + "' (use one of " + kDtypeList + ")");
  spec.kind = ArgSpec::Kind::Buffer;
  spec.buffer.dtype = *d;
  std::string dims = v.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start <= dims.size()) {
    size_t comma = dims.find(',', start);
    std::string part = trim(dims.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    long long n;
    if (!parse_int(part, n) || n <= 0) return fail("buffer dimensions must be positive integers, got '" + part + "'");
    spec.buffer.shape.push_back(n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (interp::numel(spec.buffer.shape) > (int64_t{1} << 32)) return fail("buffer too large for the interpreter");
  std::string rest = trim(v.substr(close + 1));
  if (rest.empty()) return std::make_pair(name, spec);
  if (rest[0] != ':') return fail("unexpected '" + rest + "' after the shape (a fill starts with ':')");
  std::string fill = trim(rest.substr(1));
  if (fill == "zeros") {
    spec.buffer.fill = BufferSpec::Fill::Zeros;
  } else if (fill == "ones") {
    spec.buffer.fill = BufferSpec::Fill::Ones;
  } else if (fill.rfind("uniform(", 0) == 0 && fill.back() == ')') {
    std::string inner = fill.substr(8, fill.size() - 9);
    size_t comma = inner.find(',');
    if (comma == std::string::npos || !parse_double(trim(inner.substr(0, comma)), spec.buffer.low) ||
        !parse_double(trim(inner.substr(comma + 1)), spec.buffer.high) || !(spec.buffer.low < spec.buffer.high))
      return fail("uniform(A,B) needs two numbers with A < B");
  } else if (fill.rfind("npy(", 0) == 0 && fill.back() == ')') {
    const std::string path = fill.substr(4, fill.size() - 5);
    NpyArray a;
    std::string why;
    if (!read_npy(path, a, why) || !npy_values(a, spec.buffer.values, why)) return fail(why);
    if (a.shape != spec.buffer.shape) return fail("'" + path + "' holds an array of another shape");
    if (sema::is_float(spec.buffer.dtype) != (a.descr.size() > 1 && a.descr[1] == 'f'))
      return fail("'" + path + "' holds " + a.descr + " elements, not " + dtype + " ones");
    spec.buffer.fill = BufferSpec::Fill::Npy;
  } else {
    return fail("unknown fill '" + fill + "' (use uniform(A,B), zeros, ones or npy(PATH))");
  }
  return std::make_pair(name, spec);
}

std::optional<std::array<int64_t, 3>> parse_grid(const std::string &text, std::string &error) {
  std::array<int64_t, 3> grid{1, 1, 1};
  size_t start = 0;
  for (int d = 0; d < 3; ++d) {
    size_t comma = text.find(',', start);
    std::string part = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    long long n;
    if (!parse_int(part, n) || n < 1) {
      error = "--grid " + text + ": each dimension must be a positive integer";
      return std::nullopt;
    }
    grid[d] = n;
    if (comma == std::string::npos) return grid;
    start = comma + 1;
  }
  error = "--grid " + text + ": at most three dimensions (X,Y,Z)";
  return std::nullopt;
}

std::optional<std::pair<std::string, sema::SType>> parse_param_type(const std::string &text, std::string &error) {
  std::string name, v;
  if (!split_assignment(text, "--arg", name, v, error)) return std::nullopt;
  auto fail = [&](const std::string &why) -> std::optional<std::pair<std::string, sema::SType>> {
    error = "--arg " + text + ": " + why;
    return std::nullopt;
  };
  bool pointer = !v.empty() && v[0] == '*';
  std::string body = pointer ? trim(v.substr(1)) : v;
  size_t open = body.find('[');
  std::string dtype_name = trim(body.substr(0, open));
  // Triton's signature spellings i32/u8 as well as int32/uint8.
  if (dtype_name.size() > 1 && (dtype_name[0] == 'i' || dtype_name[0] == 'u') && std::isdigit(static_cast<unsigned char>(dtype_name[1])))
    dtype_name = (dtype_name[0] == 'i' ? "int" : "uint") + dtype_name.substr(1);
  std::optional<DType> d = sema::parse_dtype(dtype_name);
  if (!d) return fail("unknown dtype '" + dtype_name + "' (use one of " + kDtypeList + ", with * for a pointer)");
  sema::SymShape shape;
  if (open != std::string::npos) {
    if (pointer) return fail("a pointer argument has no shape (write *" + dtype_name + ")");
    size_t close = body.find(']', open);
    if (close == std::string::npos || trim(body.substr(close + 1)) != "") return fail("expected DTYPE[d0, d1, ...]");
    std::string dims = body.substr(open + 1, close - open - 1);
    size_t start = 0;
    while (true) {
      size_t comma = dims.find(',', start);
      std::string part = trim(dims.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      long long n;
      if (parse_int(part, n)) {
        if (n <= 0 || (n & (n - 1)) != 0) return fail("tile dimensions must be powers of 2, got " + part);
        shape.push_back(sema::Dim::known(n));
      } else if (valid_name(part)) {
        shape.push_back(sema::Dim::symbolic(part));
      } else {
        return fail("a dimension must be a power of 2 or a name, got '" + part + "'");
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return std::make_pair(name, sema::SType::tensor(sema::ElemType{*d, pointer}, shape));
}

std::vector<double> fill_values(const BufferSpec &spec, uint64_t seed, uint64_t stream) {
  if (spec.fill == BufferSpec::Fill::Npy) return spec.values;
  const int64_t n = interp::numel(spec.shape);
  std::vector<double> out(n);
  if (spec.fill == BufferSpec::Fill::Zeros || spec.fill == BufferSpec::Fill::Ones) {
    std::fill(out.begin(), out.end(), spec.fill == BufferSpec::Fill::Ones ? 1.0 : 0.0);
    return out;
  }
  // One generator per argument, so adding an argument does not change the
  // values of the others.
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + stream);
  if (sema::is_float(spec.dtype)) {
    std::uniform_real_distribution<double> dist(spec.low, spec.high);
    for (double &v : out) v = dist(rng);
  } else {
    // Integers: uniform over [ceil(A), ceil(B)).
    long long lo = static_cast<long long>(std::ceil(spec.low)), hi = static_cast<long long>(std::ceil(spec.high)) - 1;
    if (hi < lo) hi = lo;
    std::uniform_int_distribution<long long> dist(lo, hi);
    for (double &v : out) v = static_cast<double>(dist(rng));
  }
  return out;
}

bool write_npy(const std::string &path, DType dtype, const interp::Shape &shape, const std::vector<double> &values,
               std::string &error) {
  std::string descr;
  size_t width;
  switch (dtype) {
    case DType::FP16: descr = "<f2"; width = 2; break;
    case DType::BF16:  // (numpy has no bf16 or fp8: their values, exactly, as float32)
    case DType::FP8E4B15:
    case DType::FP8E4NV:
    case DType::FP8E4B8:
    case DType::FP8E5:
    case DType::FP8E5B16:
    case DType::FP32: descr = "<f4"; width = 4; break;
    case DType::FP64: descr = "<f8"; width = 8; break;
    case DType::Int1: descr = "|b1"; width = 1; break;
    case DType::Int8: descr = "|i1"; width = 1; break;
    case DType::UInt8: descr = "|u1"; width = 1; break;
    case DType::Int16: descr = "<i2"; width = 2; break;
    case DType::UInt16: descr = "<u2"; width = 2; break;
    case DType::Int32: descr = "<i4"; width = 4; break;
    case DType::UInt32: descr = "<u4"; width = 4; break;
    case DType::Int64: descr = "<i8"; width = 8; break;
    case DType::UInt64: descr = "<u8"; width = 8; break;
  }
  NpyArray a;
  a.descr = descr;
  a.shape.assign(shape.begin(), shape.end());
  a.data.reserve(values.size() * width);
  for (double v : values) {
    unsigned char bytes[8] = {0};
    if (dtype == DType::FP16) {
      // Values are already fp16-exact; encode the half bits.
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint32_t sign = (u >> 16) & 0x8000u;
      int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
      uint32_t mant = u & 0x7FFFFFu;
      uint16_t h;
      if (std::isnan(f)) h = 0x7E00;
      else if (std::isinf(f) || exp >= 31) h = static_cast<uint16_t>(sign | 0x7C00);
      else if (exp <= 0) h = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::ldexp(std::fabs(f), 24)));
      else h = static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13));
      bytes[0] = h & 0xFF;
      bytes[1] = h >> 8;
    } else if (descr == "<f4") {
      float f = static_cast<float>(v);
      std::memcpy(bytes, &f, 4);
    } else if (descr == "<f8") {
      std::memcpy(bytes, &v, 8);
    } else {
      int64_t i = static_cast<int64_t>(v);
      std::memcpy(bytes, &i, 8);  // little-endian host: low bytes first
    }
    a.data.insert(a.data.end(), bytes, bytes + width);
  }
  return driver::write_npy(path, a, error);
}

sema::SType stype_of(const interp::Value &v) {
  switch (v.kind) {
    case interp::Value::Kind::Int: return sema::SType::of_int(v.n);
    case interp::Value::Kind::Float: return sema::SType::of_float(v.x);
    case interp::Value::Kind::Bool: return sema::SType::of_bool(v.b);
    case interp::Value::Kind::Str: return sema::SType::of_str(v.s);
    case interp::Value::Kind::DType: return sema::SType::of_dtype(v.dtype);
    default: return sema::SType::none();
  }
}

}  // namespace tgrad::driver
