// Missing values in what `convert` reads (--missing error|trim|zero|ffill): which text stands for one, and what
// becomes of a sequence that has some (doc/data-format.md, "Missing values").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ragtrain {

enum class MissingMode {
  Error,   // stop at the first missing value (the default: nothing is invented without being asked)
  Trim,    // drop trailing steps whose every feature is missing (NaN padding); any other missing value is an error
  Zero,    // replace every missing value by 0
  Ffill,   // carry the last observed value of the feature forward; leading ones take the first observed value
};

const char* missing_mode_name(MissingMode m);   // "error" | "trim" | "zero" | "ffill", as --missing takes them

// Whether a field of a text input (.ts, CSV) stands for a missing value: empty, "?", NaN in any case and with
// either sign, "NA" or "N/A" (what pandas, R and the UEA archive write). Surrounding blanks are the caller's.
bool is_missing_text(const std::string& field);

// The hint of every "missing value" error in error mode: it names the option.
extern const char* const kMissingHint;
// What is_missing_text accepts, for messages.
inline constexpr const char* kMissingText = "?, NaN, NA or an empty field";

// Where the values of one sequence come from, for messages: the sequence as a whole, and one value of it.
struct SequenceSource {
  std::string sequence;                                            // e.g. "data.ts:12 (series 3)"
  std::function<std::string(int64_t step, int64_t feature)> value;   // e.g. "data.ts:12: channel 2, value 5"
  const char* missing_as = kMissingText;                           // what marks a missing value in this input
};

// What --missing did over a whole input, for convert's output.
struct MissingReport {
  MissingMode mode = MissingMode::Error;
  int64_t missing = 0;         // missing values found
  int64_t sequences = 0;       // sequences that had at least one
  int64_t trimmed_steps = 0;   // trim: trailing steps removed
  int64_t filled = 0;          // zero, ffill: values replaced
  int64_t backfilled = 0;      // ffill: of `filled`, the leading ones (taken from the first observed value)

  // One line for convert's output, e.g. "missing values: 40 in 3 sequences; --missing trim removed 12 trailing
  // steps"; "" in error mode (where a missing value stops the conversion instead).
  std::string summary() const;
};

// Applies one mode to every sequence an importer hands it, and counts what it did.
class MissingValues {
 public:
  explicit MissingValues(MissingMode mode) { report_.mode = mode; }

  // `values` holds one sequence, (T, F) row-major, NaN marking a missing value (an importer turns infinities
  // into errors before, so NaN means missing only). On return it holds no NaN: trim may have shortened it to
  // T' >= 1 rows. Throws UserError naming `where`: error mode, any missing value; trim, a missing value that is
  // not in a trailing all-missing step, or a sequence with no observed step; ffill, a feature never observed.
  void apply(std::vector<float>& values, int64_t num_features, const SequenceSource& where);

  const MissingReport& report() const { return report_; }

 private:
  void trim(std::vector<float>& values, int64_t num_features, const SequenceSource& where);
  void ffill(std::vector<float>& values, int64_t num_features, const SequenceSource& where);

  MissingReport report_;
};

}  // namespace ragtrain
