// The GPU part of the one error module: CUDA_CHECK, CUDNN_CHECK and NCCL_CHECK throw InternalError with
// file:line, the call and the library's own error string (the printer adds rank and host).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

#define CUDA_CHECK(call)                                                                                      \
  do {                                                                                                        \
    cudaError_t rt_cuda_rc_ = (call);                                                                         \
    if (rt_cuda_rc_ != cudaSuccess)                                                                           \
      throw ::ragtrain::InternalError(::ragtrain::where(                                                      \
          __FILE__, __LINE__,                                                                                 \
          RT_MSG(#call << ": " << cudaGetErrorName(rt_cuda_rc_) << ": " << cudaGetErrorString(rt_cuda_rc_)))); \
  } while (0)

// After a kernel launch: launch-configuration errors are reported at once; faults inside the kernel surface
// at the next synchronising call, which CUDA_CHECK reports.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUDNN_CHECK(call)                                                                              \
  do {                                                                                                 \
    cudnnStatus_t rt_cudnn_rc_ = (call);                                                               \
    if (rt_cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                                          \
      throw ::ragtrain::InternalError(                                                                 \
          ::ragtrain::where(__FILE__, __LINE__, RT_MSG(#call << ": " << cudnnGetErrorString(rt_cudnn_rc_)))); \
  } while (0)

// NCCL's own string names the error class; ncclGetLastError adds the detail NCCL logged for this thread.
#define NCCL_CHECK(call)                                                                                  \
  do {                                                                                                    \
    ncclResult_t rt_nccl_rc_ = (call);                                                                    \
    if (rt_nccl_rc_ != ncclSuccess)                                                                       \
      throw ::ragtrain::InternalError(::ragtrain::where(                                                  \
          __FILE__, __LINE__,                                                                             \
          RT_MSG(#call << ": " << ncclGetErrorString(rt_nccl_rc_) << " (" << ncclGetLastError(nullptr) << ")"))); \
  } while (0)

}  // namespace ragtrain
