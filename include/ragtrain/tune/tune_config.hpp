// What `ragtrain tune` takes from the command line: its own options (TuneOptions, bound by the option table) and
// the typed configuration the command runs with (TuneConfig).
#pragma once

#include <cstdint>
#include <string>

#include "ragtrain/backend/backend.hpp"
#include "ragtrain/core/option_groups.hpp"

namespace ragtrain {

// --space, --trials, --budget-minutes, --ranks-per-trial, --trials-per-gpu, --folds.
struct TuneOptions {
  std::string space;             // FILE.ini; empty: the default space (tune/search_space.hpp)
  int64_t trials = 27;           // trials drawn; with eta 3: rungs of 27, 9 and 3 runs
  double budget_minutes = 0;     // no new training run starts after this much wall time (0: no limit)
  int64_t ranks_per_trial = 1;   // ranks of one trial group (its global batch: this x batch-per-rank)
  int64_t trials_per_gpu = 1;    // CUDA: trial groups that share one GPU (ranks on a node / this = GPUs used)
  int64_t folds = 0;             // without --val: k-fold cross-validation (1: one hold-out; 0: by the set's size)
};

// Halving's reduction factor: a rung keeps a third of its trials and trains them three times longer.
inline constexpr int kTuneEta = 3;
// DIR/tune.ini: what the search in DIR is (data, seed, trials, space); a tune started on that folder again with
// the same record continues it, one with another record is refused (cli/output_guard.cpp, cli/cmd_tune.cpp).
inline constexpr const char* kTuneRecordName = "tune.ini";
// --folds 0 (auto): sets of fewer than kTuneFoldsBelow sequences are cross-validated in kTuneAutoFolds folds,
// sets of fewer than kTuneFewFoldsBelow in kTuneFewFolds. A hold-out of 20 % of a few hundred sequences ranks
// recipes only to within a sequence or two (JapaneseVowels: 54 held out, the last rung's three trials 53, 52 and
// 52 right); folds rank them on every sequence, at k times the cost (3 folds where 5 would cost too much).
inline constexpr int64_t kTuneFoldsBelow = 200;
inline constexpr int kTuneAutoFolds = 5;
inline constexpr int64_t kTuneFewFoldsBelow = 1000;
inline constexpr int kTuneFewFolds = 3;
// The share of the training set held out for selection when there is no --val (one fold).
inline constexpr double kTuneValFraction = 0.2;

struct TuneConfig {
  DataSource source;             // --data TRAIN.h5 (the final model trains on all of it), --max-memory
  std::string val;               // --val VAL.h5; empty: a stratified split of --data
  std::string out;               // --out DIR
  uint64_t seed = 1;             // draws the trials, their seeds and the split
  Device device = Device::Cpu;
  TuneOptions tune;
  Verbosity talk;
  Provenance provenance;
};

}  // namespace ragtrain
