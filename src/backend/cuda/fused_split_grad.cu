// Phase 5 of the fused LSTM step (fused_lstm.cu) for more than 16 sequences: the weight gradients as a GEMM on the
// tensor cores over all SMs, split over equal parts of the batch's timesteps.
#include "fused_device.hpp"
#include "fused_kernels.hpp"
#include "fused_split_frag.hpp"
#include "tf32_split.hpp"

namespace ragtrain {
namespace {

// Phase 5 with many sequences (B > kStreamMaxB): the same sums as weight_grad_kernel, as a GEMM split over the
// timesteps of all sequences instead of over sequence groups. The timesteps of the batch, concatenated in slot order,
// are cut into a.groups equal parts, one per block column (two blocks per SM): each block sums its part for a tile of
// (64 a.sg_wm) gate rows x (32 a.sg_wn) columns of z on the tensor cores, a warp per 64 x 32 (4 x 4 mma tiles of
// 16 x 8, timesteps the reduction dimension, 8 an instruction; fused_split_frag.hpp), three tf32 products per float
// product (tf32_split_trunc). The warp tile was 32 x 32 in blocks of 12 warps, two chunks of 32 timesteps staged
// and two barriers a chunk: 278 us at K = 128, H = 256 on the H100 (ncu), where the tensor cores' tf32 peak would
// need ~45 us for its products. What bounded it were the instructions around the mma (each operand loaded by a
// scalar load and split again in every warp that reads it: ~4 instructions an mma) and the barriers; a warp tile of
// twice the rows loads and splits a B operand for twice the products, its operands come as float4s, and one barrier
// a chunk with two chunks in flight.
// Chunks of kSgC timesteps go to shared memory by cp.async (padding and the bias' 1 zero-filled or copied by it too),
// kSgStages of them at once; rows of the chunk a pitch of 8 (mod 32) floats apart, so a quarter warp's float4 loads
// fall on the 32 banks once. The partition and every sum's order depend only on the batch: reruns are bitwise
// equal.
__device__ const float kOneF = 1.0f;  // the source of z's bias column

// split_grad_kernel's shared memory (split_smem_bytes).
struct SplitSmem {
  float* As;       // (kSgStages, kSgC, pa) d gates, rows [m0, m0 + BM)
  float* Zs;       // (kSgStages, kSgC, pb) z, columns [n0, n0 + BN)
  int64_t* rows;   // (B) feature row of each slot
  int* pre;        // (B + 1) timesteps before each slot
  int* mb;         // (kSgMaps, kSgC) a chunk's slots (-1: past the part)
  int* mt;         // (kSgMaps, kSgC) and timesteps
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

// Chunk c of the part [i_lo, i_hi) into map buffer c % kSgMaps: each row's slot and timestep (the last slot starting
// at or before it).
__device__ void split_map(const SplitSmem& sm, int B, int i_lo, int i_hi, int c) {
  const int buf = c % kSgMaps;
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

// The copies of chunk c into stage buffer c % kSgStages (d gates rows [m0, m0 + BM), z columns [n0, n0 + BN); zeros
// past the part, G, or F + H + 1); the caller commits them as one cp.async group. A warp per row of the chunk (a timestep: its sources' addresses
// once per row), lanes along the row: the d gates as float4s (a timestep's row of G is 16-byte aligned, G and BM
// multiples of 4), z = [x, h_{t-1}, 1] in float4s where it can (vec), else element by element. (A thread per
// element, stepping by whole rows plus a remainder, recomputed each element's slot and source: ncu counted 10.4 M
// instructions for the kernel at K = 128, H = 50, 10.0 M this way; the step 144.8 -> 143.7 us, builds alternating on
// the H200.) Direction d's (bidirectional: its d gates and h in its processing order, step t of direction 1 reading
// x at timestep len - 1 - t).
__device__ void split_stage(const Args& a, const SplitSmem& sm, int d, int c, int m0, int n0, int BM, int BN) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nw = static_cast<int>(blockDim.x) >> 5, H = a.H, F = a.F, G = 4 * H;
  const int* const mb = sm.mb + (c % kSgMaps) * kSgC;
  const int* const mt = sm.mt + (c % kSgMaps) * kSgC;
  float* const A = sm.As + (c % kSgStages) * kSgC * sm.pa;
  float* const Z = sm.Zs + (c % kSgStages) * kSgC * sm.pb;
  const float* const hb = a.scratch + static_cast<int64_t>(a.t_cap) * (G + 2 * H);   // + b * per_seq: h_t at t * H
  // z's x and h parts in whole float4s (F and H multiples of 4, x and h 16-byte aligned): a quarter of the copies.
  // (Element by element, z's copies took more of the kernel's instructions than its mma.)
  const bool vec =
      ((F | H) & 3) == 0 && ((reinterpret_cast<uintptr_t>(a.features) | reinterpret_cast<uintptr_t>(hb)) & 15) == 0;
  for (int l = warp; l < kSgC; l += nw) {
    const int b = mb[l], t = mt[l];   // the same in the whole warp
    const int64_t sb = b < 0 ? 0 : b * a.dirs + d;   // the scratch of (slot b, direction d)
    const float* const drow = a.scratch + sb * a.per_seq + static_cast<int64_t>(t) * G;
    for (int e = lane; e < BM / 4; e += 32) {
      const int m = m0 + 4 * e;
      const bool ok = b >= 0 && m < G;
      cp_async16(A + l * sm.pa + 4 * e, ok ? drow + m : a.params, ok);
    }
    const int tx = b < 0 ? 0 : (d ? sm.pre[b + 1] - sm.pre[b] - 1 - t : t);
    const float* const xrow = a.features + (b < 0 ? 0 : sm.rows[b] + tx) * F;
    const float* const hrow = hb + sb * a.per_seq + static_cast<int64_t>(t - 1) * H;
    auto element = [&](int e) {
      const int n = n0 + e;
      const bool x = n < F, h = !x && n < F + H && t > 0, one = n == F + H;   // h_{-1} = 0
      const bool ok = b >= 0 && (x || h || one);
      const float* const src = !ok ? a.params : (x ? xrow + n : (h ? hrow + (n - F) : &kOneF));
      cp_async4(Z + l * sm.pb + e, src, ok);
    };
    if (vec) {   // a lane 4 columns: a float4 of x or of h, else (the bias' 1 and the padding) one at a time
      for (int e = 4 * lane; e < BN; e += 128) {
        const int n = n0 + e;
        if (n + 4 <= F) {
          cp_async16(Z + l * sm.pb + e, b >= 0 ? xrow + n : a.params, b >= 0);
        } else if (n >= F && n + 4 <= F + H) {
          const bool ok = b >= 0 && t > 0;
          cp_async16(Z + l * sm.pb + e, ok ? hrow + (n - F) : a.params, ok);
        } else {
          for (int k = 0; k < 4; ++k) element(e + k);
        }
      }
    } else {
      for (int e = lane; e < BN; e += 32) element(e);
    }
  }
}

// A warp's 64 x 32 of one staged chunk (nl timesteps; the rows past nl are zeros): per 8 timesteps its A fragments
// (4 row tiles) split once, then for each of the 4 column tiles its B fragment split and the 3 products per row
// tile. A and Z point at the warp's first row / column.
__device__ __forceinline__ void split_mma_chunk(float (&acc)[kSgMi][kSgNi][4], const float* A, const float* Z, int pa,
                                                int pb, int nl, int lane) {
#pragma unroll
  for (int kk = 0; kk < kSgC / 8; ++kk) {
    if (8 * kk >= nl) break;
    float av[kSgMi][4], bv[kSgNi][2];
    sg_fragments(A, pa, Z, pb, lane, kk, av, bv);
    uint32_t ah[kSgMi][4], al[kSgMi][4];
#pragma unroll
    for (int mi = 0; mi < kSgMi; ++mi)
#pragma unroll
      for (int r = 0; r < 4; ++r) tf32_split_trunc(av[mi][r], ah[mi][r], al[mi][r]);
#pragma unroll
    for (int ni = 0; ni < kSgNi; ++ni) {
      uint32_t bh0, bl0, bh1, bl1;
      tf32_split_trunc(bv[ni][0], bh0, bl0);
      tf32_split_trunc(bv[ni][1], bh1, bl1);
#pragma unroll
      for (int mi = 0; mi < kSgMi; ++mi) {   // small terms first
        mma_tf32(acc[mi][ni], al[mi], bh0, bh1);
        mma_tf32(acc[mi][ni], ah[mi], bl0, bl1);
        mma_tf32(acc[mi][ni], ah[mi], bh0, bh1);
      }
    }
  }
}

__global__ void __launch_bounds__(kSgThreads, 2) split_grad_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  extern __shared__ float4 sg_smem4[];
  const int tid = static_cast<int>(threadIdx.x);
  const int G = 4 * a.H, NW = a.F + a.H + 1, B = a.B;
  const int BM = 64 * a.sg_wm, BN = 32 * a.sg_wn;
  const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.z) * BN;
  SplitSmem sm;
  sm.pa = BM + 8;
  sm.pb = BN + 8;
  sm.As = reinterpret_cast<float*>(sg_smem4);
  sm.Zs = sm.As + kSgStages * kSgC * sm.pa;
  sm.rows = reinterpret_cast<int64_t*>(sm.Zs + kSgStages * kSgC * sm.pb);
  sm.pre = reinterpret_cast<int*>(sm.rows + B);
  sm.mb = sm.pre + B + 1;
  sm.mt = sm.mb + kSgMaps * kSgC;
  const int64_t total = split_prefix(p, sm);
  // x = d parts + part: direction d's part of the timesteps.
  const int parts = static_cast<int>(gridDim.x) / a.dirs, d = static_cast<int>(blockIdx.x) / parts;
  const int part = static_cast<int>(blockIdx.x) - d * parts;
  const int i_lo = static_cast<int>(total * part / parts), i_hi = static_cast<int>(total * (part + 1) / parts);
  const int chunks = (i_hi - i_lo + kSgC - 1) / kSgC;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");   // the sums kernel waits for this grid
  asm volatile("griddepcontrol.wait;" ::: "memory");                // the recurrence kernel's d gates and h
#endif
  const int warp = tid >> 5, lane = tid & 31;
  const int wr = 64 * (warp % a.sg_wm), wc = 32 * (warp / a.sg_wm);   // the warp's tile within the block's
  const bool computes = m0 + wr < G && n0 + wc < NW;                   // else all padding
  float acc[kSgMi][kSgNi][4];
#pragma unroll
  for (int mi = 0; mi < kSgMi; ++mi)
#pragma unroll
    for (int ni = 0; ni < kSgNi; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  // One barrier a chunk: past it, chunk c is in shared memory (every thread's copies) and every warp is done with
  // chunk c - 1, whose stage buffer chunk c + 2's copies then take; chunk c + 3's map goes into the buffer of chunk
  // c - 1's, read when those copies were issued. A cp.async group a chunk, empty past the last, so that
  // wait_group kSgStages - 2 always leaves chunk c complete.
  for (int c = 0; c < kSgStages; ++c) split_map(sm, B, i_lo, i_hi, c);
  __syncthreads();
  for (int c = 0; c < kSgStages - 1; ++c) {
    if (c < chunks) split_stage(a, sm, d, c, m0, n0, BM, BN);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kSgStages - 2) : "memory");
    __syncthreads();
    if (c + kSgStages - 1 < chunks) split_stage(a, sm, d, c + kSgStages - 1, m0, n0, BM, BN);
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (c + kSgStages < chunks) split_map(sm, B, i_lo, i_hi, c + kSgStages);
    if (computes)
      split_mma_chunk(acc, sm.As + (c % kSgStages) * kSgC * sm.pa + wr, sm.Zs + (c % kSgStages) * kSgC * sm.pb + wc,
                      sm.pa, sm.pb, min(kSgC, i_hi - i_lo - c * kSgC), lane);
  }
  if (!computes) return;
  // Part `part`'s partial sums, column-major (columns of a.wstride >= G floats, a multiple of 8): a lane's sums of
  // four adjacent rows of one column as a float4 (G a multiple of 4: the four are all in or all out).
  float* const out = a.wpart + static_cast<int64_t>(blockIdx.x) * NW * a.wstride;
#pragma unroll
  for (int q = 0; q < 2; ++q)
#pragma unroll
    for (int ni = 0; ni < kSgNi; ++ni)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int m = m0 + wr + 32 * q + 4 * (lane >> 2), n = n0 + wc + sg_out_col(lane, ni, c);
        if (m < G && n < NW) {
          const SgVec v = sg_out4(acc, q, ni, c);
          *reinterpret_cast<float4*>(out + static_cast<int64_t>(n) * a.wstride + m) =
              make_float4(v.v[0], v.v[1], v.v[2], v.v[3]);
        }
      }
}

}  // namespace

const void* fused_split_grad_kernel() { return reinterpret_cast<const void*>(split_grad_kernel); }

}  // namespace ragtrain
