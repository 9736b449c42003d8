// What the tensor cores' mma.sync m16n8k8 (tf32, float accumulation) costs on one SM, for the fused LSTM's next design
// question (doc/performance.md, "a direction looked at and measured in session 12": 8 sequences a block, the
// recurrent matvec as an mma with the 8 sequences' h as its n = 8 columns). Measured with clock64() inside each kernel:
//   - latency: one warp, a chain of dependent mma (each adds into the one accumulator);
//   - throughput: 4 / 8 / 16 warps of one block, each 8 independent chains: cycles per mma per SM sub-partition;
//   - step: one LSTM step's matvec at H = 50 for 8 sequences, 7 warps (224 threads, as the one-block kernel), each
//     warp 2 row tiles x 7 k-steps x 3 products (3 x tf32: lo hi, hi lo, hi hi), the B fragments (h of the 8
//     sequences) loaded from shared memory and split each step, the partial sums of 7 accumulator sets (or one chain)
//     added, the new h stored, one block barrier; against the same step's matvec on the CUDA cores for one sequence
//     (each thread its gate row's 56 weights in registers, h as 14 float4 broadcasts, 4 chains of FMAs).
// No activations: the current kernel's step minus its matvec is known from the budget test (doc/performance.md).
// usage: mma_probe [out.json]   (prints a table; writes the JSON when a path is given)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "../src/backend/cuda/tf32_split.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace {

using ragtrain::mma_tf32;

constexpr int kSteps = 96;

// CHAINS independent accumulators a warp, `iters` rounds of one mma each: cycles per round (of the slowest warp).
template <int CHAINS>
__global__ void chains_kernel(int iters, float seed, float* out, long long* cycles) {
  float acc[CHAINS][4];
  for (int c = 0; c < CHAINS; ++c)
    for (int e = 0; e < 4; ++e) acc[c][e] = 0.0f;
  const uint32_t a[4] = {ragtrain::float_bits(seed), ragtrain::float_bits(seed * 0.5f), ragtrain::float_bits(seed),
                         ragtrain::float_bits(-seed)};
  const uint32_t b0 = ragtrain::float_bits(seed * 0.25f), b1 = ragtrain::float_bits(-seed * 0.125f);
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < iters; ++i)
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) mma_tf32(acc[c], a, b0, b1);
  __syncthreads();
  const long long t1 = clock64();
  float s = 0.0f;
  for (int c = 0; c < CHAINS; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// One LSTM step's matvec for 8 sequences at H = 50 (HP = 56: 7 k-steps), 7 warps, 2 row tiles a warp (224 gate
// rows >= 200). ACC accumulator sets a row tile (7: one per k-step, summed after; 1: one dependent chain).
template <int ACC>
__global__ void __launch_bounds__(224, 1) tc_step_kernel(const float* w, float* out, long long* cycles) {
  __shared__ float h_s[2][56 * 8];   // (k, sequence), double-buffered
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  uint32_t ah[2][7][4], al[2][7][4];   // W_hh's rows [32 warp, 32 warp + 32) as A fragments, split once
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int k = 0; k < 7; ++k)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = 32 * warp + 16 * mi + g + 8 * (e & 1), col = 8 * k + t4 + 4 * (e >> 1);
        ragtrain::tf32_split(w[row * 56 + col], ah[mi][k][e], al[mi][k][e]);
      }
  for (int i = tid; i < 2 * 56 * 8; i += 224) (&h_s[0][0])[i] = 0.01f * static_cast<float>(i % 17);
  __syncthreads();
  int cur = 0;
  const long long t0 = clock64();
  for (int step = 0; step < kSteps; ++step) {
    float acc[ACC][2][4];
#pragma unroll
    for (int s = 0; s < ACC; ++s)
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[s][mi][e] = 0.0f;
#pragma unroll
    for (int k = 0; k < 7; ++k) {
      uint32_t bh0, bl0, bh1, bl1;   // B[k][n]: h_s[8 k + t4 (+ 4)][n = g]
      ragtrain::tf32_split(h_s[cur][(8 * k + t4) * 8 + g], bh0, bl0);
      ragtrain::tf32_split(h_s[cur][(8 * k + t4 + 4) * 8 + g], bh1, bl1);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        float(&d)[4] = acc[ACC == 1 ? 0 : k][mi];
        mma_tf32(d, al[mi][k], bh0, bh1);
        mma_tf32(d, ah[mi][k], bl0, bl1);
        mma_tf32(d, ah[mi][k], bh0, bh1);
      }
    }
    float v[2][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float sum = 0.0f;
#pragma unroll
        for (int s = 0; s < ACC; ++s) sum += acc[s][mi][e];
        v[mi][e] = sum;
      }
    // Stand-in for the cell update: lane (g, t4) of warps 0..6 writes h of unit 8 warp + g (< 56) for sequences
    // 2 t4, 2 t4 + 1, from its four gate values (rows g, g + 8 of both tiles).
    const int unit = 8 * warp + g;
    if (unit < 56) {
      h_s[cur ^ 1][unit * 8 + 2 * t4] = 0.25f * (v[0][0] + v[0][2] + v[1][0] + v[1][2]);
      h_s[cur ^ 1][unit * 8 + 2 * t4 + 1] = 0.25f * (v[0][1] + v[0][3] + v[1][1] + v[1][3]);
    }
    __syncthreads();
    cur ^= 1;
  }
  const long long t1 = clock64();
  out[tid] = h_s[cur][tid % (56 * 8)];
  if (tid == 0) cycles[0] = t1 - t0;
}

// The same step's matvec on the CUDA cores for one sequence (the current kernel's forward): thread r its row's 56
// weights in registers, h_{t-1} as 14 float4 broadcasts, 4 chains of FMAs joined, the new h stored, one barrier.
__global__ void __launch_bounds__(224, 1) fma_step_kernel(const float* w, float* out, long long* cycles) {
  __shared__ __align__(16) float h_s[2][56];
  const int tid = static_cast<int>(threadIdx.x);
  float wr[56];
#pragma unroll
  for (int k = 0; k < 56; ++k) wr[k] = w[tid * 56 + k];
  if (tid < 112) (&h_s[0][0])[tid] = 0.01f * static_cast<float>(tid % 17);
  __syncthreads();
  int cur = 0;
  const long long t0 = clock64();
  for (int step = 0; step < kSteps; ++step) {
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
    for (int k = 0; k < 56; k += 8) {
      const float4 m0 = *reinterpret_cast<const float4*>(&h_s[cur][k]);
      const float4 m1 = *reinterpret_cast<const float4*>(&h_s[cur][k + 4]);
      a0 += wr[k] * m0.x;
      a1 += wr[k + 1] * m0.y;
      a2 += wr[k + 2] * m0.z;
      a3 += wr[k + 3] * m0.w;
      a0 += wr[k + 4] * m1.x;
      a1 += wr[k + 5] * m1.y;
      a2 += wr[k + 6] * m1.z;
      a3 += wr[k + 7] * m1.w;
    }
    const float pre = (a0 + a1) + (a2 + a3);
    if ((tid & 3) == 0 && tid < 224) h_s[cur ^ 1][tid >> 2] = 0.25f * pre;
    __syncthreads();
    cur ^= 1;
  }
  const long long t1 = clock64();
  out[tid] = h_s[cur][tid % 56];
  if (tid == 0) cycles[0] = t1 - t0;
}

struct Row {
  const char* probe;
  double value;
  const char* unit;
};

int probe(int argc, char** argv) {
  int dev = 0, clock_khz = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  float* out = nullptr;
  long long* cyc = nullptr;
  float* w = nullptr;
  CUDA_CHECK(cudaMalloc(&out, 1 << 20));
  CUDA_CHECK(cudaMalloc(&cyc, 1024 * sizeof(long long)));
  std::vector<float> wh(224 * 56);
  for (size_t i = 0; i < wh.size(); ++i) wh[i] = 0.001f * static_cast<float>(static_cast<int>(i % 97) - 48);
  CUDA_CHECK(cudaMalloc(&w, wh.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(w, wh.data(), wh.size() * sizeof(float), cudaMemcpyHostToDevice));
  auto cycles_of = [&](int n) {
    std::vector<long long> c(static_cast<size_t>(n));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(c.data(), cyc, c.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    long long m = 0;
    for (long long v : c) m = v > m ? v : m;
    return static_cast<double>(m);
  };
  std::vector<Row> rows;
  const int iters = 4096;
  for (int rep = 0; rep < 2; ++rep) {   // the first round warms up; the second is reported
    rows.clear();
    chains_kernel<1><<<1, 32>>>(iters, 1.0f, out, cyc);
    rows.push_back({"latency: cycles per dependent mma (1 warp, 1 chain)", cycles_of(1) / iters, "cycles"});
    chains_kernel<8><<<1, 32>>>(iters, 1.0f, out, cyc);
    rows.push_back({"1 warp, 8 chains: cycles per mma", cycles_of(1) / (8.0 * iters), "cycles"});
    for (int warps : {4, 8, 16}) {
      chains_kernel<8><<<1, 32 * warps>>>(iters, 1.0f, out, cyc);
      const double per_smsp = cycles_of(1) / (8.0 * iters * warps / 4.0);
      rows.push_back({warps == 4 ? "4 warps x 8 chains: cycles per mma per SM sub-partition"
                                 : (warps == 8 ? "8 warps x 8 chains: cycles per mma per SM sub-partition"
                                               : "16 warps x 8 chains: cycles per mma per SM sub-partition"),
                      per_smsp, "cycles"});
    }
    tc_step_kernel<7><<<1, 224>>>(w, out, cyc);
    rows.push_back({"step, 8 sequences, tensor cores, 7 accumulator sets: cycles per step", cycles_of(1) / kSteps,
                    "cycles"});
    tc_step_kernel<1><<<1, 224>>>(w, out, cyc);
    rows.push_back({"step, 8 sequences, tensor cores, one chain: cycles per step", cycles_of(1) / kSteps, "cycles"});
    fma_step_kernel<<<1, 224>>>(w, out, cyc);
    rows.push_back({"step, 1 sequence, CUDA cores (today's matvec): cycles per step", cycles_of(1) / kSteps,
                    "cycles"});
  }
  CUDA_CHECK(cudaGetLastError());
  std::printf("# mma.sync m16n8k8 tf32 on %s (SM clock attribute %.0f MHz), H = 50, %d steps\n", prop.name,
              clock_khz / 1e3, kSteps);
  for (const Row& r : rows) std::printf("  %-76s %9.1f %s\n", r.probe, r.value, r.unit);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "wx");   // never overwrites
    if (!f) {
      std::fprintf(stderr, "mma_probe: cannot create %s (it may exist already: give a new path)\n", argv[1]);
      return 2;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"clock_mhz\": %.0f, \"steps\": %d, \"probes\": [", prop.name,
                 clock_khz / 1e3, kSteps);
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f, "%s\n  {\"probe\": \"%s\", \"value\": %.3f, \"unit\": \"%s\"}", i ? "," : "", rows[i].probe,
                   rows[i].value, rows[i].unit);
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  CUDA_CHECK(cudaFree(out));
  CUDA_CHECK(cudaFree(cyc));
  CUDA_CHECK(cudaFree(w));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return probe(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mma_probe: %s\n", e.what());
    return 1;
  }
}
