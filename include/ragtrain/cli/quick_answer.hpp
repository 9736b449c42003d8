// `ragtrain --help`, `--version`, `COMMAND --help` and `--print-config`: answers that need no other rank, given
// without starting MPI (MPI_Init alone takes most of a second).
#pragma once

#include <optional>

namespace ragtrain {

// The exit code when argv asks only for help, the version or the effective configuration, after printing it on
// the launcher's rank 0 (every other rank of an mpirun/srun launch prints nothing); std::nullopt for anything
// else, including a command line that does not parse: that error goes the usual way, agreed on by every rank.
std::optional<int> answer_without_mpi(int argc, const char* const* argv);

// The rank the launcher gave this process before MPI starts (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
// SLURM_PROCID), 0 without a launcher.
int launcher_rank();

}  // namespace ragtrain
