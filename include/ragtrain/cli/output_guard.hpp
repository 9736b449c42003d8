// What every subcommand reads and writes, and the check, before any work, that none of its outputs would lose
// data: an output that is one of its inputs, an existing file replaced without --force, a data set or checkpoint
// replaced by another kind of file, or a folder held by a running train (doc/reliability.md).
#pragma once

#include <string>

#include "ragtrain/cli/options.hpp"

namespace ragtrain {

// What an existing path holds, as far as replacing it is concerned.
enum class Holding { Nothing, DataSet, Checkpoint, Hdf5Unknown, RunFolder, Folder, File };
struct Existing {
  Holding kind = Holding::Nothing;
  std::string what;   // for messages: "a ragtrain data set (classification)", "JSON text (812 bytes)"
};
Existing what_is_at(const std::string& path);

// Throws UserError (exit 2) naming the output option and path, what is in the way and how to go on, when an
// output of `cfg.command` would replace an input, a data set or checkpoint, another file without --force, or
// write into a folder held by a running train. Run on rank 0 before the command starts.
void check_outputs(const RunConfig& cfg);

}  // namespace ragtrain
