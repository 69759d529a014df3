// .npy reading and writing (https://numpy.org/neps/nep-0001-npy-format.html).
#include "src/driver/Npy.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tgrad::driver {

namespace {

// The value of `'key': value` in the header's dict, as written.
std::string field(const std::string &header, const std::string &key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  k = header.find(':', k);
  if (k == std::string::npos) return "";
  ++k;
  while (k < header.size() && header[k] == ' ') ++k;
  if (header[k] == '(') return header.substr(k, header.find(')', k) - k + 1);
  if (header[k] == '\'') return header.substr(k + 1, header.find('\'', k + 1) - k - 1);
  size_t end = header.find_first_of(",}", k);
  return header.substr(k, end - k);
}

int64_t item_size(const std::string &descr) { return descr.size() >= 3 ? std::stoll(descr.substr(2)) : 0; }

}  // namespace

bool read_npy(const std::string &path, NpyArray &out, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "'";
    return false;
  }
  char magic[8];
  in.read(magic, 8);
  if (!in || std::string(magic, 6) != "\x93NUMPY") {
    error = "'" + path + "' is not a .npy file";
    return false;
  }
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char *>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char *>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  }
  std::string header(header_len, '\0');
  in.read(&header[0], header_len);
  out.descr = field(header, "descr");
  if (field(header, "fortran_order") != "False") {
    error = "'" + path + "': only C-order arrays are read";
    return false;
  }
  std::string shape = field(header, "shape");
  out.shape.clear();
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  std::string d;
  while (std::getline(dims, d, ','))
    if (d.find_first_not_of(' ') != std::string::npos) out.shape.push_back(std::stoll(d));
  const int64_t bytes = out.numel() * item_size(out.descr);
  out.data.resize(static_cast<size_t>(bytes));
  in.read(reinterpret_cast<char *>(out.data.data()), bytes);
  if (!in) {
    error = "'" + path + "' is shorter than its header says";
    return false;
  }
  return true;
}

bool write_npy(const std::string &path, const NpyArray &array, std::string &error) {
  std::string shape = "(";
  for (size_t k = 0; k < array.shape.size(); ++k) shape += (k ? ", " : "") + std::to_string(array.shape[k]);
  if (array.shape.size() == 1) shape += ",";
  shape += ")";
  std::string header = "{'descr': '" + array.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char b[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(b, 2);
  out << header;
  out.write(reinterpret_cast<const char *>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
  if (!out) {
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

bool npy_values(const NpyArray &array, std::vector<double> &out, std::string &error) {
  const std::string &d = array.descr;
  const int64_t n = array.numel(), width = item_size(d);
  const char kind = d.size() >= 3 ? d[1] : '?';
  if (!((kind == 'f' && (width == 2 || width == 4 || width == 8)) ||
        ((kind == 'i' || kind == 'u') && (width == 1 || width == 2 || width == 4 || width == 8)) ||
        (kind == 'b' && width == 1))) {
    error = "elements of type '" + d + "' cannot be read";
    return false;
  }
  out.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const unsigned char *p = array.data.data() + k * width;
    auto get = [&](auto x) {
      std::memcpy(&x, p, sizeof x);
      return static_cast<double>(x);
    };
    double v;
    if (kind == 'f' && width == 2) {  // IEEE half
      uint16_t h;
      std::memcpy(&h, p, 2);
      const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
      const double sign = (h & 0x8000) ? -1 : 1;
      v = exp == 0 ? sign * std::ldexp(mant, -24)
          : exp == 31 ? (mant ? NAN : sign * INFINITY)
                      : sign * std::ldexp(mant + 1024, exp - 25);
    } else if (kind == 'f') {
      v = width == 4 ? get(float{}) : get(double{});
    } else if (kind == 'i') {
      v = width == 1 ? get(int8_t{}) : width == 2 ? get(int16_t{}) : width == 4 ? get(int32_t{}) : get(int64_t{});
    } else {  // unsigned, bool
      v = width == 1 ? get(uint8_t{}) : width == 2 ? get(uint16_t{}) : width == 4 ? get(uint32_t{}) : get(uint64_t{});
    }
    out[static_cast<size_t>(k)] = v;
  }
  return true;
}

}  // namespace tgrad::driver
