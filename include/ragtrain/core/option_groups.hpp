// Option groups several subcommands share (--quiet/--verbose, provenance, --data/--max-memory): the option table
// binds each option to its field here once, and every command configuration embeds the group whole.
#pragma once

#include <string>

namespace ragtrain {

// --quiet, --verbose: how much a command prints besides its result.
struct Verbosity {
  bool quiet = false;
  bool verbose = false;
};

// Where a run's configuration came from, stored in its records and checkpoints.
struct Provenance {
  std::string command_line;   // argv as typed, shell-quoted
  std::string effective;      // the effective configuration in config-file form, this command's options only
};

// --data FILE.h5 and --max-memory: the data set a command reads and what one rank may allocate for it.
struct DataSource {
  std::string data;                  // empty: none (bench: the synthetic set)
  std::string max_memory = "auto";   // a size such as 512M or 8G; auto: physical memory / ranks on the node
};

}  // namespace ragtrain
