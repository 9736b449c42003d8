// RAGTRAIN_HOST_DEVICE: marks a small inline function that host C++ and CUDA device code must compute identically.
#pragma once

#if defined(__CUDACC__)
#define RAGTRAIN_HOST_DEVICE __host__ __device__
#else
#define RAGTRAIN_HOST_DEVICE
#endif
