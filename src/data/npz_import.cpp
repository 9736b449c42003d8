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
#include "ragtrain/data/dataset.hpp"
#include "ragtrain/data/npy.hpp"

namespace ragtrain {

namespace {

const char* const kNpzHint =
    "save either one array per sequence, numpy.savez(f, seq_0=a0, seq_1=a1, ..., labels=y), or the "
    "concatenation and the lengths, numpy.savez(f, values=np.concatenate(seqs), lengths=[len(s) for s in seqs], "
    "labels=y); see doc/data-format.md, \"Bring your own data\"";

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
    std::vector<char> chunk(1 << 20);
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
  for (int64_t i = 0; i < n; ++i) {
    const double v = npy_number(a, i);
    USER_CHECK(finite_as_float32(v),
               where << ": row " << features_from_row + i / f << ", column " << i % f << " is " << v
                     << "; expected finite numbers within float32 range (|x| <= 3.4e38)",
               "impute or drop missing values (NaN) and infinities before saving");
    d.features.push_back(static_cast<float>(v));
  }
  features_from_row += n / f;
}

std::vector<std::string> strings_of(const NpyArray& a) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < a.size(); ++i) out.push_back(npy_string(a, i));
  return out;
}

// The .npy entries of an .npz archive: the arrays ragtrain reads, by key, and what the messages name.
struct NpzContents {
  std::map<std::string, NpyArray> arrays;
  std::map<int64_t, std::string> seqs;      // index -> key of the seq_* arrays
  std::vector<std::string> keys;            // every .npy entry, for messages
  std::vector<std::string> object_arrays;   // entries of no known name that hold pickled objects
  std::string found;                        // the keys as one list ("none" when there are none)
  std::string where(const std::string& path, const std::string& key) const {
    return path + ": array '" + key + "'";
  }
};

NpzContents read_npz_arrays(const std::string& path, ImportLog* log) {
  NpzContents c;
  auto& arrays = c.arrays;
  auto& seqs = c.seqs;
  auto& keys = c.keys;
  auto& object_arrays = c.object_arrays;
  const std::set<std::string> known = {"values", "lengths", "labels", "class_names"};
  {
    ZipArchive zip(path);
    zip.for_each(
        [&](const std::string& name) {
          const bool npy = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0;
          const std::string key = npy ? name.substr(0, name.size() - 4) : name;
          if (!npy) {
            if (log) log->ignored.push_back(name);
            return size_t{0};
          }
          keys.push_back(key);
          // Arrays of no known name: only their header, to say what they are (an object array is a common
          // mistake: a list of arrays of different lengths).
          return known.count(key) || seq_index(key) >= 0 ? ZipArchive::kAll : size_t{4096};
        },
        [&](const std::string& name, const std::string& bytes) {
          const std::string key = name.substr(0, name.size() - 4);
          if (!known.count(key) && seq_index(key) < 0) {
            std::string what = key;
            try {
              const NpyHeader h = parse_npy_header(bytes, key);
              what += " " + h.descr;
              if (h.descr.size() >= 2 && h.descr[1] == 'O') object_arrays.push_back(key);
            } catch (const UserError&) {
              what += " (not a readable .npy header)";
            }
            if (log) log->ignored.push_back(what);
            return;
          }
          NpyArray a = parse_npy(bytes, path + ": array '" + key + "'");
          if (log) log->read.push_back(key + ": " + a.shape_string() + " " + a.descr);
          const int64_t s = seq_index(key);
          if (s >= 0) seqs[s] = key;
          arrays[key] = std::move(a);
        });
  }
  for (const auto& k : keys) c.found += (c.found.empty() ? "" : ", ") + k;
  if (c.found.empty()) c.found = "none";
  return c;
}

// The features and offsets of d from either layout (values + lengths, or seq_0 .. seq_N-1); returns the layout's
// name for messages.
std::string read_npz_sequences(const std::string& path, const NpzContents& c, RaggedData& d) {
  const auto& arrays = c.arrays;
  const auto& seqs = c.seqs;
  const auto& object_arrays = c.object_arrays;
  const std::string& found = c.found;
  const auto where = [&](const std::string& key) { return c.where(path, key); };
  std::string layout;
  const bool has_values = arrays.count("values") > 0;
  USER_CHECK(!(has_values && !seqs.empty()),
             path << ": holds both 'values' and 'seq_*' arrays; expected one layout", kNpzHint);
  if (has_values) {
    USER_CHECK(arrays.count("lengths"), path << ": has 'values' but no 'lengths' array (arrays: " << found << ")",
               kNpzHint);
    const NpyArray& len = arrays.at("lengths");
    USER_CHECK(len.kind == 'i' || len.kind == 'u',
               where("lengths") << ": has dtype '" << len.descr << "'; expected integers", kNpzHint);
    USER_CHECK(len.shape.size() == 1 && len.size() >= 1,
               where("lengths") << ": has shape " << len.shape_string() << "; expected (N,) with N >= 1", kNpzHint);
    const NpyArray& values = arrays.at("values");
    int64_t row = 0;
    append_rows(values, where("values"), d, row);
    for (int64_t i = 0; i < len.size(); ++i) {
      const auto n = static_cast<int64_t>(npy_number(len, i));
      USER_CHECK(n >= 1, where("lengths") << ": lengths[" << i << "] is " << n
                                          << "; expected at least one timestep per sequence",
                 "drop empty sequences before saving");
      d.offsets.push_back(d.offsets.back() + n);
    }
    USER_CHECK(d.offsets.back() == row,
               where("lengths") << ": the lengths add up to " << d.offsets.back() << " but 'values' has " << row
                                << " rows; expected them equal",
               kNpzHint);
    layout = "values + lengths";
  } else {
    USER_CHECK(seqs.size() > 0 || object_arrays.empty(),
               path << ": array '" << object_arrays[0] << "' is an object array (a pickle, as numpy.savez writes a list "
                    << "of arrays of different lengths); pickles are never loaded",
               "store each sequence as its own array, numpy.savez(f, **{f\"seq_{i}\": a for i, a in "
               "enumerate(seqs)}, labels=y), or as values + lengths; see doc/data-format.md, \"Bring your own data\"");
    USER_CHECK(!seqs.empty(),
               path << ": no sequences: expected arrays seq_0, seq_1, ... or values + lengths (arrays: " << found << ")",
               (found.find("arr_0") != std::string::npos
                    ? std::string("numpy.savez(f, *arrays) names them arr_0, arr_1, ...; pass names instead: "
                                  "numpy.savez(f, **{f\"seq_{i}\": a for i, a in enumerate(arrays)}, labels=y)")
                    : std::string(kNpzHint)));
    const int64_t n = seqs.rbegin()->first + 1;
    for (int64_t i = 0; i < n; ++i) {
      USER_CHECK(seqs.count(i),
                 path << ": has seq_0 .. seq_" << n - 1 << " but no seq_" << i
                      << "; expected every index from 0 to the last",
                 kNpzHint);
      const std::string& key = seqs.at(i);
      const NpyArray& a = arrays.at(key);
      USER_CHECK(a.shape.empty() || a.shape[0] >= 1,
                 where(key) << ": has shape " << a.shape_string() << "; expected at least one timestep",
                 "drop empty sequences before saving");
      int64_t row = 0;
      append_rows(a, where(key), d, row);
      d.offsets.push_back(d.offsets.back() + row);
    }
    layout = "seq_0 .. seq_" + std::to_string(n - 1);
  }
  return layout;
}

// The class names: --class-names-from's (opts), checked against and replaced by the file's own class_names.
std::vector<std::string> read_npz_class_names(const std::string& path, const NpzContents& c, const ImportOptions& opts,
                                              std::string& names_source) {
  const auto& arrays = c.arrays;
  const auto where = [&](const std::string& key) { return c.where(path, key); };
  std::vector<std::string> names = opts.class_names;
  names_source = opts.class_names_source;
  if (arrays.count("class_names")) {
    const NpyArray& cn = arrays.at("class_names");
    USER_CHECK(cn.text() && cn.shape.size() == 1,
               where("class_names") << ": has dtype '" << cn.descr << "' and shape " << cn.shape_string()
                                    << "; expected a 1-D array of strings",
               "numpy.savez(..., class_names=np.array([\"walk\", \"run\"]))");
    const std::vector<std::string> own = strings_of(cn);
    USER_CHECK(names.empty() || names == own,
               where("class_names") << " differs from the class names of " << names_source,
               "leave one of them out, or make them agree");
    names = own;
    names_source = where("class_names");
    const std::set<std::string> distinct(names.begin(), names.end());
    USER_CHECK(distinct.size() == names.size(), where("class_names") << ": has a name twice", "give every class one name");
  }

  return names;
}

// d's labels or targets, task and outputs from the 'labels' array (float labels, or --regression: targets).
void read_npz_labels(const std::string& path, const NpzContents& c, const ImportOptions& opts,
                     const std::string& layout, RaggedData& d) {
  const auto& arrays = c.arrays;
  const std::string& found = c.found;
  const auto where = [&](const std::string& key) { return c.where(path, key); };
  const int64_t n = d.num_sequences();
  USER_CHECK(arrays.count("labels"), path << ": no 'labels' array (arrays: " << found << ")",
             "add the labels: numpy.savez(..., labels=y), one per sequence");
  const NpyArray& y = arrays.at("labels");
  USER_CHECK(!y.shape.empty() && y.shape[0] == n,
             where("labels") << ": has shape " << y.shape_string() << "; expected " << n << " rows, one per sequence ("
                             << layout << ")",
             "give every sequence exactly one label (or one row of targets)");
  std::string names_source;
  const std::vector<std::string> names = read_npz_class_names(path, c, opts, names_source);
  const bool regression = y.kind == 'f' || opts.regression;
  if (regression) {
    USER_CHECK(y.numeric(), where("labels") << ": holds text (dtype '" << y.descr << "'); regression targets are numbers",
               "leave out --regression for class labels");
    USER_CHECK(names.empty(), where("labels") << ": float labels are regression targets, but class names were given ("
                                              << names_source << ")",
               "store class ids as integers (labels.astype(numpy.int64)), or drop the class names");
    USER_CHECK(y.shape.size() <= 2, where("labels") << ": has shape " << y.shape_string() << "; expected (N,) or (N, K)",
               kNpzHint);
    d.task = Task::Regression;
    d.num_outputs = y.shape.size() == 2 ? y.shape[1] : 1;
    USER_CHECK(d.num_outputs >= 1, where("labels") << ": has shape " << y.shape_string() << ", no targets", kNpzHint);
    for (int64_t i = 0; i < y.size(); ++i) {
      const double v = npy_number(y, i);
      USER_CHECK(finite_as_float32(v), where("labels") << ": sequence " << i / d.num_outputs << " has the target "
                                                       << v << "; expected finite numbers within float32 range",
                 "impute or drop missing targets before saving");
      d.targets.push_back(static_cast<float>(v));
    }
  } else {
    USER_CHECK(y.shape.size() == 1, where("labels") << ": has shape " << y.shape_string()
                                                    << "; class labels need shape (N,)",
               "flatten them with labels.ravel(), or pass --regression for several targets");
    d.task = Task::Classification;
    if (y.text()) {
      ClassLabels mapped = map_class_labels(strings_of(y), names, names_source,
                                            [&](int64_t i) { return RT_MSG(where("labels") << ": labels[" << i << "]"); });
      d.labels = std::move(mapped.ids);
      d.class_names = std::move(mapped.names);
      d.num_outputs = static_cast<int64_t>(d.class_names.size());
    } else {
      // Integer labels are class ids already; the class count is the number of names, or the largest id + 1.
      double largest = 0;
      for (int64_t i = 0; i < n; ++i) largest = std::max(largest, npy_number(y, i));
      USER_CHECK(largest < 2147483647.0, where("labels") << ": class id " << largest << " is too large",
                 "class ids count from 0 to the number of classes - 1");
      const int64_t classes = names.empty() ? static_cast<int64_t>(largest) + 1 : static_cast<int64_t>(names.size());
      for (int64_t i = 0; i < n; ++i) {
        const double v = npy_number(y, i);
        USER_CHECK(v >= 0 && v < static_cast<double>(classes),
                   where("labels") << ": labels[" << i << "] is " << v << "; expected a class id in 0.." << classes - 1
                                   << (names.empty() ? "" : " (" + std::to_string(classes) + " class names)"),
                   "class ids count from 0; string labels are mapped to ids for you");
        d.labels.push_back(static_cast<int32_t>(v));
      }
      USER_CHECK(classes >= 2, where("labels") << ": every label is 0; classification needs at least 2 classes",
                 "check the labels; for regression targets pass --regression or store them as floats");
      d.class_names = names;
      d.num_outputs = classes;
    }
  }
}

}  // namespace

RaggedData read_npz_file(const std::string& path, const ImportOptions& opts, ImportLog* log) {
  std::error_code ec;
  USER_CHECK(std::filesystem::is_regular_file(path, ec), path << ": no such file", "check the path of the .npz file");
  const NpzContents contents = read_npz_arrays(path, log);
  RaggedData d;
  const std::string layout = read_npz_sequences(path, contents, d);
  read_npz_labels(path, contents, opts, layout, d);
  d.source = RT_MSG("ragtrain convert: " << std::filesystem::path(path).filename().string() << " (" << layout << ")");
  return d;
}

}  // namespace ragtrain
