// --missing: missing values of convert's inputs, found, reported, trimmed or filled one sequence at a time.
#include "ragtrain/data/missing.hpp"

#include <cctype>
#include <cmath>
#include <sstream>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

const char* const kMissingHint =
    "convert stops at missing values unless told what to do: --missing trim drops trailing steps that are all "
    "missing (NaN padding of unequal-length sets), --missing zero writes 0, --missing ffill carries the last "
    "observed value forward; see doc/data-format.md, \"Missing values\"";

const char* missing_mode_name(MissingMode m) {
  switch (m) {
    case MissingMode::Error: return "error";
    case MissingMode::Trim: return "trim";
    case MissingMode::Zero: return "zero";
    case MissingMode::Ffill: return "ffill";
  }
  return "?";
}

bool is_missing_text(const std::string& field) {
  std::string s;
  for (char ch : field) s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!s.empty() && (s[0] == '+' || s[0] == '-') && s.size() > 1 && s.compare(1, std::string::npos, "nan") == 0)
    return true;
  return s.empty() || s == "?" || s == "nan" || s == "na" || s == "n/a";
}

std::string MissingReport::summary() const {
  if (mode == MissingMode::Error) return "";   // any missing value stopped the conversion
  if (missing == 0) return RT_MSG("missing values: none (--missing " << missing_mode_name(mode) << " changed nothing)");
  std::ostringstream s;
  s << "missing values: " << missing << " in " << sequences << " sequence" << (sequences == 1 ? "" : "s");
  switch (mode) {
    case MissingMode::Trim:
      s << "; --missing trim removed " << trimmed_steps << " trailing step" << (trimmed_steps == 1 ? "" : "s");
      break;
    case MissingMode::Zero:
      s << "; --missing zero replaced " << filled << " by 0";
      break;
    case MissingMode::Ffill:
      s << "; --missing ffill filled " << filled << " (" << filled - backfilled << " from the value before, "
        << backfilled << " leading from the first observed value)";
      break;
    case MissingMode::Error:
      break;
  }
  return s.str();
}

void MissingValues::apply(std::vector<float>& values, int64_t num_features, const SequenceSource& where) {
  const int64_t F = num_features;
  int64_t found = 0, first = -1;
  for (size_t k = 0; k < values.size(); ++k)
    if (std::isnan(values[k])) {
      if (first < 0) first = static_cast<int64_t>(k);
      ++found;
    }
  if (found == 0) return;
  USER_CHECK(report_.mode != MissingMode::Error, where.value(first / F, first % F) << " is missing (" << where.missing_as << ")",
             kMissingHint);
  report_.missing += found;
  ++report_.sequences;
  switch (report_.mode) {
    case MissingMode::Trim:
      trim(values, F, where);
      break;
    case MissingMode::Zero:
      for (float& v : values)
        if (std::isnan(v)) v = 0.0f;
      report_.filled += found;
      break;
    case MissingMode::Ffill:
      ffill(values, F, where);
      report_.filled += found;
      break;
    case MissingMode::Error:
      break;
  }
}

void MissingValues::trim(std::vector<float>& values, int64_t F, const SequenceSource& where) {
  const auto all_missing = [&](int64_t t) {
    for (int64_t f = 0; f < F; ++f)
      if (!std::isnan(values[static_cast<size_t>(t * F + f)])) return false;
    return true;
  };
  const int64_t T = static_cast<int64_t>(values.size()) / F;
  int64_t kept = T;
  while (kept > 0 && all_missing(kept - 1)) --kept;
  // A sequence cannot be dropped: it has a label, and predict's rows number the input's sequences.
  USER_CHECK(kept > 0, where.sequence << ": every value is missing; --missing trim would leave no step",
             "remove the sequence from the input (and its label), or keep it with --missing zero");
  for (int64_t k = 0; k < kept * F; ++k)
    USER_CHECK(!std::isnan(values[static_cast<size_t>(k)]),
               where.value(k / F, k % F) << " is missing (" << where.missing_as << "), inside the sequence (--missing trim removes only "
                                            "trailing steps whose every feature is missing"
                                         << (kept < T ? ", here the last " + std::to_string(T - kept) : std::string())
                                         << ")",
               "fill such values with --missing ffill or --missing zero (which keep every step), or fix the input");
  values.resize(static_cast<size_t>(kept * F));
  report_.trimmed_steps += T - kept;
}

void MissingValues::ffill(std::vector<float>& values, int64_t F, const SequenceSource& where) {
  const int64_t T = static_cast<int64_t>(values.size()) / F;
  for (int64_t f = 0; f < F; ++f) {
    float* column = values.data() + f;   // column[t * F]
    int64_t first = 0;
    while (first < T && std::isnan(column[first * F])) ++first;
    USER_CHECK(first < T,
               where.sequence << ": feature " << f << " has no observed value, so --missing ffill has nothing to "
                                                     "carry",
               "use --missing zero, or fix the input");
    for (int64_t t = 0; t < first; ++t) column[t * F] = column[first * F];   // leading: back-filled
    report_.backfilled += first;
    for (int64_t t = first + 1; t < T; ++t)
      if (std::isnan(column[t * F])) column[t * F] = column[(t - 1) * F];
  }
}

}  // namespace ragtrain
