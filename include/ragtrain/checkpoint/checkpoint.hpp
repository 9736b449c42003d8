// Model checkpoints in HDF5: parameters under PyTorch names and shapes, the model shape, optimizer state, where
// the run stands, the configuration that produced them, and a CRC-32 per tensor. Written atomically by one rank;
// read (and verified) by eval, predict and train --resume.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ragtrain/model/model.hpp"

namespace ragtrain {

inline constexpr const char* kCheckpointFormat = "ragtrain-checkpoint";
// 1: parameters, optimizer moments, normalisation. 2: + run position, training accumulators, per-tensor CRC-32.
// Version 1 files still load for eval and predict; only version 2 files can be resumed.
inline constexpr int64_t kCheckpointVersion = 2;

// Where a run stands, enough to continue it exactly. The schedule is a pure function of (training-set lengths,
// seed, epoch, global batch G, kind) and every random draw of ragtrain is counter-based (Rng(seed, stream) at a
// position), so the RNG state is the seed alone and the schedule position is (step / steps_per_epoch,
// step % steps_per_epoch): nothing else is hidden.
struct RunPosition {
  int64_t steps_per_epoch = 0;      // of the schedule that wrote the checkpoint
  int64_t global_batch = 0;         // G = world_size x batch_per_rank
  int64_t world_size = 0;           // ranks of the run that wrote it
  int64_t batch_per_rank = 0;
  int64_t epochs = 0;               // --epochs of that run
  uint64_t seed = 0;                // the whole RNG state
  std::string schedule;             // balanced | random
  int64_t data_sequences = 0;       // N of the training set
  uint32_t data_lengths_crc32 = 0;  // CRC-32 of the training set's lengths (int64): "the same data set"
  bool complete = false;            // written after the last step of the run
};

// Running sums of the current epoch and logging interval, so that a resumed run reports the same epoch loss
// and log records as an uninterrupted one even when it stopped mid-epoch.
struct TrainAccumulators {
  double epoch_loss_sum = 0, epoch_count = 0, epoch_correct = 0;
  double interval_loss_sum = 0, interval_count = 0;
  double epoch_imbalance_sum = 0, interval_imbalance_sum = 0, run_imbalance_sum = 0;   // rank 0's length imbalance
  double interval_steps = 0;
  double first_loss = -1;   // the run's first logged loss (for the validity check); -1 before the first record
  double skipped_steps = 0; // steps dropped by --on-nonfinite skip (absent in older files: 0)
};

// The best validation of the run so far (train --select) and how many validations passed without improving on it
// (--early-stop); step -1: none yet. In the checkpoint, so that a resumed run knows the best of the run it
// continues (absent in older files: none).
struct BestSoFar {
  int64_t step = -1;            // global steps done when it was validated
  int64_t epoch = 0;            // the epoch it was validated in (1-based)
  double val_loss = 0, val_accuracy = 0;
  int64_t validations_since = 0;
};

struct Checkpoint {
  ModelShape shape;                       // files without bidirectional/pool attributes: unidirectional, last
  DropoutRates dropout;                   // the training run's rates (absent in older files: 0)
  std::vector<float> params;              // flat, PyTorch layout (ParamLayout(shape))
  std::vector<std::string> class_names;   // from the training data, when it had them
  int64_t epoch = 0;                      // epochs completed
  int64_t step = 0;                       // global steps completed
  std::string config;                     // the effective configuration (config-file form)
  std::string optimizer;                  // sgd | adam | adamw
  int64_t optimizer_steps = 0;
  std::vector<float> opt_m, opt_v;        // momentum / Adam moments, flat like params (v empty for sgd)
  std::string normalization = "none";     // --normalize: none | feature | series
  std::vector<float> feature_mean;        // (F) with --normalize feature; empty otherwise
  std::vector<float> feature_std;         // (F)

  int64_t version = kCheckpointVersion;   // as read; written files always get kCheckpointVersion
  bool resumable = false;                 // position and accumulators present (version >= 2)
  RunPosition position;
  TrainAccumulators accumulators;
  BestSoFar best;
};

// Writes `ckpt` to `path`: the file is built in memory, written to a temporary file in the same folder with every
// write checked, fsync'ed, then renamed over `path`, so a reader (or a run killed mid-write) only ever sees the
// previous complete file or the new one. A full disk or an I/O error throws UserError naming `path` and the
// system's reason ("no space left on device") and removes the temporary file; `path` is left as it was.
void write_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Test hook, for the tests that kill a run inside a checkpoint write (tests/e2e/test_checkpoint_e2e.cpp): with
// RAGTRAIN_TEST_CHECKPOINT_PAUSE=STEP:POINT in the environment, the writer of the step STEP checkpoint prints
// "ragtrain: test hook ... paused" to stderr and sleeps (at most 60 s) at POINT: "write" (half of the temporary
// file written) or "link" (the step file complete, checkpoint.h5 not yet switched to it). Does nothing otherwise.
inline constexpr const char* kCheckpointPauseEnv = "RAGTRAIN_TEST_CHECKPOINT_PAUSE";
void checkpoint_test_pause(const char* point, int64_t step);

// Reads and validates a checkpoint: format, version, every tensor's name, shape, dtype and CRC-32. Throws
// UserError naming the file and the damaged part.
Checkpoint read_checkpoint(const std::string& path);

// The effective configuration stored in a checkpoint as name -> value ("# ..." lines skipped).
std::vector<std::pair<std::string, std::string>> parse_effective_config(const std::string& text);

}  // namespace ragtrain
