// RAGTRAIN_HD marks the functions of the pure index and bit arithmetic headers (fused_lanes.hpp, fused_chunks.hpp,
// fused_split_frag.hpp, tf32_split.hpp) that both the kernels and the host's unit tests call.
#pragma once

#ifdef __CUDACC__
#define RAGTRAIN_HD __host__ __device__ __forceinline__
#define RAGTRAIN_UNROLL _Pragma("unroll")   // the loops of those functions (a host compiler has no such pragma)
#else
#define RAGTRAIN_HD inline
#define RAGTRAIN_UNROLL
#endif
