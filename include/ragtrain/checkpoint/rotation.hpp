// The checkpoints of a run folder: one file per saved step (checkpoint-stepNNNNNNNNN.h5, the newest has the
// largest number), checkpoint.h5 always the newest complete one, the oldest removed beyond --keep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/checkpoint/checkpoint.hpp"

namespace ragtrain {

inline constexpr const char* kLatestCheckpointName = "checkpoint.h5";
// The model train --select kept (the best validation so far); never rotated, written with write_checkpoint.
inline constexpr const char* kBestCheckpointName = "best.h5";

// "checkpoint-step000000123.h5": nine digits, so that names sort in step order.
std::string step_checkpoint_name(int64_t step);

struct StepCheckpoint {
  int64_t step = 0;
  std::string path;
};
// The step checkpoints in `dir`, oldest first (names that do not parse are ignored).
std::vector<StepCheckpoint> list_step_checkpoints(const std::string& dir);

// Saves `ckpt` as DIR/checkpoint-step<step>.h5 (temporary file, fsync, rename), then makes DIR/checkpoint.h5 the
// same file (hard link to a temporary name, rename; a copy where hard links are not supported) and removes the
// oldest step files beyond `keep` (>= 1), and leftovers of writes that were killed. A reader, or a run killed
// at any instant, sees either the previous or the new complete checkpoint under every name. Returns the path
// of the step file.
std::string save_checkpoint(const std::string& dir, const Checkpoint& ckpt, int64_t keep);

// The file `--resume PATH` means: PATH itself, or for a run folder its checkpoint.h5 (the newest), falling
// back to its newest step file; a step file newer than checkpoint.h5 (a run killed between the two renames of
// save_checkpoint) wins. Throws UserError when there is none.
std::string resolve_resume_path(const std::string& path);

// The file `eval|predict --checkpoint PATH` means: PATH itself, or for a run folder its best.h5 when there is one
// (the model --select kept), else its checkpoint.h5 (the newest). Throws UserError when a folder has neither.
std::string resolve_model_path(const std::string& path);

}  // namespace ragtrain
