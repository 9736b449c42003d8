// HDF5 handle ownership, attribute helpers and the MPI-IO open.
#include "ragtrain/data/h5.hpp"

#include "ragtrain/core/error.hpp"

namespace ragtrain {

H5Handle& H5Handle::operator=(H5Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

herr_t H5Handle::close() {
  herr_t rc = 0;
  if (id_ >= 0 && closer_ != nullptr) rc = closer_(id_);
  id_ = H5I_INVALID_HID;
  return rc;
}

H5QuietErrors::H5QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

H5QuietErrors::~H5QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

std::string type_name(hid_t type) {
  const size_t bytes = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return RT_MSG((H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") << 8 * bytes);
    case H5T_FLOAT:
      return RT_MSG("float" << 8 * bytes);
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_ARRAY:
      return "array";
    case H5T_ENUM:
      return "enum";
    case H5T_REFERENCE:
      return "reference";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_BITFIELD:
      return "bitfield";
    default:
      return "unknown type";
  }
}

namespace {

std::string attr_what(const char* name) { return RT_MSG("attribute '" << name << "'"); }

// The innermost (first pushed) error of HDF5's stack: the most specific reason, e.g. "addr overflow".
herr_t innermost_error(unsigned n, const H5E_error2_t* err, void* out) {
  if (n == 0 && err->desc != nullptr) *static_cast<std::string*>(out) = err->desc;
  return 0;
}

}  // namespace

void throw_damaged(hid_t obj, const std::string& what) {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_error, &reason);
  std::string file = "the file";
  const ssize_t len = H5Fget_name(obj, nullptr, 0);
  if (len > 0) {
    file.assign(static_cast<size_t>(len) + 1, '\0');
    H5Fget_name(obj, file.data(), file.size());
    file.resize(static_cast<size_t>(len));
  }
  throw UserError(RT_MSG(file << ": " << what << " could not be read" << (reason.empty() ? "" : " (HDF5: ")
                              << reason << (reason.empty() ? "" : ")")),
                  RT_MSG("the file is damaged or truncated, or was not written by HDF5 " << H5_VERS_MAJOR << "."
                         << H5_VERS_MINOR << "-compatible software; check it with `h5dump -H " << file
                         << "` and write it again (doc/data-format.md)"));
}

AttrShape attr_shape(hid_t obj, const char* name) {
  AttrShape shape;
  // A failure (negative) is a damaged attribute table, not a missing attribute.
  if (h5_read_check(H5Aexists(obj, name), obj, attr_what(name)) == 0) return shape;
  H5Handle attr = h5_attribute(h5_read_check(H5Aopen(obj, name, H5P_DEFAULT), obj, attr_what(name)));
  H5Handle type = h5_type(h5_read_check(H5Aget_type(attr.get()), obj, attr_what(name)));
  H5Handle space = h5_space(h5_read_check(H5Aget_space(attr.get()), obj, attr_what(name)));
  shape.elements =
      static_cast<int64_t>(h5_read_check(H5Sget_simple_extent_npoints(space.get()), obj, attr_what(name)));
  shape.type = type_name(type.get());
  switch (H5Tget_class(type.get())) {
    case H5T_STRING: shape.kind = AttrKind::String; break;
    case H5T_INTEGER: shape.kind = AttrKind::Integer; break;
    case H5T_FLOAT: shape.kind = AttrKind::Float; break;
    default: shape.kind = AttrKind::Other; break;
  }
  return shape;
}

int64_t read_int_attr(hid_t obj, const char* name) {
  H5Handle attr = h5_attribute(h5_read_check(H5Aopen(obj, name, H5P_DEFAULT), obj, attr_what(name)));
  int64_t value = 0;
  // HDF5 converts any integer width and byte order to the native int64 on the way in.
  h5_read_check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), obj, attr_what(name));
  return value;
}

namespace {

// Reads every string of an attribute (scalar or 1-D), fixed or variable length.
std::vector<std::string> read_strings(hid_t obj, const char* name) {
  const std::string what = attr_what(name);
  H5Handle attr = h5_attribute(h5_read_check(H5Aopen(obj, name, H5P_DEFAULT), obj, what));
  H5Handle file_type = h5_type(h5_read_check(H5Aget_type(attr.get()), obj, what));
  H5Handle space = h5_space(h5_read_check(H5Aget_space(attr.get()), obj, what));
  const auto n = static_cast<size_t>(h5_read_check(H5Sget_simple_extent_npoints(space.get()), obj, what));
  // The shape and width come from the file: a damaged header may declare 2^60 strings of 2^32 bytes. The
  // attribute's stored bytes bound what a real attribute holds (at least one byte per string, a fixed-length
  // string its full width), so nothing larger than the file's own data is allocated.
  const auto stored = static_cast<size_t>(H5Aget_storage_size(attr.get()));
  const size_t file_width = H5Tget_size(file_type.get());
  const bool variable = h5_read_check(H5Tis_variable_str(file_type.get()), obj, what) > 0;
  if (n > stored || (!variable && (file_width == 0 || n > stored / file_width)))
    throw_damaged(obj, RT_MSG(what << " (" << n << " strings of " << (variable ? "variable" : "fixed") << " width "
                                   << file_width << " in " << stored << " stored bytes)"));
  // HDF5 knows two character sets; a damaged type message may carry any 4-bit value, which H5Tset_cset refuses.
  const H5T_cset_t cset = H5Tget_cset(file_type.get());
  if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8)
    throw_damaged(obj, RT_MSG(what << " (character set " << static_cast<int>(cset) << ", neither ASCII nor UTF-8)"));
  H5Handle mem_type = h5_type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_cset(mem_type.get(), cset));
  std::vector<std::string> out;
  out.reserve(n);
  if (variable) {
    H5_CHECK(H5Tset_size(mem_type.get(), H5T_VARIABLE));
    std::vector<char*> ptrs(n, nullptr);
    h5_read_check(H5Aread(attr.get(), mem_type.get(), ptrs.data()), obj, what);
    for (char* p : ptrs) {
      out.emplace_back(p != nullptr ? p : "");
      H5free_memory(p);
    }
  } else {
    // One byte more than the stored width so a NUL-padded string that fills its width keeps its last char.
    const size_t width = file_width + 1;
    H5_CHECK(H5Tset_size(mem_type.get(), width));
    H5_CHECK(H5Tset_strpad(mem_type.get(), H5T_STR_NULLTERM));
    std::vector<char> buf(n * width, '\0');
    h5_read_check(H5Aread(attr.get(), mem_type.get(), buf.data()), obj, what);
    for (size_t i = 0; i < n; ++i) out.emplace_back(buf.data() + i * width);
  }
  return out;
}

H5Handle utf8_vlen_string_type() {
  H5Handle type = h5_type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE));
  H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  return type;
}

void write_attr(hid_t obj, const char* name, hid_t type, hid_t space, const void* data) {
  H5Handle attr = h5_attribute(H5_CHECK(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr.get(), type, data));
}

}  // namespace

std::string read_string_attr(hid_t obj, const char* name) {
  std::vector<std::string> all = read_strings(obj, name);
  // Callers check the shape first, but a file may hold an array where one string belongs: the file's fault.
  if (all.size() != 1) throw_damaged(obj, RT_MSG(attr_what(name) << " (" << all.size() << " strings; expected one)"));
  return all.front();
}

std::vector<std::string> read_string_array_attr(hid_t obj, const char* name) { return read_strings(obj, name); }

void write_int_attr(hid_t obj, const char* name, int64_t value) {
  H5Handle space = h5_space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Handle attr = h5_attribute(
      H5_CHECK(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value));
}

void write_string_attr(hid_t obj, const char* name, const std::string& value) {
  H5Handle type = utf8_vlen_string_type();
  H5Handle space = h5_space(H5_CHECK(H5Screate(H5S_SCALAR)));
  const char* ptr = value.c_str();
  write_attr(obj, name, type.get(), space.get(), &ptr);
}

void write_string_array_attr(hid_t obj, const char* name, const std::vector<std::string>& values) {
  H5Handle type = utf8_vlen_string_type();
  const hsize_t n = values.size();
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size());
  for (const std::string& v : values) ptrs.push_back(v.c_str());
  write_attr(obj, name, type.get(), space.get(), ptrs.data());
}

H5Handle open_file_parallel(const std::string& path, MPI_Comm comm) {
  H5Handle fapl = h5_plist(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  H5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL));
  return h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
}

H5Handle collective_transfer() {
  H5Handle dxpl = h5_plist(H5_CHECK(H5Pcreate(H5P_DATASET_XFER)));
  H5_CHECK(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE));
  return dxpl;
}

}  // namespace ragtrain
