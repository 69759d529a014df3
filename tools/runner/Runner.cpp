// tgrad-runner: launches a PTX kernel that `tgrad compile` wrote, on the GPU,
// through the CUDA driver API (DESIGN.md §4, "Runner").
//
//   tgrad-runner add.ptx --grid 98 --arg x_ptr=x.npy --arg y_ptr=fp32[98432]:uniform(-1,1)
//                --arg out_ptr=fp32[98432]:zeros --arg n_elements=98432 --out results/ [--bench 100]
//
// The sidecar (add.json, or --json) gives the entry's parameters in order
// with their types, the block size and the dynamic shared memory. Buffers
// come from .npy files (float32 files fill fp16 and bf16 buffers, rounded)
// or are DTYPE[d0,...] filled with zeros, ones or seeded uniform draws: the
// draws `tgrad run` makes for the same --arg (src/driver/LaunchSpec.cpp's
// fill_values: one generator per buffer, numbered in parameter order), so
// the same specs give the interpreter's inputs;
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

#include "tools/runner/Buffers.h"

namespace {

using tgrad::runner::Buffer;
using tgrad::runner::make_buffer;
using tgrad::runner::save;

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
  app.add_option("--seed", seed, "Seed of random buffers (the draws `tgrad run --seed` makes)");
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
      buffers.push_back(make_buffer(name, type.substr(1), it->second, seed, buffers.size()));
      Buffer &b = buffers.back();
      check(cuMemAlloc(&b.device, std::max<size_t>(b.host.size(), 1)), "cuMemAlloc");
      check(cuMemcpyHtoD(b.device, b.host.data(), b.host.size()), "cuMemcpyHtoD");
      params.push_back(&b.device);
    } else {
      std::vector<unsigned char> bytes(8);
      const std::string &v = it->second;
      if (type == "i32") {
        int32_t x = static_cast<int32_t>(std::stoll(v));
        std::memcpy(bytes.data(), &x, 4);
      } else if (type == "i64") {
        int64_t x = std::stoll(v);
        std::memcpy(bytes.data(), &x, 8);
      } else if (type == "fp32") {
        float x = std::stof(v);
        std::memcpy(bytes.data(), &x, 4);
      } else if (type == "fp64") {
        double x = std::stod(v);
        std::memcpy(bytes.data(), &x, 8);
      } else
        die("scalars of type '" + type + "' are not supported by the runner");
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
    std::printf("{\"kernel\": \"%s\", \"launches\": %d, \"median_ms\": %.6f, \"min_ms\": %.6f}\n", kernel.c_str(),
                bench, ms[ms.size() / 2], ms[0]);
  }
  for (Buffer &b : buffers) cuMemFree(b.device);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}
