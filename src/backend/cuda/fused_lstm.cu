// The fused LSTM training step, three kernels in one stream (four with K > 1), each a programmatic dependent launch
// of the one before, so its blocks are placed while that one ends:
//   1. input projection  W_ih x_t + b_ih + b_hh for every (sequence, timestep), into a per-sequence global scratch
//      (L2-resident); a block per (sequence, time chunk), so all SMs share it. It stages its inputs while the
//      previous step's optimizer ends and reads the parameters after it (W_ih through shared memory). For H > 64 its
//      first kPack blocks write W_hh in the cluster kernel's register order for that kernel's prologue.
//   2. recurrence (one thread block per sequence for H <= 64, a cluster of 4 blocks above): forward recurrence,
//      gate activations, c, tanh(c) and h saved to the scratch, and the pooling of h (last step, mean or max over
//      the sequence's steps, kept in registers); head, loss and d loss / d pooled h; backward recurrence (seeded by
//      the pooling's backward: the last step, every step / length, or each unit's argmax step; d gates overwrite the
//      activations in the scratch); then the head's gradients. Its prologue (W_hh into registers) overlaps the
//      projection.
//   3. weight gradients  [dW_ih dW_hh db] = sum over sequences and t of dg_t [x_t, h_{t-1}, 1]^T. Up to 16 sequences
//      a tiled GEMM over the other SMs, split over groups of sequences, that streams: each chunk of timesteps is
//      summed as soon as the backward has published that it is stored. More: a GEMM over all SMs after the
//      recurrence, split over equal parts of all sequences' timesteps (split_grad_kernel).
//   4. (K > 1) the sums over the groups or parts, in order, and, for the head, over the sequences.
// In the recurrence thread r = 4 j + q owns gate q of hidden unit j (PyTorch row q H + j), so the four gates of a
// unit sit in four adjacent lanes and the cell update needs only warp shuffles: one block barrier per timestep,
// forward and backward (h and d gates are double-buffered in shared memory).
// Recurrent weights always in registers: H <= 64 in one block, where a lane holds the four gate rows of its unit at a
// quarter of the columns (forward) and, for four units' columns, a quarter of one gate's rows (backward), so it
// loads a quarter of the step's vector instead of all of it (slice_matvec; zero-padded to 32, 48, 52, 56 or 64 so
// the unrolled loops have no branches); 64 < H <= 128 spread over the 4 SMs of a thread-block
// cluster, h and d gates exchanged through distributed shared memory (see the cluster variant).
// The recurrence is latency-bound: what it costs is the chain of dependent instructions per timestep (shared-memory
// loads, the FMA chains, the activations, the shuffles, the barrier) and every global round trip (~600 cycles)
// left on that chain, so loads are issued far ahead and in batches; the projection and weight gradients, which do
// not depend on the recurrence's order, run on the other SMs (the H200's measurements are in doc/performance.md).
// Every sum has a fixed order and there are no atomics, so a rerun gives identical bits.
#include "fused_lstm.hpp"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fill.hpp"
#include "fused_chunks.hpp"
#include "fused_lanes.hpp"
#include "tf32_split.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {
namespace {

constexpr int kInline = 16;     // slots passed in the kernel parameters (larger batches: a device table)
constexpr int kTables = 3;      // device slot tables used in turn (FusedLstm::run)
constexpr int kMaxH = 128;
constexpr int kProjT = 64;      // input projection: timesteps per block at most
constexpr unsigned kFull = 0xffffffffu;
// Streaming weight gradients pays off while the GEMM's blocks find SMs of their own beside the recurrence's: on the
// H200 at H = 50 a whole run took 96.4-97.4 us streaming vs 99.2-100.9 waiting at K = 1, 101.3-103.5 vs 105.8-106.9
// at K = 16, but 149.8-151.6 vs 149.4-150.0 at K = 128 (the GEMM's polling blocks then share the recurrence's SMs).
// In the cluster variant a progress word per warp (each with its fence every chunk) cost more than it saved at
// H = 128 (173.4 vs 170.8 us); one per block saves 1.5-3.3 us.
constexpr int kStreamMaxB = 16;
constexpr int kCl = 4;   // blocks per sequence in the cluster variant (64 < H <= 128)
constexpr int kClUnits = kMaxH / kCl;    // units per block at most
constexpr int kClThreads = 16 * kClUnits;
constexpr int kClCols = 32;              // columns (forward) or rows (backward) of W_hh per thread
constexpr int kPack = 32;                // blocks of the projection kernel that pack W_hh for the cluster variant

struct Args {
  const float* params = nullptr;
  float* out = nullptr;           // B == 1: the fused buffer (+=); else the partials (=), block b at b * stride
  int64_t stride = 0;
  bool accumulate = true;
  const float* features = nullptr;
  const int32_t* labels = nullptr;
  const float* targets = nullptr;
  const GatherSlot* slots = nullptr;   // B > kInline
  int32_t B = 0, F = 0, H = 0, C = 0;
  bool classification = true;
  int32_t pool = 0;               // the head's input: 0 the last step's h, 1 the mean over the steps, 2 the max
  FusedLayout lay;
  float* scratch = nullptr;
  int64_t per_seq = 0;
  int32_t t_cap = 0;
  int32_t HP = 0, fc = 0, tc = 0, Cp = 0;   // tc: projection timesteps per block
  int32_t fc_smem = 0;            // floats of the head's weight and bias staged in shared memory (0: none)
  int32_t groups = 1;             // weight-gradient partial sums: sequence groups, or the split GEMM's parts (1:
                                  // added straight into the fused buffer)
  float* grads = nullptr;         // the fused buffer
  float* wpart = nullptr;         // groups > 1: (groups, F + H + 1, wstride) partial sums, column-major
  int32_t wstride = 0;            // a column's floats: 4H rounded up to 8
  int32_t sg_wm = 0, sg_wn = 0;   // split_grad_kernel: its block tile in warps (32 x 32 outputs each)
  int32_t sum_blocks = 0;         // sums_kernel: blocks of the weight-gradient sums (the head's sums after them)
  int64_t head_lo = 0, n_grad = 0;   // the head's gradients and the extras: fused-buffer entries [head_lo, n_grad)
  // The backward's progress, kCl words per sequence (one per block of a cluster; the one-block kernel uses the
  // first), each (epoch << 32) | v: every d gate of steps >= v (and every h of the forward) that the block stored is
  // in the scratch. With `stream` set (few sequences) the recurrence publishes them at every chunk boundary and the
  // weight-gradient blocks, resident on other SMs (programmatic dependent launch), sum each chunk of timesteps as
  // soon as it is published instead of waiting for the whole recurrence kernel.
  unsigned long long* progress = nullptr;
  uint32_t epoch = 0;
  int32_t words = 1;              // progress words in use per sequence
  bool stream = false;
  long long* cycles = nullptr;    // (5) block 0's clock at the recurrence's phase boundaries, or null
  // W_hh packed for the recurrence kernel's registers (packed_source), written by the projection's pack blocks, each
  // of which then sets its flag to the epoch.
  float* packed = nullptr;
  int32_t packed_floats = 0;
  unsigned long long* pack_flags = nullptr;   // (kPack)
  int32_t pack_rows = 0;                      // the projection grid's first rows, holding the pack blocks (cluster)
};

struct Params {
  Args a;
  GatherSlot slot[kInline];
};

// sigmoid(v), and tanh(v) = 2 sigmoid(2v) - 1 (gate g, tanh(c)): one exp and one reciprocal, no branch, so the
// four gates of a quad take the same path (tanhf and expf in divergent lanes cost both, on the critical path).
// The approximate reciprocal: the correctly rounded one adds a range check and a branch to every activation (seen in
// the SASS); 1 / inf still gives 0, so sigmoid saturates correctly. The flush-to-zero forms of ex2 and rcp are bare
// MUFU instructions (the others wrap them in denormal scaling, on the critical path); they give the same bits as
// __expf and __fdividef(1, x) wherever input and result are normal, and a denormal 2^(-v log2 e) only perturbs
// 1 + it below float resolution.
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// sigmoid_scaled takes v (-log2 e): the recurrences fold the factor 2 of tanh into that one product (2 (-log2 e) is
// exact in float, so v (2 (-log2 e)) and (2 v) (-log2 e) round to the same bits), one instruction less on the chain.
constexpr float kNegLog2e = -1.44269504088896341f;
__device__ __forceinline__ float sigmoid_scaled(float v) { return rcp_ftz(1.0f + ex2_ftz(v)); }
__device__ __forceinline__ float sigmoid_f(float v) { return sigmoid_scaled(v * kNegLog2e); }
__device__ __forceinline__ float tanh_f(float v) { return 2.0f * sigmoid_scaled(v * (2.0f * kNegLog2e)) - 1.0f; }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 4 (16) bytes global -> shared, asynchronously; zeros when !ok (src is then not read).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}

// The projection and the split weight-gradient GEMM run on the tensor cores, three tf32 products per float product
// (tf32_split.hpp): float accuracy, as the CPU reference needs. Both are deterministic: fixed tiles, fixed order of
// the mma instructions.

// For rows x cols: dst(row, k, src(row, k)). A warp per row, lanes along k (coalesced), 4 rows x 64 columns per warp
// in flight: a loop that stores each value right after its load waits one memory latency (~600 cycles) per element.
template <class Src, class Dst>
__device__ __forceinline__ void copy_rows(int rows, int cols, Src src, Dst dst) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nw = static_cast<int>(blockDim.x) >> 5;
  for (int r0 = warp; r0 < rows; r0 += 4 * nw) {
    for (int c0 = 0; c0 < cols; c0 += 64) {
      float v[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          const int row = r0 + i * nw, k = c0 + 32 * b + lane;
          v[i][b] = (row < rows && k < cols) ? src(row, k) : 0.0f;
        }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          const int row = r0 + i * nw, k = c0 + 32 * b + lane;
          if (row < rows && k < cols) dst(row, k, v[i][b]);
        }
    }
  }
}

__device__ __forceinline__ void mark(const Args& a, int phase) {
  if (a.cycles && blockIdx.x == 0 && threadIdx.x == 0) a.cycles[phase] = clock64();
}

// The progress word of a sequence (Args::progress). The writer's fence makes every store that reached it through
// the block's barriers visible at GPU scope before the word; the reader's acquire orders its loads after the word.
__device__ __forceinline__ void publish_progress(unsigned long long* word, uint32_t epoch, int v) {
  __threadfence();
  const unsigned long long val = (static_cast<unsigned long long>(epoch) << 32) | static_cast<uint32_t>(v);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(word), "l"(val) : "memory");
}
__device__ __forceinline__ bool progress_reached(const unsigned long long* word, uint32_t epoch, int v) {
  unsigned long long val;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(val) : "l"(word) : "memory");
  return static_cast<uint32_t>(val >> 32) == epoch && static_cast<int>(static_cast<uint32_t>(val)) <= v;
}

// out[idx(u)] = val[u] (partials) or += (the fused buffer) for the U entries with ok(u); the old values are loaded
// together first (one memory latency for all U, not U of them).
template <int U, class Idx, class Ok>
__device__ __forceinline__ void emit_batch(const Args& a, int seq, const float (&val)[U], Idx idx, Ok ok) {
  float* out = a.out + static_cast<int64_t>(seq) * a.stride;
  float old[U];
#pragma unroll
  for (int u = 0; u < U; ++u) old[u] = (a.accumulate && ok(u)) ? out[idx(u)] : 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (ok(u)) out[idx(u)] = a.accumulate ? old[u] + val[u] : val[u];
}

__device__ __forceinline__ GatherSlot slot_of(const Params& p, int b) {
  return p.a.B <= kInline ? p.slot[b] : p.a.slots[b];
}

// The cluster variant's W_hh, packed by the projection kernel in the order its threads hold it in registers: float4
// d4 = (rank, w, k / 4, thread), w 0 the forward row, 1 the backward column. Loading it is then 16-byte loads,
// coalesced (the strided column loads straight from the parameters took 14.3 K cycles at H = 128, longer than the
// projection they overlap). (The one-block kernel loads its weights directly: there the projection is longer than
// those loads, and the packed copy's float4 loads measured 905 instead of 829 cycles a backward step at H = 50.)
// Returns the parameter index of element e of packed float4 d4, or -1 (a zero: padding past H).
__device__ __forceinline__ int64_t packed_source(const Args& a, int d4, int e) {
  constexpr int kPerPart = kClThreads * kClCols / 4;   // float4s of one (rank, w)
  const int H = a.H, tid = d4 % kClThreads, k = 4 * ((d4 / kClThreads) % (kClCols / 4)) + e;
  const int w = (d4 / kPerPart) % 2, rank = d4 / (2 * kPerPart);
  const int jl = tid >> 4, q = (tid >> 2) & 3, pp = tid & 3, j = kCl * jl + rank;
  if (j >= H) return -1;
  if (w == 0) {
    const int col = 4 * k + pp;
    return col < H ? a.lay.w_hh[q] + static_cast<int64_t>(j) * H + col : -1;
  }
  const int g = k & 3, i = 4 * q + pp + 16 * (k >> 2);
  return i < H ? a.lay.w_hh[g] + static_cast<int64_t>(i) * H + j : -1;
}

// Pack block pi < kPack of the projection's pack rows: its share of the packed W_hh (all loads in flight, then the
// stores), then its flag (epoch-tagged, as the progress words).
__device__ void pack_w_hh(const Args& a, int pi) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int n4 = a.packed_floats / 4, step = kPack * nt;
  constexpr int U = 4;
  for (int d0 = pi * nt + tid; d0 < n4; d0 += U * step) {
    float v[U][4];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d4 = d0 + u * step;
        const int64_t src = d4 < n4 ? packed_source(a, d4, e) : -1;
        v[u][e] = src >= 0 ? a.params[src] : 0.0f;
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (d0 + u * step < n4)
        reinterpret_cast<float4*>(a.packed)[d0 + u * step] = make_float4(v[u][0], v[u][1], v[u][2], v[u][3]);
  }
  __syncthreads();
  if (tid == 0) publish_progress(a.pack_flags + pi, a.epoch, 0);
}

// The packed W_hh of this run is complete (every pack block's flag carries this run's epoch); the block's loads of
// it after this are ordered after the flags.
__device__ __forceinline__ void wait_packed(const Args& a) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kPack)
    while (!progress_reached(a.pack_flags + tid, a.epoch, 0)) __nanosleep(32);
  __syncthreads();
}

// The projection's W_ih columns [f0, f0 + nf) into ws by interleaved row (pitch kp), zero to the next multiple of 8:
// a warp per unit j (all four gates), lanes along k, U units (8 U loads a lane) in flight: one round trip at H <= U x
// the warps. (Loaded straight into registers, a warp's 32 rows cost 32 sectors a load: ncu timed the kernel at 9 us at
// H = 128; one division per element here cost as much again.)
template <int U>
__device__ __forceinline__ void stage_w_ih(const Args& a, float* ws, int kp, int f0, int nf) {
  const int H = a.H, F = a.F, lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nw = static_cast<int>(blockDim.x) >> 5, kpad = (nf + 7) & ~7;
  for (int j0 = warp; j0 < H; j0 += U * nw) {
    float v[U][4][2];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int g = 0; g < 4; ++g)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int jj = j0 + u * nw, k = lane + 32 * c;
          v[u][g][c] = (jj < H && k < nf) ? a.params[a.lay.w_ih[g] + static_cast<int64_t>(jj) * F + f0 + k] : 0.0f;
        }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int g = 0; g < 4; ++g)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int jj = j0 + u * nw, k = lane + 32 * c;
          if (jj < H && k < kpad) ws[(4 * jj + g) * kp + k] = v[u][g][c];
        }
  }
}

// Phase 1, one block per (sequence, chunk of a.tc <= kProjT timesteps): gbuf[t][r] = b_ih + b_hh + W_ih[row] x_t;
// sequence b in row b + a.pack_rows of the grid, the kPack pack blocks (pack_w_hh) first, in the rows before.
// A GEMM on the tensor cores (3 x tf32, as split_grad_kernel): timesteps x features times features x gate rows, warp
// w the rows r in [32 w, 32 w + 32) (4 mma tiles of 8) for all the chunk's timesteps (up to 4 tiles of 16), the sums
// over features in registers across feature chunks of a.fc <= 64. Each chunk of W_ih and of the inputs is staged in
// shared memory with coalesced loads (W_ih by interleaved row 4 j + q), rows a.fc + 4 floats apart (4 mod 8: a
// fragment's loads, 8 rows x 4 features, on 32 distinct banks), zero-padded to whole mma tiles. (On the CUDA cores,
// each thread a row of W_ih in registers, the kernel took 14.8 / 16.7 us at K = 128, H = 50 on the H200, here 13.1 /
// 15.4 (ncu, two steps): most of it is the staging's memory round trips, 26% of issue slots busy.)
// Dynamic shared memory: xs (kProjT x pitch), then ws (threads x pitch).
__global__ void __launch_bounds__(512) projection_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 proj_smem[];
  const int kp = a.fc + 4;   // the rows' pitch
  float* const xs = reinterpret_cast<float*>(proj_smem);
  float* const ws = xs + kProjT * kp;
  if (static_cast<int>(blockIdx.y) < a.pack_rows) {   // the pack rows
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const int pi = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
    if (pi < kPack) pack_w_hh(a, pi);
    return;
  }
  const int b = static_cast<int>(blockIdx.y) - a.pack_rows;
  const GatherSlot slot = slot_of(p, b);
  const int t_begin = static_cast<int>(blockIdx.x) * a.tc;
  if (t_begin >= slot.length) return;   // the whole block: no barrier is left waiting
  const int n = min(a.tc, slot.length - t_begin), n16 = (n + 15) & ~15;
  const float* x = a.features + (slot.row + t_begin) * a.F;
  const int H = a.H, G = 4 * H, F = a.F, tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  // The chunk's inputs, rows past n and features past nf (to the next multiple of 8) zero.
  auto stage_x = [&](int f0, int nf) {
    copy_rows(
        n16, (nf + 7) & ~7,
        [&](int tt, int k) { return (tt < n && k < nf) ? x[static_cast<int64_t>(tt) * F + f0 + k] : 0.0f; },
        [&](int tt, int k, float v) { xs[tt * kp + k] = v; });
  };
  // The features never change: their first chunk is staged while the previous step's optimizer may still run (this
  // kernel is launched with programmatic dependent launch after it); the parameters are read only after the wait.
  stage_x(0, min(a.fc, F));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // Let the recurrence kernel start its prologue now: the parameters are final (the cluster variant's then waits for
  // the pack blocks' flags before it reads the packed W_hh).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int g = lane >> 2, t4 = lane & 3, r0 = 32 * warp + 2 * t4;   // lane (g, t4)'s rows: r0 + 8 ni + {0, 1}
  float bias[4][2];
#pragma unroll
  for (int ni = 0; ni < 4; ++ni)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int r = r0 + 8 * ni + e, j = r >> 2, q = r & 3;
      bias[ni][e] = r < G ? a.params[a.lay.b_ih[q] + j] + a.params[a.lay.b_hh[q] + j] : 0.0f;
    }
  float acc[4][4][4];   // (timestep tile, row tile, fragment)
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  stage_w_ih<8>(a, ws, kp, 0, min(a.fc, F));   // 8 units in flight while the sums below hold no registers
  for (int f0 = 0; f0 < F; f0 += a.fc) {
    const int nf = min(a.fc, F - f0);
    if (f0 > 0) {   // F > 64: the next chunk, fewer loads in flight beside the sums
      __syncthreads();   // xs and ws are free
      stage_x(f0, nf);
      stage_w_ih<2>(a, ws, kp, f0, nf);
    }
    __syncthreads();
    const float* const Xl = xs + g * kp + t4;                // A[tt][k] = xs[tt][k]
    const float* const Wl = ws + (32 * warp + g) * kp + t4;  // B[k][r] = ws[r][k]
    for (int k0 = 0; k0 < nf; k0 += 8) {
      uint32_t bh[4][2], bl[4][2];
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        tf32_split(Wl[8 * ni * kp + k0], bh[ni][0], bl[ni][0]);
        tf32_split(Wl[8 * ni * kp + k0 + 4], bh[ni][1], bl[ni][1]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        if (16 * mi >= n) break;
        const float* const Xm = Xl + 16 * mi * kp + k0;
        uint32_t ah[4], al[4];
        tf32_split(Xm[0], ah[0], al[0]);
        tf32_split(Xm[8 * kp], ah[1], al[1]);
        tf32_split(Xm[4], ah[2], al[2]);
        tf32_split(Xm[8 * kp + 4], ah[3], al[3]);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {   // small terms first
          mma_tf32(acc[mi][ni], al, bh[ni][0], bh[ni][1]);
          mma_tf32(acc[mi][ni], ah, bl[ni][0], bl[ni][1]);
          mma_tf32(acc[mi][ni], ah, bh[ni][0], bh[ni][1]);
        }
      }
    }
  }
  // Rows r, r + 1 of timestep tt as one 8-byte store (G is even).
  float* const gb = a.scratch + static_cast<int64_t>(b) * a.per_seq + static_cast<int64_t>(t_begin) * G;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tt = 16 * mi + g + 8 * h, r = r0 + 8 * ni;
        if (tt < n && r < G)
          *reinterpret_cast<float2*>(gb + tt * G + r) =
              make_float2(bias[ni][0] + acc[mi][ni][2 * h], bias[ni][1] + acc[mi][ni][2 * h + 1]);
      }
}

// The fused-buffer (or partials) entry of the head's value i: fc.weight (i < C H), fc.bias, then loss, count, correct.
__device__ __forceinline__ int64_t head_entry(const Args& a, int i) {
  const int CH = a.C * a.H;
  return i < CH ? a.lay.fc_w + i : (i < CH + a.C ? a.lay.fc_b + (i - CH) : a.lay.extras + (i - CH - a.C));
}

// Phase 3: logits, loss, d loss / d logits (in lg_s), d loss / d h_last (dh_s); the head's gradients are written
// by head_emit after the backward recurrence (their read-modify-write of global memory waited one memory latency
// on the way into the backward).
// All of it in warp 0, one block barrier at the end: lane c takes the classes c, c + 32, ... (its logits' dot
// products over h in a fixed order, four partial sums), the loss and d loss / d logits combine the lanes in a fixed
// butterfly, and lane k takes d h_k, k + 32, ... (a sum over the classes in order). (Spread over the block — a warp
// per class with a butterfly each, the softmax in warp 0, d h over the threads, three barriers — it took ~4.6 K
// cycles at H = 50, C = 10 on the H200; this form 4.2-4.5 K, so the barriers were not the cost. At H = 128 a lane's
// 32-long chains make it slower than the spread form: 8.0 K cycles against 3.6 K.)
// fc_s: the head's weight and bias staged in shared memory before the recurrence, or null (read from global memory).
// label: the sequence's class (classification), loaded ahead (at the kernel's start, or after the forward in the
// cluster variant), not on this phase's path.
__device__ void head(const Args& a, const float* hl, float* lg_s, float* dh_s, float* misc, const float* fc_s,
                     int pos, int label) {
  const int tid = static_cast<int>(threadIdx.x);
  const int H = a.H, C = a.C, lane = tid % 32;
  if (tid < 32) {
    const float* fcw = fc_s ? fc_s : a.params + a.lay.fc_w;
    const float* fcb = fc_s ? fc_s + C * H : a.params + a.lay.fc_b;
    const float* t = a.classification ? nullptr : a.targets + static_cast<int64_t>(pos) * C;
    const float t_lane = (t && lane < C) ? t[lane] : 0.0f;   // in flight during the dot products
    for (int c = lane; c < C; c += 32) {
      const float* w = fcw + static_cast<int64_t>(c) * H;
      float s4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int k = 0;
#pragma unroll 2
      for (; k + 4 <= H; k += 4)
#pragma unroll
        for (int e = 0; e < 4; ++e) s4[e] += w[k + e] * hl[k + e];
      if (k < H) s4[0] += w[k] * hl[k];   // H mod 4 left (no array index at run time: registers)
      if (k + 1 < H) s4[1] += w[k + 1] * hl[k + 1];
      if (k + 2 < H) s4[2] += w[k + 2] * hl[k + 2];
      lg_s[c] = ((s4[0] + s4[1]) + (s4[2] + s4[3])) + fcb[c];
    }
    __syncwarp();
    float loss = 0.0f, hit = 0.0f;
    if (a.classification) {
      label = label < 0 ? 0 : (label >= C ? C - 1 : label);   // validated on the host; never index out of bounds
      float m = -INFINITY;
      int best = C;   // argmax, ties to the lowest index as in the reference (C: none above -inf yet)
      for (int c = lane; c < C; c += 32)
        if (lg_s[c] > m) m = lg_s[c], best = c;
      for (int o = 16; o > 0; o >>= 1) {
        const float mo = __shfl_xor_sync(kFull, m, o);
        const int bo = __shfl_xor_sync(kFull, best, o);
        if (mo > m || (mo == m && bo < best)) m = mo, best = bo;
      }
      best = best == C ? 0 : best;
      float sum = 0.0f;
      for (int c = lane; c < C; c += 32) sum += expf(lg_s[c] - m);
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFull, sum, o);
      loss = m + logf(sum) - lg_s[label];
      hit = best == label ? 1.0f : 0.0f;
      __syncwarp();   // every lane has read lg_s[label]
      for (int c = lane; c < C; c += 32) lg_s[c] = expf(lg_s[c] - m) / sum - (c == label ? 1.0f : 0.0f);
    } else {
      const float inv_k = 1.0f / static_cast<float>(C);
      float sq = 0.0f;
      for (int c = lane; c < C; c += 32) {
        const float diff = lg_s[c] - (c < 32 ? t_lane : t[c]);
        sq += diff * diff;
        lg_s[c] = 2.0f * diff * inv_k;
      }
      for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(kFull, sq, o);
      loss = sq * inv_k;
    }
    if (lane == 0) {
      misc[0] = loss;
      misc[1] = hit;
    }
    __syncwarp();   // d loss / d logits are in lg_s
    for (int k = lane; k < H; k += 32) {
      float s = 0.0f;
      for (int c = 0; c < C; ++c) s += fcw[static_cast<int64_t>(c) * H + k] * lg_s[c];
      dh_s[k] = s;
    }
  }
  __syncthreads();
}

// The head's gradients (fc.weight, fc.bias) and the loss, count and correct, from what head() left in lg_s and misc
// and its input hl (all untouched by the backward). seq: the sequence's index in the batch (its partials' row); in a
// cluster every block runs the head (each needs d loss / d h of its own units) and one emits. old_s: the old values
// (loaded in the recurrence's prologue), or null (loaded here).
__device__ void head_emit(const Args& a, const float* hl, const float* lg_s, const float* misc, int seq,
                          const float* old_s) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int H = a.H, C = a.C, lim = C * H + C + 3;
  auto value = [&](int i) {
    if (i < C * H) return lg_s[i / H] * hl[i % H];
    if (i < C * H + C) return lg_s[i - C * H];
    const int e = i - C * H - C;
    return e == 0 ? misc[0] : (e == 1 ? 1.0f : misc[1]);
  };
  if (old_s) {
    for (int i = tid; i < lim; i += nt) a.out[head_entry(a, i)] = old_s[i] + value(i);
    return;
  }
  for (int i0 = tid; i0 < lim; i0 += 8 * nt) {   // fc.weight, fc.bias, loss, count, correct
    float v[8];
    int64_t at[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + u * nt;
      v[u] = i < lim ? value(i) : 0.0f;
      at[u] = i < lim ? head_entry(a, i) : 0;
    }
    emit_batch<8>(a, seq, v, [&](int u) { return at[u]; }, [&](int u) { return i0 + u * nt < lim; });
  }
}

// Phase 5, the weight gradients as one GEMM: for gate row m (interleaved, m = 4 j + q) and column n of
// z_t = [x_t, h_{t-1}, 1] (h_{-1} = 0; the last column gives the bias gradient), sum over the group's sequences in
// slot order and over t in chunks, the last chunk first (the backward's order), of dg_t[m] z_t[n]. A block computes a
// kWgM x kWgN tile (each thread 2 x 4), staging a chunk of d gates and z in shared memory, the next chunk's loads in
// flight while it computes. Streaming (Args::stream), a chunk's loads wait for the backward's progress word instead of
// the whole recurrence kernel.
constexpr int kWgM = 64, kWgN = 32, kWgThreads = 256;   // chunks of kWgL timesteps at most (fused_chunks.hpp)
// Sequence groups of the weight-gradient GEMM at most. (At K = 128, H = 50 on the H200: 32 groups of 4 sequences
// 42 us for the GEMM and 4.9 us for the sums; 128 groups of one 43.5 and 12.1.)
constexpr int kMaxGroups = 32;
constexpr int kWgSlots = 32;     // sequences of one group at most (kMaxGatherSlots / kMaxGroups)

// The fused-buffer entries of gradient element (m, n): dW_ih (n < F), dW_hh (n < F + H), else both biases (second
// entry, else -1).
__device__ __forceinline__ void wg_entries(const Args& a, int m, int n, int64_t* e1, int64_t* e2) {
  const int j = m >> 2, q = m & 3;
  *e2 = -1;
  if (n < a.F) {
    *e1 = a.lay.w_ih[q] + static_cast<int64_t>(j) * a.F + n;
  } else if (n < a.F + a.H) {
    *e1 = a.lay.w_hh[q] + static_cast<int64_t>(j) * a.H + (n - a.F);
  } else {
    *e1 = a.lay.b_ih[q] + j;
    *e2 = a.lay.b_hh[q] + j;
  }
}

// grads[entries of (m[u], n[u])] += v[u] for the U elements with ok[u]: every old value loaded first (one memory
// latency for all of them; a load after each store would wait one round trip per element, as they may alias).
// wg_load takes the entries and their old values, wg_store adds and stores: the streaming GEMM loads before its
// chunks, so no round trip is left after its last one.
template <int U>
struct WgOld {
  int64_t e1[U], e2[U];
  float o1[U], o2[U];
};
template <int U>
__device__ __forceinline__ void wg_load(const Args& a, const int (&m)[U], const int (&n)[U], const bool (&ok)[U],
                                        WgOld<U>& w) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    w.e1[u] = w.e2[u] = -1;
    if (ok[u]) wg_entries(a, m[u], n[u], &w.e1[u], &w.e2[u]);
    w.o1[u] = w.e1[u] >= 0 ? a.grads[w.e1[u]] : 0.0f;
    w.o2[u] = w.e2[u] >= 0 ? a.grads[w.e2[u]] : 0.0f;
  }
}
template <int U>
__device__ __forceinline__ void wg_store(const Args& a, const WgOld<U>& w, const float (&v)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (w.e1[u] >= 0) a.grads[w.e1[u]] = w.o1[u] + v[u];
    if (w.e2[u] >= 0) a.grads[w.e2[u]] = w.o2[u] + v[u];
  }
}
template <int U>
__device__ __forceinline__ void wg_add(const Args& a, const int (&m)[U], const int (&n)[U], const bool (&ok)[U],
                                       const float (&v)[U]) {
  WgOld<U> w;
  wg_load(a, m, n, ok, w);
  wg_store(a, w, v);
}

__global__ void __launch_bounds__(kWgThreads) weight_grad_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  __shared__ __align__(16) float As[kWgL * kWgM];
  __shared__ __align__(16) float Zs[kWgL * kWgN];
  const int tid = static_cast<int>(threadIdx.x), tx = tid & 7, ty = tid >> 3;
  const int H = a.H, F = a.F, G = 4 * H, NW = F + H + 1;
  const int m0 = static_cast<int>(blockIdx.x) * kWgM, n0 = static_cast<int>(blockIdx.y) * kWgN;
  const int g = static_cast<int>(blockIdx.z);
  const int b_lo = g * a.B / a.groups, b_hi = (g + 1) * a.B / a.groups;   // >= 1 sequence: groups <= B
  // What this thread stages: d gates of row lm for timesteps lt + 4 i, and z column lc for timesteps zt + 8 i.
  constexpr int kA = kWgL * kWgM / kWgThreads, kZ = kWgL * kWgN / kWgThreads;
  const int lm = m0 + (tid % kWgM), lt = tid / kWgM, lc = n0 + (tid % kWgN), zt = tid / kWgN;
  const bool row_ok = lm < G;
  const int zkind = lc < F ? 0 : (lc < F + H ? 1 : (lc == F + H ? 2 : 3));   // x, h_{t-1}, the bias' 1, padding
  // The group's slots in shared memory: read from the device table in the loop, each chunk's loads waited one
  // memory latency for the slot first (the host wrote the table before the step, so this runs before the wait).
  static_assert(kMaxGatherSlots <= kMaxGroups * kWgSlots, "a group's slots exceed the staged table");
  __shared__ GatherSlot gs[kWgSlots];
  for (int b = b_lo + tid; b < b_hi; b += kWgThreads) gs[b - b_lo] = slot_of(p, b);
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The optimizer after this kernel (programmatic dependent launch) may be placed now; it waits for this grid.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (!a.stream) asm volatile("griddepcontrol.wait;" ::: "memory");   // the recurrence kernel's d gates and h
#endif
  // Every thread polls the words itself (a warp's loads of one are one request), so no block barrier is added.
  auto ready = [&](int b, int t0) {
    if (!a.stream) return;
    for (int w = 0; w < a.words; ++w)
      while (!progress_reached(a.progress + static_cast<int64_t>(b) * kCl + w, a.epoch, t0)) __nanosleep(64);
  };
  // This thread's outputs, and (one sequence: added into the fused buffer) their old values, loaded now: only this
  // thread writes them in this step, and the update that zeroed them has ended (this grid starts after the
  // recurrence kernel's wait, which follows the projection's wait for the update).
  int mm[8], nn[8];
  bool ok[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    mm[u] = m0 + 2 * ty + u / 4;
    nn[u] = n0 + 4 * tx + u % 4;
    ok[u] = mm[u] < G && nn[u] < NW;
  }
  WgOld<8> old;
  if (a.groups == 1) wg_load(a, mm, nn, ok, old);
  auto top = [&](int b) { return wg_chunk_floor(gs[b - b_lo].length - 1); };
  auto end = [&](int b, int t0) { return min(gs[b - b_lo].length, t0 == 0 ? kWgLast : t0 + kWgL); };   // wg_chunk_end
  float va[kA], vz[kZ];
  auto load = [&](int b, int t0) {
    const GatherSlot slot = gs[b - b_lo];
    const int t_end = end(b, t0);
    const float* gcol = a.scratch + static_cast<int64_t>(b) * a.per_seq + lm;
    const float* hcol = a.scratch + static_cast<int64_t>(b) * a.per_seq + static_cast<int64_t>(a.t_cap) * (G + 2 * H) +
                        max(lc - F, 0);   // h_t at hcol[t * H]
    const float* xcol = a.features + slot.row * F + min(lc, F - 1);
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int t = t0 + lt + i * (kWgThreads / kWgM);
      va[i] = (row_ok && t < t_end) ? gcol[static_cast<int64_t>(t) * G] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kZ; ++i) {
      const int t = t0 + zt + i * (kWgThreads / kWgN);
      const bool in = t < t_end;
      if (zkind == 0) vz[i] = in ? xcol[static_cast<int64_t>(t) * F] : 0.0f;
      else if (zkind == 1) vz[i] = (in && t > 0) ? hcol[static_cast<int64_t>(t - 1) * H] : 0.0f;
      else vz[i] = (in && zkind == 2) ? 1.0f : 0.0f;
    }
  };
  float acc[2][4] = {};
  int b = b_lo, t0 = top(b_lo);
  ready(b, t0);
  load(b, t0);
  while (b < b_hi) {
#pragma unroll
    for (int i = 0; i < kA; ++i) As[tid + i * kWgThreads] = va[i];
#pragma unroll
    for (int i = 0; i < kZ; ++i) Zs[tid + i * kWgThreads] = vz[i];
    __syncthreads();
    const int nl = end(b, t0) - t0;
    int nb = b, nt = wg_chunk_below(t0);   // (t0 == 0: the next sequence's top, below)
    if (t0 == 0) {
      ++nb;
      nt = nb < b_hi ? top(nb) : 0;
    }
    if (nb < b_hi) {
      ready(nb, nt);
      load(nb, nt);   // in flight while this chunk is summed
    }
#pragma unroll 8
    for (int l = 0; l < nl; ++l) {
      const float2 av = *reinterpret_cast<const float2*>(As + l * kWgM + 2 * ty);
      const float4 zv = *reinterpret_cast<const float4*>(Zs + l * kWgN + 4 * tx);
      acc[0][0] += av.x * zv.x;
      acc[0][1] += av.x * zv.y;
      acc[0][2] += av.x * zv.z;
      acc[0][3] += av.x * zv.w;
      acc[1][0] += av.y * zv.x;
      acc[1][1] += av.y * zv.y;
      acc[1][2] += av.y * zv.z;
      acc[1][3] += av.y * zv.w;
    }
    __syncthreads();   // the tiles are consumed before the next store
    b = nb;
    t0 = nt;
  }
  float v[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) v[u] = acc[u / 4][u % 4];
  if (a.groups == 1) {
    wg_store(a, old, v);
  } else {
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (ok[u]) a.wpart[(static_cast<int64_t>(g) * NW + nn[u]) * a.wstride + mm[u]] = v[u];
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Streaming, this grid may otherwise end before the recurrence kernel (whose head gradients and totals the next
  // kernels read): its end now implies the recurrence's, for every kernel ordered after it.
  if (a.stream) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}


// What the two recurrences share (inlined: these stay in registers).
struct Step {
  float* h_s;        // (2, HP)
  float* dg_s;       // (2, 4, HP)
  const float* dh_s; // (HP) d loss / d pooled h
  int H, G, HP, len, j, q, quad, pool;
  bool valid;
  float* g_r;        // this thread's gate column of gbuf
  float* c_j;        // its unit's c, tanh(c) columns, and what it saves in the forward pass
  float* tc_j;
  float* save_j;
  unsigned long long* progress;   // this sequence's progress word (Args::progress)
  uint32_t epoch;
  bool lead;                      // thread 0 of a streaming run: publishes the progress
};

// What the pooling keeps of unit j over the forward recurrence (every lane of the quad holds the same bits, as h):
// the sum of h in step order (mean), or the max and the first step holding it (max), as the CPU reference.
struct PoolAcc {
  float v = 0.0f;
  int at = 0;
};

// The recurrences' matrix-vector products read their vector from shared memory, and there the cost is the number of
// load instructions, not of bytes: on the H200 a 16-byte load takes two wavefronts of the shared-memory pipe when the
// whole warp reads one address and four when it reads a few (one per quarter warp), and a timestep's loads of all
// warps queue behind each other there (ncu, H = 50: 13 loads a lane, 182 wavefronts a forward step and 364 a backward
// one, against steps of ~716 and ~810 cycles). So a lane holds the weights of several rows for a part of the columns,
// loads only that part, and the partial sums are exchanged by shuffles.
//
// Both matvecs give a lane four rows' worth of partial sums over a quarter of the vector — slice k of it: float4 blocks
// k, k + 4, ... and then its share of the tail (HR = 4 or 8 mod 16: float k or float2 k of the last 4 or 8) — and
// reduce them over the four lanes of the slices, S apart, in two rounds of shuffles: lane k keeps row k's sum,
// (k + k ^ 2) + (k ^ 1 + k ^ 3), a fixed order (reruns are bitwise equal). Its weights are in lane-relative order,
// w[u HR / 4 + s] for row k ^ u at element s of its slice, so the exchange needs no select.
//  - Forward (S = 1): lane q of unit j's quad; row u is gate q ^ u of unit j (PyTorch row (q ^ u) H + j), v is h.
//  - Backward (S = 4): the quads of units 4 m .. 4 m + 3 form a group of 16 lanes; lane (k = j & 3, q) takes gate q's
//    d gates at row slice k, and row u is column j ^ u of W_hh^T's gate-q block (W_hh[q H + i][j ^ u]); v is gate
//    q's d gates. The result is gate q's share of (W_hh^T dg)[j]; the quad then adds its four gates. (With a quarter
//    of the rows for four units a lane loads 13 floats at H = 50 where an octet of two units loaded 26, and a
//    backward step's loads cost 91 wavefronts of the shared-memory pipe instead of 196.)
template <int HR, int S>
__device__ __forceinline__ float slice_matvec(const float (&w)[HR], const float* v, int k) {
  using L = LaneSlice<HR>;
  static_assert(L::kTail <= 2 && HR % 4 == 0, "slice_matvec: HR = 0, 4 or 8 (mod 16)");
  float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < L::kF4; ++i) {
    const float4 m = *reinterpret_cast<const float4*>(v + 16 * i + 4 * k);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      a[g] += w[g * L::kS + 4 * i] * m.x;
      a[g] += w[g * L::kS + 4 * i + 1] * m.y;
      a[g] += w[g * L::kS + 4 * i + 2] * m.z;
      a[g] += w[g * L::kS + 4 * i + 3] * m.w;
    }
  }
  if constexpr (L::kTail == 1) {
    const float m = v[16 * L::kF4 + k];
#pragma unroll
    for (int g = 0; g < 4; ++g) a[g] += w[g * L::kS + 4 * L::kF4] * m;
  } else if constexpr (L::kTail == 2) {
    const float2 m = *reinterpret_cast<const float2*>(v + 16 * L::kF4 + 2 * k);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      a[g] += w[g * L::kS + 4 * L::kF4] * m.x;
      a[g] += w[g * L::kS + 4 * L::kF4 + 1] * m.y;
    }
  }
  const float u0 = a[0] + __shfl_xor_sync(kFull, a[2], 2 * S);   // row k: lane k ^ 2's slot 2
  const float u1 = a[1] + __shfl_xor_sync(kFull, a[3], 2 * S);   // row k ^ 1: its slot 3
  return u0 + __shfl_xor_sync(kFull, u1, S);                      // lane k ^ 1's u1 is row k
}

// v = *p if `load`, else v as it was: a predicated load into v's own register. The recurrences' rings of values
// loaded kRing steps ahead need it: from `v = load ? *p : 0` ptxas may issue the load into another register (ahead of
// the old value's last uses) and move it into v's at the end of the step, and that move waits for the load (on the
// H200 such moves drew 10% of the one-block recurrence's stall samples at H = 50, a backward step ~90 cycles longer).
// The asm is volatile so that it stays between the block barriers around it.
__device__ __forceinline__ void load_if(float& v, const float* p, bool load) {
  asm volatile(
      "{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.f32 %0, [%1];\n\t}"
      : "+f"(v)
      : "l"(p), "r"(static_cast<int>(load)));
}

// Phase 2: the forward recurrence; returns which half of h_s holds h_{len-1}, and unit j's pooling in `acc`.
// Loads of the recurrences are issued kRing steps ahead (2 measured slower on the H200: 872 vs 834 cycles a step).
constexpr int kRing = 4;
template <int HR>
__device__ __forceinline__ int forward_recurrence(const Step& st, const float (&wf)[HR], PoolAcc& acc) {
  float* const h_s = st.h_s;
  const int H = st.H, G = st.G, HP = st.HP, len = st.len;
  const int j = st.j, q = st.q, quad = st.quad;
  const bool valid = st.valid;
  float* const g_r = st.g_r;
  float* const save_j = st.save_j;
  // The input projections of the next 4 steps wait in registers: each load is issued 4 steps before its use.
  int cur = 0;
  float c = 0.0f;
  float pre[kRing];
#pragma unroll
  for (int u = 0; u < kRing; ++u) pre[u] = (valid && u < len) ? g_r[u * G] : 0.0f;
  // What step t saves: the unit's four activations as one float4 (lane 0: g_r is then row 4 j, 16-byte aligned), h,
  // c and tanh(c) (lanes 1, 2, 3), one store a lane. Issued in step t + 1 after its h loads, with that step's
  // prefetch: global accesses queued before the loads delay them (H = 50 on the H200: 834 cycles a step with the
  // stores before the barrier, 757 here, 671 without any).
  // Steps are stored in order, through pointers that move on by a step each (an index times the row length costs a
  // 64-bit address computation on the chain).
  float4 put_act = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float put_val = 0.0f;
  float* put_g = g_r;
  float* put_s = save_j;
  auto put = [&]() {
    if (valid && q == 0) *reinterpret_cast<float4*>(put_g) = put_act;
    if (valid && q > 0) *put_s = put_val;
    put_g += G;
    put_s += H;
  };
  const float kq = q == 2 ? 2.0f * kNegLog2e : kNegLog2e;   // gate g: tanh(v) = 2 sigmoid(2 v) - 1
  for (int t0 = 0; t0 < len; t0 += kRing) {
#pragma unroll
    for (int u = 0; u < kRing; ++u) {
      const int t = t0 + u;
      if (t >= len) break;
      const float xp = pre[u];
      // h_{t-1} (zero at t = 0), padded to HR with zero weights: no branch, loads hoisted
      const float pre_act = xp + slice_matvec<HR, 1>(wf, h_s + cur * HP, q);
      load_if(pre[u], g_r + (t + kRing) * G, valid && t + kRing < len);   // (past len: never read)
      if (t > 0) put();   // step t - 1
      const float s = sigmoid_scaled(pre_act * kq);
      const float act = q == 2 ? 2.0f * s - 1.0f : s;
      const float ig = __shfl_sync(kFull, act, quad), fg = __shfl_sync(kFull, act, quad + 1);
      const float gg = __shfl_sync(kFull, act, quad + 2), og = __shfl_sync(kFull, act, quad + 3);
      c = (t > 0 ? fg * c : 0.0f) + ig * gg;
      const float tc = tanh_f(c);
      const float h = og * tc;
      if (valid && q == 0) h_s[(cur ^ 1) * HP + j] = h;
      // Pooling: a compare or an add beside the chain (nothing downstream in this step waits for it).
      if (st.pool == 1) {
        acc.v += h;
      } else if (st.pool == 2 && (t == 0 || h > acc.v)) {   // ties: the first step
        acc.v = h;
        acc.at = t;
      }
      put_act = make_float4(ig, fg, gg, og);
      put_val = q == 1 ? h : (q == 2 ? c : tc);
      __syncthreads();
      cur ^= 1;
    }
  }
  put();   // step len - 1
  return cur;
}

// Phase 4: the backward recurrence, from d loss / d pooled h in dh_s; d gates replace the activations in gbuf.
// The pooling's backward seeds d h: at the last step (last), at every step divided by the length (mean, as the
// reference: dq / n added at each step), or at unit j's argmax step (max, `at`).
template <int HR>
__device__ __forceinline__ void backward_recurrence(const Step& st, const float (&wb)[HR], int at) {
  float* const dg_s = st.dg_s;
  const int H = st.H, G = st.G, HP = st.HP, len = st.len;
  const int j = st.j, q = st.q, quad = st.quad;
  const bool valid = st.valid;
  float* const g_r = st.g_r;
  const float* const c_j = st.c_j;
  const float* const tc_j = st.tc_j;
  const float* const dh_s = st.dh_s;
  const float seed = st.pool == 1 ? dh_s[j] / static_cast<float>(len) : dh_s[j];
  const int seed_at = st.pool == 0 ? len - 1 : at;   // mean: every step
  // Thread (j, q) sums gate q's share of (W_hh^T dg)[j]; the quad adds the four.
  // Step t's activation, c_{t-1} and tanh(c_t) are loaded 4 steps ahead, as in the forward loop: zero for an invalid
  // lane or a step before 0 at first, then (load_if) left as they are (the steps before 0 never run, c_{-1} is never
  // read, an invalid lane keeps its zeros).
  int cb = 0;
  float dc = 0.0f;
  float pa[kRing], pc[kRing], pt[kRing];
  auto fetch = [&](int t, float& act, float& cp, float& tcv) {
    act = (valid && t >= 0) ? g_r[t * G] : 0.0f;
    cp = (valid && t >= 1) ? c_j[(t - 1) * H] : 0.0f;
    tcv = (valid && t >= 0) ? tc_j[t * H] : 0.0f;
  };
#pragma unroll
  for (int u = 0; u < kRing; ++u) fetch(len - 1 - u, pa[u], pc[u], pt[u]);
  auto refetch = [&](int t, float& act, float& cp, float& tcv) {
    load_if(act, g_r + t * G, valid && t >= 0);
    load_if(cp, c_j + (t - 1) * H, valid && t >= 1);
    load_if(tcv, tc_j + t * H, valid && t >= 0);
  };
  // Step t's d gates (one float4, lane 0) go to global memory in step t - 1 after its matvec, as in the forward.
  float4 put_dg = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto put = [&](int ts) {
    if (valid && q == 0) *reinterpret_cast<float4*>(g_r + ts * G) = put_dg;   // row 4 j
  };
  int published = len;   // streaming: the progress word's last value (all steps >= it are stored)
  for (int t0 = len - 1; t0 >= 0; t0 -= kRing) {
    // Steps >= t0 + 2 are in the scratch: the d gates of step t0 + 2 were stored in step t0 + 1, before its barrier.
    // Published at the first group of kRing steps past each chunk boundary, before this thread's own stores of
    // the group, so the fence finds little left in flight; outside the unrolled steps, whose scheduling a fence (a
    // compiler barrier too) would constrain (inside them it cost ~90 cycles a step on the H200, even in runs that
    // never published).
    const int v = wg_chunk_ceil(t0 + 2);   // a chunk boundary with every step >= it stored
    if (st.lead && v < published) {
      published = v;
      publish_progress(st.progress, st.epoch, v);
    }
#pragma unroll
    for (int u = 0; u < kRing; ++u) {
      const int t = t0 - u;
      if (t < 0) break;
      const float act = pa[u], cprev = pc[u], tc = pt[u];
      // The gates of the unit first, and every factor of the d gates that does not depend on d h: none of it waits
      // for the recurrence, so it leaves the critical path (which keeps d h -> d c -> d gate: an add, an FMA and a
      // product), and the saved values are used up before the loads that refill their registers.
      const float ig = __shfl_sync(kFull, act, quad), fg = __shfl_sync(kFull, act, quad + 1);
      const float gg = __shfl_sync(kFull, act, quad + 2), og = __shfl_sync(kFull, act, quad + 3);
      const float kc = og * (1.0f - tc * tc);   // d c_t / d h_t
      const float k0 = gg * (ig * (1.0f - ig));
      const float k1 = t > 0 ? cprev * (fg * (1.0f - fg)) : 0.0f;
      const float k2 = ig * (1.0f - gg * gg);
      const float k3 = tc * (og * (1.0f - og));
      const float kd = q == 0 ? k0 : (q == 1 ? k1 : (q == 2 ? k2 : k3));
      // d gates of step t + 1 (zero at t = len - 1): gate q's share for unit j, then the quad's sum over gates
      float P = slice_matvec<HR, 4>(wb, dg_s + cb * 4 * HP + q * HP, j & 3);
      // Step t - 4's values into the registers step t has just read. (Refilled after the barrier instead, where every
      // use of the old values comes before the load, a backward step took ~45 cycles longer on the H200: the loads
      // then queue before the step's shared-memory loads.)
      refetch(t - kRing, pa[u], pc[u], pt[u]);
      if (t < len - 1) put(t + 1);
      P += __shfl_xor_sync(kFull, P, 1);   // identical bits in all four lanes (addition commutes exactly)
      P += __shfl_xor_sync(kFull, P, 2);
      const float dh = P + ((st.pool == 1 || t == seed_at) ? seed : 0.0f);
      const float dct = dc + dh * kc;
      // Selects, not branches on q (those would run the four paths one after another in every warp); lane 0 stores
      // all four, each the same product as its lane's.
      const float dg = (q == 3 ? dh : dct) * kd;
      dc = dct * fg;
      if (valid) dg_s[(cb ^ 1) * 4 * HP + q * HP + j] = dg;
      put_dg = make_float4(dct * k0, dct * k1, dct * k2, dh * k3);
      __syncthreads();
      cb ^= 1;
    }
  }
  put(0);
  __syncthreads();   // every thread's last d gates are issued
  if (st.lead) publish_progress(st.progress, st.epoch, 0);
}

template <int HR>
__global__ void __launch_bounds__(256, 1) fused_lstm_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 smem4[];
  const int H = a.H, G = 4 * H, HP = a.HP;
  float* h_s = reinterpret_cast<float*>(smem4);   // (2, HP) h, double-buffered
  float* dg_s = h_s + 2 * HP;    // (2, 4, HP) d gates, gate-major, double-buffered
  float* lg_s = dg_s + 8 * HP;   // (Cp) logits, then d loss / d logits
  float* dh_s = lg_s + a.Cp;     // (HP) d loss / d pooled h
  float* misc = dh_s + HP;       // (4)
  float* fc_s = misc + 4;        // (fc_smem) the head's weight, then its bias
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, nt = static_cast<int>(blockDim.x);
  const int r = tid, j = r >> 2, q = r & 3, quad = lane & ~3;
  const bool valid = r < G;
  const GatherSlot slot = slot_of(p, static_cast<int>(blockIdx.x));
  const int len = slot.length;
  const int label = a.classification ? a.labels[slot.pos] : 0;   // for the head, loaded long before
  // This sequence's scratch (int offsets: t_cap * 4H fits easily).
  float* gbuf = a.scratch + static_cast<int64_t>(blockIdx.x) * a.per_seq;   // (t_cap, G) by interleaved row
  float* cbuf = gbuf + a.t_cap * G;                                          // (t_cap, H)
  float* tcbuf = cbuf + a.t_cap * H;
  float* hbuf = tcbuf + a.t_cap * H;
  mark(a, 0);

  // Recurrent weights into registers: forward, the four gates' rows of unit j at lane q's slice of the columns;
  // backward, gate q's rows at slice j & 3 of the rows for the columns of the four units of j's group (slice_matvec;
  // lanes past H hold their group's other units' weights too: those units' sums need every slice). All of W_hh goes
  // through shared memory first, row-major, warp w copying the four gates' rows of units 8 w .. 8 w + 7 (for each gate
  // 8 H contiguous floats) by cp.async, every copy in flight at once; each lane reads its forward row slices there
  // now, and its backward column entries after the forward (they hold no registers through it). (The backward's
  // entries read straight from global memory touched 8-16 sectors a warp's load for 4 useful bytes a lane: on the H200
  // the prologue took ~3.9 us at H = 50, the first step waiting for it; rows straight into registers, 32 sectors a
  // load, took 8.2 K cycles at K = 128.)
  constexpr int P = HR + 1;                // odd: a warp's 32 rows start on distinct banks
  float* const wall = fc_s + a.fc_smem;   // (warp, gate, unit - 8 warp) x P
  // One sequence with a small head: the fused buffer's values of the head's gradients, copied here with W_hh, so that
  // head_emit after the backward adds to them without a load (nothing else writes them during the step; the update
  // that zeroed them has ended: this grid starts after the projection's wait).
  float* const old_s = a.accumulate && a.fc_smem ? wall + nt * P : nullptr;
  float wf[HR];
  {
    float* const wst = wall + (tid >> 5) * 32 * P;   // this warp's rows
    const int j0 = (tid >> 5) * 8, n = max(0, min(8, H - j0)) * H;
    const float inv_h = 1.0f / static_cast<float>(H);   // (e + 0.5) / H is >= 1 / (2 H) from an integer: exact floor
#pragma unroll 1
    for (int g = 0; g < 4; ++g) {
      const float* src = a.params + a.lay.w_hh[g] + static_cast<int64_t>(j0) * H;
#pragma unroll
      for (int u = 0; u < HR / 4; ++u) {   // 32 lanes x HR / 4 = 8 HR >= 8 H floats
        const int e = lane + 32 * u, row = static_cast<int>((static_cast<float>(e) + 0.5f) * inv_h);
        if (e < n) cp_async4(wst + (8 * g + row) * P + (e - row * H), src + e, true);
      }
    }
    if (old_s)
      for (int i = tid; i < a.C * H + a.C + 3; i += nt) cp_async4(old_s + i, a.out + head_entry(a, i), true);
    for (int i = tid; i < 10 * HP; i += nt) h_s[i] = 0.0f;   // h_s and dg_s, padding included
    // The head's parameters too: at the last step the head then waits on no global load (4 in flight per thread).
    const int nfc = a.fc_smem ? a.C * H + a.C : 0;
    for (int i0 = tid; i0 < nfc; i0 += 4 * nt) {
      float v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + u * nt;
        v[u] = i < nfc ? a.params[i < a.C * H ? a.lay.fc_w + i : a.lay.fc_b + (i - a.C * H)] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (i0 + u * nt < nfc) fc_s[i0 + u * nt] = v[u];
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();   // all of W_hh, h_s and fc_s in shared memory
#pragma unroll
    for (int g = 0; g < 4; ++g) {   // slot g: gate q ^ g
      const float* wrow = wst + (8 * (q ^ g) + (lane >> 2)) * P;
#pragma unroll
      for (int s = 0; s < HR / 4; ++s) {
        const int k = LaneSlice<HR>::col(q, s);
        wf[g * (HR / 4) + s] = (valid && k < H) ? wrow[k] : 0.0f;
      }
    }
  }
  // Everything above read only the parameters; gbuf is the projection kernel's output (launched before this one
  // with programmatic dependent launch, so the staging above overlapped it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // The weight-gradient kernel may be scheduled now: it waits for this grid's end before it reads anything.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  mark(a, 1);
  float* const g_r = gbuf + r;       // this thread's gate column
  float* const c_j = cbuf + j;       // its unit's columns
  float* const tc_j = tcbuf + j;
  // What lane q saves each forward step, branch-free: h (q = 1), c (q = 2), tanh(c) (q = 3); q = 0 the activations.
  float* const save_j = (q <= 1 ? hbuf : (q == 2 ? cbuf : tcbuf)) + j;

  const Step st{h_s,   dg_s,  dh_s,   H,    G,    HP,   len,
                j,     q,     quad,   a.pool, valid, g_r, c_j,
                tc_j,  save_j, a.progress + blockIdx.x * kCl, a.epoch, tid == 0 && a.stream};
  PoolAcc acc;
  const int cur = forward_recurrence<HR>(st, wf, acc);
  float wb[HR];   // the backward's weights from the staged W_hh (untouched since the prologue)
  {
    // Row i of gate q (unit i's row) is row 8 q + i % 8 of warp i / 8's rows; the slice's float4 blocks, i = 16 b +
    // 4 k + e, are rows 8 q + 4 (k & 1) + e of warp 2 b + k / 2: one base and constant offsets.
    const int k = j & 3;
    const float* const wcol = wall + ((k >> 1) * 32 + 8 * q + 4 * (k & 1)) * P;
#pragma unroll
    for (int u = 0; u < 4; ++u) {   // slot u: column j ^ u
      const int c = j ^ u;
#pragma unroll
      for (int s = 0; s < HR / 4; ++s) {
        const int i = LaneSlice<HR>::col(k, s);
        const float* const at = s < 4 * LaneSlice<HR>::kF4 ? wcol + (64 * (s / 4) + s % 4) * P + c
                                                            : wall + ((i >> 3) * 32 + 8 * q + (i & 7)) * P + c;
        wb[u * (HR / 4) + s] = (c < H && i < H) ? *at : 0.0f;
      }
    }
  }
  // The head's input: h_{len-1} as it is, or the pooled vector in the other half of h_s (h_{len-2}, which nothing
  // reads any more: every thread passed the last step's barrier).
  const float* pooled = h_s + cur * HP;
  if (a.pool != 0) {
    if (valid && q == 0) h_s[(cur ^ 1) * HP + j] = a.pool == 1 ? acc.v / static_cast<float>(len) : acc.v;
    __syncthreads();
    pooled = h_s + (cur ^ 1) * HP;
  }
  mark(a, 2);

  head(a, pooled, lg_s, dh_s, misc, a.fc_smem ? fc_s : nullptr, slot.pos, label);
  mark(a, 3);

  backward_recurrence<HR>(st, wb, acc.at);
  mark(a, 4);
  head_emit(a, pooled, lg_s, misc, static_cast<int>(blockIdx.x), old_s);   // the backward left h_s, lg_s, misc alone
}

// ---- The cluster variant (64 < H <= 128) ----
// One block cannot hold W_hh twice in registers at H = 128 (2 x 64 K floats; shared memory then bounds a timestep
// by its bandwidth, ~2 K cycles for the forward alone). So a sequence runs on a cluster of kCl blocks (one per SM)
// and each block keeps both copies of a quarter: block c owns hidden units j = kCl jl + c (jl < kClUnits), and its
// thread (jl, q, p) — 16 lanes per unit, lane 4 q + p of the unit's half-warp — holds
//   forward:  W_hh[q H + j][4 k + p], k < 32        (gate q's row of unit j, the columns of part p)
//   backward: W_hh[g H + i][j] for the 4 gates g and i = 4 q + p + 16 k, k < 8   (column j, rows of part 4 q + p)
// A forward step: 32-long partial dot products, summed over the unit's 4 parts with two xor shuffles (so the four
// lanes hold identical bits), the activations, the cell update in all 16 lanes of the unit, and h_t of the warp's
// two units stored by lane p into block p's shared memory (distributed shared memory) as one 8-byte store. The
// backward step sums over the unit's 16 lanes (four shuffles) and lane p sends the unit's four d gates as one 16-byte
// store into block p (d gates unit-major, so a part reads float4s). Each remote store costs: one per gate and unit
// ran ~1,990 cycles a backward step at H = 128, one per unit ~1,400; one per unit forward ~1,470, one per warp ~1,440.
// The sends are asynchronous remote stores (st.async) that count their bytes on an mbarrier of the receiving block,
// and a block waits only on its own mbarrier for the step's vector: no cluster barrier per step. (A cluster barrier's
// release must also wait for the step's global stores to reach L2; with it a step cost ~1,750 cycles forward and
// ~2,250 backward on the H200.)
// Double buffers need no other barrier: every block's h_t (d gates) depends on all its warps having read step t's
// input, so no block can send into a buffer before all have read it. Warps whose units are all past H take no part.
// Fixed orders throughout: reruns are bitwise equal.
constexpr int kClPart = 36;              // shared-memory stride of a 32-long part: the 4 parts' reads on distinct banks
constexpr int kClVec = 4 * kClPart;      // one vector of H <= 128 (h, or one gate's d gates); 144 = 16 (mod 32)
constexpr int kClBars = 8;               // floats ahead of h_s: 4 mbarriers (h, then d gates, double-buffered)
constexpr int kClSmemFixed = kClBars + 10 * kClVec + 2 * kMaxH + 4;   // bars, h_s, dg_s, pool_s, dh_s, misc

// Where h_j sits in h_s: part p (= j mod 4, the block owning unit j) holds units p, p + 4, ... at offsets 0, 1, ...,
// so the two units of a warp (j, j + 4) are adjacent and go out as one 8-byte store.
__device__ __forceinline__ int h_slot(int j) { return kClPart * (j & 3) + (j >> 2); }

// The same shared-memory offset in block `rank` of the cluster.
__device__ __forceinline__ uint32_t remote_addr(uint32_t local, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
// The barrier's current phase completes once `bytes` have arrived (and this, its one arrival, is made).
__device__ __forceinline__ void mbar_arm(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}
// v into the remote address `at` (8-byte aligned), its bytes counted on the remote mbarrier `bar` (both in the same
// block); send4: 16 bytes, 16-byte aligned.
__device__ __forceinline__ void send2(uint32_t at, float2 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(at),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void send4(uint32_t at, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(at),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
               "r"(__float_as_uint(v.w)), "r"(bar)
               : "memory");
}

struct ClusterStep {
  const Args* a;
  float* h_s;        // (2, kClVec) h_{t-1} by h_slot, double-buffered; every block holds all of it
  float* dg_s;       // (2, kMaxH, 4) d gates of step t + 1, unit-major
  uint32_t bars;     // this block's 4 mbarriers: h into buffer 0, 1; d gates into buffer 0, 1
  uint32_t h_far;    // h_s, dg_s and the mbarriers of block p (this lane's part) in the cluster
  uint32_t dg_far;
  uint32_t bars_far;
  int H, G, len, j, q, p, ub;   // ub: the unit's first lane in the warp (0 or 16)
  uint32_t h_bytes;  // what one step's h brings each block: 8 bytes per warp whose first unit is below H
  bool valid, lead;  // lead: the thread that re-arms this block's mbarriers
  float* g_r;        // this thread's gate column of gbuf (row 4 j + q)
  float* g_j;        // the unit's first row (4 j): its four gates as one float4
  const float* c_j;  // unit j's c and tanh(c) columns
  const float* tc_j;
  float* save_j;     // what lane (q, 0) saves each forward step: h (q = 1), c (2), tanh(c) (3)
};

// The forward recurrence; returns unit j's input to the head (h_{len-1}, the mean or the max of h over the steps, as
// the one-block kernel) and keeps the max's step in acc.at.
__device__ __forceinline__ float cluster_forward(const ClusterStep& st, const float (&wf)[kClCols], PoolAcc& acc) {
  const int G = st.G, H = st.H, len = st.len, q = st.q, p = st.p, ub = st.ub;
  const bool valid = st.valid;
  const int pool = st.a->pool;
  int cur = 0;
  float c = 0.0f, h = 0.0f;
  float pre[4];   // the input projections of the next 4 steps, each load issued 4 steps before its use
#pragma unroll
  for (int u = 0; u < 4; ++u) pre[u] = (valid && u < len) ? st.g_r[u * G] : 0.0f;
  // Step t's saves (the unit's gates as one float4 by lane (0, 0); h, c, tanh(c) by lanes (1..3, 0)) are stored at
  // the end of the step, after the send: issued after the next step's matvec, as in the one-block kernel, they cost
  // ~140 cycles a forward step and ~90 a backward one on the H200 (H = 128).
  float4 put_act = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float put_val = 0.0f;
  auto put = [&](int ts) {
    if (valid && p == 0 && q == 0) *reinterpret_cast<float4*>(st.g_j + ts * G) = put_act;
    if (valid && p == 0 && q > 0) st.save_j[ts * H] = put_val;
  };
  for (int t0 = 0; t0 < len; t0 += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = t0 + u;
      if (t >= len) break;
      const float xp = pre[u];
      pre[u] = (valid && t + 4 < len) ? st.g_r[(t + 4) * G] : 0.0f;
      if (t > 0) {   // h_{t-1}, sent at step t - 1 into buffer cur: the ((t - 1) / 2)-th phase of its mbarrier
        mbar_wait(st.bars + 8 * cur, ((t - 1) >> 1) & 1);
        if (st.lead) mbar_arm(st.bars + 8 * cur, st.h_bytes);   // its next phase
      }
      const float* hs = st.h_s + cur * kClVec + p * kClPart;   // h_{t-1} of units 4 k + p: zero at t = 0
      // Four chains of FMAs, k mod 4 each, joined as (0 + 1) + (2 + 3), written out here (through a shared helper
      // ptxas ordered this kernel's loop differently, and only this order has been measured on the GPU).
      float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
      for (int k = 0; k < kClCols; k += 8) {
        const float4 m0 = *reinterpret_cast<const float4*>(hs + k);
        const float4 m1 = *reinterpret_cast<const float4*>(hs + k + 4);
        a0 += wf[k] * m0.x;
        a1 += wf[k + 1] * m0.y;
        a2 += wf[k + 2] * m0.z;
        a3 += wf[k + 3] * m0.w;
        a0 += wf[k + 4] * m1.x;
        a1 += wf[k + 5] * m1.y;
        a2 += wf[k + 6] * m1.z;
        a3 += wf[k + 7] * m1.w;
      }
      float part = (a0 + a1) + (a2 + a3);
      part += __shfl_xor_sync(kFull, part, 1);
      part += __shfl_xor_sync(kFull, part, 2);
      const float pre_act = xp + part;
      const float s = sigmoid_f(q == 2 ? 2.0f * pre_act : pre_act);
      const float act = q == 2 ? 2.0f * s - 1.0f : s;   // gate g: tanh
      const float ig = __shfl_sync(kFull, act, ub + p), fg = __shfl_sync(kFull, act, ub + 4 + p);
      const float gg = __shfl_sync(kFull, act, ub + 8 + p), og = __shfl_sync(kFull, act, ub + 12 + p);
      c = (t > 0 ? fg * c : 0.0f) + ig * gg;
      const float tc = tanh_f(c);
      h = og * tc;
      const float hv = valid ? h : 0.0f;
      const float h_odd = __shfl_sync(kFull, hv, (ub + 4 * q + p) | 16);   // the warp's second unit (j + 4)
      if (valid && ub == 0 && q == 0 && t + 1 < len)   // into block p (h_{len-1} goes to the head by pool_s)
        send2(st.h_far + 4 * ((cur ^ 1) * kClVec + h_slot(st.j)), make_float2(hv, h_odd), st.bars_far + 8 * (cur ^ 1));
      if (pool == 1) {
        acc.v += h;
      } else if (pool == 2 && (t == 0 || h > acc.v)) {   // ties: the first step
        acc.v = h;
        acc.at = t;
      }
      put_act = make_float4(ig, fg, gg, og);
      put_val = q == 1 ? h : (q == 2 ? c : tc);
      put(t);
      cur ^= 1;
    }
  }
  return pool == 0 ? h : (pool == 1 ? acc.v / static_cast<float>(len) : acc.v);
}

// The backward recurrence, seeded by d loss / d pooled h (`seed` at step seed_at, or at every step for the mean);
// d gates replace the activations in gbuf.
// Streaming (progress non-null), the block's active warps meet at a named barrier at the first group of 4 steps past
// each chunk boundary, and thread 0 publishes the block's progress word (the warps meet at no barrier otherwise).
__device__ __forceinline__ void cluster_backward(const ClusterStep& st, const float (&wb)[kClCols], float seed,
                                                 int seed_at, unsigned long long* progress, uint32_t epoch,
                                                 int bar_threads) {
  const int G = st.G, H = st.H, len = st.len, q = st.q, p = st.p, ub = st.ub;
  const bool valid = st.valid, every = st.a->pool == 1;
  int cb = 0;
  float dc = 0.0f;
  float pa[4], pc[4], pt[4];
  auto fetch = [&](int t, float& act, float& cp, float& tcv) {
    act = (valid && t >= 0) ? st.g_r[t * G] : 0.0f;
    cp = (valid && t >= 1) ? st.c_j[(t - 1) * H] : 0.0f;
    tcv = (valid && t >= 0) ? st.tc_j[t * H] : 0.0f;
  };
#pragma unroll
  for (int u = 0; u < 4; ++u) fetch(len - 1 - u, pa[u], pc[u], pt[u]);
  float4 put_dg = make_float4(0.0f, 0.0f, 0.0f, 0.0f);   // step t's d gates, stored at the end of the step
  auto put = [&](int ts) {
    if (valid && q == 1 && p == 0) *reinterpret_cast<float4*>(st.g_j + ts * G) = put_dg;
  };
  int published = len;
  auto publish = [&](int v) {   // every active warp of the block stored its d gates of steps >= v
    asm volatile("bar.sync 1, %0;" ::"r"(bar_threads) : "memory");
    if (threadIdx.x == 0) publish_progress(progress, epoch, v);
    published = v;
  };
  for (int t0 = len - 1; t0 >= 0; t0 -= 4) {
    // Each warp stored step t0 + 1's d gates at its end (after its send), so steps >= t0 + 2 are all in.
    const int v = wg_chunk_ceil(t0 + 2);
    if (progress && v < published) publish(v);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = t0 - u;
      if (t < 0) break;
      const float act = pa[u], cprev = pc[u], tc = pt[u];
      fetch(t - 4, pa[u], pc[u], pt[u]);
      const float ig = __shfl_sync(kFull, act, ub + p), fg = __shfl_sync(kFull, act, ub + 4 + p);
      const float gg = __shfl_sync(kFull, act, ub + 8 + p), og = __shfl_sync(kFull, act, ub + 12 + p);
      const int s = len - 1 - t;   // the backward's step count
      if (s > 0) {                 // the d gates of step t + 1, sent into buffer cb
        mbar_wait(st.bars + 8 * (2 + cb), ((s - 1) >> 1) & 1);
        if (st.lead) mbar_arm(st.bars + 8 * (2 + cb), 16 * H);
      }
      // The d gates of units i = pt + 16 k (zero at t = len - 1): lanes pt and pt + 8 on distinct banks.
      const float* d = st.dg_s + cb * 4 * kMaxH + 4 * (4 * q + p);
      float b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
#pragma unroll
      for (int k = 0; k < kClCols / 4; ++k) {
        const float4 m = *reinterpret_cast<const float4*>(d + 64 * k);
        b0 += wb[4 * k] * m.x;
        b1 += wb[4 * k + 1] * m.y;
        b2 += wb[4 * k + 2] * m.z;
        b3 += wb[4 * k + 3] * m.w;
      }
      float P = (b0 + b1) + (b2 + b3);
#pragma unroll
      for (int o = 1; o < 16; o <<= 1) P += __shfl_xor_sync(kFull, P, o);   // the unit's 16 lanes, identical bits
      const float dh = P + ((every || t == seed_at) ? seed : 0.0f);
      const float dct = dc + dh * og * (1.0f - tc * tc);
      const float d0 = dct * gg * ig * (1.0f - ig);
      const float d1 = t > 0 ? dct * cprev * fg * (1.0f - fg) : 0.0f;
      const float d2 = dct * ig * (1.0f - gg * gg);
      const float d3 = dh * tc * og * (1.0f - og);
      dc = dct * fg;
      const float4 dg = make_float4(d0, d1, d2, d3);
      if (valid && q == 0 && t > 0)   // into block p
        send4(st.dg_far + 4 * ((cb ^ 1) * 4 * kMaxH + 4 * st.j), dg, st.bars_far + 8 * (2 + (cb ^ 1)));
      put_dg = dg;
      put(t);
      cb ^= 1;
    }
  }
  if (progress) publish(0);
}

// The cluster variant's recurrence kernel: blocks kCl s .. kCl s + kCl - 1 run sequence s.
__global__ void __cluster_dims__(kCl, 1, 1) __launch_bounds__(kClThreads, 1)
    fused_lstm_cluster_kernel(const __grid_constant__ Params p) {
  namespace cg = cooperative_groups;
  const Args& a = p.a;
  extern __shared__ float4 smem4[];
  float* const base = reinterpret_cast<float*>(smem4);   // the mbarriers (4 x 8 bytes), then:
  float* h_s = base + kClBars;                      // (2, kClVec)
  float* dg_s = h_s + 2 * kClVec;                   // (2, kMaxH, 4) (within 8 kClVec)
  float* pool_s = dg_s + 8 * kClVec;                // (kMaxH) the head's input by unit
  float* dh_s = pool_s + kMaxH;                     // (kMaxH) d loss / d pooled h
  float* misc = dh_s + kMaxH;                       // (4)
  float* lg_s = misc + 4;                           // (Cp) logits, then d loss / d logits
  float* fc_s = lg_s + a.Cp;                        // (fc_smem) the head's weight, then its bias
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank()), seq = static_cast<int>(blockIdx.x) / kCl;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const int jl = tid >> 4, q = (tid >> 2) & 3, pp = tid & 3;
  const int H = a.H, G = 4 * H, j = kCl * jl + rank;
  const bool valid = j < H;
  const GatherSlot slot = slot_of(p, seq);
  const int len = slot.length;
  float* gbuf = a.scratch + static_cast<int64_t>(seq) * a.per_seq;   // the one-block kernel's scratch layout
  float* cbuf = gbuf + a.t_cap * G;
  float* tcbuf = cbuf + a.t_cap * H;
  float* hbuf = tcbuf + a.t_cap * H;
  mark(a, 0);

  for (int i = tid; i < kClSmemFixed - kClBars; i += kClThreads) h_s[i] = 0.0f;   // padding included
  // Both quarters of W_hh into registers from the packed copy (zero-padded past H), all 16 loads in flight.
  float wf[kClCols], wb[kClCols];
  wait_packed(a);
  {
    const float4* pk = reinterpret_cast<const float4*>(a.packed) + rank * 2 * (kClThreads * kClCols / 4) + tid;
#pragma unroll
    for (int k4 = 0; k4 < kClCols / 4; ++k4) {
      const float4 f = __ldcg(pk + k4 * kClThreads), g = __ldcg(pk + (kClCols / 4 + k4) * kClThreads);
      wf[4 * k4] = f.x, wf[4 * k4 + 1] = f.y, wf[4 * k4 + 2] = f.z, wf[4 * k4 + 3] = f.w;
      wb[4 * k4] = g.x, wb[4 * k4 + 1] = g.y, wb[4 * k4 + 2] = g.z, wb[4 * k4 + 3] = g.w;
    }
  }
  const uint32_t bars = smem_addr(base);
  uint32_t h_bytes = 0;   // 8 for each warp of the cluster whose first unit, kCl (2 w) + r, is below H
  for (int r = 0; r < kCl; ++r)
    for (int w = 0; w < kClUnits / 2; ++w) h_bytes += kCl * 2 * w + r < H ? 8 : 0;
  if (tid == 0) {
    for (int b = 0; b < 4; ++b) mbar_init(bars + 8 * b);
    for (int b = 0; b < 4; ++b) mbar_arm(bars + 8 * b, b < 2 ? h_bytes : 16 * H);   // each one's first phase
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  const int nfc = a.fc_smem ? a.C * H + a.C : 0;
  for (int i = tid; i < nfc; i += kClThreads)
    fc_s[i] = a.params[i < a.C * H ? a.lay.fc_w + i : a.lay.fc_b + (i - a.C * H)];
  // Every block of the cluster is running, zeroed and its mbarriers set before any block sends into another.
  cluster.sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // gbuf holds the projection kernel's output
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  mark(a, 1);
  const ClusterStep st{&a,
                       h_s,
                       dg_s,
                       bars,
                       remote_addr(smem_addr(h_s), pp),
                       remote_addr(smem_addr(dg_s), pp),
                       remote_addr(bars, pp),
                       H,
                       G,
                       len,
                       j,
                       q,
                       pp,
                       lane & 16,
                       h_bytes,
                       valid,
                       tid == 0,
                       gbuf + 4 * j + q,
                       gbuf + 4 * j,
                       cbuf + j,
                       tcbuf + j,
                       (q <= 1 ? hbuf : (q == 2 ? cbuf : tcbuf)) + j};
  // A warp whose units are all past H sits the recurrences out (it would only wait; nothing waits for it).
  const bool active = kCl * 2 * (tid >> 5) + rank < H;
  PoolAcc acc;
  const float pooled = active ? cluster_forward(st, wf, acc) : 0.0f;
  // For the head, loaded here (no register to spare through the recurrence): its latency overlaps the barrier.
  const int label = a.classification ? a.labels[slot.pos] : 0;
  if (valid && q == 0) cluster.map_shared_rank(pool_s, pp)[j] = pooled;   // every block gets the whole vector
  cluster.sync();
  mark(a, 2);

  // Each block runs the head (so each has d loss / d pooled h of its own units); block 0 emits its gradients.
  head(a, pool_s, lg_s, dh_s, misc, a.fc_smem ? fc_s : nullptr, slot.pos, label);
  mark(a, 3);

  const float seed = valid ? (a.pool == 1 ? dh_s[j] / static_cast<float>(len) : dh_s[j]) : 0.0f;
  int bar_threads = 0;   // the active warps' threads of this block (warp w holds units kCl (2 w) + rank, + kCl)
  for (int w = 0; w < kClThreads / 32; ++w) bar_threads += kCl * 2 * w + rank < H ? 32 : 0;
  if (active)
    cluster_backward(st, wb, seed, a.pool == 0 ? len - 1 : acc.at,
                     a.stream ? a.progress + static_cast<int64_t>(seq) * kCl + rank : nullptr, a.epoch, bar_threads);
  mark(a, 4);
  if (rank == 0) head_emit(a, pool_s, lg_s, misc, seq, nullptr);
  cluster.sync();   // no block leaves while another may still read or wait on anything of it
}

// Phase 5 with many sequences (B > kStreamMaxB): the same sums as weight_grad_kernel, as a GEMM split over the
// timesteps of all sequences instead of over sequence groups. The timesteps of the batch, concatenated in slot order,
// are cut into a.groups equal parts, one per block column (about two blocks per SM): each block sums its part for a
// tile of (32 a.sg_wm) gate rows x (32 a.sg_wn) columns of z on the tensor cores, a warp per 32 x 32 (2 x 4 mma
// tiles of 16 x 8, timesteps the reduction dimension, 8 an instruction), three tf32 products per float product
// (tf32_split.hpp). On the CUDA cores (4 x 8 outputs a thread, two blocks an SM) the GEMM took 25.5 / 30.1 us at
// K = 128, H = 50 on the H200 (ncu, two steps), on the tensor cores 22.6 / 24.5: the products are not what bounds it
// (ncu: 45% of issue slots busy, a quarter of the warps' samples at the chunks' barriers).
// Chunks of kSgC timesteps go to shared memory by cp.async (padding and the bias' 1 zero-filled or copied by it too),
// the next chunk in flight while the current one is summed; rows of the chunk a pitch of 8 (mod 32) floats apart, so
// a fragment's loads (8 rows x 4 timesteps) fall on 32 distinct banks. The partition and every sum's order depend
// only on the batch: reruns are bitwise equal.
constexpr int kSgC = 32;              // timesteps per staged chunk
constexpr int kSgWarps = 12;          // warps of a block tile at most (two blocks an SM)
constexpr int kSgMaxThreads = 32 * kSgWarps;
__device__ const float kOneF = 1.0f;  // the source of z's bias column

// split_grad_kernel's shared memory (split_smem_bytes).
struct SplitSmem {
  float* As;       // (2, kSgC, pa) d gates, rows [m0, m0 + BM)
  float* Zs;       // (2, kSgC, pb) z, columns [n0, n0 + BN)
  int64_t* rows;   // (B) feature row of each slot
  int* pre;        // (B + 1) timesteps before each slot
  int* mb;         // (2, kSgC) the chunk's slots (-1: past the part)
  int* mt;         // (2, kSgC) and timesteps
  int pa, pb;      // row pitches: BM + 8, BN + 8
};

// The slot table into shared memory and the prefix sums of the lengths (warp 0, in lane-contiguous runs); returns
// the batch's timesteps. Reads only the slot table (written before the projection).
__device__ int split_prefix(const Params& p, const SplitSmem& sm) {
  const int tid = static_cast<int>(threadIdx.x), nth = static_cast<int>(blockDim.x), B = p.a.B;
  for (int b = tid; b < B; b += nth) {
    const GatherSlot s = slot_of(p, b);
    sm.rows[b] = s.row;
    sm.pre[b + 1] = s.length;
  }
  __syncthreads();
  if (tid < 32) {
    const int per = (B + 31) / 32, lo = tid * per, hi = min(B, lo + per);
    int sum = 0;
    for (int b = lo; b < hi; ++b) sum += sm.pre[b + 1];
    int incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(kFull, incl, o);
      if (tid >= o) incl += v;
    }
    int run = incl - sum;
    for (int b = lo; b < hi; ++b) {
      run += sm.pre[b + 1];
      sm.pre[b + 1] = run;
    }
    if (tid == 0) sm.pre[0] = 0;
  }
  __syncthreads();
  return sm.pre[B];
}

// Chunk c of the part [i_lo, i_hi) into map buffer `buf`: each row's slot and timestep (the last slot starting at
// or before it).
__device__ void split_map(const SplitSmem& sm, int B, int i_lo, int i_hi, int c, int buf) {
  for (int r = static_cast<int>(threadIdx.x); r < kSgC; r += static_cast<int>(blockDim.x)) {
    const int i = i_lo + c * kSgC + r;
    int b = -1, t = 0;
    if (i < i_hi) {
      int lo = 0, hi = B - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (sm.pre[mid] <= i) lo = mid;
        else hi = mid - 1;
      }
      b = lo;
      t = i - sm.pre[lo];
    }
    sm.mb[buf * kSgC + r] = b;
    sm.mt[buf * kSgC + r] = t;
  }
}

// The copies of the chunk mapped in buffer `buf` (d gates rows [m0, m0 + BM), z columns [n0, n0 + BN); zeros past
// the part, G, or F + H + 1), as one cp.async group. A warp per row of the chunk (a timestep: its sources' addresses
// once per row), lanes along the row: the d gates as float4s (a timestep's row of G is 16-byte aligned, G and BM
// multiples of 4), z = [x, h_{t-1}, 1] element by element. (A thread per element, stepping by whole rows plus a
// remainder, recomputed each element's slot and source: ncu counted 10.4 M instructions for the kernel at K = 128,
// H = 50, 10.0 M this way; the step 144.8 -> 143.7 us, builds alternating on the H200.)
__device__ void split_stage(const Args& a, const SplitSmem& sm, int buf, int m0, int n0, int BM, int BN) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nw = static_cast<int>(blockDim.x) >> 5, H = a.H, F = a.F, G = 4 * H;
  const int* const mb = sm.mb + buf * kSgC;
  const int* const mt = sm.mt + buf * kSgC;
  float* const A = sm.As + buf * kSgC * sm.pa;
  float* const Z = sm.Zs + buf * kSgC * sm.pb;
  const float* const hb = a.scratch + static_cast<int64_t>(a.t_cap) * (G + 2 * H);   // + b * per_seq: h_t at t * H
  for (int l = warp; l < kSgC; l += nw) {
    const int b = mb[l], t = mt[l];   // the same in the whole warp
    const float* const drow = a.scratch + static_cast<int64_t>(b < 0 ? 0 : b) * a.per_seq + static_cast<int64_t>(t) * G;
    for (int e = lane; e < BM / 4; e += 32) {
      const int m = m0 + 4 * e;
      const bool ok = b >= 0 && m < G;
      cp_async16(A + l * sm.pa + 4 * e, ok ? drow + m : a.params, ok);
    }
    const float* const xrow = a.features + (b < 0 ? 0 : sm.rows[b] + t) * F;
    const float* const hrow = hb + static_cast<int64_t>(b < 0 ? 0 : b) * a.per_seq + static_cast<int64_t>(t - 1) * H;
    for (int e = lane; e < BN; e += 32) {
      const int n = n0 + e;
      const bool x = n < F, h = !x && n < F + H && t > 0, one = n == F + H;   // h_{-1} = 0
      const bool ok = b >= 0 && (x || h || one);
      const float* const src = !ok ? a.params : (x ? xrow + n : (h ? hrow + (n - F) : &kOneF));
      cp_async4(Z + l * sm.pb + e, src, ok);
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// A warp's 32 x 32 of one staged chunk (nl timesteps; the rows past nl are zeros): per 8 timesteps its A fragments
// (2 row tiles) split once, then for each of the 4 column tiles its B fragment and the 3 products per row tile.
// A and Z point at the warp's first row / column, lane (g, t) offset by g.
__device__ __forceinline__ void split_mma_chunk(float (&acc)[2][4][4], const float* A, const float* Z, int pa, int pb,
                                                int nl, int t4) {
#pragma unroll
  for (int kk = 0; kk < kSgC / 8; ++kk) {
    if (8 * kk >= nl) break;
    const float* const Ak = A + (8 * kk + t4) * pa;
    const float* const Zk = Z + (8 * kk + t4) * pb;
    uint32_t ah[2][4], al[2][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      tf32_split(Ak[16 * mi], ah[mi][0], al[mi][0]);
      tf32_split(Ak[16 * mi + 8], ah[mi][1], al[mi][1]);
      tf32_split(Ak[4 * pa + 16 * mi], ah[mi][2], al[mi][2]);
      tf32_split(Ak[4 * pa + 16 * mi + 8], ah[mi][3], al[mi][3]);
    }
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      uint32_t bh0, bl0, bh1, bl1;
      tf32_split(Zk[8 * ni], bh0, bl0);
      tf32_split(Zk[4 * pb + 8 * ni], bh1, bl1);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {   // small terms first
        mma_tf32(acc[mi][ni], al[mi], bh0, bh1);
        mma_tf32(acc[mi][ni], ah[mi], bl0, bl1);
        mma_tf32(acc[mi][ni], ah[mi], bh0, bh1);
      }
    }
  }
}

__global__ void __launch_bounds__(kSgMaxThreads, 2) split_grad_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 sg_smem4[];
  const int tid = static_cast<int>(threadIdx.x);
  const int G = 4 * a.H, NW = a.F + a.H + 1, B = a.B;
  const int BM = 32 * a.sg_wm, BN = 32 * a.sg_wn;
  const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.z) * BN;
  SplitSmem sm;
  sm.pa = BM + 8;
  sm.pb = BN + 8;
  sm.As = reinterpret_cast<float*>(sg_smem4);
  sm.Zs = sm.As + 2 * kSgC * sm.pa;
  sm.rows = reinterpret_cast<int64_t*>(sm.Zs + 2 * kSgC * sm.pb);
  sm.pre = reinterpret_cast<int*>(sm.rows + B);
  sm.mb = sm.pre + B + 1;
  sm.mt = sm.mb + 2 * kSgC;
  const int64_t total = split_prefix(p, sm);
  const int parts = static_cast<int>(gridDim.x), part = static_cast<int>(blockIdx.x);
  const int i_lo = static_cast<int>(total * part / parts), i_hi = static_cast<int>(total * (part + 1) / parts);
  const int chunks = (i_hi - i_lo + kSgC - 1) / kSgC;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");   // the sums kernel waits for this grid
  asm volatile("griddepcontrol.wait;" ::: "memory");                // the recurrence kernel's d gates and h
#endif
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int wr = 32 * (warp % a.sg_wm), wc = 32 * (warp / a.sg_wm);   // the warp's tile within the block's
  const bool computes = m0 + wr < G && n0 + wc < NW;                   // else all padding
  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  // Two barriers a chunk: the map of chunk c + 2 is made after chunk c's sums, into the map buffer that chunk c's
  // copies (issued an iteration earlier) read.
  split_map(sm, B, i_lo, i_hi, 0, 0);
  split_map(sm, B, i_lo, i_hi, 1, 1);
  __syncthreads();
  if (chunks > 0) split_stage(a, sm, 0, m0, n0, BM, BN);
  for (int c = 0; c < chunks; ++c) {
    const int buf = c & 1;
    if (c + 1 < chunks) {   // the other buffers were last read before the previous chunk's closing barrier
      split_stage(a, sm, buf ^ 1, m0, n0, BM, BN);
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncthreads();   // chunk c is in shared memory, every thread's copies included
    if (computes)
      split_mma_chunk(acc, sm.As + buf * kSgC * sm.pa + wr + g, sm.Zs + buf * kSgC * sm.pb + wc + g, sm.pa, sm.pb,
                      min(kSgC, i_hi - i_lo - c * kSgC), t4);
    if (c + 2 < chunks) split_map(sm, B, i_lo, i_hi, c + 2, buf);
    __syncthreads();   // buffer buf is read before the next chunk's copies reuse it; the new map is visible
  }
  if (!computes) return;
  // Part `part`'s partial sums, column-major (columns of a.wstride >= G floats): a store instruction writes 4
  // columns' runs of 8 adjacent rows.
  float* const out = a.wpart + static_cast<int64_t>(part) * NW * a.wstride;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + wr + 16 * mi + g + 8 * (e >> 1), n = n0 + wc + 8 * ni + 2 * t4 + (e & 1);
        if (m < G && n < NW) out[static_cast<int64_t>(n) * a.wstride + m] = acc[mi][ni][e];
      }
}

// B > 1, both sums into the fused buffer in one launch (launched early, programmatic dependent launch):
//  - blocks [0, a.sum_blocks): each weight-gradient entry += its sum over the a.groups partial sums, in order: 32
//    entries a block, lane l of warp w summing slice w of entry l's partials (one 128-byte line a load, every load
//    of a slice in flight at once), then warp 0 the 8 slices in order (a thread per entry over 132 partials waited
//    one memory latency per 32; 8 slices of an entry in adjacent lanes took 9 us at K = 128, 8 lines a load);
//  - the blocks after: the head's gradients and the extras, entries [a.head_lo, a.n_grad), += the sum over the
//    sequences of the partials. A warp per entry, lane l summing b = l, l + 32, ... in order, then the lanes in a
//    fixed butterfly: every load of a warp in flight at once (summing b in order in one thread waited one memory
//    latency per 8 sequences: 13.8 us at K = 128).
constexpr int kSumSlices = 8;
__global__ void __launch_bounds__(256) sums_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // the weight-gradient kernel (and so the recurrence) ended
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (static_cast<int>(blockIdx.x) < a.sum_blocks) {
    static_assert(kSumSlices * 32 == 256, "a warp per slice");
    __shared__ float slice_sum[kSumSlices][32];
    const int NW = a.F + a.H + 1, n_all = 4 * a.H * NW;
    const int lane = static_cast<int>(threadIdx.x) & 31, slice = static_cast<int>(threadIdx.x) >> 5;
    const int i = static_cast<int>(blockIdx.x) * 32 + lane;
    const bool in = i < n_all;
    const int G = 4 * a.H, n = in ? i / G : 0, m = in ? i - n * G : 0;   // column-major, as the partials
    const int g_lo = slice * a.groups / kSumSlices, g_hi = in ? (slice + 1) * a.groups / kSumSlices : g_lo;
    const float* src = a.wpart + static_cast<int64_t>(n) * a.wstride + m;
    const int64_t gstride = static_cast<int64_t>(NW) * a.wstride;
    float s = 0.0f;
    for (int g0 = g_lo; g0 < g_hi; g0 += 32) {   // 32 loads in flight, then their sum in order
      float v[32];
#pragma unroll
      for (int g = 0; g < 32; ++g) v[g] = g0 + g < g_hi ? src[(g0 + g) * gstride] : 0.0f;
#pragma unroll
      for (int g = 0; g < 32; ++g)
        if (g0 + g < g_hi) s += v[g];
    }
    slice_sum[slice][lane] = s;
    __syncthreads();
    if (slice != 0 || !in) return;
    for (int w = 1; w < kSumSlices; ++w) s += slice_sum[w][lane];
    const int mm[1] = {m}, nn[1] = {n};
    const bool ok[1] = {true};
    const float sv[1] = {s};
    wg_add(a, mm, nn, ok, sv);
    return;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31, B = a.B;
  const int64_t i =
      a.head_lo + (static_cast<int64_t>(static_cast<int>(blockIdx.x) - a.sum_blocks) * blockDim.x + threadIdx.x) / 32;
  if (i >= a.n_grad) return;   // the whole warp
  float s = 0.0f;
  for (int b0 = lane; b0 < B; b0 += 8 * 32) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int b = b0 + 32 * u;
      v[u] = b < B ? a.out[static_cast<int64_t>(b) * a.stride + i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) s += v[u];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
  if (lane == 0) a.grads[i] += s;
}

int round_up(int v, int m) { return (v + m - 1) / m * m; }

}  // namespace

std::string fused_lstm_unsupported(const ModelShape& shape) {
  if (shape.layers != 1) return RT_MSG(shape.layers << " layers (the fused kernel runs one)");
  if (shape.bidirectional) return "a bidirectional LSTM (the fused kernel runs one direction)";
  if (shape.hidden > kMaxH) return RT_MSG("H=" << shape.hidden << " (the fused kernel runs H <= " << kMaxH << ")");
  if (shape.hidden < 1 || shape.input_size < 1 || shape.outputs < 1) return "an empty model";
  return "";
}

FusedLayoutResult fused_layout_from_index(const ModelShape& shape, const std::vector<int64_t>& dev_index,
                                          int64_t head_offset, int64_t extras_offset) {
  FusedLayoutResult res;
  const ParamLayout pl(shape);
  const int64_t H = shape.hidden;
  // Gate q's block of a tensor of `width` columns: rows q H .. q H + H - 1, contiguous in the device layout.
  auto gate_block = [&](const ParamTensor& t, int64_t width, int q, int64_t* out) {
    const int64_t first = t.offset + q * H * width;
    const int64_t base = dev_index[static_cast<size_t>(first)];
    for (int64_t i = 0; i < H * width; ++i)
      if (dev_index[static_cast<size_t>(first + i)] != base + i) return false;
    *out = base;
    return true;
  };
  for (int q = 0; q < 4; ++q) {
    if (!gate_block(pl.w_ih(0), shape.input_size, q, &res.layout.w_ih[q]) ||
        !gate_block(pl.w_hh(0), H, q, &res.layout.w_hh[q]) || !gate_block(pl.b_ih(0), 1, q, &res.layout.b_ih[q]) ||
        !gate_block(pl.b_hh(0), 1, q, &res.layout.b_hh[q])) {
      res.why = "cuDNN's weight space stores a gate block non-contiguously";
      return res;
    }
  }
  res.layout.fc_w = head_offset;
  res.layout.fc_b = head_offset + shape.outputs * H;
  res.layout.extras = extras_offset;
  res.ok = true;
  return res;
}

FusedLstm::FusedLstm(const ModelShape& shape, const FusedLayout& layout, int64_t n_grad, int device)
    : shape_(shape), layout_(layout), n_grad_(n_grad), stride_((n_grad + 31) / 32 * 32),
      copy_stream_(Stream::create()) {
  const std::string why = fused_lstm_unsupported(shape);
  RT_CHECK(why.empty(), "fused LSTM: " << why);
  const int H = static_cast<int>(shape.hidden), F = static_cast<int>(shape.input_size), G = 4 * H;
  hr_ = one_block_width(H);   // 0: the cluster variant
  threads_ = round_up(G, 32);   // the projection kernel, and the one-block recurrence
  rec_threads_ = hr_ > 0 ? threads_ : kClThreads;
  HP_ = one_block_pitch(H, hr_);
  Cp_ = round_up(static_cast<int>(shape.outputs), 4);
  int optin = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // The head's parameters go to shared memory when small: at the last step the head then waits on no global load.
  const int64_t C = shape.outputs;
  fc_smem_ = C * (H + 1) <= 8192 ? static_cast<int32_t>((C * (H + 1) + 3) / 4 * 4) : 0;
  // (The one-block kernel's prologue stages W_hh after these, threads x (hr_ + 1) floats, and with a small head the
  // fused buffer's values of its gradients after that.)
  const int64_t staged = threads_ * (hr_ + 1) + (fc_smem_ ? (C * (H + 1) + 3 + 3) / 4 * 4 : 0);
  const int64_t fixed = (hr_ > 0 ? 2 * HP_ + 8 * HP_ + HP_ + 4 + staged : kClSmemFixed) + Cp_ + fc_smem_;
  RT_CHECK(fixed * static_cast<int64_t>(sizeof(float)) <= optin, "fused LSTM: the head exceeds shared memory");
  fc_ = std::min(round_up(F, 8), 64);   // input projection: features per shared-memory chunk
  smem_bytes_ = static_cast<size_t>(fixed) * sizeof(float);
  const void* k = kernel();
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes_)));
  proj_smem_bytes_ = static_cast<size_t>((kProjT + threads_) * (fc_ + 4)) * sizeof(float);
  RT_CHECK(static_cast<int64_t>(proj_smem_bytes_) <= optin,
           "fused LSTM: the projection's W_ih chunk exceeds shared memory");
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(projection_kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(proj_smem_bytes_)));
  // The split weight-gradient GEMM (B > kStreamMaxB): warp tiles of 32 x 32, block tiles of <= 4 warps along z's
  // columns and <= kSgWarps warps, as few block tiles as that allows, and parts of the timesteps for about two blocks
  // per SM.
  wstride_ = round_up(G, 8);
  const int rows32 = (G + 31) / 32, cols32 = (F + H + 1 + 31) / 32;
  sg_ntiles_ = (cols32 + 3) / 4;
  sg_wn_ = (cols32 + sg_ntiles_ - 1) / sg_ntiles_;
  const int wm_max = kSgWarps / sg_wn_;
  sg_mtiles_ = (rows32 + wm_max - 1) / wm_max;
  sg_wm_ = (rows32 + sg_mtiles_ - 1) / sg_mtiles_;
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  sg_parts_ = std::max(1, 2 * sms / (sg_mtiles_ * sg_ntiles_));
  const size_t sg_max = split_smem_bytes(kMaxGatherSlots);
  RT_CHECK(static_cast<int64_t>(sg_max) <= optin, "fused LSTM: the weight-gradient tiles exceed shared memory");
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(split_grad_kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sg_max)));
  packed_floats_ = hr_ > 0 ? 0 : kCl * 2 * kClCols * kClThreads;
  if (packed_floats_ > 0) packed_.resize_discard(static_cast<size_t>(packed_floats_));
  pack_flags_.resize_discard(kPack);
  // Epoch 0 is never a run's: a flag not yet written reads as not packed.
  CUDA_CHECK(cudaMemset(pack_flags_.get(), 0, kPack * sizeof(unsigned long long)));
  slots_host_ = PinnedBuffer<GatherSlot>(kMaxGatherSlots, false);
  slots_dev_.resize_discard(kTables * kMaxGatherSlots);
  cycles_.resize_discard(8);
}

const void* FusedLstm::kernel() const {
  switch (hr_) {
    case 32: return reinterpret_cast<const void*>(fused_lstm_kernel<32>);
    case 48: return reinterpret_cast<const void*>(fused_lstm_kernel<48>);
    case 52: return reinterpret_cast<const void*>(fused_lstm_kernel<52>);
    case 56: return reinterpret_cast<const void*>(fused_lstm_kernel<56>);
    case 64: return reinterpret_cast<const void*>(fused_lstm_kernel<64>);
    default: return reinterpret_cast<const void*>(fused_lstm_cluster_kernel);
  }
}

// One sequence: its sums go straight into the fused buffer. Up to kStreamMaxB: up to kMaxGroups groups of
// consecutive slots (weight_grad_kernel), whose sums a second pass adds in group order. More: the split GEMM's parts
// of the `timesteps` of all sequences, at least 16 timesteps a part, at most sg_parts_.
int FusedLstm::weight_grad_groups(int64_t B, int64_t timesteps) const {
  if (B > kStreamMaxB) return static_cast<int>(std::clamp<int64_t>((timesteps + 15) / 16, 1, sg_parts_));
  return static_cast<int>(B == 1 ? 1 : std::min<int64_t>(B, kMaxGroups));
}

size_t FusedLstm::split_smem_bytes(int64_t B) const {
  return static_cast<size_t>(2 * kSgC * (32 * (sg_wm_ + sg_wn_) + 16)) * sizeof(float) + static_cast<size_t>(B) * 8 +
         static_cast<size_t>(B + 1 + 4 * kSgC) * sizeof(int);
}

// A sequence's scratch: gates (4H), c, tanh(c), h (H each) for cap_T steps, rounded to 4 floats so that every
// sequence's rows stay 16-byte aligned (the recurrences store a unit's four gates as one float4).
int64_t FusedLstm::per_seq() const { return (cap_T_ * 7 * shape_.hidden + 3) / 4 * 4; }

void FusedLstm::reserve(int64_t B, int64_t T) {
  if (B <= cap_B_ && T <= cap_T_) return;
  cap_B_ = std::max(cap_B_, B);
  cap_T_ = std::max(cap_T_, T);
  const int64_t H = shape_.hidden, F = shape_.input_size;
  scratch_.resize_discard(static_cast<size_t>(cap_B_ * per_seq()));
  progress_.resize_discard(static_cast<size_t>(cap_B_ * kCl));
  // Epoch 0 is never a run's: a word not yet written this run never reads as progress.
  CUDA_CHECK(cudaMemset(progress_.get(), 0, progress_.size() * sizeof(unsigned long long)));
  if (cap_B_ > 1) {
    partials_.resize_discard(static_cast<size_t>(cap_B_ * stride_));
    CUDA_CHECK(cudaMemset(partials_.get(), 0, partials_.size() * sizeof(float)));   // entries never written stay 0
    const int64_t parts =
        std::max<int64_t>(std::min<int64_t>(cap_B_, kMaxGroups), cap_B_ > kStreamMaxB ? sg_parts_ : 1);
    wpart_.resize_discard(static_cast<size_t>(parts * (F + H + 1) * wstride_));
  }
}

void FusedLstm::run(const std::vector<GatherSlot>& slots, const float* features, const int32_t* labels,
                    const float* targets, const float* params, float* grads, cudaStream_t s) {
  const int64_t B = static_cast<int64_t>(slots.size());
  RT_CHECK(B >= 1 && B <= kMaxGatherSlots, "fused LSTM: " << B << " sequences in one step");
  int64_t T = 0, timesteps = 0;
  for (const GatherSlot& g : slots) {
    RT_CHECK(g.length >= 1, "fused LSTM: a sequence of length " << g.length);
    T = std::max<int64_t>(T, g.length);
    timesteps += g.length;
  }
  if (B > cap_B_ || T > cap_T_) {
    CUDA_CHECK(cudaStreamSynchronize(s));   // the buffers may still be in use by a queued launch
    reserve(B, T);
  }
  const int64_t H = shape_.hidden, F = shape_.input_size;
  Params p{};
  Args& a = p.a;
  a.params = params;
  a.accumulate = B == 1;
  a.out = B == 1 ? grads : partials_.get();
  a.stride = B == 1 ? 0 : stride_;
  a.features = features;
  a.labels = labels;
  a.targets = targets;
  a.B = static_cast<int32_t>(B);
  a.F = static_cast<int32_t>(F);
  a.H = static_cast<int32_t>(H);
  a.C = static_cast<int32_t>(shape_.outputs);
  a.classification = shape_.task == Task::Classification;
  a.pool = shape_.pool == Pool::Last ? 0 : (shape_.pool == Pool::Mean ? 1 : 2);
  a.lay = layout_;
  a.scratch = scratch_.get();
  a.per_seq = per_seq();
  a.t_cap = static_cast<int32_t>(cap_T_);
  a.HP = HP_;
  a.fc = fc_;
  // Projection blocks of tc timesteps (a multiple of 8, <= kProjT): about 256 blocks over all sequences.
  a.tc = static_cast<int32_t>(std::clamp<int64_t>((B * T + 255) / 256 + 7, 8, kProjT) / 8 * 8);
  a.Cp = Cp_;
  a.fc_smem = fc_smem_;
  a.groups = weight_grad_groups(B, timesteps);
  a.wstride = wstride_;
  a.sg_wm = sg_wm_;
  a.sg_wn = sg_wn_;
  a.grads = grads;
  a.wpart = wpart_.get();
  a.sum_blocks = static_cast<int32_t>((4 * H * (F + H + 1) + 31) / 32);   // 32 entries a block
  a.head_lo = std::min({layout_.fc_w, layout_.fc_b, layout_.extras});
  a.n_grad = n_grad_;
  a.cycles = record_ ? cycles_.get() : nullptr;
  a.progress = progress_.get();
  a.epoch = ++epoch_ == 0 ? ++epoch_ : epoch_;   // skips 0 when the counter wraps
  // Streaming needs the weight-gradient blocks launched while the recurrence runs (not in a recorded run, whose
  // kernels are separated by events).
  a.stream = streaming_ && !record_ && B <= kStreamMaxB;
  a.words = hr_ > 0 ? 1 : kCl;
  a.packed = packed_.get();
  a.packed_floats = packed_floats_;
  a.pack_flags = pack_flags_.get();
  if (B <= kInline) {
    for (int64_t i = 0; i < B; ++i) p.slot[i] = slots[static_cast<size_t>(i)];
  } else {
    // The table goes to the device on a stream of its own and the host waits for it here: a copy on `s` would put
    // the copy engine between the previous step's update and this projection, with no programmatic dependent launch
    // across it (on the H200 at K = 128 the GPU then idled ~11 us a step, the step launched ahead or not). Three
    // device tables in turn: run k writes table k mod 3, whose last reader, run k - 3, has completed when the caller
    // takes the totals of every step (CudaBackend: at most two runs a step, one launched ahead and discarded, and
    // the update's totals come after all of the step's kernels) or synchronizes (time_us, the tests).
    table_ = (table_ + 1) % kTables;
    GatherSlot* dev = slots_dev_.get() + table_ * kMaxGatherSlots;
    std::copy(slots.begin(), slots.end(), slots_host_.get());
    CUDA_CHECK(cudaMemcpyAsync(dev, slots_host_.get(), static_cast<size_t>(B) * sizeof(GatherSlot),
                               cudaMemcpyHostToDevice, copy_stream_.get()));
    CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));   // also frees the host table for the next run
    a.slots = dev;
  }
  if (record_ && !marks_[0])
    for (Event& e : marks_) e = Event::create(true);
  auto mark = [&](int i) {
    if (record_) CUDA_CHECK(cudaEventRecord(marks_[i].get(), s));
  };
  void* args[] = {&p};
  const unsigned ub = static_cast<unsigned>(B);
  // Programmatic dependent launch: the projection's blocks stage their features while the previous step's optimizer
  // finishes, the recurrence kernel's blocks start while the projection runs, and the weight-gradient blocks are
  // resident when the recurrence ends (a recorded run launches plainly, so the events between the kernels measure
  // each one).
  cudaLaunchAttribute pdl[1] = {};
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  auto launch = [&](const void* fn, dim3 grid, int threads, size_t smem) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(static_cast<unsigned>(threads));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = pdl;
    cfg.numAttrs = record_ ? 0 : 1;
    CUDA_CHECK(cudaLaunchKernelExC(&cfg, fn, args));
  };
  mark(0);
  // The cluster variant's pack blocks first (the first kPack blocks of the first rows), then a row per sequence of
  // its time chunks.
  const int64_t proj_x = (T + a.tc - 1) / a.tc;
  a.pack_rows = hr_ > 0 ? 0 : static_cast<int32_t>((kPack + proj_x - 1) / proj_x);
  launch(reinterpret_cast<const void*>(projection_kernel),
         dim3(static_cast<unsigned>(proj_x), ub + static_cast<unsigned>(a.pack_rows)), threads_, proj_smem_bytes_);
  mark(1);
  launch(kernel(), dim3(hr_ > 0 ? ub : ub * kCl), rec_threads_, smem_bytes_);   // cluster: kCl blocks a sequence
  mark(2);
  const int G = static_cast<int>(4 * H), NW = static_cast<int>(F + H + 1);
  if (B > kStreamMaxB)
    launch(reinterpret_cast<const void*>(split_grad_kernel),
           dim3(static_cast<unsigned>(a.groups), static_cast<unsigned>(sg_mtiles_), static_cast<unsigned>(sg_ntiles_)),
           32 * sg_wm_ * sg_wn_, split_smem_bytes(B));
  else
    launch(reinterpret_cast<const void*>(weight_grad_kernel),
           dim3(static_cast<unsigned>((G + kWgM - 1) / kWgM), static_cast<unsigned>((NW + kWgN - 1) / kWgN),
                static_cast<unsigned>(a.groups)),
           kWgThreads, 0);
  mark(3);
  if (B > 1) {   // (then groups > 1 too) the sums over groups and over sequences
    const int head_blocks = static_cast<int>(((a.n_grad - a.head_lo) * 32 + 255) / 256);
    launch(reinterpret_cast<const void*>(sums_kernel), dim3(static_cast<unsigned>(a.sum_blocks + head_blocks)), 256, 0);
  }
  mark(4);
}

FusedCycles FusedLstm::last_cycles(cudaStream_t s) {
  CUDA_CHECK(cudaStreamSynchronize(s));
  long long c[8] = {};
  CUDA_CHECK(cudaMemcpy(c, cycles_.get(), sizeof(c), cudaMemcpyDeviceToHost));
  FusedCycles r;
  r.stage = c[1] - c[0];
  r.forward = c[2] - c[1];
  r.head = c[3] - c[2];
  r.backward = c[4] - c[3];
  r.total = c[4] - c[0];
  if (marks_[0]) {
    float ms[4] = {};
    for (int i = 0; i < 4; ++i) CUDA_CHECK(cudaEventElapsedTime(&ms[i], marks_[i].get(), marks_[i + 1].get()));
    r.projection_us = 1e3 * ms[0];
    r.recurrence_us = 1e3 * ms[1];
    r.weight_grads_us = 1e3 * ms[2];
    r.sums_us = 1e3 * ms[3];
  }
  return r;
}

double FusedLstm::time_us(int64_t B, int64_t T, cudaStream_t s) {
  const int64_t F = shape_.input_size, C = shape_.outputs;
  DeviceBuffer<float> feats(static_cast<size_t>(B * T * F)), params(static_cast<size_t>(n_grad_)),
      grads(static_cast<size_t>(n_grad_)), targets(static_cast<size_t>(B * C));
  DeviceBuffer<int32_t> labels(static_cast<size_t>(B));
  launch_fill_uniform(feats.get(), B * T * F, 11, -1.0f, 1.0f, s);
  launch_fill_uniform(params.get(), n_grad_, 12, -0.1f, 0.1f, s);
  launch_fill_uniform(targets.get(), B * C, 13, -1.0f, 1.0f, s);
  launch_fill_int(labels.get(), B, 0, s);
  CUDA_CHECK(cudaMemsetAsync(grads.get(), 0, static_cast<size_t>(n_grad_) * sizeof(float), s));
  std::vector<GatherSlot> slots;
  for (int64_t b = 0; b < B; ++b)
    slots.push_back(GatherSlot{b * T, static_cast<int32_t>(T), static_cast<int32_t>(b)});
  Event e0 = Event::create(true), e1 = Event::create(true);
  std::vector<float> us;
  for (int i = 0; i < 23; ++i) {
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    run(slots, feats.get(), labels.get(), targets.get(), params.get(), grads.get(), s);
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    if (i >= 3) us.push_back(1e3f * ms);   // the first runs include module load and buffer growth
  }
  std::sort(us.begin(), us.end());
  return static_cast<double>(us[us.size() / 2]);
}

std::string FusedLstm::describe() const {
  if (hr_ == 0)
    return RT_MSG("fused kernel (recurrent weights in the registers of a " << kCl << "-block cluster per sequence, "
                                                                          << rec_threads_ << " threads a block)");
  return RT_MSG("fused kernel (recurrent weights in registers, " << rec_threads_ << " threads, "
                                                                  << (smem_bytes_ + 1023) / 1024 << " KiB shared)");
}

}  // namespace ragtrain
