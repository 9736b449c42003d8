// The value invariants of format v1 (offsets, labels, finite values), shared by the writer and the readers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragtrain {

// Whether a number read from text or another file type survives the trip into /features or /labels (float32):
// finite, and finite still as a float (1e300 is a finite double but would be stored as inf).
bool finite_as_float32(double v);

// A decimal number filling the whole of `text` (an optional leading '+'), finite as a float32; false otherwise.
// The one number syntax of the text importers (.ts, CSV).
bool parse_float32_text(const std::string& text, double& value);

// offsets (N + 1): offsets[0] == 0, strictly increasing (no empty sequence), offsets[N] == rows of /features.
// Throws UserError naming `path`, /offsets and the first bad index.
void check_offsets(const std::string& path, const std::vector<int64_t>& offsets, int64_t rows);

// A class label of global sequence `index`: in [0, classes). Throws UserError naming /labels and the index.
void check_label(const std::string& path, int64_t index, int32_t label, int64_t classes);

// Every value of one sequence (length, F) of /features is finite. Throws UserError with timestep and feature.
void check_finite_features(const std::string& path, int64_t index, const float* x, int64_t length,
                           int64_t num_features);

// Every regression target (K) of one sequence is finite. Throws UserError naming /labels and the index.
void check_finite_targets(const std::string& path, int64_t index, const float* y, int64_t num_outputs);

}  // namespace ragtrain
