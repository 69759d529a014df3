// Test helpers for whole kernels: a kernel case as command-line specs
// (--arg, -D, --wrt, the grid) turned into a differentiation request, a
// launch and the interpreter's memory, as `tgrad check --kernel` builds them.
#pragma once

#include <array>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/driver/GradCheck.h"
#include "src/driver/LaunchSpec.h"
#include "src/parse/FollowImports.h"
#include "tgrad/sema/Names.h"
#include "tests/parse/ParseHelpers.h"

namespace tgrad::testing {


struct KernelCase {
  std::string file, kernel;
  std::array<int64_t, 3> grid;
  std::vector<std::string> args;     // --arg specs (buffers and scalars)
  std::vector<std::string> defines;  // -D
  std::vector<std::string> wrt;
  std::vector<std::string> expect_explained = {};  // substrings of the --explain lines
  std::string source = "";                          // the kernel's module, where `file` is empty
};

inline std::ostream &operator<<(std::ostream &os, const KernelCase &c) { return os << c.kernel; }

struct KernelSetup {
  std::unique_ptr<Parsed> parsed;
  ad::BackwardRequest request;
  interp::Launch launch;
  interp::Memory memory;
};

inline KernelSetup setup(const KernelCase &c) {
  KernelSetup s;
  std::string path = c.file.empty() ? "t.py" : "tests/kernels/" + c.file + ".py";
  s.parsed = parse_text(c.file.empty() ? c.source : read_file(path), path);
  // Modules of the user's that the kernel imports (tests/kernels/helper_module.py), as the CLI reads them.
  parse::follow_imports(*s.parsed->module, path, {}, s.parsed->sources, *s.parsed->diags);
  sema::supersede_fallback_functions(*s.parsed->module);
  s.request.function = c.kernel;
  s.request.wrt = c.wrt;
  s.launch.kernel = c.kernel;
  s.launch.grid = c.grid;
  std::string error;
  uint64_t stream = 0;
  for (const std::string &d : c.defines) {
    auto def = driver::parse_define(d, error);
    EXPECT_TRUE(def) << error;
    interp::KernelArg a;
    a.kind = interp::KernelArg::Kind::Constexpr;
    a.constexpr_value = def->second;
    s.launch.args[def->first] = a;
    s.request.param_types[def->first] = driver::stype_of(def->second);
  }
  for (const std::string &text : c.args) {
    auto spec = driver::parse_arg(text, error);
    EXPECT_TRUE(spec) << error;
    interp::KernelArg a;
    if (spec->second.kind == driver::ArgSpec::Kind::Buffer) {
      interp::Buffer b{spec->first, spec->second.buffer.dtype, spec->second.buffer.shape, {}, {}};
      for (double v : driver::fill_values(spec->second.buffer, 5, stream++)) {
        if (sema::is_float(b.dtype)) b.f.push_back(v);
        else b.i.push_back(static_cast<int64_t>(v));  // integer buffers (indices): truncated draws
      }
      a.kind = interp::KernelArg::Kind::Buffer;
      a.buffer = s.memory.buffers().size();
      s.memory.add(b);
      s.request.param_types[spec->first] = sema::SType::tensor({spec->second.buffer.dtype, true}, {});
    } else if (spec->second.kind == driver::ArgSpec::Kind::None) {
      a.kind = interp::KernelArg::Kind::None;
      s.request.param_types[spec->first] = sema::SType::none();
    } else if (spec->second.kind == driver::ArgSpec::Kind::Int) {
      a.kind = interp::KernelArg::Kind::Int;
      a.n = spec->second.n;
      s.request.param_types[spec->first] = sema::SType::tensor({sema::DType::Int32, false}, {});
    } else {
      a.kind = interp::KernelArg::Kind::Float;
      a.x = spec->second.x;
      s.request.param_types[spec->first] = sema::SType::tensor({sema::DType::FP32, false}, {});
    }
    s.launch.args[spec->first] = a;
  }
  return s;
}

}  // namespace tgrad::testing
