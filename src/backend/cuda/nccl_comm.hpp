// The NCCL communicator of a backend (RAII), bootstrapped over MPI, and the typed in-place sum.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>

namespace ragtrain {

// NCCL's datatype for T, so element counts and types never drift apart.
template <class T> struct NcclType;
template <> struct NcclType<float> { static constexpr ncclDataType_t value = ncclFloat32; };
template <> struct NcclType<double> { static constexpr ncclDataType_t value = ncclFloat64; };
template <> struct NcclType<int32_t> { static constexpr ncclDataType_t value = ncclInt32; };

class NcclComm {
 public:
  // Collective over `comm`: rank 0 makes the unique id, MPI_Bcast shares it, every rank joins with
  // ncclCommInitRank. The calling thread's current device must already be this rank's GPU.
  explicit NcclComm(MPI_Comm comm);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // In-place sum of `count` elements (an element count, not bytes) on `stream`.
  template <class T>
  void allreduce_sum(T* buf, int64_t count, cudaStream_t stream) const {
    allreduce_sum_raw(buf, count, NcclType<T>::value, stream);
  }

  int size() const { return size_; }
  int rank() const { return rank_; }

 private:
  void allreduce_sum_raw(void* buf, int64_t count, ncclDataType_t type, cudaStream_t stream) const;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace ragtrain
