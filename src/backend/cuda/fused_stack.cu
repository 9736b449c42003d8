// What a stacked LSTM adds to the fused step (fused_lstm.cu runs each layer's projection, recurrence and weight
// gradients in turn): the next layer's input through the dropout between layers, and, in the backward, the d loss /
// d h_t that a layer passes down, dX = dG W_ih (the recurrence of the layer below adds it to its own d h_t).
#include "fused_device.hpp"
#include "fused_kernels.hpp"
#include "ragtrain/model/dropout_mask.hpp"

namespace ragtrain {
namespace {

// The mask of the dropout between layers on unit k of the layer's output at timestep t of slot b (the CPU
// reference's draw: model/dropout_mask.hpp, keyed by the run's step and the sequence's global index).
__device__ __forceinline__ float between_keep(const Args& a, int pos, int t, int k) {
  const DropoutKey key{a.between.seed, a.between.step, a.between.indices[pos]};
  return dropout_keep(key, a.between_layer, t, k, a.between.threshold) ? a.between.scale : 0.0f;
}

// The layer above's input, when it does not read the layer below's h in place (with dropout between layers, or
// bidirectional): features[b][t][k] = [h_fwd ; h_rev][b][t][k] x mask (direction 1's h of timestep t is its
// processing row len - 1 - t), one thread an element; block (x, b) a range of slot b's elements.
__global__ void __launch_bounds__(256) layer_input_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");   // the layer below's forward ended
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int b = static_cast<int>(blockIdx.y), F = a.F, H = a.H;   // F: this layer's input width, dirs x H
  const GatherSlot slot = slot_of(p, b);
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= slot.length * F) return;
  const int t = i / F, k = i - t * F, d = k / H, j = k - d * H;
  const int row = d ? slot.length - 1 - t : t;
  const float* const hb = a.h_below + static_cast<int64_t>(b * a.dirs + d) * a.per_seq +
                          static_cast<int64_t>(a.t_cap) * 6 * H;
  const float v = hb[static_cast<int64_t>(row) * H + j];
  a.x_next[static_cast<int64_t>(b) * a.t_cap * F + i] = a.between.threshold ? v * between_keep(a, slot.pos, t, k) : v;
}

// dx[b][t][k] = sum over the directions d and gate rows r (interleaved, r = 4 j + q) of dg_t[r] W_ih[q H + j][k]
// (direction d's d gates and W_ih), through the dropout mask of the layer below's output: a kIgT-timestep x 64-column
// tile of slot b a block, the rows in chunks of 32 staged in shared memory; each thread kIgT / 16 timesteps x 4
// columns, summed over d and r in order (a rerun gives the same bits). Column k is d loss / d h of the layer below's
// direction k / H, unit k mod H: written to that direction's rows of dx (B dirs, t_cap, H) in its processing order.
constexpr int kIgR = 32;   // (kIgT x kIgK outputs a block: fused_kernels.hpp)
constexpr int kIgU = kIgT / 16;   // timesteps a thread (16 x 16 threads)
__global__ void __launch_bounds__(256) input_grad_kernel(const __grid_constant__ Params p) {
  const Args& a = p.a;
  __shared__ float ds[kIgT][kIgR + 1];
  __shared__ float ws[kIgR][kIgK + 1];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // This layer's d gates (and the layer below's last use of dx); overlapped, its backward's progress words say which.
  if (!a.overlap) asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int b = static_cast<int>(blockIdx.y), H = a.H, G = 4 * H, F = a.F;
  const GatherSlot slot = slot_of(p, b);
  const int len = slot.length;
  const int t0 = static_cast<int>(blockIdx.x) * kIgT, k0 = static_cast<int>(blockIdx.z) * kIgK;
  if (t0 >= len) return;   // the whole block
  const int tid0 = static_cast<int>(threadIdx.x);
  if (a.overlap) {   // every d gate of steps >= t0 stored, by every block of the sequence's cluster
    if (tid0 < a.words)
      while (!progress_reached(a.progress + static_cast<int64_t>(b) * kMaxCl + tid0, a.epoch, t0)) __nanosleep(64);
    __syncthreads();
  }
  const int n = min(kIgT, len - t0);
  const int tid = static_cast<int>(threadIdx.x), tt = tid >> 4, kk = tid & 15;
  float acc[kIgU][4] = {};
  for (int d = 0; d < a.dirs; ++d) {
    const FusedLayout& lay = lay_of(a, d);
    // Timestep t0 + t of direction d: its processing row (direction 1: len - 1 - (t0 + t)).
    const float* const gb = a.scratch + static_cast<int64_t>(b * a.dirs + d) * a.per_seq;
    for (int r0 = 0; r0 < G; r0 += kIgR) {
      for (int e = tid; e < kIgT * kIgR; e += 256) {
        const int t = e / kIgR, r = e - t * kIgR, row = d ? len - 1 - (t0 + t) : t0 + t;
        ds[t][r] = t < n && r0 + r < G ? gb[static_cast<int64_t>(row) * G + r0 + r] : 0.0f;
      }
      for (int e = tid; e < kIgR * kIgK; e += 256) {
        const int r = e / kIgK, c = e - r * kIgK, R = r0 + r;
        ws[r][c] = R < G && k0 + c < F ? a.params[lay.w_ih[R & 3] + static_cast<int64_t>(R >> 2) * F + k0 + c] : 0.0f;
      }
      __syncthreads();
#pragma unroll 8
      for (int r = 0; r < kIgR; ++r) {
        float dv[kIgU];
#pragma unroll
        for (int i = 0; i < kIgU; ++i) dv[i] = ds[tt + 16 * i][r];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float w = ws[r][kk + 16 * c];
#pragma unroll
          for (int i = 0; i < kIgU; ++i) acc[i][c] += dv[i] * w;
        }
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (int i = 0; i < kIgU; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int t = t0 + tt + 16 * i, k = k0 + kk + 16 * c;
      if (t < len && k < F) {
        const int d = k / H, row = d ? len - 1 - t : t;
        a.dx[(static_cast<int64_t>(b * a.dirs + d) * a.t_cap + row) * H + (k - d * H)] =
            a.between.threshold ? acc[i][c] * between_keep(a, slot.pos, t, k) : acc[i][c];
      }
    }
  if (a.dx_flags) {   // overlapped: this tile of the layer below's dh_ext is stored
    __syncthreads();
    if (tid0 == 0)
      publish_progress(a.dx_flags + chain_dx_flag(a.t_cap, H, b, blockIdx.x, blockIdx.z), a.dx_epoch, 0);
  }
}

}  // namespace

const void* fused_layer_input_kernel() { return reinterpret_cast<const void*>(layer_input_kernel); }
const void* fused_input_grad_kernel() { return reinterpret_cast<const void*>(input_grad_kernel); }

}  // namespace ragtrain
