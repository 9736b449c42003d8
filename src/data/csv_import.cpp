// read_csv_folder: a folder of per-sequence CSV files plus a labels CSV into a RaggedData.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/class_labels.hpp"
#include "ragtrain/data/importers.hpp"

namespace fs = std::filesystem;

namespace ragtrain {

namespace {

const char* const kCsvHint =
    "one CSV file per sequence: one row per timestep, one column per feature, numbers separated by ',' and an "
    "optional first row of column names; see doc/data-format.md, \"Bring your own data\"";
const char* const kLabelsHint =
    "the labels file has a header row, then one row per sequence: FILE,LABEL (or FILE,Y1,...,YK with "
    "--regression); see doc/data-format.md, \"Bring your own data\"";

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

// Whether `field` is written as a number, finite or not ("1e-3", "NaN", "inf"): such a first row is data.
bool numberish(const std::string& field) {
  double v = 0;
  const char* b = field.data() + (!field.empty() && field[0] == '+' ? 1 : 0);
  const auto [p, ec] = std::from_chars(b, field.data() + field.size(), v);
  return !field.empty() && ec == std::errc() && p == field.data() + field.size();
}

// Why `field` is not a finite number, for messages.
std::string not_a_number(const std::string& field) {
  if (field.empty()) return "an empty value (missing values are not supported)";
  double v = 0;
  const char* b = field.data() + (field[0] == '+' ? 1 : 0);
  const auto [p, ec] = std::from_chars(b, field.data() + field.size(), v);
  if (ec == std::errc() && p == field.data() + field.size())
    return std::isfinite(v) ? "\"" + field + "\", beyond float32 range (|x| <= 3.4e38)"
                            : "the non-finite value \"" + field + "\" (NaN and infinity are not supported)";
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

// One sequence file: (rows, width) numbers and the header, when the first row is one.
struct SequenceCsv {
  std::vector<std::string> header;   // empty without a header row
  int64_t width = 0;
  int64_t rows = 0;
  std::vector<float> values;         // (rows, width)
};

SequenceCsv read_sequence_csv(const std::string& path) {
  const std::vector<std::string> lines = read_lines(path, kCsvHint);
  SequenceCsv s;
  int64_t width_line = 0;   // the line that set the width
  for (size_t i = 0; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    const auto line = static_cast<int64_t>(i) + 1;
    const std::vector<std::string> f = fields_of(lines[i]);
    if (width_line == 0) {
      // The first row is a header when none of its fields is a number, data when none is text; a mix is a
      // typo. Empty fields count as neither (pandas writes an empty name for the index column).
      int64_t numbers = 0;
      std::string text;
      for (const auto& x : f) {
        if (numberish(x)) ++numbers;
        else if (!x.empty() && text.empty()) text = x;
      }
      s.width = static_cast<int64_t>(f.size());
      width_line = line;
      if (numbers == 0) {
        for (const auto& x : f) s.header.push_back(unquote(x));
        continue;
      }
      USER_CHECK(text.empty(),
                 path << ":" << line << ": the first row mixes numbers and text (\"" << text
                      << "\"); expected either a header row of column names or a row of numbers",
                 kCsvHint);
    }
    USER_CHECK(static_cast<int64_t>(f.size()) == s.width,
               path << ":" << line << ": " << f.size() << " value(s); expected " << s.width << " like line "
                    << width_line << " (every row of a sequence has one value per feature)",
               kCsvHint);
    for (size_t c = 0; c < f.size(); ++c) {
      double v = 0;
      USER_CHECK(parse_float32_text(f[c], v),
                 path << ":" << line << ": column " << c + 1 << " holds " << not_a_number(f[c])
                      << "; expected a finite number",
                 kCsvHint);
      s.values.push_back(static_cast<float>(v));
    }
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

}  // namespace

RaggedData read_csv_folder(const std::string& dir, const std::string& labels_csv, const ImportOptions& opts,
                           ImportLog* log) {
  std::error_code ec;
  USER_CHECK(fs::is_directory(dir, ec), dir << ": no such folder", "pass the folder that holds one CSV file per sequence");
  USER_CHECK(!labels_csv.empty(), dir << ": a folder of CSV files needs --labels LABELS.csv", kLabelsHint);
  const std::vector<std::string> lines = read_lines(labels_csv, kLabelsHint);

  // The header row fixes the number of columns: FILE,LABEL or FILE,Y1..YK.
  size_t first = 0;
  while (first < lines.size() && blank(lines[first])) ++first;
  USER_CHECK(first < lines.size(), labels_csv << ": is empty; expected a header row and one row per sequence",
             kLabelsHint);
  const std::vector<std::string> header = fields_of(lines[first]);
  const auto width = static_cast<int64_t>(header.size());
  USER_CHECK(width >= 2, labels_csv << ":" << first + 1 << ": the header has " << width
                                    << " column(s); expected a file column and a label column",
             kLabelsHint);
  USER_CHECK(opts.regression || width == 2,
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

  struct Row {
    fs::path file;
    int64_t line;
    std::vector<std::string> labels;
  };
  std::vector<Row> rows;
  std::map<fs::path, int64_t> seen;   // canonical path -> line
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
    const fs::path key = fs::canonical(file, ec);
    const auto [it, fresh] = seen.emplace(key, line);
    USER_CHECK(fresh, labels_csv << ":" << line << ": \"" << name << "\" already has a label on line " << it->second,
               "give every sequence file exactly one row");
    rows.push_back(Row{file, line, std::vector<std::string>(f.begin() + 1, f.end())});
  }
  USER_CHECK(!rows.empty(), labels_csv << ": no rows after the header; expected one row per sequence", kLabelsHint);

  // Every CSV file of the folder is a sequence, so a file without a label is a mistake rather than skipped.
  const fs::path labels_key = fs::canonical(labels_csv, ec);
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    if (!fs::is_regular_file(p, ec)) continue;
    if (lower_extension(p) != ".csv") {
      if (log) log->ignored.push_back(p.filename().string() + " (not .csv)");
      continue;
    }
    const fs::path key = fs::canonical(p, ec);
    if (key == labels_key) continue;
    USER_CHECK(seen.count(key), p.string() << ": has no row in " << labels_csv << "; expected a label for every "
                                           << "CSV file of the folder",
               "add a row `" << p.filename().string() << ",LABEL` to " << labels_csv
                             << ", or move the file out of the folder");
  }

  RaggedData d;
  d.task = opts.regression ? Task::Regression : Task::Classification;
  std::vector<std::string> first_header;
  std::string first_file, header_file;
  for (const Row& r : rows) {
    const SequenceCsv s = read_sequence_csv(r.file.string());
    if (d.num_features == 0) {
      d.num_features = s.width;
      first_file = r.file.string();
    }
    USER_CHECK(s.width == d.num_features,
               r.file.string() << ": " << s.width << " column(s); expected " << d.num_features << " like " << first_file
                               << " (every sequence has the same features)",
               kCsvHint);
    if (!s.header.empty()) {
      if (first_header.empty()) {
        first_header = s.header;
        header_file = r.file.string();
      }
      USER_CHECK(s.header == first_header,
                 r.file.string() << ":1: the column names differ from those of " << header_file
                                 << "; expected the same features in the same order",
                 "write every sequence file with the same columns in the same order");
    }
    d.features.insert(d.features.end(), s.values.begin(), s.values.end());
    d.offsets.push_back(d.offsets.back() + s.rows);
    if (log)
      log->read.push_back(r.file.filename().string() + ": " + std::to_string(s.rows) + " x " + std::to_string(s.width));
  }

  const auto where = [&](int64_t i) { return RT_MSG(labels_csv << ":" << rows[static_cast<size_t>(i)].line); };
  if (d.task == Task::Classification) {
    std::vector<std::string> labels;
    for (const Row& r : rows) labels.push_back(unquote(r.labels[0]));
    ClassLabels mapped = map_class_labels(labels, opts.class_names, opts.class_names_source, where);
    d.labels = std::move(mapped.ids);
    d.class_names = std::move(mapped.names);
    d.num_outputs = static_cast<int64_t>(d.class_names.size());
  } else {
    d.num_outputs = width - 1;
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
  fs::path folder(dir);
  if (!folder.has_filename()) folder = folder.parent_path();   // "data/" names the folder "data"
  d.source = RT_MSG("ragtrain convert: " << folder.filename().string() << "/ (" << rows.size()
                                         << " CSV files) with labels " << fs::path(labels_csv).filename().string());
  return d;
}

}  // namespace ragtrain
