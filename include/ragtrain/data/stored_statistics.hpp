// The feature statistics a data file may carry (/statistics): read and checked with the header, written by the
// writers (gen, convert, tune's split files) and by `inspect --write-statistics`, and turned into moments.
#pragma once

#include <hdf5.h>

#include <optional>
#include <string>

#include "ragtrain/data/format.hpp"
#include "ragtrain/data/normalization.hpp"

namespace ragtrain {

inline constexpr const char* kStatisticsGroup = "/statistics";

// /statistics of an open file, nullopt when the file has none. A group that is there but malformed (another
// block size, a row count that is not offsets[N] = `rows`, shapes other than (F), values not finite or m2 < 0)
// throws UserError naming the file, with a hint (rewrite them with `ragtrain inspect --write-statistics`).
std::optional<StoredStatistics> read_statistics(hid_t file, const std::string& path, int64_t rows, int64_t num_features);

// The moments of `rows` rows (FeatureMoments::of_rows of the whole /features) as stored, and back.
StoredStatistics to_stored(const FeatureMoments& moments, int64_t rows);
FeatureMoments from_stored(const StoredStatistics& stored);

// Writes /statistics into an open file that has none.
void write_statistics(hid_t file, const StoredStatistics& stats);

// Adds or replaces /statistics of the file at `path` (serial, in place: the data is not rewritten). The new group
// is written under another name and then renamed, so a failure leaves the old group or none, never half of one.
void store_statistics(const std::string& path, const StoredStatistics& stats);
// Removes /statistics of the file at `path`, if it has one (serial, in place).
void remove_statistics(const std::string& path);

}  // namespace ragtrain
