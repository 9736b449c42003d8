// The CUDA part of provenance (runtime, driver, cuDNN, NCCL, device name); empty in builds without CUDA.
#include "ragtrain/metrics/provenance.hpp"

#ifdef RAGTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#endif

namespace ragtrain {

#ifdef RAGTRAIN_WITH_CUDA
namespace {
// 12040 -> "12.4"; CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
}  // namespace

Json cuda_versions() {
  // Failures (no driver on a login node) are recorded as such, never thrown: provenance must not end a run.
  Json v = Json::object();
  int rt = 0, drv = 0;
  v["cuda_runtime"] = cudaRuntimeGetVersion(&rt) == cudaSuccess ? cuda_version_string(rt) : "unavailable";
  v["cuda_driver"] = cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0 ? cuda_version_string(drv) : "unavailable";
  const size_t dnn = cudnnGetVersion();   // 90100 -> 9.1.0 (cuDNN 9: major*10000 + minor*100 + patch)
  v["cudnn"] = dnn >= 90000 ? std::to_string(dnn / 10000) + "." + std::to_string((dnn % 10000) / 100) + "." +
                                  std::to_string(dnn % 100)
                            : std::to_string(dnn / 1000) + "." + std::to_string((dnn % 1000) / 100) + "." +
                                  std::to_string(dnn % 100);
  int nccl = 0;
  v["nccl"] = ncclGetVersion(&nccl) == ncclSuccess
                  ? std::to_string(nccl / 10000) + "." + std::to_string((nccl % 10000) / 100) + "." +
                        std::to_string(nccl % 100)
                  : "unavailable";
  return v;
}

std::string device_description(const std::string& backend_name) {
  if (backend_name != "cuda") return backend_name;
  int dev = -1;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return "cuda (unknown device)";
  char bus[32] = {0};
  cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
  return std::string(prop.name) + " (device " + std::to_string(dev) + ", " + bus + ")";
}
#else
Json cuda_versions() { return Json::object(); }
std::string device_description(const std::string& backend_name) { return backend_name; }
#endif

}  // namespace ragtrain
