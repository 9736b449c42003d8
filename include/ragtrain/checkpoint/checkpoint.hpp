// Model checkpoints in HDF5: parameters under PyTorch names and shapes, the model shape, optimizer state and
// the configuration that produced them. Written atomically by one rank; read by eval, predict and resume.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/model/model.hpp"

namespace ragtrain {

inline constexpr const char* kCheckpointFormat = "ragtrain-checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

struct Checkpoint {
  ModelShape shape;
  std::vector<float> params;              // flat, PyTorch layout (ParamLayout(shape))
  std::vector<std::string> class_names;   // from the training data, when it had them
  int64_t epoch = 0;                      // epochs completed
  int64_t step = 0;                       // global steps completed
  std::string config;                     // the effective configuration (config-file form)
  std::string optimizer;                  // sgd | adam | adamw
  int64_t optimizer_steps = 0;
  std::vector<float> opt_m, opt_v;        // momentum / Adam moments, flat like params (v empty for sgd)
  std::vector<float> feature_mean;        // (F) with --normalize; empty otherwise
  std::vector<float> feature_std;         // (F)
};

// Writes `ckpt` to `path`: temporary file, fsync, rename. Throws UserError if the folder is not writable.
void write_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Reads and validates a checkpoint (format, version, every tensor's name and shape). Throws UserError.
Checkpoint read_checkpoint(const std::string& path);

}  // namespace ragtrain
