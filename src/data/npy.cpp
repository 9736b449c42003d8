// parse_npy: the .npy header (a Python dict literal) and dtype, checked against the data that follows it.
#include "ragtrain/data/npy.hpp"

#include <cctype>
#include <cstring>
#include <limits>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

namespace {

const char* const kNpyHint =
    "save plain numeric arrays with numpy.save/numpy.savez (C order, dtype float32/float64 or an integer type); "
    "see doc/data-format.md, \"Bring your own data\"";

// The few Python literals a .npy header uses: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  void parse(NpyArray& a, bool& fortran_order) {
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (peek('[')) fail("has a structured dtype (a list of fields); only plain numeric arrays can be read");
        a.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        a.shape = int_tuple();
        has_shape = true;
      } else {
        fail("has the unknown header key '" + key + "'");
      }
      if (!peek('}')) expect(',');
    }
    if (!has_descr || !has_order || !has_shape) fail("header lacks 'descr', 'fortran_order' or 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(where_ + ": " + what, kNpyHint);
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("malformed .npy header: expected '") + c + "' at character " + std::to_string(pos_) +
                       " of \"" + s_ + "\"");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      fail("malformed .npy header: expected a quoted string at character " + std::to_string(pos_) + " of \"" + s_ + "\"");
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) fail("malformed .npy header: unterminated string in \"" + s_ + "\"");
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("malformed .npy header: fortran_order is neither True nor False in \"" + s_ + "\"");
  }
  std::vector<int64_t> int_tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!peek(')')) {
      skip_space();
      int64_t v = 0;
      size_t digits = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("shape dimension too large in \"" + s_ + "\"");
        v = v * 10 + (s_[pos_++] - '0');
        ++digits;
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;   // Python 2 long suffix, as old files have it
      if (digits == 0) fail("malformed .npy header: expected a non-negative integer in shape \"" + s_ + "\"");
      out.push_back(v);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return out;
  }

  const std::string& s_;
  const std::string& where_;
  size_t pos_ = 0;
};

// Fills kind, item_size and swap from the descr string ("<f4"), rejecting what cannot become float32 or a label.
void parse_descr(NpyArray& a, const std::string& where) {
  const std::string& d = a.descr;
  USER_CHECK(d.size() >= 2 && std::strchr("<>|=", d[0]) != nullptr,
             where << ": unsupported dtype '" << d << "'", kNpyHint);
  const char kind = d[1];
  USER_CHECK(kind != 'O', where << ": is an object array (dtype '" << d
                                << "', stored as a Python pickle); pickles are never loaded",
             "store each sequence as its own numeric array (seq_0, seq_1, ...) or as values + lengths, not as a list "
             "of arrays of different lengths; see doc/data-format.md, \"Bring your own data\"");
  USER_CHECK(kind != 'M' && kind != 'm', where << ": has the date/time dtype '" << d << "'; expected numbers",
             "convert time stamps to numeric features (e.g. seconds) before saving");
  USER_CHECK(kind != 'c', where << ": has the complex dtype '" << d << "'; expected real numbers",
             "save the real and imaginary parts as separate features");
  USER_CHECK(kind != 'V', where << ": has a structured or void dtype '" << d << "'; expected plain numbers", kNpyHint);
  int64_t size = 0;
  size_t i = 2;
  for (; i < d.size() && std::isdigit(static_cast<unsigned char>(d[i])) && size < 1000000; ++i)
    size = size * 10 + (d[i] - '0');
  USER_CHECK(i == d.size() && i > 2, where << ": unsupported dtype '" << d << "'", kNpyHint);
  const bool ok = (kind == 'f' && (size == 4 || size == 8)) ||
                  ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
                  (kind == 'b' && size == 1) || (kind == 'U' && size >= 1) || (kind == 'S' && size >= 1);
  USER_CHECK(ok, where << ": unsupported dtype '" << d
                       << "'; expected float32/float64, an integer type, bool, or strings (labels and class names)",
             (kind == 'f' && size == 2 ? std::string("convert half precision with .astype(numpy.float32) before saving")
                                       : std::string(kNpyHint)));
  a.kind = kind;
  a.item_size = kind == 'U' ? 4 * size : size;
  // '|' (not applicable) and '=' (native) need no swap on this little-endian host; only '>' does.
  a.swap = d[0] == '>' && (a.item_size > 1 && kind != 'S');
}

uint32_t le32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

// The `n` bytes of an element in host (little-endian) order.
void element_bytes(const NpyArray& a, int64_t i, unsigned char* out, int64_t n, int64_t byte_offset = 0) {
  std::memcpy(out, a.data.data() + i * a.item_size + byte_offset, static_cast<size_t>(n));
  if (a.swap)
    for (int64_t k = 0; k < n / 2; ++k) std::swap(out[k], out[n - 1 - k]);
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string NpyArray::shape_string() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

NpyHeader parse_npy_header(const std::string& bytes, const std::string& where) {
  static const char kMagic[] = "\x93NUMPY";
  USER_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, kMagic, 6) == 0,
             where << ": not a .npy array (no \\x93NUMPY magic string)", kNpyHint);
  const int major = static_cast<unsigned char>(bytes[6]);
  USER_CHECK(major >= 1 && major <= 3, where << ": .npy format version " << major << " is not supported (1-3 are)",
             kNpyHint);
  // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4 (little-endian).
  const size_t prefix = major == 1 ? 10 : 12;
  USER_CHECK(bytes.size() >= prefix, where << ": truncated .npy header", kNpyHint);
  const size_t header_len = major == 1 ? (static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8)
                                       : le32(bytes, 8);
  USER_CHECK(bytes.size() >= prefix + header_len,
             where << ": truncated .npy header (" << header_len << " bytes announced, " << bytes.size() - prefix
                   << " present)",
             kNpyHint);
  NpyHeader h;
  NpyArray a;
  HeaderParser(bytes.substr(prefix, header_len), where).parse(a, h.fortran_order);
  h.descr = a.descr;
  h.shape = a.shape;
  h.data_offset = prefix + header_len;
  return h;
}

NpyArray parse_npy(const std::string& bytes, const std::string& where) {
  const NpyHeader h = parse_npy_header(bytes, where);
  NpyArray a;
  a.descr = h.descr;
  a.shape = h.shape;
  parse_descr(a, where);
  USER_CHECK(!h.fortran_order || a.shape.size() < 2,
             where << ": is stored in Fortran (column-major) order, shape " << a.shape_string()
                   << "; expected C (row-major) order",
             "save numpy.ascontiguousarray(x) instead of x (a transposed array is stored in Fortran order)");

  // Shapes come from the file: check the byte count without overflowing.
  const auto available = static_cast<int64_t>(bytes.size() - h.data_offset);
  int64_t need = a.item_size;
  for (int64_t d : a.shape) {
    if (d != 0 && need > std::numeric_limits<int64_t>::max() / d) need = -1;
    if (need < 0) break;
    need *= d;
  }
  USER_CHECK(need >= 0 && need == available,
             where << ": shape " << a.shape_string() << " of dtype '" << a.descr << "' needs "
                   << (need < 0 ? std::string("more than 2^63") : std::to_string(need)) << " bytes of data, the array has "
                   << available,
             "the file is truncated or damaged; save it again");
  a.data = bytes.substr(h.data_offset);
  return a;
}

double npy_number(const NpyArray& a, int64_t i) {
  RT_CHECK(a.numeric(), "npy_number on dtype " << a.descr);
  unsigned char b[8];
  element_bytes(a, i, b, a.item_size);
  switch (a.kind) {
    case 'f':
      if (a.item_size == 4) {
        float v;
        std::memcpy(&v, b, 4);
        return v;
      } else {
        double v;
        std::memcpy(&v, b, 8);
        return v;
      }
    case 'b':
      return b[0] != 0 ? 1.0 : 0.0;
    case 'u': {
      uint64_t v = 0;
      std::memcpy(&v, b, static_cast<size_t>(a.item_size));   // little-endian host: low bytes first
      return static_cast<double>(v);
    }
    default: {
      uint64_t v = 0;
      std::memcpy(&v, b, static_cast<size_t>(a.item_size));
      const int bits = static_cast<int>(8 * a.item_size);
      if (bits < 64 && (v >> (bits - 1)) & 1) v |= ~uint64_t{0} << bits;   // sign-extend
      int64_t s;
      std::memcpy(&s, &v, 8);
      return static_cast<double>(s);
    }
  }
}

std::string npy_string(const NpyArray& a, int64_t i) {
  RT_CHECK(a.text(), "npy_string on dtype " << a.descr);
  std::string out;
  if (a.kind == 'S') {
    out.assign(a.data.data() + i * a.item_size, static_cast<size_t>(a.item_size));
    const size_t end = out.find('\0');
    if (end != std::string::npos) out.resize(end);
    return out;
  }
  for (int64_t c = 0; c < a.item_size / 4; ++c) {
    unsigned char b[4];
    element_bytes(a, i, b, 4, 4 * c);
    uint32_t cp;
    std::memcpy(&cp, b, 4);
    if (cp == 0) break;   // NumPy pads shorter strings with NULs
    append_utf8(out, cp);
  }
  return out;
}

}  // namespace ragtrain
