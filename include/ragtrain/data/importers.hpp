// The importers of `convert`: a UEA/sktime .ts file, a folder of CSV files, a NumPy .npz file, each into a
// RaggedData (src/data/ts_import.cpp, csv_import.cpp, npz_import.cpp).
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "ragtrain/data/missing.hpp"
#include "ragtrain/data/ragged_data.hpp"

namespace ragtrain {

// How `convert` reads the labels of CSV and .npz inputs (a .ts file declares its own task and classes), and
// what it does with missing feature values (all inputs).
struct ImportOptions {
  bool regression = false;                // the labels are regression targets (numbers), not classes
  std::vector<std::string> class_names;   // fixed class order (--class-names-from); empty: sorted distinct labels
  std::string class_names_source;         // where class_names came from, for messages
  MissingMode missing = MissingMode::Error;   // --missing
};

// What an import read, for `convert --verbose`: one line per file or array used, and what it skipped; and what
// became of missing values (every importer fills it).
struct ImportLog {
  std::vector<std::string> read;
  std::vector<std::string> ignored;
  MissingReport missing;
};

// Parses a UEA/sktime .ts file (multivariate, equal or unequal length, class labels, regression targets, or
// no labels with @classLabel false). Labels are mapped to 0..C-1 in the order of the @classLabel header;
// class_names keeps the original strings. Missing values ('?', NaN) are handled as `missing` says. Throws
// UserError with the file, line number and what was wrong.
RaggedData read_ts_file(const std::string& path, MissingMode missing = MissingMode::Error, ImportLog* log = nullptr);
// The same parser on a stream; `name` stands for the file in messages (the fuzzer feeds it bytes).
RaggedData parse_ts(std::istream& in, const std::string& name, MissingMode missing = MissingMode::Error,
                    ImportLog* log = nullptr);

// A folder of CSV files, one sequence each (rows = timesteps, columns = features, an optional header row of
// column names), and a labels CSV (a header row, then FILE,LABEL per sequence, or FILE,Y1,..,YK for regression).
// Sequence i is the file on row i of the labels file; every *.csv file of the folder (except the labels file)
// must have a row. Without labels: `labels_csv` empty (sequence i is the i-th *.csv file in sorted name order)
// or a labels file of one column, FILE (its order). Throws UserError naming the file and line
// (doc/data-format.md, "Bring your own data").
RaggedData read_csv_folder(const std::string& dir, const std::string& labels_csv, const ImportOptions& opts,
                           ImportLog* log = nullptr);

// A NumPy .npz file (numpy.savez or savez_compressed) holding either seq_0, seq_1, ... (each (T_i, F)) or
// values (total_T, F) + lengths (N), plus labels (N) or (N, K), and optionally class_names (C). Integer or
// string labels are classes, float labels regression targets; without a labels array the data set is
// unlabeled. NaN in the values is a missing value. Throws UserError naming the file and entry.
RaggedData read_npz_file(const std::string& path, const ImportOptions& opts, ImportLog* log = nullptr);

}  // namespace ragtrain
