// Which GPU a rank uses: the node-local rank modulo the visible devices, and a collective check that no two
// ranks share one (NCCL would refuse later with a less helpful "Duplicate GPU detected").
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ragtrain {

// Where one rank runs: host name and the GPU's UUID as nvidia-smi prints it ("GPU-xxxxxxxx-...").
struct GpuIdentity {
  std::string host;
  std::string uuid;
};

// Pure: the first pair of ranks (a < b, ordered by b then a) that use the same GPU on the same host, if any.
std::optional<std::pair<int, int>> find_shared_gpu(const std::vector<GpuIdentity>& ranks);

// Pure: the host as NCCL tells hosts apart: NCCL_HOSTID where it is set, even to "" (`nccl_hostid`, null when
// unset), else the host name. Ranks with different ids are different hosts to NCCL even on one machine.
std::string nccl_host_key(const std::string& hostname, const char* nccl_hostid);

// The device ordinal for a node-local rank among `visible` devices (CUDA_VISIBLE_DEVICES already applied by the
// runtime: with Slurm's --gpus-per-task=1 every rank sees one device, ordinal 0).
int device_for_local_rank(int local_rank, int visible);

// Formats a CUDA UUID like nvidia-smi -L.
std::string format_gpu_uuid(const unsigned char (&bytes)[16]);

struct GpuBinding {
  int device = 0;               // CUDA ordinal in this process
  std::string name;             // e.g. "NVIDIA H200"
  std::string uuid;
  int visible = 0;              // devices this rank can see
};

// Collective over `comm`: every rank probes its devices, selects and sets its GPU, then the ranks exchange
// (host, uuid, status) so that a failure or a shared GPU on any rank ends every rank with the same error
// (UserError naming both ranks, the GPU and the host) instead of leaving some ranks waiting in NCCL.
GpuBinding bind_gpu(int local_rank, MPI_Comm comm);

// Number of devices this process can see; 0 (and the reason in `why`) when the runtime reports none or fails.
int visible_gpu_count(std::string* why);

}  // namespace ragtrain
