// make_cuda_backend: the "auto" decision (collective), then the CUDA backend and its one-line description.
#include "cuda_backend_factory.hpp"

#include <cstdio>

#include "cuda_backend.hpp"
#include "gpu_binding.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/units.hpp"

namespace ragtrain {

std::unique_ptr<Backend> make_cuda_backend(const ModelShape& shape, const BackendOptions& opts) {
  RT_CHECK(opts.device != Device::Cpu, "make_cuda_backend for device cpu");
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(opts.comm, &rank));
  if (opts.device == Device::Auto) {
    // All ranks must take the same backend (their collectives must match), so the answer is "CUDA" only when
    // every rank sees a GPU.
    std::string why;
    const int mine = visible_gpu_count(&why) > 0 ? 1 : 0;
    int all = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, opts.comm));
    if (!all) {
      int without = 0;
      const int lacking = 1 - mine;
      MPI_CHECK(MPI_Allreduce(&lacking, &without, 1, MPI_INT, MPI_SUM, opts.comm));
      if (rank == 0)
        std::fprintf(stderr, "ragtrain: --device auto: no CUDA GPU visible to %s%s%s; using the CPU backend\n",
                     count_of(without, "rank").c_str(), why.empty() ? "" : " (", why.empty() ? "" : (why + ")").c_str());
      return nullptr;
    }
  }
  CudaTuning tuning = CudaTuning::from_environment();
  tuning.lstm = opts.lstm;
  auto backend = std::make_unique<CudaBackend>(shape, opts, tuning);
  if (rank == 0) std::fprintf(stderr, "ragtrain: %s\n", backend->describe().c_str());
  return backend;
}

}  // namespace ragtrain
