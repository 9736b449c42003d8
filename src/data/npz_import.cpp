// read_npz_file: a NumPy .npz archive (numpy.savez or savez_compressed) of ragged sequences into a RaggedData.
//
// Why minizip reads the archive: an .npz is a zip archive of .npy files, stored (savez) or deflated
// (savez_compressed), and numpy writes every entry with ZIP64 extra fields (force_zip64=True). Reading that
// correctly, CRC checks included, is the job of a maintained zip reader rather than of zip code of our own.
// libzip (Debian's libzip-dev) ships only a shared library and pulls in bzip2, OpenSSL/GnuTLS, lzma and zstd,
// so the PORTABLE build, which links static libraries to run on the GPU machine (Ubuntu without our
// dependencies), could not carry it. minizip, the zip reader of zlib's contrib tree (Debian's
// libminizip-dev), ships libminizip.a and needs only zlib, which HDF5 links in anyway; the Makefile links it
// statically when PORTABLE=1.
#include <minizip/unzip.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/missing.hpp"
#include "ragtrain/data/names.hpp"
#include "ragtrain/data/npy.hpp"

namespace ragtrain {

namespace {

const char* const kNpzHint =
    "save either one array per sequence, numpy.savez(f, seq_0=a0, seq_1=a1, ..., labels=y), or the "
    "concatenation and the lengths, numpy.savez(f, values=np.concatenate(seqs), lengths=[len(s) for s in seqs], "
    "labels=y), or a padded (N, T, F) array as values (with lengths, or NaN padding and --missing trim); see "
    "doc/data-format.md, \"Bring your own data\"";

// An open zip archive (minizip's unzFile), closed on every path out.
class ZipArchive {
 public:
  explicit ZipArchive(const std::string& path) : path_(path), zip_(unzOpen64(path.c_str())) {
    USER_CHECK(zip_ != nullptr, path << ": not a zip archive; expected an .npz file written by numpy.savez",
               "check the file; a single array saved with numpy.save (.npy) must be saved with numpy.savez instead");
  }
  ~ZipArchive() { unzClose(zip_); }
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  // Calls want(name) for every entry, which returns how many of its bytes to read (0: none, kAll: all);
  // take(name, bytes) then receives them.
  static constexpr size_t kAll = ~size_t{0};
  template <class Want, class Take>
  void for_each(Want&& want, Take&& take) {
    for (int rc = unzGoToFirstFile(zip_); rc != UNZ_END_OF_LIST_OF_FILE; rc = unzGoToNextFile(zip_)) {
      USER_CHECK(rc == UNZ_OK, path_ << ": damaged zip directory (minizip error " << rc << ")",
                 "the file is truncated or damaged; save it again");
      unz_file_info64 info;
      USER_CHECK(unzGetCurrentFileInfo64(zip_, &info, nullptr, 0, nullptr, 0, nullptr, 0) == UNZ_OK,
                 path_ << ": damaged zip directory entry", "the file is truncated or damaged; save it again");
      std::string name(info.size_filename, '\0');
      unzGetCurrentFileInfo64(zip_, &info, name.data(), static_cast<uLong>(name.size()), nullptr, 0, nullptr, 0);
      const size_t limit = want(name);
      if (limit == 0) continue;
      USER_CHECK((info.flag & 1) == 0, path_ << ": entry '" << name << "' is encrypted", "save the arrays unencrypted");
      USER_CHECK(info.compression_method == 0 || info.compression_method == Z_DEFLATED,
                 path_ << ": entry '" << name << "' uses zip compression method " << info.compression_method
                       << "; expected stored or deflated",
                 "save with numpy.savez or numpy.savez_compressed");
      take(name, read_current(name, limit));
    }
  }

 private:
  // The entry's bytes (its first `limit`), read in chunks (the size in the directory is not trusted for an
  // allocation); a whole entry is checked against its CRC-32 when it is closed.
  std::string read_current(const std::string& name, size_t limit) {
    USER_CHECK(unzOpenCurrentFile(zip_) == UNZ_OK, path_ << ": entry '" << name << "' cannot be opened",
               "the file is damaged; save it again");
    std::string bytes;
    std::vector<char> chunk(1 << 16);
    int n = 0;
    while (bytes.size() < limit && (n = unzReadCurrentFile(zip_, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0)
      bytes.append(chunk.data(), static_cast<size_t>(n));
    if (bytes.size() >= limit) n = 0;   // stopped early on purpose
    const int closed = unzCloseCurrentFile(zip_);   // UNZ_CRCERROR when the data does not match its CRC-32
    USER_CHECK(n == 0 && closed == UNZ_OK,
               path_ << ": entry '" << name << "' is damaged ("
                     << (closed == UNZ_CRCERROR ? std::string("CRC-32 mismatch")
                                                : "minizip error " + std::to_string(n < 0 ? n : closed))
                     << ")",
               "the file is truncated or damaged; save it again");
    return bytes;
  }

  std::string path_;
  unzFile zip_;
};

// "seq_12" -> 12; -1 for any other name (and for leading zeros, which would allow two names for one index).
int64_t seq_index(const std::string& key) {
  if (key.size() < 5 || key.compare(0, 4, "seq_") != 0) return -1;
  const std::string digits = key.substr(4);
  if (digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  if (digits.size() > 1 && digits[0] == '0') return -1;
  return std::stoll(digits);
}

// Element i of a numeric array as a feature value. NaN is a missing value, for --missing to handle
// (handle_missing); an infinity is an error naming the element (`where()`: "x.npz: array 'values': row 3, column 1").
template <class Where>
float feature_value(const NpyArray& a, int64_t i, Where&& where) {
  const double v = npy_number(a, i);
  USER_CHECK(std::isnan(v) || finite_as_float32(v),
             where() << " is " << v
                     << "; expected finite numbers within float32 range (|x| <= 3.4e38), or NaN for a missing value",
             "replace infinities before saving");
  return static_cast<float>(v);
}

// Appends the rows of a (T, F) or (T,) numeric array to d.features, checking F and finiteness.
void append_rows(const NpyArray& a, const std::string& where, RaggedData& d, int64_t& features_from_row) {
  USER_CHECK(a.numeric(), where << ": has the text dtype '" << a.descr << "'; expected numbers", kNpzHint);
  USER_CHECK(a.shape.size() == 1 || a.shape.size() == 2,
             where << ": has shape " << a.shape_string() << "; expected (timesteps, features) or (timesteps,)",
             kNpzHint);
  const int64_t f = a.shape.size() == 2 ? a.shape[1] : 1;
  USER_CHECK(f >= 1, where << ": has shape " << a.shape_string() << ", no features", kNpzHint);
  if (d.num_features == 0) d.num_features = f;
  USER_CHECK(f == d.num_features,
             where << ": has " << f << " feature column(s), shape " << a.shape_string() << "; expected "
                   << d.num_features << " like the sequences before it",
             "every sequence must have the same features");
  const int64_t n = a.size();
  for (int64_t i = 0; i < n; ++i)
    d.features.push_back(feature_value(a, i, [&] { return RT_MSG(where << ": row " << features_from_row + i / f
                                                                        << ", column " << i % f); }));
  features_from_row += n / f;
}

std::vector<std::string> strings_of(const NpyArray& a) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < a.size(); ++i) out.push_back(npy_string(a, i));
  return out;
}

// What an archive holds: the arrays read whole (known names and seq_*), and what the others were.
struct NpzContents {
  std::map<std::string, NpyArray> arrays;
  std::map<int64_t, std::string> seqs;      // index -> key
  std::vector<std::string> keys;            // every .npy entry, for messages
  std::vector<std::string> object_arrays;   // entries of no known name that hold pickled objects

  // "labels, seq_0, seq_1" (or "none"), for messages.
  std::string found() const {
    std::string out;
    for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
    return out.empty() ? "none" : out;
  }
};

bool known_key(const std::string& key) {
  static const std::set<std::string> known = {"values", "lengths", "labels", "class_names", "names"};
  return known.count(key) > 0 || seq_index(key) >= 0;
}

// Reads the archive: arrays of known names whole, of other names only their header (to say what they are: an
// object array is a common mistake, a list of arrays of different lengths).
NpzContents read_archive(const std::string& path, ImportLog* log) {
  NpzContents c;
  ZipArchive zip(path);
  zip.for_each(
      [&](const std::string& name) {
        const bool npy = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0;
        if (!npy) {
          if (log) log->ignored.push_back(name);
          return size_t{0};
        }
        const std::string key = name.substr(0, name.size() - 4);
        c.keys.push_back(key);
        return known_key(key) ? ZipArchive::kAll : size_t{4096};
      },
      [&](const std::string& name, const std::string& bytes) {
        const std::string key = name.substr(0, name.size() - 4);
        if (!known_key(key)) {
          std::string what = key;
          try {
            const NpyHeader h = parse_npy_header(bytes, key);
            what += " " + h.descr;
            if (h.descr.size() >= 2 && h.descr[1] == 'O') c.object_arrays.push_back(key);
          } catch (const UserError&) {
            what += " (not a readable .npy header)";
          }
          if (log) log->ignored.push_back(what);
          return;
        }
        NpyArray a = parse_npy(bytes, path + ": array '" + key + "'");
        if (log) log->read.push_back(key + ": " + a.shape_string() + " " + a.descr);
        const int64_t s = seq_index(key);
        if (s >= 0) c.seqs[s] = key;
        c.arrays[key] = std::move(a);
      });
  return c;
}

std::string where_in(const std::string& path, const std::string& key) { return path + ": array '" + key + "'"; }

// The integer array 'lengths' of (N,) entries, each 1..longest (any width and sign, checked as doubles before
// conversion: a length from the file need not fit int64_t, uint64 2^64-1); `longest` is what the values hold.
std::vector<int64_t> lengths_of(const NpzContents& c, const std::string& path, int64_t n, int64_t longest,
                                const char* what) {
  const std::string where = where_in(path, "lengths");
  const NpyArray& len = c.arrays.at("lengths");
  USER_CHECK(len.kind == 'i' || len.kind == 'u', where << ": has dtype '" << len.descr << "'; expected integers",
             kNpzHint);
  USER_CHECK(len.shape.size() == 1 && len.size() == n,
             where << ": has shape " << len.shape_string() << "; expected (" << n << ",), one length per sequence of "
                   << what,
             kNpzHint);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const double v = npy_number(len, i);
    USER_CHECK(v >= 1 && v <= static_cast<double>(longest),
               where << ": lengths[" << i << "] is " << v << "; expected 1.." << longest << " (" << what << ")",
               (v < 1 ? "drop empty sequences before saving" : kNpzHint));
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

// The sequences of a padded (N, T, F) 'values' array into d: sequence i is values[i, :lengths[i]] when the archive
// has 'lengths', else all T steps of row i (and --missing trim drops NaN padding at the end).
std::string sequences_from_padded(const NpzContents& c, const std::string& path, RaggedData& d) {
  const NpyArray& v = c.arrays.at("values");
  const std::string where = where_in(path, "values");
  USER_CHECK(v.numeric(), where << ": has the text dtype '" << v.descr << "'; expected numbers", kNpzHint);
  const int64_t n = v.shape[0], steps = v.shape[1], f = v.shape[2];
  USER_CHECK(n >= 1 && steps >= 1 && f >= 1,
             where << ": has shape " << v.shape_string() << "; expected (sequences, timesteps, features), each >= 1",
             kNpzHint);
  const bool has_lengths = c.arrays.count("lengths") > 0;
  const std::vector<int64_t> lengths =
      has_lengths ? lengths_of(c, path, n, steps, "the padded 'values' (N, T, F)") : std::vector<int64_t>(n, steps);
  d.num_features = f;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first = i * steps * f, len = lengths[static_cast<size_t>(i)];
    for (int64_t k = 0; k < len * f; ++k)
      d.features.push_back(feature_value(v, first + k, [&] {
        return RT_MSG(where << "[" << i << ", " << k / f << ", " << k % f << "]");
      }));
    d.offsets.push_back(d.offsets.back() + len);
  }
  return has_lengths ? "values (N, T, F) + lengths" : "values (N, T, F), padded";
}

// The sequences of the layout values (total_T, F) + lengths (N), or of a padded values (N, T, F), into d;
// returns the layout's name.
std::string sequences_from_values(const NpzContents& c, const std::string& path, RaggedData& d) {
  const auto where = [&](const std::string& key) { return where_in(path, key); };
  if (c.arrays.at("values").shape.size() == 3) return sequences_from_padded(c, path, d);
  USER_CHECK(c.arrays.count("lengths"), path << ": has 'values' but no 'lengths' array (arrays: " << c.found() << ")",
             kNpzHint);
  const NpyArray& len = c.arrays.at("lengths");
  USER_CHECK(len.kind == 'i' || len.kind == 'u',
             where("lengths") << ": has dtype '" << len.descr << "'; expected integers", kNpzHint);
  USER_CHECK(len.shape.size() == 1 && len.size() >= 1,
             where("lengths") << ": has shape " << len.shape_string() << "; expected (N,) with N >= 1", kNpzHint);
  int64_t row = 0;
  append_rows(c.arrays.at("values"), where("values"), d, row);
  for (int64_t i = 0; i < len.size(); ++i) {
    // Checked as a double before any conversion: a length from the file need not fit int64_t (uint64 2^64-1),
    // and a running sum kept within the rows of 'values' cannot overflow.
    const double n = npy_number(len, i);
    USER_CHECK(n >= 1, where("lengths") << ": lengths[" << i << "] is " << n
                                        << "; expected at least one timestep per sequence",
               "drop empty sequences before saving");
    USER_CHECK(n <= static_cast<double>(row - d.offsets.back()),
               where("lengths") << ": lengths[0.." << i << "] add up to more than the " << row
                                << " rows of 'values' (lengths[" << i << "] is " << n << ")",
               kNpzHint);
    d.offsets.push_back(d.offsets.back() + static_cast<int64_t>(n));
  }
  USER_CHECK(d.offsets.back() == row,
             where("lengths") << ": the lengths add up to " << d.offsets.back() << " but 'values' has " << row
                              << " rows; expected them equal",
             kNpzHint);
  return "values + lengths";
}

// The sequences of the layout seq_0, seq_1, ... into d; returns the layout's name.
std::string sequences_from_seq_arrays(const NpzContents& c, const std::string& path, RaggedData& d) {
  USER_CHECK(c.seqs.size() > 0 || c.object_arrays.empty(),
             path << ": array '" << c.object_arrays[0] << "' is an object array (a pickle, as numpy.savez writes a list "
                  << "of arrays of different lengths); pickles are never loaded",
             "store each sequence as its own array, numpy.savez(f, **{f\"seq_{i}\": a for i, a in "
             "enumerate(seqs)}, labels=y), or as values + lengths; see doc/data-format.md, \"Bring your own data\"");
  const std::string found = c.found();
  USER_CHECK(!c.seqs.empty(),
             path << ": no sequences: expected arrays seq_0, seq_1, ... or values + lengths (arrays: " << found << ")",
             (found.find("arr_0") != std::string::npos
                  ? std::string("numpy.savez(f, *arrays) names them arr_0, arr_1, ...; pass names instead: "
                                "numpy.savez(f, **{f\"seq_{i}\": a for i, a in enumerate(arrays)}, labels=y)")
                  : std::string(kNpzHint)));
  const int64_t n = c.seqs.rbegin()->first + 1;
  for (int64_t i = 0; i < n; ++i) {
    USER_CHECK(c.seqs.count(i),
               path << ": has seq_0 .. seq_" << n - 1 << " but no seq_" << i
                    << "; expected every index from 0 to the last",
               kNpzHint);
    const std::string& key = c.seqs.at(i);
    const NpyArray& a = c.arrays.at(key);
    USER_CHECK(a.shape.empty() || a.shape[0] >= 1,
               where_in(path, key) << ": has shape " << a.shape_string() << "; expected at least one timestep",
               "drop empty sequences before saving");
    int64_t row = 0;
    append_rows(a, where_in(path, key), d, row);
    d.offsets.push_back(d.offsets.back() + row);
  }
  return "seq_0 .. seq_" + std::to_string(n - 1);
}

// Float labels (or any numbers with --regression): targets (N,) or (N, K) into d.
void regression_targets(const NpyArray& y, const std::string& where, const std::vector<std::string>& names,
                        const std::string& names_source, RaggedData& d) {
  USER_CHECK(y.numeric(), where << ": holds text (dtype '" << y.descr << "'); regression targets are numbers",
             "leave out --regression for class labels");
  USER_CHECK(names.empty(), where << ": float labels are regression targets, but class names were given ("
                                  << names_source << ")",
             "store class ids as integers (labels.astype(numpy.int64)), or drop the class names");
  USER_CHECK(y.shape.size() <= 2, where << ": has shape " << y.shape_string() << "; expected (N,) or (N, K)", kNpzHint);
  d.task = Task::Regression;
  d.num_outputs = y.shape.size() == 2 ? y.shape[1] : 1;
  USER_CHECK(d.num_outputs >= 1, where << ": has shape " << y.shape_string() << ", no targets", kNpzHint);
  for (int64_t i = 0; i < y.size(); ++i) {
    const double v = npy_number(y, i);
    USER_CHECK(finite_as_float32(v), where << ": sequence " << i / d.num_outputs << " has the target " << v
                                           << "; expected finite numbers within float32 range",
               "impute or drop missing targets before saving");
    d.targets.push_back(static_cast<float>(v));
  }
}

// Integer or string labels (N,): class ids into d, numbered by `names` when given.
void class_labels(const NpyArray& y, const std::string& where, const std::vector<std::string>& names,
                  const std::string& names_source, RaggedData& d) {
  const int64_t n = d.num_sequences();
  USER_CHECK(y.shape.size() == 1, where << ": has shape " << y.shape_string() << "; class labels need shape (N,)",
             "flatten them with labels.ravel(), or pass --regression for several targets");
  d.task = Task::Classification;
  if (y.text()) {
    ClassLabels mapped = map_class_labels(strings_of(y), names, names_source,
                                          [&](int64_t i) { return RT_MSG(where << ": labels[" << i << "]"); });
    d.labels = std::move(mapped.ids);
    d.class_names = std::move(mapped.names);
    d.num_outputs = static_cast<int64_t>(d.class_names.size());
    return;
  }
  // Integer labels are class ids already; the class count is the number of names, or the largest id + 1.
  double largest = 0;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, npy_number(y, i));
  USER_CHECK(largest < 2147483647.0, where << ": class id " << largest << " is too large",
             "class ids count from 0 to the number of classes - 1");
  const int64_t classes = names.empty() ? static_cast<int64_t>(largest) + 1 : static_cast<int64_t>(names.size());
  for (int64_t i = 0; i < n; ++i) {
    const double v = npy_number(y, i);
    USER_CHECK(v >= 0 && v < static_cast<double>(classes),
               where << ": labels[" << i << "] is " << v << "; expected a class id in 0.." << classes - 1
                     << (names.empty() ? "" : " (" + std::to_string(classes) + " class names)"),
               "class ids count from 0; string labels are mapped to ids for you");
    d.labels.push_back(static_cast<int32_t>(v));
  }
  USER_CHECK(classes >= 2, where << ": every label is 0; classification needs at least 2 classes",
             "check the labels; for regression targets pass --regression or store them as floats");
  d.class_names = names;
  d.num_outputs = classes;
}

// How an archive stores its sequences, for messages that point into it.
enum class NpzLayout { SeqArrays, Flat, Padded };

// Where step t, feature f of sequence i is in the archive: "x.npz: array 'values': row 812, column 2 (sequence 9,
// step 4)", "x.npz: array 'values'[9, 4, 2]", or "x.npz: array 'seq_9': row 4, column 2".
std::string element_in(const NpzContents& c, const std::string& path, NpzLayout layout, int64_t i, int64_t first,
                       int64_t t, int64_t f) {
  switch (layout) {
    case NpzLayout::Padded: return RT_MSG(where_in(path, "values") << "[" << i << ", " << t << ", " << f << "]");
    case NpzLayout::Flat:
      return RT_MSG(where_in(path, "values") << ": row " << first + t << ", column " << f << " (sequence " << i
                                             << ", step " << t << ")");
    case NpzLayout::SeqArrays: break;
  }
  return RT_MSG(where_in(path, c.seqs.at(i)) << ": row " << t << ", column " << f);
}

// The missing values (NaN) of every sequence in d handled as --missing says; trim rebuilds the offsets.
void handle_missing(const NpzContents& c, const std::string& path, NpzLayout layout, MissingMode mode, RaggedData& d,
                    ImportLog* log) {
  MissingValues missing(mode);
  const int64_t F = d.num_features;
  const std::vector<int64_t> offsets = d.offsets;   // as read from the archive
  std::vector<float> features, seq;
  features.reserve(d.features.size());
  d.offsets.assign(1, 0);
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(offsets.size()); ++i) {
    const int64_t first = offsets[static_cast<size_t>(i)], last = offsets[static_cast<size_t>(i + 1)];
    seq.assign(d.features.begin() + first * F, d.features.begin() + last * F);
    const std::string sequence = layout == NpzLayout::SeqArrays
                                     ? where_in(path, c.seqs.at(i))
                                     : RT_MSG(where_in(path, "values") << " (sequence " << i << ")");
    missing.apply(seq, F,
                  SequenceSource{sequence, [&](int64_t t, int64_t f) { return element_in(c, path, layout, i, first, t, f); },
                                 "NaN"});
    features.insert(features.end(), seq.begin(), seq.end());
    d.offsets.push_back(d.offsets.back() + static_cast<int64_t>(seq.size()) / F);
  }
  d.features = std::move(features);
  if (log) log->missing = missing.report();
}

// The archive's 'names' (N,) of strings or integers, checked; else the sequences' positions, "0".."N-1".
std::vector<std::string> names_of(const NpzContents& c, const std::string& path, int64_t n) {
  if (!c.arrays.count("names")) return index_names(n);
  const std::string where = where_in(path, "names");
  const NpyArray& a = c.arrays.at("names");
  USER_CHECK((a.text() || a.kind == 'i' || a.kind == 'u') && a.shape.size() == 1 && a.size() == n,
             where << ": has dtype '" << a.descr << "' and shape " << a.shape_string() << "; expected (" << n
                   << ",) strings or integers, one name per sequence",
             "numpy.savez(..., names=np.array([\"walk_000\", \"walk_001\", ...])), or leave 'names' out to number "
             "the sequences");
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i)
    names.push_back(a.text() ? npy_string(a, i) : RT_MSG(static_cast<int64_t>(npy_number(a, i))));
  check_sequence_names(where, names, n);
  return names;
}

// The labels of the N sequences in d (and the archive's class_names, checked against --class-names-from). An
// archive without 'labels' is a data set without labels (for predict).
void labels_into(const NpzContents& c, const std::string& path, const std::string& layout, const ImportOptions& opts,
                 RaggedData& d, ImportLog* log) {
  const auto where = [&](const std::string& key) { return where_in(path, key); };
  const int64_t n = d.num_sequences();
  if (!c.arrays.count("labels")) {
    d.labeled = false;
    d.num_outputs = 0;
    // The model's checkpoint names the classes of predict's output; names without labels are not stored.
    if (c.arrays.count("class_names") && log) log->ignored.push_back("class_names (no labels to name)");
    return;
  }
  const NpyArray& y = c.arrays.at("labels");
  USER_CHECK(!y.shape.empty() && y.shape[0] == n,
             where("labels") << ": has shape " << y.shape_string() << "; expected " << n << " rows, one per sequence ("
                             << layout << ")",
             "give every sequence exactly one label (or one row of targets)");
  std::vector<std::string> names = opts.class_names;
  std::string names_source = opts.class_names_source;
  if (c.arrays.count("class_names")) {
    const NpyArray& cn = c.arrays.at("class_names");
    USER_CHECK(cn.text() && cn.shape.size() == 1,
               where("class_names") << ": has dtype '" << cn.descr << "' and shape " << cn.shape_string()
                                    << "; expected a 1-D array of strings",
               "numpy.savez(..., class_names=np.array([\"walk\", \"run\"]))");
    const std::vector<std::string> own = strings_of(cn);
    USER_CHECK(names.empty() || names == own, where("class_names") << " differs from the class names of " << names_source,
               "leave one of them out, or make them agree");
    names = own;
    names_source = where("class_names");
    const std::set<std::string> distinct(names.begin(), names.end());
    USER_CHECK(distinct.size() == names.size(), where("class_names") << ": has a name twice", "give every class one name");
  }
  if (y.kind == 'f' || opts.regression) regression_targets(y, where("labels"), names, names_source, d);
  else class_labels(y, where("labels"), names, names_source, d);
}

}  // namespace

RaggedData read_npz_file(const std::string& path, const ImportOptions& opts, ImportLog* log) {
  std::error_code ec;
  USER_CHECK(std::filesystem::is_regular_file(path, ec), path << ": no such file", "check the path of the .npz file");
  const NpzContents c = read_archive(path, log);
  RaggedData d;
  const bool has_values = c.arrays.count("values") > 0;
  USER_CHECK(!(has_values && !c.seqs.empty()), path << ": holds both 'values' and 'seq_*' arrays; expected one layout",
             kNpzHint);
  const std::string layout = has_values ? sequences_from_values(c, path, d) : sequences_from_seq_arrays(c, path, d);
  handle_missing(c, path,
                 !has_values                                    ? NpzLayout::SeqArrays
                 : c.arrays.at("values").shape.size() == 3 ? NpzLayout::Padded
                                                                : NpzLayout::Flat,
                 opts.missing, d, log);
  d.names = names_of(c, path, d.num_sequences());
  labels_into(c, path, layout, opts, d, log);
  d.source = RT_MSG("ragtrain convert: " << std::filesystem::path(path).filename().string() << " (" << layout << ")");
  return d;
}

}  // namespace ragtrain
