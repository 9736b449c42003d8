// The selection data of `ragtrain tune` without --val: a stratified hold-out split of the TRAINING set (never a
// test set), a pure function of (labels, fraction, seed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/data/ragged_data.hpp"

namespace ragtrain {

struct SplitIndices {
  std::vector<int64_t> train, val;   // global sequence indices, each ascending; together every sequence once
};

// Classification (`labels` non-empty, values in [0, classes)): each class sends round(fraction x its count) of
// its sequences, drawn by a seeded shuffle, to `val` — at least one when it has two or more, and never its
// last one (a class of one sequence stays in `train`, so every class is trained on). Regression (`labels`
// empty): the same over all `n` sequences. Throws UserError when no sequence would be left for validation.
SplitIndices stratified_split(const std::vector<int32_t>& labels, int64_t n, double fraction, uint64_t seed);

// Stratified k-fold cross-validation (k >= 2), for sets too small for one hold-out to rank trials: each class's
// sequences, in a seeded shuffle, are dealt round-robin to the k folds (regression: all sequences); fold f's
// `val` is its own sequences, its `train` every other fold's. Every sequence is validated exactly once. Throws
// UserError when a fold would be empty (fewer sequences than folds).
std::vector<SplitIndices> stratified_folds(const std::vector<int32_t>& labels, int64_t n, int k, uint64_t seed);

// A Shard of a whole file (read with read_shard) as RaggedData, for subset (data/ragged_data.hpp) and
// write_dataset.
RaggedData to_ragged(const Shard& shard, const std::vector<std::string>& class_names, const std::string& source);

}  // namespace ragtrain
