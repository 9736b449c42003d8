// The Linear head, the per-sequence loss (cross-entropy or mean squared error) and their gradients on the GPU,
// plus the small copy kernels that feed a sequence to a replayed CUDA graph.
#include <cuda_runtime.h>

#include <vector>

#include "device_kernels.hpp"
#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {
namespace {

constexpr int kHeadThreads = 256;
constexpr int kWarps = kHeadThreads / 32;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

// logits (C) = W h + b into shared memory; one warp per output row, lanes stride over H.
__device__ void head_logits(const float* h_s, const float* __restrict__ w, const float* __restrict__ b, int H, int C,
                            float* out_s) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int c = warp; c < C; c += kWarps) {
    float s = 0.0f;
    for (int j = lane; j < H; j += 32) s += w[static_cast<int64_t>(c) * H + j] * h_s[j];
    s = warp_sum(s);
    if (lane == 0) out_s[c] = s + b[c];
  }
}

// w_in_shared: fc.weight is staged in shared memory together with h (one memory round trip instead of two on this
// latency-bound single-block kernel); large heads read it from global memory.
__global__ void __launch_bounds__(kHeadThreads) head_loss_grad_kernel(HeadArgs a, bool w_in_shared) {
  extern __shared__ float smem[];
  const int H = a.hidden, C = a.outputs;
  const int64_t CH = static_cast<int64_t>(C) * H;
  float* h_s = smem;          // (H)
  float* out_s = h_s + H;     // (C) head outputs
  float* d_s = out_s + C;     // (C) d loss / d outputs
  float* w_s = d_s + C;       // (C, H) fc.weight when w_in_shared
  const int tid = static_cast<int>(threadIdx.x);
  for (int j = tid; j < H; j += kHeadThreads) h_s[j] = a.h[j];
  if (w_in_shared)
    for (int64_t i = tid; i < CH; i += kHeadThreads) w_s[i] = a.weight[i];
  const float* w = w_in_shared ? w_s : a.weight;
  __syncthreads();
  head_logits(h_s, w, a.bias, H, C, out_s);
  __syncthreads();

  // Loss and d loss / d outputs: warp 0, lanes stride over C (the reference's formulas, shifted log-softmax).
  if (tid < 32) {
    const int lane = tid;
    float loss = 0.0f, correct = 0.0f;
    if (a.classification) {
      int label = *a.label;
      label = label < 0 ? 0 : (label >= C ? C - 1 : label);   // validated on the host; never index out of bounds
      float m = -INFINITY;
      int best = C;   // argmax, ties to the lowest index as in the reference
      float best_v = -INFINITY;
      for (int k = lane; k < C; k += 32) {
        m = fmaxf(m, out_s[k]);
        if (out_s[k] > best_v) best_v = out_s[k], best = k;
      }
      m = warp_max(m);
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_down_sync(0xffffffffu, best_v, o);
        const int oi = __shfl_down_sync(0xffffffffu, best, o);
        if (ov > best_v || (ov == best_v && oi < best)) best_v = ov, best = oi;
      }
      m = __shfl_sync(0xffffffffu, m, 0);
      float sum = 0.0f;
      for (int k = lane; k < C; k += 32) sum += expf(out_s[k] - m);
      sum = __shfl_sync(0xffffffffu, warp_sum(sum), 0);
      for (int k = lane; k < C; k += 32) d_s[k] = expf(out_s[k] - m) / sum - (k == label ? 1.0f : 0.0f);
      loss = m + logf(sum) - out_s[label];
      correct = best == label ? 1.0f : 0.0f;
    } else {
      const float inv_k = 1.0f / static_cast<float>(C);
      float sq = 0.0f;
      for (int k = lane; k < C; k += 32) {
        const float diff = out_s[k] - a.target[k];
        sq += diff * diff;
        d_s[k] = 2.0f * diff * inv_k;
      }
      loss = warp_sum(sq) * inv_k;
    }
    if (lane == 0) {
      a.extras[0] += loss;
      a.extras[1] += 1.0f;
      a.extras[2] += correct;
    }
  }
  __syncthreads();

  // Gradients: fc.weight += d h^T, fc.bias += d, dh = W^T d (the seed of the LSTM's backward pass).
  for (int64_t i = tid; i < CH; i += kHeadThreads) a.d_weight[i] += d_s[i / H] * h_s[i % H];
  for (int c = tid; c < C; c += kHeadThreads) a.d_bias[c] += d_s[c];
  for (int j = tid; j < H; j += kHeadThreads) {
    float s = 0.0f;
    for (int c = 0; c < C; ++c) s += w[static_cast<int64_t>(c) * H + j] * d_s[c];
    a.d_h[j] = s;
  }
}

__global__ void __launch_bounds__(kHeadThreads)
    head_forward_kernel(const float* h, const float* w, const float* b, int H, int C, float* out) {
  extern __shared__ float smem[];
  float* h_s = smem;       // (H)
  float* out_s = h_s + H;  // (C)
  for (int j = static_cast<int>(threadIdx.x); j < H; j += kHeadThreads) h_s[j] = h[j];
  __syncthreads();
  head_logits(h_s, w, b, H, C, out_s);
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x); c < C; c += kHeadThreads) out[c] = out_s[c];
}

__global__ void gather_kernel(float* __restrict__ x_dst, const float* __restrict__ x_src, int64_t n_x,
                              int32_t* label_dst, const int32_t* label_src, float* target_dst,
                              const float* target_src, int64_t n_target) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_x; i += stride)
    x_dst[i] = x_src[i];
  if (blockIdx.x == 0) {
    if (label_src && threadIdx.x == 0) *label_dst = *label_src;
    if (target_src)
      for (int64_t k = threadIdx.x; k < n_target; k += blockDim.x) target_dst[k] = target_src[k];
  }
}

__device__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = static_cast<float>(mix64(seed ^ mix64(static_cast<uint64_t>(i))) >> 40) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
  }
}

int grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
}

}  // namespace

void launch_head_loss_grad(const HeadArgs& a, cudaStream_t s) {
  const size_t base = sizeof(float) * (static_cast<size_t>(a.hidden) + 2 * static_cast<size_t>(a.outputs));
  const size_t with_w = base + sizeof(float) * static_cast<size_t>(a.hidden) * static_cast<size_t>(a.outputs);
  RT_CHECK(base <= 48 * 1024, "head of H=" << a.hidden << ", C=" << a.outputs << " exceeds the kernel's shared memory");
  const bool w_in_shared = with_w <= 48 * 1024;
  head_loss_grad_kernel<<<1, kHeadThreads, w_in_shared ? with_w : base, s>>>(a, w_in_shared);
  CUDA_CHECK_LAUNCH();
}

void launch_head_forward(const float* h, const float* weight, const float* bias, int32_t hidden, int32_t outputs,
                         float* out, cudaStream_t s) {
  const size_t shared = sizeof(float) * (static_cast<size_t>(hidden) + static_cast<size_t>(outputs));
  RT_CHECK(shared <= 48 * 1024, "head of H=" << hidden << ", C=" << outputs << " exceeds the kernel's shared memory");
  head_forward_kernel<<<1, kHeadThreads, shared, s>>>(h, weight, bias, hidden, outputs, out);
  CUDA_CHECK_LAUNCH();
}

void launch_gather_sequence(float* x_dst, const float* x_src, int64_t n_x, int32_t* label_dst,
                            const int32_t* label_src, float* target_dst, const float* target_src, int64_t n_target,
                            cudaStream_t s) {
  gather_kernel<<<grid_for(n_x, 256), 256, 0, s>>>(x_dst, x_src, n_x, label_dst, label_src, target_dst, target_src,
                                                   n_target);
  CUDA_CHECK_LAUNCH();
}

cudaGraphNode_t find_gather_node(cudaGraph_t graph) {
  size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p{};
    if (cudaGraphKernelNodeGetParams(node, &p) != cudaSuccess) {   // a library's node we cannot read: not ours
      cudaGetLastError();
      continue;
    }
    if (p.func == reinterpret_cast<void*>(gather_kernel)) return node;
  }
  return nullptr;
}

void update_gather_node(cudaGraphExec_t exec, cudaGraphNode_t node, float* x_dst, const float* x_src, int64_t n_x,
                        int32_t* label_dst, const int32_t* label_src, float* target_dst, const float* target_src,
                        int64_t n_target) {
  void* args[] = {&x_dst, &x_src, &n_x, &label_dst, &label_src, &target_dst, &target_src, &n_target};
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(gather_kernel);
  p.gridDim = dim3(static_cast<unsigned>(grid_for(n_x, 256)));   // as launch_gather_sequence: same length, same grid
  p.blockDim = dim3(256);
  p.sharedMemBytes = 0;
  p.kernelParams = args;
  p.extra = nullptr;
  CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
}

void launch_fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (n <= 0) return;
  fill_uniform_kernel<<<grid_for(n, 256), 256, 0, s>>>(p, n, seed, lo, hi);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ragtrain
