// Turning command-line launch specifications into interpreter inputs:
//   -D NAME=VALUE     a tl.constexpr value: 128, 0.5, True, None, tl.float16, 'relu'
//   --arg NAME=SPEC   a scalar (1024, 0.5) or a buffer DTYPE[d0,d1,...] with an
//                     optional fill: ':uniform(A,B)' (default uniform(-1,1)),
//                     ':zeros', ':ones', ':npy(PATH)' (a .npy file's elements,
//                     of that shape, rounded to DTYPE)
//   --grid X[,Y[,Z]]
// Every malformed piece is an error that names the argument it is about.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tgrad/interp/Interpreter.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::driver {

struct BufferSpec {
  sema::DType dtype = sema::DType::FP32;
  interp::Shape shape;
  enum class Fill { Uniform, Zeros, Ones, Npy } fill = Fill::Uniform;
  double low = -1.0, high = 1.0;
  std::vector<double> values = {};  // Fill::Npy: the file's elements, read with the spec
};

struct ArgSpec {
  // None: a pointer the caller passes as None (Triton specializes on it; `if W is None:` in the kernel).
  enum class Kind { Int, Float, Buffer, None } kind = Kind::Int;
  long long n = 0;
  double x = 0;
  BufferSpec buffer;
};

// Each returns nullopt and sets `error` (a complete sentence) on bad input.
std::optional<std::pair<std::string, interp::Value>> parse_define(const std::string &text, std::string &error);

// The static type of a -D value, as semantic analysis sees a tl.constexpr.
sema::SType stype_of(const interp::Value &v);
std::optional<std::pair<std::string, ArgSpec>> parse_arg(const std::string &text, std::string &error);
std::optional<std::array<int64_t, 3>> parse_grid(const std::string &text, std::string &error);

// A parameter type for semantic analysis, in Triton's signature notation:
//   *fp32            a pointer
//   fp32, i32        a scalar
//   fp32[16, N]      a tile; a dimension may be a name (a symbol)
// `--arg NAME=TYPE` on the analysis command line.
std::optional<std::pair<std::string, sema::SType>> parse_param_type(const std::string &text, std::string &error);

// Values of a buffer: seeded uniform draws (rounded to the dtype), constants,
// or a file's elements.
// `stream` separates the draws of different arguments under one seed.
std::vector<double> fill_values(const BufferSpec &spec, uint64_t seed, uint64_t stream);

// Writes values as a NumPy .npy file (bf16 is written as float32, which
// NumPy can read; int1 as bool). Returns false and sets error on failure.
bool write_npy(const std::string &path, sema::DType dtype, const interp::Shape &shape,
               const std::vector<double> &values, std::string &error);

}  // namespace tgrad::driver
