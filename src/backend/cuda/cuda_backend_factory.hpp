// Entry point of the CUDA backend for make_backend: binds this rank to its GPU and builds the backend.
#pragma once

#include <memory>

#include "ragtrain/backend/backend.hpp"

namespace ragtrain {

// Collective over opts.comm (every rank calls it). For device "cuda": picks the GPU from opts.local_rank,
// refuses two ranks on one GPU (UserError), sets up NCCL and cuDNN. For device "auto": the same when every rank
// sees a GPU; otherwise prints a one-line notice (rank 0 of opts.comm) and returns nullptr, and the caller falls
// back to the CPU backend. Throws UserError for "cuda" when a rank sees no GPU.
std::unique_ptr<Backend> make_cuda_backend(const ModelShape& shape, const BackendOptions& opts);

}  // namespace ragtrain
