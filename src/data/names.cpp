// Sequence names (/names): checks of one name and of a whole list, the serial read of a file's, and the write.
#include "ragtrain/data/names.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/memory.hpp"
#include "ragtrain/data/h5.hpp"

namespace ragtrain {

namespace {

const char* const kNamesHint =
    "a name is 1..1024 bytes of UTF-8 text without control characters (tabs, line ends), one per sequence, each "
    "different; leave /names out to number the sequences instead (doc/data-format.md, \"Sequence names\")";

// The length of the UTF-8 sequence starting at s[i] (1..4), or 0 if it is not one (overlong forms, surrogates
// and code points above U+10FFFF included: what a strict decoder such as Python's refuses).
size_t utf8_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;   // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; lo = c == 0xE0 ? 0xA0 : 0x80; hi = c == 0xED ? 0x9F : 0xBF; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; lo = c == 0xF0 ? 0x90 : 0x80; hi = c == 0xF4 ? 0x8F : 0xBF; }
  else return 0;
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// What is wrong with one name, or "" when nothing is.
std::string name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameBytes)
    return "is " + std::to_string(name.size()) + " bytes long; expected at most " + std::to_string(kMaxNameBytes);
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7F) return "holds the control character " + std::to_string(c) + " at byte " + std::to_string(i);
    const size_t n = utf8_length(name, i);
    if (n == 0) return "is not valid UTF-8 (byte " + std::to_string(i) + ")";
    i += n;
  }
  return "";
}

// A name as a message shows it: quoted, cut short, its bytes as they are (the terminal copes with UTF-8; a bad
// byte at worst shows as one odd character).
std::string shown(const std::string& name) {
  std::string s = name.size() > 60 ? name.substr(0, 60) + "..." : name;
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
  return "\"" + s + "\"";
}

}  // namespace

void check_sequence_names(const std::string& where, const std::vector<std::string>& names, int64_t n) {
  USER_CHECK(static_cast<int64_t>(names.size()) == n,
             where << ": has " << names.size() << " names for " << n << " sequences; expected one name per sequence",
             kNamesHint);
  std::unordered_map<std::string, int64_t> first_of;
  first_of.reserve(names.size());
  for (int64_t i = 0; i < n; ++i) {
    const std::string& name = names[static_cast<size_t>(i)];
    const std::string problem = name_problem(name);
    USER_CHECK(problem.empty(), where << ": the name of sequence " << i << " " << problem, kNamesHint);
    const auto [it, fresh] = first_of.emplace(name, i);
    USER_CHECK(fresh,
               where << ": sequences " << it->second << " and " << i << " have the same name "
                    << shown(name) << "; expected a different name for every sequence",
               kNamesHint);
  }
}

std::vector<std::string> index_names(int64_t n) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) names.push_back(std::to_string(i));
  return names;
}

std::vector<std::string> read_sequence_names(const DatasetInfo& info, const MemoryBudget& budget) {
  RT_CHECK(info.has_names, "read_sequence_names on " << info.path << ", which has no /names");
  H5QuietErrors quiet;
  const std::string& path = info.path;
  H5Handle file = open_file_parallel(path, MPI_COMM_SELF);
  USER_CHECK(file, path << ": HDF5 could not open the file", "the file may have changed since it was checked");
  const std::string what = "dataset /names";
  H5Handle dset = h5_dataset(h5_read_check(H5Dopen2(file.get(), "/names", H5P_DEFAULT), file.get(), what));
  H5Handle file_type = h5_type(h5_read_check(H5Dget_type(dset.get()), file.get(), what));
  const bool variable = h5_read_check(H5Tis_variable_str(file_type.get()), file.get(), what) > 0;
  const H5T_cset_t cset = H5Tget_cset(file_type.get());
  if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8)
    throw_damaged(file.get(), RT_MSG(what << " (character set " << static_cast<int>(cset) << ", neither ASCII nor UTF-8)"));
  const auto n = static_cast<size_t>(info.num_sequences);
  H5Handle space = h5_space(h5_read_check(H5Dget_space(dset.get()), file.get(), what));
  USER_CHECK(h5_read_check(H5Sget_simple_extent_npoints(space.get()), file.get(), what) == info.num_sequences,
             path << ": dataset /names no longer holds " << n << " names", "the file changed while it was read");
  // One byte more than the stored width, so that a NUL-padded name filling its width keeps its last byte.
  const size_t width = variable ? sizeof(char*) : H5Tget_size(file_type.get()) + 1;
  const int64_t bytes = width > static_cast<size_t>(INT64_MAX) / std::max<size_t>(n, 1)
                            ? INT64_MAX : static_cast<int64_t>(n * width);
  check_fits(bytes, budget.bytes,
             RT_MSG(path << ": reading dataset /names (" << n << " strings of " << width << " bytes)"),
             budget.max_memory);

  H5Handle mem_type = h5_type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_cset(mem_type.get(), cset));
  std::vector<std::string> names;
  names.reserve(n);
  if (variable) {
    H5_CHECK(H5Tset_size(mem_type.get(), H5T_VARIABLE));
    std::vector<char*> ptrs(n, nullptr);
    h5_read_check(H5Dread(dset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), file.get(), what);
    for (char* p : ptrs) {
      names.emplace_back(p != nullptr ? p : "");
      H5free_memory(p);
    }
  } else {
    H5_CHECK(H5Tset_size(mem_type.get(), width));
    H5_CHECK(H5Tset_strpad(mem_type.get(), H5T_STR_NULLTERM));
    std::vector<char> buf(n * width, '\0');
    h5_read_check(H5Dread(dset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), file.get(), what);
    for (size_t i = 0; i < n; ++i) names.emplace_back(buf.data() + i * width);
  }
  check_sequence_names(path + ": dataset /names", names, info.num_sequences);
  return names;
}

void write_sequence_names(hid_t file, const std::vector<std::string>& names) {
  size_t width = 1;
  for (const std::string& s : names) width = std::max(width, s.size());
  H5Handle type = h5_type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type.get(), width));
  H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  std::vector<char> buf(names.size() * width, '\0');
  for (size_t i = 0; i < names.size(); ++i) std::copy(names[i].begin(), names[i].end(), buf.begin() + i * width);
  const hsize_t n = names.size();
  H5Handle space = h5_space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  H5Handle dset = h5_dataset(
      H5_CHECK(H5Dcreate2(file, "/names", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()));
}

}  // namespace ragtrain
