// The runner's host buffers: filled from .npy files or from the seeded draws
// `tgrad run` makes for the same spec, and written back as .npy. No CUDA
// here, so that the fills are tested on the build machine
// (tests/codegen/RunnerBuffersTest.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tgrad::runner {

struct Buffer {
  std::string name, type;  // type: the sidecar's, without '*' ("fp32", "i64")
  std::vector<int64_t> shape;
  std::vector<unsigned char> host;
  unsigned long long device = 0;  // a CUdeviceptr (its type in cuda.h)
};

// A buffer for parameter `name` of type `type` from `spec`: a .npy file, or
// DTYPE[d0,...][:zeros|:ones|:uniform(a,b)] (default uniform(-1,1)) drawn as
// `tgrad run --seed seed` draws its `stream`-th buffer. Exits with a message
// on a spec that does not fit.
Buffer make_buffer(const std::string &name, const std::string &type, const std::string &spec, uint64_t seed,
                   uint64_t stream);
// Element k of a buffer as a double.
double element(const Buffer &b, int64_t k);
// DIR/NAME.npy (bf16 as float32).
void save(const Buffer &b, const std::string &dir);

}  // namespace tgrad::runner
