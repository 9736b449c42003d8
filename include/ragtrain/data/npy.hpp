// The NumPy .npy array format (versions 1-3): header parsing and element conversion, without NumPy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragtrain {

// One array as stored in a .npy file (or a .npz entry): dtype, shape and the raw C-order bytes.
struct NpyArray {
  std::string descr;             // the dtype as written, e.g. "<f4", "|u1", "<U5" (for messages)
  char kind = 'f';               // 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool, 'U' UTF-32 text, 'S' bytes
  int64_t item_size = 0;         // bytes per element (U: 4 per character)
  bool swap = false;             // stored big-endian: bytes are swapped on conversion (this is a little-endian host)
  std::vector<int64_t> shape;    // () for a scalar
  std::string data;              // (product(shape) x item_size) bytes, C order

  int64_t size() const;                          // number of elements
  bool numeric() const { return kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b'; }
  bool text() const { return kind == 'U' || kind == 'S'; }
  std::string shape_string() const;              // "(3, 4)" as NumPy prints it
};

// The header of a .npy file: what it declares, before any check of the dtype. Throws UserError (starting with
// `where`) when `bytes` does not start with a well-formed header.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;   // where the array's bytes start
};
NpyHeader parse_npy_header(const std::string& bytes, const std::string& where);

// Parses the bytes of a .npy file. Rejects, with a UserError that starts with `where` and has a hint:
// a bad magic string or version, a malformed header, Fortran order, object arrays (pickles), structured,
// complex, half-precision and date/time dtypes, and data shorter or longer than the shape says.
NpyArray parse_npy(const std::string& bytes, const std::string& where);

// Element i of a numeric array as double (ints and bools exactly up to 2^53).
double npy_number(const NpyArray& a, int64_t i);

// Element i of a text array, UTF-8 encoded, trailing NUL padding removed.
std::string npy_string(const NpyArray& a, int64_t i);

}  // namespace ragtrain
