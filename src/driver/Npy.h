// NumPy .npy files (format 1.0/2.0, little-endian, C order): the element
// bytes and what they are. `tgrad run` reads its inputs from them (an --arg
// fill) and writes its results; tools/runner reads and writes them too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tgrad::driver {

struct NpyArray {
  std::string descr;  // "<f4", "<f2", "<i4", "<i8", "|b1", "<f8", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// False with `error` set where the file cannot be read or is not a C-order array.
bool read_npy(const std::string &path, NpyArray &out, std::string &error);
bool write_npy(const std::string &path, const NpyArray &array, std::string &error);
// The elements as doubles (floats of 2, 4 or 8 bytes, integers, bools);
// false with `error` set for another descr.
bool npy_values(const NpyArray &array, std::vector<double> &out, std::string &error);

}  // namespace tgrad::driver
