// GPU selection per rank and the collective duplicate-GPU check.
#include "gpu_binding.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

std::optional<std::pair<int, int>> find_shared_gpu(const std::vector<GpuIdentity>& ranks) {
  std::map<std::pair<std::string, std::string>, int> first_user;   // (host, uuid) -> lowest rank using it
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const GpuIdentity& id = ranks[static_cast<size_t>(r)];
    auto [it, inserted] = first_user.emplace(std::make_pair(id.host, id.uuid), r);
    if (!inserted) return std::make_pair(it->second, r);
  }
  return std::nullopt;
}

std::string nccl_host_key(const std::string& hostname, const char* nccl_hostid) {
  return nccl_hostid != nullptr ? std::string(nccl_hostid) : hostname;
}

int device_for_local_rank(int local_rank, int visible) {
  RT_CHECK(visible > 0 && local_rank >= 0, "local rank " << local_rank << ", " << visible << " visible GPUs");
  return local_rank % visible;
}

std::string format_gpu_uuid(const unsigned char (&b)[16]) {
  char s[48];
  std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return s;
}

int visible_gpu_count(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError();   // clear the (non-sticky) error so later CUDA calls start clean
    if (why) *why = RT_MSG("cudaGetDeviceCount: " << cudaGetErrorString(rc));
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount reports 0 devices";
  return n;
}

namespace {

// One rank's answer in the all-gather: fixed size, plain bytes.
struct BindRecord {
  enum Status : int32_t { kOk = 0, kUserError = 1, kInternal = 2 };
  int32_t status = kOk;
  int32_t device = -1;
  char host[256] = {};
  char host_key[256] = {};   // the host as NCCL tells hosts apart (below)
  char uuid[48] = {};
  char message[640] = {};
};

template <size_t N>
void copy_text(char (&dst)[N], const std::string& src) {
  std::strncpy(dst, src.c_str(), N - 1);
  dst[N - 1] = '\0';
}

}  // namespace

GpuBinding bind_gpu(int local_rank, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));

  BindRecord mine;
  GpuBinding b;
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(host, &len));
  copy_text(mine.host, std::string(host, static_cast<size_t>(len)));
  // NCCL takes NCCL_HOSTID, where set, for the host's identity: ranks with different ids count as different hosts
  // (NCCL then connects them through its network transport, even on one GPU). The shared-GPU check follows NCCL
  // exactly, so it refuses what NCCL would refuse and nothing else; tests use this to run several ranks on one GPU.
  copy_text(mine.host_key, nccl_host_key(mine.host, std::getenv("NCCL_HOSTID")));

  // Local part: nothing here may leave this rank out of the all-gather below, so errors become a status.
  try {
    std::string why;
    b.visible = visible_gpu_count(&why);
    if (b.visible == 0) {
      const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
      mine.status = BindRecord::kUserError;
      copy_text(mine.message, RT_MSG("--device cuda: no CUDA GPU is visible to rank "
                                     << rank << " on host " << mine.host << " (" << why << "; CUDA_VISIBLE_DEVICES="
                                     << (cvd ? cvd : "<unset>") << ")"));
    } else {
      b.device = device_for_local_rank(local_rank, b.visible);
      CUDA_CHECK(cudaSetDevice(b.device));
      cudaDeviceProp prop{};
      CUDA_CHECK(cudaGetDeviceProperties(&prop, b.device));
      unsigned char bytes[16];
      std::memcpy(bytes, prop.uuid.bytes, 16);
      b.uuid = format_gpu_uuid(bytes);
      b.name = prop.name;
      mine.device = b.device;
      copy_text(mine.uuid, b.uuid);
    }
  } catch (const std::exception& e) {
    mine.status = BindRecord::kInternal;
    copy_text(mine.message, RT_MSG("rank " << rank << " on host " << mine.host << ": " << e.what()));
  }

  std::vector<BindRecord> all(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&mine, sizeof(BindRecord), MPI_BYTE, all.data(), sizeof(BindRecord), MPI_BYTE, comm));

  // Every rank holds the same table, so every rank reaches the same verdict and throws the same error.
  for (const BindRecord& r : all) {
    if (r.status == BindRecord::kUserError)
      throw UserError(r.message, "run where every rank sees a GPU (Slurm: --gpus-per-task=1; check "
                                 "CUDA_VISIBLE_DEVICES), or use --device cpu or --device auto");
    if (r.status == BindRecord::kInternal) throw InternalError(RT_MSG("GPU set-up failed: " << r.message));
  }
  std::vector<GpuIdentity> ids;
  for (const BindRecord& r : all) ids.push_back(GpuIdentity{r.host_key, r.uuid});
  if (const auto dup = find_shared_gpu(ids)) {
    const BindRecord& a = all[static_cast<size_t>(dup->first)];
    throw UserError(RT_MSG("ranks " << dup->first << " and " << dup->second << " both use GPU " << a.uuid << " on host "
                                    << a.host << " (CUDA device " << a.device << " of "
                                    << b.visible << " visible)"),
                    "one rank per GPU: start at most as many ranks per node as it has GPUs (Slurm: "
                    "--gpus-per-task=1, or fewer --ntasks-per-node; mpirun: fewer -np / --map-by)");
  }
  return b;
}

}  // namespace ragtrain
