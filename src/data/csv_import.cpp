// read_csv_folder: a folder of per-sequence CSV files plus a labels CSV into a RaggedData.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/missing.hpp"

namespace fs = std::filesystem;

namespace ragtrain {

namespace {

const char* const kCsvHint =
    "one CSV file per sequence: one row per timestep, one column per feature, numbers separated by ',' and an "
    "optional first row of column names; see doc/data-format.md, \"Bring your own data\"";
const char* const kLabelsHint =
    "the labels file has a header row, then one row per sequence: FILE,LABEL (or FILE,Y1,...,YK with "
    "--regression, or FILE alone for the order of sequences without labels); see doc/data-format.md, \"Bring "
    "your own data\"";

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// "walk" -> walk, with "" inside a quoted field meaning one ". Commas inside quotes are not supported.
std::string unquote(const std::string& s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') return s;
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    out += s[i];
    if (s[i] == '"' && s[i + 1] == '"') ++i;
  }
  return out;
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t pos; (pos = line.find(',', start)) != std::string::npos; start = pos + 1)
    out.push_back(trim(line.substr(start, pos - start)));
  out.push_back(trim(line.substr(start)));
  return out;
}

// Whether `field` is written as a number, finite or not ("1e-3", "inf"): such a first row is data.
bool numberish(const std::string& field) {
  double v = 0;
  const char* b = field.data() + (!field.empty() && field[0] == '+' ? 1 : 0);
  const auto [p, ec] = std::from_chars(b, field.data() + field.size(), v);
  return !field.empty() && ec == std::errc() && p == field.data() + field.size();
}

// Why `field` (not a missing value) is not a finite number, for messages.
std::string not_a_number(const std::string& field) {
  double v = 0;
  const char* b = field.data() + (!field.empty() && field[0] == '+' ? 1 : 0);
  const auto [p, ec] = std::from_chars(b, field.data() + field.size(), v);
  if (!field.empty() && ec == std::errc() && p == field.data() + field.size())
    return std::isfinite(v) ? "\"" + field + "\", beyond float32 range (|x| <= 3.4e38)"
                            : "the infinite value \"" + field + "\" (infinity is not supported)";
  if (is_missing_text(field)) return "a missing value (\"" + field + "\"), which a label or target cannot be";
  return "\"" + field + "\", which is not a number";
}

// The lines of a text file; a UTF-8 byte-order mark (as spreadsheet programs write) and '\r' are dropped.
std::vector<std::string> read_lines(const std::string& path, const char* hint) {
  std::error_code ec;
  USER_CHECK(fs::is_regular_file(path, ec), path << ": no such file", hint);
  std::ifstream in(path, std::ios::binary);
  USER_CHECK(in, path << ": cannot be read", "check the file's permissions");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (lines.empty() && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

// One sequence file: (rows, width) numbers (NaN where a value is missing) and the header, when the first row
// is one.
struct SequenceCsv {
  std::vector<std::string> header;   // empty without a header row
  int64_t width = 0;
  int64_t rows = 0;
  std::vector<float> values;         // (rows, width)
  std::vector<int64_t> lines;        // (rows) the line of each row, for messages
};

// Whether the first row of a sequence file is a header: none of its fields is a number, and one is text (not
// a missing value). A mix of numbers and text is a typo. Missing values count as neither: pandas writes an
// empty name for the index column, and a first row of data may have gaps.
bool is_header_row(const std::vector<std::string>& f, const std::string& path, int64_t line) {
  int64_t numbers = 0;
  std::string text;
  for (const auto& x : f) {
    if (is_missing_text(x)) continue;
    if (numberish(x)) ++numbers;
    else if (text.empty()) text = x;
  }
  USER_CHECK(numbers == 0 || text.empty(),
             path << ":" << line << ": the first row mixes numbers and text (\"" << text
                  << "\"); expected either a header row of column names or a row of numbers",
             kCsvHint);
  return !text.empty();
}

SequenceCsv read_sequence_csv(const std::string& path) {
  const std::vector<std::string> lines = read_lines(path, kCsvHint);
  SequenceCsv s;
  int64_t width_line = 0;   // the line that set the width
  for (size_t i = 0; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    const auto line = static_cast<int64_t>(i) + 1;
    const std::vector<std::string> f = fields_of(lines[i]);
    if (width_line == 0) {
      s.width = static_cast<int64_t>(f.size());
      width_line = line;
      if (is_header_row(f, path, line)) {
        for (const auto& x : f) s.header.push_back(unquote(x));
        continue;
      }
    }
    USER_CHECK(static_cast<int64_t>(f.size()) == s.width,
               path << ":" << line << ": " << f.size() << " value(s); expected " << s.width << " like line "
                    << width_line << " (every row of a sequence has one value per feature)",
               kCsvHint);
    for (size_t c = 0; c < f.size(); ++c) {
      if (is_missing_text(f[c])) {   // --missing decides (MissingValues), with the file and line at hand
        s.values.push_back(std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      double v = 0;
      USER_CHECK(parse_float32_text(f[c], v),
                 path << ":" << line << ": column " << c + 1 << " holds " << not_a_number(f[c])
                      << "; expected a finite number, or an empty field, ?, NaN or NA for a missing value",
                 kCsvHint);
      s.values.push_back(static_cast<float>(v));
    }
    s.lines.push_back(line);
    ++s.rows;
  }
  USER_CHECK(s.rows >= 1, path << ": no rows of numbers; expected at least one timestep per sequence", kCsvHint);
  return s;
}

// Lower-case extension of a path, ".csv" for "a.CSV".
std::string lower_extension(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& ch : e) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return e;
}

// One row of the labels file: the sequence file, its line, and its label (or targets; none when unlabeled).
struct Row {
  fs::path file;
  int64_t line = 0;
  std::vector<std::string> labels;
};

// The rows of a labels file, in its order: FILE,LABEL, FILE,Y1..YK (--regression), or FILE alone (no labels).
// `seen` gets every file's canonical path and line.
std::vector<Row> label_rows(const std::string& dir, const std::string& labels_csv, const ImportOptions& opts,
                            std::map<fs::path, int64_t>& seen) {
  std::error_code ec;
  const std::vector<std::string> lines = read_lines(labels_csv, kLabelsHint);
  // The header row fixes the number of columns: FILE,LABEL or FILE,Y1..YK, or FILE for an order without labels.
  size_t first = 0;
  while (first < lines.size() && blank(lines[first])) ++first;
  USER_CHECK(first < lines.size(), labels_csv << ": is empty; expected a header row and one row per sequence",
             kLabelsHint);
  const std::vector<std::string> header = fields_of(lines[first]);
  const auto width = static_cast<int64_t>(header.size());
  USER_CHECK(opts.regression || width <= 2,
             labels_csv << ":" << first + 1 << ": the header has " << width
                        << " columns; class labels need exactly 2 (FILE,LABEL)",
             "for regression targets (one column each) pass --regression");
  {
    const fs::path as_file = fs::path(dir) / unquote(header[0]);
    USER_CHECK(!fs::is_regular_file(as_file, ec) && !fs::is_regular_file(as_file.string() + ".csv", ec),
               labels_csv << ":" << first + 1 << ": the first row names the file \"" << unquote(header[0])
                          << "\"; expected a header row (e.g. file,label) before the data rows",
               kLabelsHint);
  }
  std::vector<Row> rows;
  for (size_t i = first + 1; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    const auto line = static_cast<int64_t>(i) + 1;
    std::vector<std::string> f = fields_of(lines[i]);
    USER_CHECK(static_cast<int64_t>(f.size()) == width,
               labels_csv << ":" << line << ": " << f.size() << " column(s); expected " << width << " like the header",
               kLabelsHint);
    const std::string name = unquote(f[0]);
    USER_CHECK(!name.empty(), labels_csv << ":" << line << ": the file name is empty", kLabelsHint);
    fs::path file = fs::path(dir) / name;
    if (!fs::is_regular_file(file, ec) && !file.has_extension()) file += ".csv";
    USER_CHECK(fs::is_regular_file(file, ec),
               labels_csv << ":" << line << ": no file \"" << name << "\" in " << dir,
               "every row names a CSV file of the folder, relative to it (e.g. walk_001.csv)");
    const auto [it, fresh] = seen.emplace(fs::canonical(file, ec), line);
    USER_CHECK(fresh, labels_csv << ":" << line << ": \"" << name << "\" already has a row on line " << it->second,
               "give every sequence file exactly one row");
    rows.push_back(Row{file, line, std::vector<std::string>(f.begin() + 1, f.end())});
  }
  USER_CHECK(!rows.empty(), labels_csv << ": no rows after the header; expected one row per sequence", kLabelsHint);
  return rows;
}

// Every *.csv file of the folder, in sorted name order. With a labels file (`labels_csv` not empty) each must
// have a row there: a file without one is a mistake rather than skipped. Without one, they are the sequences.
std::vector<fs::path> csv_files(const std::string& dir, const std::string& labels_csv,
                                const std::map<fs::path, int64_t>& seen, ImportLog* log) {
  std::error_code ec;
  const fs::path labels_key = labels_csv.empty() ? fs::path() : fs::canonical(labels_csv, ec);
  std::vector<fs::path> entries, out;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    if (!fs::is_regular_file(p, ec)) continue;
    if (lower_extension(p) != ".csv") {
      if (log) log->ignored.push_back(p.filename().string() + " (not .csv)");
      continue;
    }
    const fs::path key = fs::canonical(p, ec);
    if (!labels_csv.empty() && key == labels_key) continue;
    USER_CHECK(labels_csv.empty() || seen.count(key),
               p.string() << ": has no row in " << labels_csv << "; expected a row for every CSV file of the folder",
               "add a row `" << p.filename().string() << ",LABEL` to " << labels_csv
                             << ", or move the file out of the folder");
    out.push_back(p);
  }
  USER_CHECK(!out.empty(), dir << ": holds no .csv file; expected one CSV file per sequence", kCsvHint);
  return out;
}

// The sequence files, in order, into d.features and d.offsets, their missing values handled as `opts` says.
void read_sequences(const std::vector<fs::path>& files, const ImportOptions& opts, RaggedData& d, ImportLog* log) {
  MissingValues missing(opts.missing);
  std::vector<std::string> first_header;
  std::string first_file, header_file;
  for (const fs::path& file : files) {
    const std::string path = file.string();
    SequenceCsv s = read_sequence_csv(path);
    if (d.num_features == 0) {
      d.num_features = s.width;
      first_file = path;
    }
    USER_CHECK(s.width == d.num_features,
               path << ": " << s.width << " column(s); expected " << d.num_features << " like " << first_file
                    << " (every sequence has the same features)",
               kCsvHint);
    if (!s.header.empty()) {
      if (first_header.empty()) {
        first_header = s.header;
        header_file = path;
      }
      USER_CHECK(s.header == first_header,
                 path << ":1: the column names differ from those of " << header_file
                      << "; expected the same features in the same order",
                 "write every sequence file with the same columns in the same order");
    }
    missing.apply(s.values, s.width,
                  SequenceSource{path, [&](int64_t t, int64_t f) {
                                   return RT_MSG(path << ":" << s.lines[static_cast<size_t>(t)] << ": column " << f + 1);
                                 }});
    const int64_t rows = static_cast<int64_t>(s.values.size()) / s.width;
    d.features.insert(d.features.end(), s.values.begin(), s.values.end());
    d.offsets.push_back(d.offsets.back() + rows);
    if (log)
      log->read.push_back(file.filename().string() + ": " + std::to_string(rows) + " x " + std::to_string(s.width));
  }
  if (log) log->missing = missing.report();
}

// The labels (or targets) of the rows into d.
void labels_into(const std::vector<Row>& rows, const std::string& labels_csv, const ImportOptions& opts,
                 RaggedData& d) {
  const auto where = [&](int64_t i) { return RT_MSG(labels_csv << ":" << rows[static_cast<size_t>(i)].line); };
  d.task = opts.regression ? Task::Regression : Task::Classification;
  if (d.task == Task::Classification) {
    std::vector<std::string> labels;
    for (const Row& r : rows) {
      labels.push_back(unquote(r.labels[0]));
      // --missing is about features: a sequence without its label is a mistake, not a class named "" or "?".
      USER_CHECK(!labels.back().empty() && labels.back() != "?",
                 where(static_cast<int64_t>(labels.size()) - 1) << ": the label of " << r.file.filename().string()
                                                                << " is missing (\"" << labels.back() << "\")",
                 "give every sequence its label; for data without labels leave out --labels (or give a labels "
                 "file with the FILE column only)");
    }
    ClassLabels mapped = map_class_labels(labels, opts.class_names, opts.class_names_source, where);
    d.labels = std::move(mapped.ids);
    d.class_names = std::move(mapped.names);
    d.num_outputs = static_cast<int64_t>(d.class_names.size());
    return;
  }
  d.num_outputs = static_cast<int64_t>(rows[0].labels.size());
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t k = 0; k < rows[i].labels.size(); ++k) {
      double v = 0;
      USER_CHECK(parse_float32_text(rows[i].labels[k], v),
                 where(static_cast<int64_t>(i)) << ": target column " << k + 2 << " holds "
                                                << not_a_number(rows[i].labels[k]) << "; expected a finite number",
                 kLabelsHint);
      d.targets.push_back(static_cast<float>(v));
    }
}

// Whether `file` reads like a labels file of `dir`: the first field of its second non-blank row names a file
// of the folder. For the hint when a folder is converted without --labels but holds its labels file.
bool names_files_of(const fs::path& file, const std::string& dir) {
  std::error_code ec;
  int64_t row = 0;
  for (const std::string& line : read_lines(file.string(), kCsvHint)) {
    if (blank(line) || ++row < 2) continue;
    const fs::path named = fs::path(dir) / unquote(fields_of(line)[0]);
    return fs::is_regular_file(named, ec) || fs::is_regular_file(named.string() + ".csv", ec);
  }
  return false;
}

}  // namespace

RaggedData read_csv_folder(const std::string& dir, const std::string& labels_csv, const ImportOptions& opts,
                           ImportLog* log) {
  std::error_code ec;
  USER_CHECK(fs::is_directory(dir, ec), dir << ": no such folder", "pass the folder that holds one CSV file per sequence");
  std::map<fs::path, int64_t> seen;   // canonical path -> line of the labels file
  const std::vector<Row> rows = labels_csv.empty() ? std::vector<Row>{} : label_rows(dir, labels_csv, opts, seen);
  const std::vector<fs::path> listed = csv_files(dir, labels_csv, seen, log);
  // Labelled: the labels file's order. Without a labels file: the folder's, sorted by name.
  std::vector<fs::path> files;
  if (labels_csv.empty())
    files = listed;
  else
    for (const Row& r : rows) files.push_back(r.file);

  RaggedData d;
  try {
    read_sequences(files, opts, d, log);
  } catch (const UserError& e) {
    // Without --labels a labels file in the folder is read as a sequence and fails there: say what it is.
    if (!labels_csv.empty()) throw;
    for (const fs::path& f : files)
      if (names_files_of(f, dir))
        throw UserError(e.what(), RT_MSG(f.filename().string()
                                         << " looks like a labels file (its rows name CSV files of the folder): pass "
                                            "it with --labels "
                                         << f.string()
                                         << "; without --labels every *.csv file of the folder is a sequence of a "
                                            "data set without labels"));
    throw;
  }
  // Each sequence is named by its file, as the labels file or the folder listing has it (relative to the folder).
  const fs::path base = fs::path(dir).lexically_normal();
  for (const fs::path& f : files) d.names.push_back(f.lexically_normal().lexically_relative(base).generic_string());
  d.labeled = !rows.empty() && !rows[0].labels.empty();
  if (d.labeled) labels_into(rows, labels_csv, opts, d);
  fs::path folder(dir);
  if (!folder.has_filename()) folder = folder.parent_path();   // "data/" names the folder "data"
  d.source = RT_MSG("ragtrain convert: " << folder.filename().string() << "/ (" << files.size() << " CSV files) "
                                         << (labels_csv.empty() ? std::string("without labels, in name order")
                                                                : (d.labeled ? "with labels " : "in the order of ") +
                                                                      fs::path(labels_csv).filename().string()));
  return d;
}

}  // namespace ragtrain
