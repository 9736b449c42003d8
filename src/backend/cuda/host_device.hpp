// RAGTRAIN_HD marks the functions of the pure index and bit arithmetic headers (fused_lanes.hpp, fused_chunks.hpp,
// tf32_split.hpp) that both the kernels and the host's unit tests call.
#pragma once

#ifdef __CUDACC__
#define RAGTRAIN_HD __host__ __device__ __forceinline__
#else
#define RAGTRAIN_HD inline
#endif
