// NCCL bootstrap over MPI and the in-place sum.
#include "nccl_comm.hpp"

#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

NcclComm::NcclComm(MPI_Comm comm) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  // Rank 0 sends a status with the id, so a failure there ends every rank instead of leaving them in MPI_Bcast.
  struct {
    ncclUniqueId id;
    int32_t rc;
  } boot{};
  if (rank_ == 0) boot.rc = static_cast<int32_t>(ncclGetUniqueId(&boot.id));
  MPI_CHECK(MPI_Bcast(&boot, sizeof boot, MPI_BYTE, 0, comm));
  if (boot.rc != ncclSuccess)
    throw InternalError(RT_MSG("ncclGetUniqueId on rank 0: " << ncclGetErrorString(static_cast<ncclResult_t>(boot.rc))));
  NCCL_CHECK(ncclCommInitRank(&comm_, size_, boot.id, rank_));
}

NcclComm::~NcclComm() {
  if (comm_) ncclCommDestroy(comm_);
}

void NcclComm::allreduce_sum_raw(void* buf, int64_t count, ncclDataType_t type, cudaStream_t stream) const {
  RT_CHECK(count >= 0, "negative element count " << count);
  NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<size_t>(count), type, ncclSum, comm_, stream));
}

}  // namespace ragtrain
