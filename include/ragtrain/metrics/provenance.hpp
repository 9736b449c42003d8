// Where and how a result was produced, recorded in summary.json and bench JSON: command line, configuration,
// git revision, library versions, hosts, devices and the rank layout, and the validity of the result.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ragtrain/comm/context.hpp"
#include "ragtrain/metrics/metrics.hpp"

namespace ragtrain {

// The git revision the binary was built from (`git describe --always --dirty` at build time), or "unknown"
// when it was built outside a git checkout (a release tarball).
std::string git_revision();

// Versions of the libraries linked in: {"mpi": MPI_Get_library_version's first line, "mpi_standard": "3.1",
// "hdf5": "1.10.8", "boost": "1.74.0", "zlib": "1.2.13", "compiler": ...} plus, in CUDA builds, cuda_versions().
Json library_versions();

// CUDA runtime and driver, cuDNN and NCCL versions; an empty object in builds without CUDA
// (src/metrics/provenance_cuda.cpp).
Json cuda_versions();

// What this rank computes on: "cpu", or in CUDA builds the current device's name and PCI bus id.
std::string device_description(const std::string& backend_name);

// Collective. On rank 0: {"command_line", "config", "git_revision", "versions", "started_at", "recorded_at",
// "slurm" (job id, restart count, ... when under Slurm), "layout": {"world_size", "nodes", "hosts": {host:
// [ranks]}, "ranks": [{"rank", "host", "local_rank", "device", "cuda_visible_devices"}]}}; empty elsewhere.
Json collect_provenance(const Context& ctx, const std::string& command_line, const std::string& effective_config,
                        const std::string& backend_name, const std::string& started_at);

// The current time as ISO 8601 UTC ("2026-12-02T14:21:07Z").
std::string utc_now();
// `t` as ISO 8601 UTC with milliseconds ("2026-12-02T14:21:07.042Z"): the time stamp of run records.
std::string utc_time_ms(std::chrono::system_clock::time_point t);

// Collective. The validity flag of a result: the loss is finite and fell from `first_loss` to `last_loss`, and
// every rank holds bit-identical parameters (CRC-32 of `params` compared with one MPI_Allreduce). On rank 0:
// {"valid", "loss_finite", "loss_falling", "first_loss", "last_loss", "ranks_agree", "params_crc32"}.
Json check_validity(const Context& ctx, const std::vector<float>& params, double first_loss, double last_loss);

}  // namespace ragtrain
