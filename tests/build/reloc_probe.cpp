// The program tests/build/test_build.sh builds against MPI and parallel HDF5 reached only through a relocated
// prefix (pkg-config, or MPI_HOME/HDF5_HOME): the data path's parallel reads, as ragtrain runs them. Every rank
// opens the file through MPI-IO (read_dataset_info), reads its block of sequences with the collective hyperslab
// reads of read_shard, and the timesteps read are summed over the ranks.
// usage: mpirun -np P reloc_probe FILE.h5   ->   "reloc_probe: P ranks read N sequences, T timesteps of F features"
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <vector>

#include "ragtrain/data/format.hpp"
#include "ragtrain/data/shard.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = 0;
  try {
    if (argc != 2) throw std::runtime_error("usage: reloc_probe FILE.h5");
    const ragtrain::DatasetInfo info = ragtrain::read_dataset_info(argv[1], MPI_COMM_WORLD);
    std::vector<int64_t> mine;   // block r of P: the sequences [r N / P, (r + 1) N / P)
    for (int64_t i = rank * info.num_sequences / size; i < (rank + 1) * info.num_sequences / size; ++i)
      mine.push_back(i);
    const ragtrain::Shard shard = ragtrain::read_shard(info, mine, MPI_COMM_WORLD);
    int64_t counts[2] = {shard.size(), shard.offsets.back()}, totals[2] = {0, 0};
    MPI_Allreduce(counts, totals, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("reloc_probe: %d ranks read %lld sequences, %lld timesteps of %lld features (file: %lld, %lld)\n",
                  size, static_cast<long long>(totals[0]), static_cast<long long>(totals[1]),
                  static_cast<long long>(info.num_features), static_cast<long long>(info.num_sequences),
                  static_cast<long long>(info.offsets.back()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reloc_probe: rank %d: %s\n", rank, e.what());
    code = 1;
  }
  MPI_Finalize();
  return code;
}
