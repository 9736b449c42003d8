// RAII ownership of HDF5 identifiers, scalar/array attribute helpers, and the parallel (MPI-IO) file open.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ragtrain {

// Owns one hid_t and releases it with the close function of its kind (H5Fclose, H5Dclose, ...).
// Move-only: an identifier must be closed exactly once, and H5Fclose is collective under MPI-IO.
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);

  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~H5Handle() { reset(); }
  H5Handle(H5Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = H5I_INVALID_HID; }
  H5Handle& operator=(H5Handle&& other) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;

  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }

  // Closes now and reports failure (a file being written may fail to flush here); the destructor cannot.
  herr_t close();
  void reset() { (void)close(); }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Wrap the result of a create/open call; the handle is empty (false) when the call failed.
inline H5Handle h5_file(hid_t id) { return H5Handle(id, H5Fclose); }
inline H5Handle h5_dataset(hid_t id) { return H5Handle(id, H5Dclose); }
inline H5Handle h5_space(hid_t id) { return H5Handle(id, H5Sclose); }
inline H5Handle h5_attribute(hid_t id) { return H5Handle(id, H5Aclose); }
inline H5Handle h5_plist(hid_t id) { return H5Handle(id, H5Pclose); }
inline H5Handle h5_type(hid_t id) { return H5Handle(id, H5Tclose); }

// Turns off HDF5's automatic printing of its error stack for the lifetime of the guard and restores the
// previous handler afterwards: readers report the user's mistake themselves, once, in plain words.
class H5QuietErrors {
 public:
  H5QuietErrors();
  ~H5QuietErrors();
  H5QuietErrors(const H5QuietErrors&) = delete;
  H5QuietErrors& operator=(const H5QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// What an attribute holds, described without judging it: callers decide what is acceptable and say so.
enum class AttrKind { Missing, String, Integer, Float, Other };
struct AttrShape {
  AttrKind kind = AttrKind::Missing;
  int64_t elements = 0;   // 1 for a scalar
  std::string type;       // e.g. "string", "int32", "float64", for messages
};
AttrShape attr_shape(hid_t obj, const char* name);

// Readers for attributes whose AttrShape the caller has checked. Integers of any width and sign are
// converted to int64; strings may be fixed or variable length. These read a user's file, so an HDF5 failure
// (a damaged or hostile file) throws UserError naming the file and attribute, like h5_read_check.
int64_t read_int_attr(hid_t obj, const char* name);
std::string read_string_attr(hid_t obj, const char* name);
std::vector<std::string> read_string_array_attr(hid_t obj, const char* name);

// Writers: int64 scalars and variable-length UTF-8 strings (what h5py reads back as Python str).
void write_int_attr(hid_t obj, const char* name, int64_t value);
void write_string_attr(hid_t obj, const char* name, const std::string& value);
void write_string_array_attr(hid_t obj, const char* name, const std::vector<std::string>& values);

// For HDF5 calls that read a user's file (attribute, dataspace and datatype queries, reads): failure means the
// file is damaged or was not written by a conforming writer, not a bug, so it throws UserError naming the file
// of `obj`, `what` ("attribute 'format'", "dataset /offsets") and HDF5's innermost error, with a hint.
[[noreturn]] void throw_damaged(hid_t obj, const std::string& what);
template <typename T>
T h5_read_check(T rc, hid_t obj, const std::string& what) {
  if (rc < 0) throw_damaged(obj, what);
  return rc;
}

// A short name for a datatype in messages: "float32", "int64", "uint8", "string", "compound", ...
std::string type_name(hid_t type);

// Opens `path` read-only on every rank of `comm` through MPI-IO (collective). Empty handle on failure.
H5Handle open_file_parallel(const std::string& path, MPI_Comm comm);

// A dataset transfer property list for collective MPI-IO reads and writes.
H5Handle collective_transfer();

}  // namespace ragtrain
