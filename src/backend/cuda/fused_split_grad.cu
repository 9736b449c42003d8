// Phase 5 of the fused LSTM step (fused_lstm.cu) for more than 16 sequences: the weight gradients as a GEMM on the
// tensor cores over all SMs, split over equal parts of the batch's timesteps.
#include "fused_device.hpp"
#include "fused_kernels.hpp"
#include "tf32_split.hpp"

namespace ragtrain {
namespace {

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
__device__ const float kOneF = 1.0f;  // the source of z's bias column

// split_grad_kernel's shared memory (split_smem_bytes).
struct SplitSmem {
  float* As;       // (2, kSgC, pa) d gates, rows [m0, m0 + BM)
  float* Zs;       // (2, kSgC, pb) z, columns [n0, n0 + BN)
  int64_t* rows;   // (B) feature row of each slot the kernel covers (Args::sg_nr), in slot order
  int* pre;        // (B + 1) timesteps before each of them
  int* slot;       // (B) its slot
  int* mb;         // (2, kSgC) the chunk's slots (-1: past the part)
  int* mt;         // (2, kSgC) and timesteps
  int pa, pb;      // row pitches: BM + 8, BN + 8
};

// The slot's index of the i-th slot the kernel covers: every slot, or those of the ranges Args::sg_lo / sg_hi.
__device__ __forceinline__ int covered_slot(const Args& a, int i) {
  for (int r = 0; r < a.sg_nr; ++r) {
    const int n = a.sg_hi[r] - a.sg_lo[r];
    if (i < n) return a.sg_lo[r] + i;
    i -= n;
  }
  return i;
}

// The table of the slots covered into shared memory and the prefix sums of their lengths (warp 0, in lane-contiguous
// runs); returns their number (`*count`) and timesteps. Reads only the slot table (written before the projection).
__device__ int split_prefix(const Params& p, const SplitSmem& sm, int* count) {
  const int tid = static_cast<int>(threadIdx.x), nth = static_cast<int>(blockDim.x);
  int B = p.a.B;
  if (p.a.sg_nr > 0) {
    B = 0;
    for (int r = 0; r < p.a.sg_nr; ++r) B += p.a.sg_hi[r] - p.a.sg_lo[r];
  }
  *count = B;
  for (int i = tid; i < B; i += nth) {
    const int b = covered_slot(p.a, i);
    const GatherSlot s = slot_of(p, b);
    sm.slot[i] = b;
    sm.rows[i] = s.row;
    sm.pre[i + 1] = s.length;
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
// multiples of 4), z = [x, h_{t-1}, 1] in float4s where it can (vec), else element by element. (A thread per
// element, stepping by whole rows plus a remainder, recomputed each element's slot and source: ncu counted 10.4 M
// instructions for the kernel at K = 128, H = 50, 10.0 M this way; the step 144.8 -> 143.7 us, builds alternating on
// the H200.) Direction d's (bidirectional: its d gates and h in its processing order, step t of direction 1 reading
// x at timestep len - 1 - t).
__device__ void split_stage(const Args& a, const SplitSmem& sm, int d, int buf, int m0, int n0, int BM, int BN) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nw = static_cast<int>(blockDim.x) >> 5, H = a.H, F = a.F, G = 4 * H;
  const int* const mb = sm.mb + buf * kSgC;
  const int* const mt = sm.mt + buf * kSgC;
  float* const A = sm.As + buf * kSgC * sm.pa;
  float* const Z = sm.Zs + buf * kSgC * sm.pb;
  const float* const hb = a.scratch + static_cast<int64_t>(a.t_cap) * (G + 2 * H);   // + b * per_seq: h_t at t * H
  // z's x and h parts in whole float4s (F and H multiples of 4, x and h 16-byte aligned): a quarter of the copies.
  // (Element by element, z's copies took more of the kernel's instructions than its mma.)
  const bool vec =
      ((F | H) & 3) == 0 && ((reinterpret_cast<uintptr_t>(a.features) | reinterpret_cast<uintptr_t>(hb)) & 15) == 0;
  for (int l = warp; l < kSgC; l += nw) {
    const int b = mb[l], t = mt[l];   // the same in the whole warp
    const int64_t sb = b < 0 ? 0 : sm.slot[b] * a.dirs + d;   // the scratch of (slot, direction d)
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
  sm.slot = sm.pre + B + 1;
  sm.mb = sm.slot + B;
  sm.mt = sm.mb + 2 * kSgC;
  int covered = B;
  const int64_t total = split_prefix(p, sm, &covered);
  // x = d parts + part: direction d's part of the timesteps.
  const int parts = static_cast<int>(gridDim.x) / a.dirs, d = static_cast<int>(blockIdx.x) / parts;
  const int part = static_cast<int>(blockIdx.x) - d * parts;
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
  split_map(sm, covered, i_lo, i_hi, 0, 0);
  split_map(sm, covered, i_lo, i_hi, 1, 1);
  __syncthreads();
  if (chunks > 0) split_stage(a, sm, d, 0, m0, n0, BM, BN);
  for (int c = 0; c < chunks; ++c) {
    const int buf = c & 1;
    if (c + 1 < chunks) {   // the other buffers were last read before the previous chunk's closing barrier
      split_stage(a, sm, d, buf ^ 1, m0, n0, BM, BN);
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncthreads();   // chunk c is in shared memory, every thread's copies included
    if (computes)
      split_mma_chunk(acc, sm.As + buf * kSgC * sm.pa + wr + g, sm.Zs + buf * kSgC * sm.pb + wc + g, sm.pa, sm.pb,
                      min(kSgC, i_hi - i_lo - c * kSgC), t4);
    if (c + 2 < chunks) split_map(sm, covered, i_lo, i_hi, c + 2, buf);
    __syncthreads();   // buffer buf is read before the next chunk's copies reuse it; the new map is visible
  }
  if (!computes) return;
  // Part `part`'s partial sums, column-major (columns of a.wstride >= G floats): a store instruction writes 4
  // columns' runs of 8 adjacent rows. (Direction d's a.groups parts, of which this launch's start at sg_part0.)
  float* const out = a.wpart + static_cast<int64_t>(d * a.groups + a.sg_part0 + part) * NW * a.wstride;
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

}  // namespace

const void* fused_split_grad_kernel() { return reinterpret_cast<const void*>(split_grad_kernel); }

}  // namespace ragtrain
