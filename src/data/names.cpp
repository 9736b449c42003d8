// Sequence names (/names): the checks of one name and of a whole list, and names by position. No HDF5 here, so
// that the importers (and their fuzz targets) need no HDF5 library; names_io.cpp reads and writes them.
#include "ragtrain/data/names.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "ragtrain/core/error.hpp"

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

}  // namespace ragtrain
