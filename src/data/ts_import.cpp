// read_ts_file: the UEA/sktime .ts text format (multivariate, equal or unequal length) into a RaggedData.
#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/checks.hpp"
#include "ragtrain/data/importers.hpp"
#include "ragtrain/data/names.hpp"
#include "ragtrain/data/missing.hpp"

namespace ragtrain {

namespace {

const char* const kTsHint =
    "a .ts file has '@' header lines (@classLabel true L1 L2 ..., @targetLabel true, or @classLabel false for "
    "series without labels), then @data and one series per line: channels separated by ':', values by ',', the "
    "label last; see doc/data-format.md";

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(sep, start)) != std::string::npos; start = pos + 1) out.push_back(s.substr(start, pos - start));
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char ch : s) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      if (!w.empty()) out.push_back(std::move(w));
      w.clear();
    } else {
      w += ch;
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Parses the header (until @data) and the series, one line at a time.
class TsParser {
 public:
  TsParser(std::string path, MissingMode missing) : path_(std::move(path)), missing_(missing) {}

  RaggedData run(std::istream& in);
  const MissingReport& missing_report() const { return missing_.report(); }

 private:
  std::string at(int64_t line) const { return RT_MSG(path_ << ":" << line << ": "); }
  void header(const std::string& text, int64_t line);
  void start_data(int64_t line);
  void series(const std::string& text, int64_t line);
  std::vector<float> channel_values(const std::string& channel, int64_t c, int64_t line) const;
  void label(const std::string& text, int64_t line);

  std::string path_, problem_;
  MissingValues missing_;
  bool in_data_ = false, has_targets_ = false;
  bool says_unlabeled_ = false;             // @classLabel false or @targetLabel false: series carry no label
  int64_t dimensions_ = -1;                 // from @dimensions, or the first series
  std::vector<std::string> class_labels_;   // from @classLabel true ...
  RaggedData d_;
};

void TsParser::header(const std::string& text, int64_t line) {
  const std::vector<std::string> w = words(text);
  const std::string key = lower(w[0]);
  const std::string value = w.size() > 1 ? lower(w[1]) : std::string();
  if (key == "@problemname") {
    problem_ = w.size() > 1 ? w[1] : std::string();
  } else if (key == "@timestamps") {
    USER_CHECK(value != "true", at(line) << "@timeStamps true: series with time stamps \"(t,v)\" are not supported",
               "export the series without time stamps (values only)");
  } else if (key == "@dimensions") {
    double dims = 0;
    // The upper bound keeps the conversion to int64 defined; no real file has that many channels.
    USER_CHECK(w.size() == 2 && parse_float32_text(w[1], dims) && dims >= 1 && dims <= INT32_MAX &&
                   dims == std::floor(dims),
               at(line) << "@dimensions expects a positive integer (at most " << INT32_MAX << "); found \"" << text
                        << "\"",
               kTsHint);
    dimensions_ = static_cast<int64_t>(dims);
  } else if (key == "@classlabel" || key == "@targetlabel") {
    USER_CHECK(value == "true" || value == "false",
               at(line) << w[0] << " expects true or false; found \"" << value << "\"", kTsHint);
    says_unlabeled_ = says_unlabeled_ || value == "false";
    if (key == "@targetlabel") {
      has_targets_ = value == "true";
    } else if (value == "true") {
      class_labels_.assign(w.begin() + 2, w.end());
      USER_CHECK(class_labels_.size() >= 2,
                 at(line) << "@classLabel true lists " << class_labels_.size() << " class(es); expected at least 2",
                 kTsHint);
      for (size_t i = 1; i < class_labels_.size(); ++i)   // a repeated label would name two class ids
        USER_CHECK(std::find(class_labels_.begin(), class_labels_.begin() + static_cast<std::ptrdiff_t>(i),
                             class_labels_[i]) == class_labels_.begin() + static_cast<std::ptrdiff_t>(i),
                   at(line) << "@classLabel true lists \"" << class_labels_[i] << "\" twice; expected distinct labels",
                   kTsHint);
    }
  } else if (key == "@data") {
    start_data(line);
  }
  // @missing, @univariate, @equalLength, @seriesLength and unknown keys carry nothing this reader needs:
  // missing values, lengths and channel counts are checked on the data itself.
}

void TsParser::start_data(int64_t line) {
  USER_CHECK(!class_labels_.empty() || has_targets_ || says_unlabeled_,
             at(line) << "no @classLabel header before @data; expected @classLabel true and the list of class "
                         "labels, @targetLabel true, or @classLabel false (series without labels)",
             kTsHint);
  USER_CHECK(class_labels_.empty() || !has_targets_,
             at(line) << "both @classLabel true and @targetLabel true; expected one of them", kTsHint);
  in_data_ = true;
  d_.labeled = !class_labels_.empty() || has_targets_;
  d_.task = has_targets_ ? Task::Regression : Task::Classification;
  d_.num_outputs = !d_.labeled ? 0 : has_targets_ ? 1 : static_cast<int64_t>(class_labels_.size());
  d_.class_names = class_labels_;
}

// The values of channel c of one series, NaN where one is missing ('?', NaN, an empty field).
std::vector<float> TsParser::channel_values(const std::string& channel, int64_t c, int64_t line) const {
  USER_CHECK(!channel.empty(), at(line) << "channel " << c << " is empty; expected at least one value", kTsHint);
  std::vector<float> out;
  for (const std::string& raw : split(channel, ',')) {
    const std::string token = trim(raw);
    if (is_missing_text(token)) {
      out.push_back(std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    USER_CHECK(token[0] != '(',
               at(line) << "channel " << c << " has a time-stamped value \"" << token
                        << "\"; time stamps are not supported",
               "export the series without time stamps (values only)");
    double v = 0;
    USER_CHECK(parse_float32_text(token, v),
               at(line) << "channel " << c << " has the value \"" << token
                        << "\"; expected a finite number within float32 range (|x| <= 3.4e38), or '?' for a "
                           "missing value",
               kTsHint);
    out.push_back(static_cast<float>(v));
  }
  return out;
}

void TsParser::label(const std::string& text, int64_t line) {
  if (d_.task == Task::Classification) {
    const auto it = std::find(class_labels_.begin(), class_labels_.end(), text);
    USER_CHECK(it != class_labels_.end(),
               at(line) << "unknown class label \"" << text << "\"; expected one of the @classLabel values", kTsHint);
    d_.labels.push_back(static_cast<int32_t>(it - class_labels_.begin()));
  } else {
    double y = 0;
    USER_CHECK(parse_float32_text(text, y), at(line) << "the target \"" << text
                                                << "\" is not a finite number within float32 range (|x| <= 3.4e38)", kTsHint);
    d_.targets.push_back(static_cast<float>(y));
  }
}

void TsParser::series(const std::string& text, int64_t line) {
  const std::vector<std::string> fields = split(text, ':');
  // A labelled series ends in its label; a series of a file without labels is channels only.
  const auto channels = static_cast<int64_t>(fields.size()) - (d_.labeled ? 1 : 0);
  USER_CHECK(channels >= 1, at(line) << "expected channels separated by ':' and a label last; found no ':'",
             kTsHint);
  if (dimensions_ < 0) dimensions_ = channels;
  USER_CHECK(channels == dimensions_,
             at(line) << "series has " << channels << " channel(s); expected " << dimensions_
                      << (d_.num_features ? " like the series before" : " (@dimensions)")
                      << (d_.labeled ? "" : "; the header says the series carry no label (@classLabel false)"),
             kTsHint);
  d_.num_features = channels;

  std::vector<std::vector<float>> values(static_cast<size_t>(channels));   // (F, T) as written
  for (int64_t c = 0; c < channels; ++c) {
    values[static_cast<size_t>(c)] = channel_values(trim(fields[static_cast<size_t>(c)]), c, line);
    USER_CHECK(values[static_cast<size_t>(c)].size() == values[0].size(),
               at(line) << "channel " << c << " has " << values[static_cast<size_t>(c)].size()
                        << " values but channel 0 has " << values[0].size()
                        << "; expected every channel of a series to have the same length (pad the shorter "
                           "channels with '?' at the end and convert with --missing)",
               kTsHint);
  }

  const auto length = static_cast<int64_t>(values[0].size());
  std::vector<float> rows;   // (length, F), time-major: row t holds every channel at time t
  rows.reserve(static_cast<size_t>(length * channels));
  for (int64_t t = 0; t < length; ++t)
    for (int64_t c = 0; c < channels; ++c) rows.push_back(values[static_cast<size_t>(c)][static_cast<size_t>(t)]);
  const int64_t index = d_.num_sequences();
  missing_.apply(rows, channels,
                 SequenceSource{RT_MSG(path_ << ":" << line << " (series " << index << ")"),
                                [&](int64_t t, int64_t c) {
                                  return RT_MSG(at(line) << "channel " << c << ", step " << t << " (series " << index
                                                         << ")");
                                }});
  d_.features.insert(d_.features.end(), rows.begin(), rows.end());
  d_.offsets.push_back(d_.offsets.back() + static_cast<int64_t>(rows.size()) / channels);
  if (d_.labeled) label(trim(fields.back()), line);
}

RaggedData TsParser::run(std::istream& in) {
  std::string text;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    if (line == 1 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);   // a UTF-8 BOM, as CSV files
    text = trim(text);
    if (text.empty() || text[0] == '#') continue;
    if (in_data_) {
      series(text, line);
    } else {
      USER_CHECK(text[0] == '@',
                 at(line) << "expected a '@' header line before the series; is the @data line missing?", kTsHint);
      header(text, line);
    }
  }
  USER_CHECK(in_data_, path_ << ": no @data line; expected the header to end with @data", kTsHint);
  USER_CHECK(d_.num_sequences() >= 1, path_ << ": no series after @data", kTsHint);
  d_.source = RT_MSG("ragtrain convert: " << std::filesystem::path(path_).filename().string()
                                          << (problem_.empty() ? "" : " (@problemName " + problem_ + ")"));
  return std::move(d_);
}

}  // namespace

RaggedData read_ts_file(const std::string& path, MissingMode missing, ImportLog* log) {
  std::error_code ec;
  USER_CHECK(std::filesystem::is_regular_file(path, ec), path << ": no such file",
             "check the path of the .ts file");
  std::ifstream in(path);
  USER_CHECK(in, path << ": cannot be read", "check the file's permissions");
  return parse_ts(in, path, missing, log);
}

RaggedData parse_ts(std::istream& in, const std::string& name, MissingMode missing, ImportLog* log) {
  TsParser parser(name, missing);
  RaggedData d = parser.run(in);
  d.names = index_names(d.num_sequences());   // series i of the file, counted from 0 in its order
  if (log) log->missing = parser.missing_report();
  return d;
}

}  // namespace ragtrain
