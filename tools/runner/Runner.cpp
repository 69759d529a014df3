// tgrad-runner: launches a PTX kernel that `tgrad compile` wrote, on the GPU,
// through the CUDA driver API (DESIGN.md §4, "Runner").
//
//   tgrad-runner add.ptx --grid 98 --arg x_ptr=x.npy --arg y_ptr=fp32[98432]:uniform(-1,1)
//                --arg out_ptr=fp32[98432]:zeros --arg n_elements=98432 --out results/ [--bench 100]
//
// The sidecar (add.json, or --json) gives the entry's parameters in order
// with their types, the block size and the dynamic shared memory. Buffers
// come from .npy files (float32 files fill fp16 and bf16 buffers, rounded)
// or are DTYPE[d0,...] filled with zeros, ones or seeded uniform draws;
// scalars are numbers. --out writes every buffer after the run as NAME.npy
// (bf16 as float32, which NumPy reads). --bench N takes N samples with CUDA
// events, each of --batch B launches back to back (default 1; a batch keeps
// the GPU busy while the host launches the next), and prints the median and
// the minimum time of one launch.
//
// Built on the build machine against the toolkit's stub libcuda.so; the
// GPU machine's driver provides the real one (libcuda.so.1).
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/runner/Npy.h"

namespace {

using tgrad::runner::NpyArray;

[[noreturn]] void die(const std::string &message) {
  std::cerr << "tgrad-runner: error: " << message << '\n';
  std::exit(1);
}

void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  die(std::string(what) + ": " + (name ? name : "?") + " (" + (text ? text : "") + ")");
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
      {"fp32", {4, "<f4"}}, {"fp16", {2, "<f2"}}, {"bf16", {2, "<f4"}}, {"fp64", {8, "<f8"}},
      {"i32", {4, "<i4"}},  {"i64", {8, "<i8"}},  {"i16", {2, "<i2"}},  {"i8", {1, "|i1"}},
      {"u8", {1, "|u1"}},   {"u16", {2, "<u2"}},  {"u32", {4, "<u4"}},  {"u64", {8, "<u8"}},
      {"i1", {1, "|b1"}}};
  auto it = info.find(t);
  if (it == info.end()) die("buffers of type '" + t + "' are not supported by the runner");
  return it->second;
}

// One element stored from a double.
void put(std::vector<unsigned char> &data, int64_t k, const std::string &t, double v) {
  unsigned char *p = data.data() + k * elem_info(t).bytes;
  auto store = [&](auto x) { std::memcpy(p, &x, sizeof x); };
  if (t == "fp32") store(static_cast<float>(v));
  else if (t == "fp64") store(v);
  else if (t == "fp16") store(to_fp16(static_cast<float>(v)));
  else if (t == "bf16") store(to_bf16(static_cast<float>(v)));
  else if (t == "i32") store(static_cast<int32_t>(v));
  else if (t == "i64") store(static_cast<int64_t>(v));
  else if (t == "i16") store(static_cast<int16_t>(v));
  else if (t == "i8") store(static_cast<int8_t>(v));
  else if (t == "u8" || t == "i1") store(static_cast<uint8_t>(v));
  else if (t == "u16") store(static_cast<uint16_t>(v));
  else if (t == "u32") store(static_cast<uint32_t>(v));
  else store(static_cast<uint64_t>(v));
}

struct Buffer {
  std::string name, type;  // type without '*'
  std::vector<int64_t> shape;
  std::vector<unsigned char> host;
  CUdeviceptr device = 0;
};

// DTYPE[d0,...][:zeros|:ones|:uniform(a,b)]
Buffer make_buffer(const std::string &name, const std::string &type, const std::string &spec, uint64_t seed) {
  Buffer b{name, type, {}, {}, 0};
  if (spec.size() > 4 && spec.substr(spec.size() - 4) == ".npy") {
    NpyArray a;
    std::string error;
    if (!tgrad::runner::read_npy(spec, a, error)) die(error);
    b.shape = a.shape;
    const int64_t n = a.numel();
    const ElemInfo e = elem_info(type);
    if (a.descr == e.descr && type != "bf16") {
      b.host = a.data;
    } else if (a.descr == "<f4" || a.descr == "<f8") {
      b.host.resize(static_cast<size_t>(n * e.bytes));
      for (int64_t k = 0; k < n; ++k) {
        double v;
        if (a.descr == "<f4") {
          float f;
          std::memcpy(&f, a.data.data() + k * 4, 4);
          v = f;
        } else {
          std::memcpy(&v, a.data.data() + k * 8, 8);
        }
        put(b.host, k, type, v);
      }
    } else {
      die(name + ": '" + spec + "' holds " + a.descr + ", not what a *" + type + " buffer takes");
    }
    return b;
  }
  const size_t open = spec.find('['), close = spec.find(']');
  if (open == std::string::npos || close == std::string::npos) die(name + ": '" + spec + "' is neither a .npy file nor DTYPE[shape]");
  if (spec.substr(0, open) != type) die(name + ": the kernel takes *" + type + ", not " + spec.substr(0, open));
  std::stringstream dims(spec.substr(open + 1, close - open - 1));
  std::string d;
  int64_t n = 1;
  while (std::getline(dims, d, ',')) {
    b.shape.push_back(std::stoll(d));
    n *= b.shape.back();
  }
  std::string fill = close + 1 < spec.size() ? spec.substr(close + 2) : "uniform(-1,1)";
  double lo = -1, hi = 1;
  if (fill == "zeros") lo = hi = 0;
  else if (fill == "ones") lo = hi = 1;
  else if (std::sscanf(fill.c_str(), "uniform(%lf,%lf)", &lo, &hi) != 2) die(name + ": unknown fill '" + fill + "'");
  b.host.resize(static_cast<size_t>(n * elem_info(type).bytes));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t k = 0; k < n; ++k) put(b.host, k, type, lo == hi ? lo : u(rng));
  return b;
}

void save(const Buffer &b, const std::string &dir) {
  NpyArray a;
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
  if (!tgrad::runner::write_npy(dir + "/" + b.name + ".npy", a, error)) die(error);
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"tgrad-runner: launch a kernel compiled by `tgrad compile` (PTX + JSON sidecar) on the GPU"};
  std::string ptx_path, json_path, grid_text = "1", out_dir;
  std::vector<std::string> args;
  uint64_t seed = 0;
  int bench = 0, warmup = 3, batch = 1;
  app.add_option("PTX", ptx_path, "The PTX file")->required();
  app.add_option("--json", json_path, "The sidecar (default: the PTX's path with .json)");
  app.add_option("--grid", grid_text, "Launch grid X[,Y[,Z]]");
  app.add_option("--arg", args, "NAME=SPEC: a .npy file, DTYPE[d0,...][:zeros|:ones|:uniform(a,b)], or a number");
  app.add_option("--seed", seed, "Seed of random buffers (each buffer draws from seed + its index)");
  app.add_option("--out", out_dir, "Write every buffer after the first launch as NAME.npy here");
  app.add_option("--bench", bench, "Time this many launches more (CUDA events): median and minimum");
  app.add_option("--warmup", warmup, "Untimed launches before --bench ones (default 3)");
  app.add_option("--batch", batch, "Launches per timed sample of --bench (default 1)");
  CLI11_PARSE(app, argc, argv);
  if (json_path.empty()) json_path = ptx_path.substr(0, ptx_path.rfind('.')) + ".json";

  std::ifstream ptx_file(ptx_path), json_file(json_path);
  if (!ptx_file) die("cannot open '" + ptx_path + "'");
  if (!json_file) die("cannot open '" + json_path + "'");
  const std::string ptx((std::istreambuf_iterator<char>(ptx_file)), std::istreambuf_iterator<char>());
  const nlohmann::json meta = nlohmann::json::parse(json_file);
  unsigned grid[3] = {1, 1, 1};
  {
    std::stringstream g(grid_text);
    std::string d;
    for (int k = 0; k < 3 && std::getline(g, d, ','); ++k) grid[k] = static_cast<unsigned>(std::stoul(d));
  }
  std::map<std::string, std::string> given;
  for (const std::string &a : args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos) die("--arg " + a + ": NAME=SPEC");
    given[a.substr(0, eq)] = a.substr(eq + 1);
  }

  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUmodule module;
  check(cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData");
  CUfunction fn;
  const std::string kernel = meta.at("kernel");
  check(cuModuleGetFunction(&fn, module, kernel.c_str()), "cuModuleGetFunction");
  const unsigned shared = meta.at("shared_bytes").get<unsigned>();
  if (shared > 48 * 1024)
    check(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared)),
          "cuFuncSetAttribute");

  std::vector<Buffer> buffers;
  std::vector<std::vector<unsigned char>> scalars;
  std::vector<void *> params;
  buffers.reserve(meta.at("params").size());
  scalars.reserve(meta.at("params").size());
  for (const auto &p : meta.at("params")) {
    const std::string name = p.at("name"), type = p.at("type");
    auto it = given.find(name);
    if (it == given.end()) die("no --arg " + name + "=... (the kernel takes " + type + ")");
    if (type[0] == '*') {
      buffers.push_back(make_buffer(name, type.substr(1), it->second, seed + buffers.size()));
      Buffer &b = buffers.back();
      check(cuMemAlloc(&b.device, std::max<size_t>(b.host.size(), 1)), "cuMemAlloc");
      check(cuMemcpyHtoD(b.device, b.host.data(), b.host.size()), "cuMemcpyHtoD");
      params.push_back(&b.device);
    } else {
      std::vector<unsigned char> bytes(8);
      const std::string &v = it->second;
      if (type == "i32") { int32_t x = static_cast<int32_t>(std::stoll(v)); std::memcpy(bytes.data(), &x, 4); }
      else if (type == "i64") { int64_t x = std::stoll(v); std::memcpy(bytes.data(), &x, 8); }
      else if (type == "fp32") { float x = std::stof(v); std::memcpy(bytes.data(), &x, 4); }
      else if (type == "fp64") { double x = std::stod(v); std::memcpy(bytes.data(), &x, 8); }
      else die("scalars of type '" + type + "' are not supported by the runner");
      scalars.push_back(bytes);
      params.push_back(scalars.back().data());
    }
    given.erase(it);
  }
  if (!given.empty()) die("'" + kernel + "' has no parameter '" + given.begin()->first + "'");

  const unsigned threads = meta.at("threads_per_cta").get<unsigned>();
  auto launch = [&] {
    check(cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, shared, nullptr, params.data(), nullptr),
          "cuLaunchKernel");
  };
  launch();
  check(cuCtxSynchronize(), "the kernel");
  for (Buffer &b : buffers) check(cuMemcpyDtoH(b.host.data(), b.device, b.host.size()), "cuMemcpyDtoH");
  if (!out_dir.empty())
    for (const Buffer &b : buffers) save(b, out_dir);
  if (bench > 0) {
    for (int k = 0; k < warmup; ++k) launch();
    CUevent start, stop;
    check(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<float> ms;
    for (int k = 0; k < bench; ++k) {
      check(cuEventRecord(start, nullptr), "cuEventRecord");
      for (int b = 0; b < batch; ++b) launch();
      check(cuEventRecord(stop, nullptr), "cuEventRecord");
      check(cuEventSynchronize(stop), "the kernel");
      float t = 0;
      check(cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
      ms.push_back(t / static_cast<float>(std::max(batch, 1)));
    }
    std::sort(ms.begin(), ms.end());
    std::printf("{\"kernel\": \"%s\", \"launches\": %d, \"median_ms\": %.6f, \"min_ms\": %.6f}\n", kernel.c_str(), bench,
                ms[ms.size() / 2], ms[0]);
  }
  for (Buffer &b : buffers) cuMemFree(b.device);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}
