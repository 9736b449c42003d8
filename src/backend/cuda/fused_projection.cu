// Phase 1 of the fused LSTM step (fused_lstm.cu): the input projection W_ih x_t + b_ih + b_hh of every (sequence,
// timestep) on the tensor cores, and, for the cluster variant (H > 64), its first blocks pack W_hh in the order of
// that kernel's registers.
#include "fused_device.hpp"
#include "fused_kernels.hpp"
#include "tf32_split.hpp"

namespace ragtrain {
namespace {

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

// The cluster variant's W_hh, packed by the projection kernel in the order its threads hold it in registers: float4
// d4 = (rank, w, k / 4, thread), w 0 the forward row, 1 the backward column. Loading it is then 16-byte loads,
// coalesced (the strided column loads straight from the parameters took 14.3 K cycles at H = 128, longer than the
// projection they overlap). (The one-block kernel loads its weights directly: there the projection is longer than
// those loads, and the packed copy's float4 loads measured 905 instead of 829 cycles a backward step at H = 50.)
// Returns the parameter index of element e of packed float4 d4, or -1 (a zero: padding past H). M: the variant's
// lane map (fused_lanes.hpp).
template <class M>
__device__ __forceinline__ int64_t packed_source(const Args& a, const FusedLayout& lay, int d4, int e) {
  constexpr int kPerPart = M::kThreads * M::kCols / 4;   // float4s of one (rank, w)
  const int H = a.H, tid = d4 % M::kThreads, k = 4 * ((d4 / M::kThreads) % (M::kCols / 4)) + e;
  const int w = (d4 / kPerPart) % 2, rank = d4 / (2 * kPerPart);
  const int q = (tid >> 2) & 3, pp = tid & 3, j = M::unit(rank, tid);
  if (j >= H) return -1;
  if (w == 0) {
    const int col = M::fwd_col(pp, k);
    return col < H ? lay.w_hh[q] + static_cast<int64_t>(j) * H + col : -1;
  }
  const int g = k & 3, i = M::bwd_row(q, pp, k);
  return i < H ? lay.w_hh[g] + static_cast<int64_t>(i) * H + j : -1;
}

// Pack block pi < kPack of the projection's pack rows for direction d: its share of direction d's packed W_hh (all
// loads in flight, then the stores), then its flag (epoch-tagged, as the progress words).
template <class M>
__device__ void pack_w_hh(const Args& a, int pi, int d) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const FusedLayout& lay = lay_of(a, d);
  float4* const packed = reinterpret_cast<float4*>(a.packed + static_cast<int64_t>(d) * a.packed_floats);
  const int n4 = a.packed_floats / 4, step = kPack * nt;
  constexpr int U = 4;
  for (int d0 = pi * nt + tid; d0 < n4; d0 += U * step) {
    float v[U][4];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d4 = d0 + u * step;
        const int64_t src = d4 < n4 ? packed_source<M>(a, lay, d4, e) : -1;
        v[u][e] = src >= 0 ? a.params[src] : 0.0f;
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (d0 + u * step < n4)
        packed[d0 + u * step] = make_float4(v[u][0], v[u][1], v[u][2], v[u][3]);
  }
  __syncthreads();
  if (tid == 0) publish_progress(a.pack_flags + d * kPack + pi, a.epoch, 0);
}

// The projection's W_ih columns [f0, f0 + nf) into ws by interleaved row (pitch kp), zero to the next multiple of 8:
// a warp per unit j (all four gates), lanes along k, U units (8 U loads a lane) in flight: one round trip at H <= U x
// the warps. (Loaded straight into registers, a warp's 32 rows cost 32 sectors a load: ncu timed the kernel at 9 us at
// H = 128; one division per element here cost as much again.)
// Units [j_lo, j_hi) only (the block's row tile), at rows 4 (j - j_lo) + q of ws.
template <int U>
__device__ __forceinline__ void stage_w_ih(const Args& a, const FusedLayout& lay, float* ws, int kp, int f0, int nf,
                                           int j_lo, int j_hi) {
  const int H = j_hi, F = a.F, lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nw = static_cast<int>(blockDim.x) >> 5, kpad = (nf + 7) & ~7;
  for (int j0 = j_lo + warp; j0 < H; j0 += U * nw) {
    float v[U][4][2];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int g = 0; g < 4; ++g)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int jj = j0 + u * nw, k = lane + 32 * c;
          v[u][g][c] = (jj < H && k < nf) ? a.params[lay.w_ih[g] + static_cast<int64_t>(jj) * F + f0 + k] : 0.0f;
        }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int g = 0; g < 4; ++g)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int jj = j0 + u * nw, k = lane + 32 * c;
          if (jj < H && k < kpad) ws[(4 * (jj - j_lo) + g) * kp + k] = v[u][g][c];
        }
  }
}

// Phase 1, one block per (sequence, chunk of a.tc <= kProjT timesteps, direction): gbuf[t][r] = b_ih + b_hh +
// W_ih[row] x_t; sequence b in row b + a.pack_rows of the grid, the kPack pack blocks (pack_w_hh) first, in the rows
// before; blockIdx.z = direction + dirs x row tile (bidirectional: direction 1 stores timestep t at row len - 1 - t
// of its scratch, the order its recurrence reads; 4H > kMaxProjThreads: tiles of that many gate rows).
// A GEMM on the tensor cores (3 x tf32, as split_grad_kernel): timesteps x features times features x gate rows, warp
// w the rows r in [32 w, 32 w + 32) (4 mma tiles of 8) for all the chunk's timesteps (up to 4 tiles of 16), the sums
// over features in registers across feature chunks of a.fc <= 64. Each chunk of W_ih and of the inputs is staged in
// shared memory with coalesced loads (W_ih by interleaved row 4 j + q), rows a.fc + 4 floats apart (4 mod 8: a
// fragment's loads, 8 rows x 4 features, on 32 distinct banks), zero-padded to whole mma tiles. (On the CUDA cores,
// each thread a row of W_ih in registers, the kernel took 14.8 / 16.7 us at K = 128, H = 50 on the H200, here 13.1 /
// 15.4 (ncu, two steps): most of it is the staging's memory round trips, 26% of issue slots busy.) Two blocks an SM
// (128 registers a thread): one block's staging overlaps another's products and stores; with blocks of 512 rows, one
// an SM, the H = 256 K = 128 step took 4.5-4.8 us longer (one H100, 2026-12-07).
// Dynamic shared memory: xs (kProjT x pitch), then ws (threads x pitch).
__global__ void __launch_bounds__(kMaxProjThreads, 2) projection_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 proj_smem[];
  const int kp = a.fc + 4;   // the rows' pitch
  float* const xs = reinterpret_cast<float*>(proj_smem);
  float* const ws = xs + kProjT * kp;
  if (static_cast<int>(blockIdx.y) < a.pack_rows) {   // the pack rows
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // (Overlapped, a layer above the first: the parameters are final, the first layer's projection waited for them.)
    if (!a.below_words) asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    // (z = direction + dirs x row tile: each direction's W_hh packed by the pack blocks of row tile 0.)
    const int pi = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), d = static_cast<int>(blockIdx.z);
    if (pi < kPack && d < a.dirs) {
      if (a.H <= ClusterMap4::kHmax)
        pack_w_hh<ClusterMap4>(a, pi, d);
      else
        pack_w_hh<ClusterMap16>(a, pi, d);
    }
    return;
  }
  const int b = static_cast<int>(blockIdx.y) - a.pack_rows, d = static_cast<int>(blockIdx.z) % a.dirs;
  const int row0 = kMaxProjThreads * (static_cast<int>(blockIdx.z) / a.dirs);   // the tile's first gate row
  const FusedLayout& lay = lay_of(a, d);
  const GatherSlot slot = slot_of(p, b);
  const int t_begin = static_cast<int>(blockIdx.x) * a.tc;
  if (t_begin >= slot.length) return;   // the whole block: no barrier is left waiting
  const int n = min(a.tc, slot.length - t_begin), n16 = (n + 15) & ~15;
  const float* x = a.features + (slot.row + t_begin) * a.F;
  const int H = a.H, G = 4 * H, F = a.F, tid = static_cast<int>(threadIdx.x);
  const int j_lo = row0 / 4, j_hi = min(H, j_lo + static_cast<int>(blockDim.x) / 4);   // the tile's units
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
  // A stacked layer's inputs are the layer below's h, written by the kernels before this one: staged after it.
  if (a.x_early) stage_x(0, min(a.fc, F));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (!a.below_words) asm volatile("griddepcontrol.wait;" ::: "memory");
  // Let the recurrence kernel start its prologue now: the parameters are final (the cluster variant's then waits for
  // the pack blocks' flags before it reads the packed W_hh).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (a.below_words) {   // overlapped: the layer below's h of this chunk's steps is stored once each block says so
    if (tid < a.words)
      while (!fwd_reached(a.below_words + static_cast<int64_t>(b) * kMaxCl + tid, a.below_epoch, t_begin + n))
        __nanosleep(64);
    __syncthreads();
  }
  if (!a.x_early) stage_x(0, min(a.fc, F));
  // lane (g, t4)'s rows: r0 + 8 ni + {0, 1} (gate rows of the whole layer; ws holds the tile's from row0)
  const int g = lane >> 2, t4 = lane & 3, r0 = row0 + 32 * warp + 2 * t4;
  float bias[4][2];
#pragma unroll
  for (int ni = 0; ni < 4; ++ni)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int r = r0 + 8 * ni + e, j = r >> 2, q = r & 3;
      bias[ni][e] = r < G ? a.params[lay.b_ih[q] + j] + a.params[lay.b_hh[q] + j] : 0.0f;
    }
  float acc[4][4][4];   // (timestep tile, row tile, fragment)
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  stage_w_ih<8>(a, lay, ws, kp, 0, min(a.fc, F), j_lo, j_hi);   // 8 units in flight; the sums hold no registers yet
  for (int f0 = 0; f0 < F; f0 += a.fc) {
    const int nf = min(a.fc, F - f0);
    if (f0 > 0) {   // F > 64: the next chunk, fewer loads in flight beside the sums
      __syncthreads();   // xs and ws are free
      stage_x(f0, nf);
      stage_w_ih<2>(a, lay, ws, kp, f0, nf, j_lo, j_hi);
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
  // Rows r, r + 1 of timestep tt as one 8-byte store (G is even). Direction 1: row len - 1 - t, walking down.
  float* const gb = a.scratch + static_cast<int64_t>(b * a.dirs + d) * a.per_seq +
                    static_cast<int64_t>(d ? slot.length - 1 - t_begin : t_begin) * G;
  const int tstep = d ? -G : G;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tt = 16 * mi + g + 8 * h, r = r0 + 8 * ni;
        if (tt < n && r < G)
          *reinterpret_cast<float2*>(gb + tt * tstep + r) =
              make_float2(bias[ni][0] + acc[mi][ni][2 * h], bias[ni][1] + acc[mi][ni][2 * h + 1]);
      }
  if (a.proj_flags) {   // overlapped: this chunk's gate rows of the tile are stored
    __syncthreads();
    if (tid == 0)
      publish_progress(a.proj_flags + chain_proj_flag(a.t_cap, H, b, t_begin / a.tc, row0 / kMaxProjThreads), a.epoch,
                       0);
  }
}

}  // namespace

const void* fused_projection_kernel() { return reinterpret_cast<const void*>(projection_kernel); }

}  // namespace ragtrain
