// Host buffers of the runner: .npy in and out, seeded fills (Buffers.h).
#include "tools/runner/Buffers.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "src/driver/Npy.h"

namespace tgrad::runner {

namespace {

[[noreturn]] void die(const std::string &message) {
  std::cerr << "tgrad-runner: error: " << message << '\n';
  std::exit(1);
}

// fp32 -> bf16 / fp16 bits, rounding to nearest even; and back.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {  // a subnormal half, or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    const uint32_t m = mant | 0x800000, shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // a carry rounds into the exponent
  return static_cast<uint16_t>(sign | half);
}

// A buffer's element type: its sidecar type without the '*'.
struct ElemInfo {
  int64_t bytes;
  const char *descr;  // .npy descr of the file the buffer is written as
};
ElemInfo elem_info(const std::string &t) {
  static const std::map<std::string, ElemInfo> info = {
      {"fp32", {4, "<f4"}}, {"fp16", {2, "<f2"}}, {"bf16", {2, "<f4"}}, {"fp64", {8, "<f8"}}, {"i32", {4, "<i4"}},
      {"i64", {8, "<i8"}},  {"i16", {2, "<i2"}},  {"i8", {1, "|i1"}},   {"u8", {1, "|u1"}},   {"u16", {2, "<u2"}},
      {"u32", {4, "<u4"}},  {"u64", {8, "<u8"}},  {"i1", {1, "|b1"}}};
  auto it = info.find(t);
  if (it == info.end()) die("buffers of type '" + t + "' are not supported by the runner");
  return it->second;
}

// How an element of type `t` is stored from a double, looked up once per
// buffer (looked up per element, it took 0.6 s of filling a 4096x4096 fp16
// buffer with zeros, 0.07 s now).
using Put = void (*)(unsigned char *, double);
template <typename T>
void put_as(unsigned char *p, double v) {
  const T x = static_cast<T>(v);
  std::memcpy(p, &x, sizeof x);
}
Put put_of(const std::string &t) {
  if (t == "fp32") return put_as<float>;
  if (t == "fp64") return put_as<double>;
  if (t == "fp16") return [](unsigned char *p, double v) { put_as<uint16_t>(p, to_fp16(static_cast<float>(v))); };
  if (t == "bf16") return [](unsigned char *p, double v) { put_as<uint16_t>(p, to_bf16(static_cast<float>(v))); };
  if (t == "i32") return put_as<int32_t>;
  if (t == "i64") return put_as<int64_t>;
  if (t == "i16") return put_as<int16_t>;
  if (t == "i8") return put_as<int8_t>;
  if (t == "u8" || t == "i1") return put_as<uint8_t>;
  if (t == "u16") return put_as<uint16_t>;
  if (t == "u32") return put_as<uint32_t>;
  return put_as<uint64_t>;
}

// `tgrad run`'s dtype names ("int32") as the sidecar's ("i32").
std::string sidecar_dtype(const std::string &d) {
  static const std::map<std::string, std::string> names = {{"int1", "i1"},    {"int8", "i8"},    {"int16", "i16"},
                                                           {"int32", "i32"},  {"int64", "i64"},  {"uint8", "u8"},
                                                           {"uint16", "u16"}, {"uint32", "u32"}, {"uint64", "u64"}};
  auto it = names.find(d);
  return it == names.end() ? d : it->second;
}

}  // namespace

Buffer make_buffer(const std::string &name, const std::string &type, const std::string &spec, uint64_t seed,
                   uint64_t stream) {
  Buffer b{name, type, {}, {}, 0};
  if (spec.size() > 4 && spec.substr(spec.size() - 4) == ".npy") {
    driver::NpyArray a;
    std::string error;
    if (!driver::read_npy(spec, a, error)) die(error);
    b.shape = a.shape;
    const int64_t n = a.numel();
    const ElemInfo e = elem_info(type);
    if (a.descr == e.descr && type != "bf16") {
      b.host = a.data;
    } else if (a.descr == "<f4" || a.descr == "<f8") {
      b.host.resize(static_cast<size_t>(n * e.bytes));
      const Put put = put_of(type);
      for (int64_t k = 0; k < n; ++k) {
        double v;
        if (a.descr == "<f4") {
          float f;
          std::memcpy(&f, a.data.data() + k * 4, 4);
          v = f;
        } else {
          std::memcpy(&v, a.data.data() + k * 8, 8);
        }
        put(b.host.data() + k * e.bytes, v);
      }
    } else {
      die(name + ": '" + spec + "' holds " + a.descr + ", not what a *" + type + " buffer takes");
    }
    return b;
  }
  const size_t open = spec.find('['), close = spec.find(']');
  if (open == std::string::npos || close == std::string::npos)
    die(name + ": '" + spec + "' is neither a .npy file nor DTYPE[shape]");
  if (sidecar_dtype(spec.substr(0, open)) != type)
    die(name + ": the kernel takes *" + type + ", not " + spec.substr(0, open));
  std::stringstream dims(spec.substr(open + 1, close - open - 1));
  std::string d;
  int64_t n = 1;
  while (std::getline(dims, d, ',')) {
    b.shape.push_back(std::stoll(d));
    n *= b.shape.back();
  }
  std::string fill = close + 1 < spec.size() ? spec.substr(close + 2) : "uniform(-1,1)";
  double lo = -1, hi = 1;
  if (fill == "zeros")
    lo = hi = 0;
  else if (fill == "ones")
    lo = hi = 1;
  else if (std::sscanf(fill.c_str(), "uniform(%lf,%lf)", &lo, &hi) != 2)
    die(name + ": unknown fill '" + fill + "'");
  const int64_t width = elem_info(type).bytes;
  const Put put = put_of(type);
  b.host.resize(static_cast<size_t>(n * width));
  if (lo == hi) {
    for (int64_t k = 0; k < n; ++k) put(b.host.data() + k * width, lo);
    return b;
  }
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + stream);
  if (type == "fp32" || type == "fp16" || type == "bf16" || type == "fp64") {
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t k = 0; k < n; ++k) put(b.host.data() + k * width, u(rng));
  } else {  // integers: uniform over [ceil(A), ceil(B))
    const long long ilo = static_cast<long long>(std::ceil(lo));
    const long long ihi = std::max(ilo, static_cast<long long>(std::ceil(hi)) - 1);
    std::uniform_int_distribution<long long> u(ilo, ihi);
    for (int64_t k = 0; k < n; ++k) put(b.host.data() + k * width, static_cast<double>(u(rng)));
  }
  return b;
}

void save(const Buffer &b, const std::string &dir) {
  driver::NpyArray a;
  a.shape = b.shape;
  a.descr = elem_info(b.type).descr;
  if (b.type == "bf16") {
    const int64_t n = static_cast<int64_t>(b.host.size() / 2);
    a.data.resize(static_cast<size_t>(n * 4));
    for (int64_t k = 0; k < n; ++k) {
      uint16_t h;
      std::memcpy(&h, b.host.data() + k * 2, 2);
      float f = from_bf16(h);
      std::memcpy(a.data.data() + k * 4, &f, 4);
    }
  } else {
    a.data = b.host;
  }
  std::string error;
  if (!driver::write_npy(dir + "/" + b.name + ".npy", a, error)) die(error);
}

double element(const Buffer &b, int64_t k) {
  const unsigned char *p = b.host.data() + k * elem_info(b.type).bytes;
  auto get = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<double>(x);
  };
  const std::string &t = b.type;
  if (t == "fp32") return get(float{});
  if (t == "fp64") return get(double{});
  if (t == "bf16") {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return from_bf16(h);
  }
  if (t == "fp16") {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1 : 1;
    if (exp == 0) return sign * std::ldexp(mant, -24);
    if (exp == 31) return mant ? NAN : sign * INFINITY;
    return sign * std::ldexp(mant + 1024, exp - 25);
  }
  if (t == "i32") return get(int32_t{});
  if (t == "i64") return get(int64_t{});
  if (t == "i16") return get(int16_t{});
  if (t == "i8") return get(int8_t{});
  if (t == "u16") return get(uint16_t{});
  if (t == "u32") return get(uint32_t{});
  if (t == "u64") return get(uint64_t{});
  return get(uint8_t{});
}

}  // namespace tgrad::runner
