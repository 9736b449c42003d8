// The batch gather kernel: one grid-stride pass over the padded input and dy, with the slot table as a
// __grid_constant__ parameter (read from the constant bank with a run-time index, never copied to local memory).
#include "batch_gather.hpp"

#include <cuda_runtime.h>

#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {
namespace {

constexpr int kThreads = 256;

// The kernel's whole parameter block: the shape, then a table of Cap slots (only a.B are used). Instantiated for a
// few capacities so that a batch of one passes about 100 bytes, a batch of 128 about 2 KiB, and a batch of 1024
// about 16 KiB (beyond 4 KiB this relies on CUDA 12.1+'s 32 KiB kernel-parameter limit).
template <int Cap>
struct GatherParams {
  GatherArgs a;
  GatherSlot slot[Cap];
};

template <int Cap>
__global__ void __launch_bounds__(kThreads) gather_batch_kernel(const __grid_constant__ GatherParams<Cap> p) {
  const GatherArgs& a = p.a;
  const int32_t tid = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  const int32_t stride = static_cast<int32_t>(gridDim.x * blockDim.x);
  // Per-slot metadata first (few threads), then the bulk: x (T*B*F elements) followed by dy (T*B*H zeros).
  if (tid < a.B) {
    const GatherSlot& s = p.slot[tid];
    a.lengths[tid] = s.length;
    a.cudnn_lengths[tid] = a.ragged ? s.length : a.T;
    if (a.labels) a.label[tid] = a.labels[s.pos];
    if (a.seq) a.seq[tid] = a.indices[s.pos];
  }
  if (tid == 0 && a.step_out) *a.step_out = a.step;
  if (a.targets)
    for (int32_t i = tid; i < a.B * a.C; i += stride)
      a.target[i] = a.targets[static_cast<int64_t>(p.slot[i / a.C].pos) * a.C + i % a.C];
  const int32_t n_x = a.T * a.B * a.F, n_dy = a.T * a.B * a.H;
  for (int32_t i = tid; i < n_x; i += stride) {
    const int32_t f = i % a.F, r = i / a.F, b = r % a.B, t = r / a.B;
    const GatherSlot& s = p.slot[b];
    a.x[i] = t < s.length ? a.features[(s.row + t) * a.F + f] : 0.0f;
  }
  for (int32_t i = tid; i < n_dy; i += stride) a.dy[i] = 0.0f;
}

int grid_for(const GatherArgs& a) {
  const int64_t n = static_cast<int64_t>(a.T) * a.B * (a.F + a.H);
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
}

void check(const GatherArgs& a, const std::vector<GatherSlot>& slots) {
  RT_CHECK(a.B >= 1 && a.B <= kMaxGatherSlots && static_cast<int64_t>(slots.size()) == a.B,
           "gather of " << slots.size() << " slots for a batch of " << a.B << " (at most " << kMaxGatherSlots << ")");
  RT_CHECK(static_cast<int64_t>(a.T) * a.B * (a.F + a.H) <= INT32_MAX, "batch too large for the gather kernel");
  for (const GatherSlot& s : slots) RT_CHECK(s.length >= 1 && s.length <= a.T, "slot length " << s.length);
}

// Calls f(kernel function, parameter block) for the smallest capacity that holds a.B slots.
template <class F>
void with_params(const GatherArgs& a, const std::vector<GatherSlot>& slots, F&& f) {
  auto run = [&](auto cap_tag) {
    constexpr int Cap = decltype(cap_tag)::value;
    GatherParams<Cap> p{};
    p.a = a;
    for (size_t i = 0; i < slots.size(); ++i) p.slot[i] = slots[i];
    f(reinterpret_cast<const void*>(gather_batch_kernel<Cap>), &p);
  };
  if (a.B <= 1) run(std::integral_constant<int, 1>{});
  else if (a.B <= 16) run(std::integral_constant<int, 16>{});
  else if (a.B <= 64) run(std::integral_constant<int, 64>{});
  else if (a.B <= 128) run(std::integral_constant<int, 128>{});   // 2 KiB: within the classic 4 KiB limit
  else if (a.B <= 256) run(std::integral_constant<int, 256>{});
  else run(std::integral_constant<int, 1024>{});
}

bool is_gather_kernel(const void* func) {
  return func == reinterpret_cast<const void*>(gather_batch_kernel<1>) ||
         func == reinterpret_cast<const void*>(gather_batch_kernel<16>) ||
         func == reinterpret_cast<const void*>(gather_batch_kernel<64>) ||
         func == reinterpret_cast<const void*>(gather_batch_kernel<128>) ||
         func == reinterpret_cast<const void*>(gather_batch_kernel<256>) ||
         func == reinterpret_cast<const void*>(gather_batch_kernel<1024>);
}

}  // namespace

void launch_gather_batch(const GatherArgs& a, const std::vector<GatherSlot>& slots, cudaStream_t s) {
  check(a, slots);
  with_params(a, slots, [&](const void* func, void* params) {
    void* args[] = {params};
    CUDA_CHECK(cudaLaunchKernel(func, dim3(static_cast<unsigned>(grid_for(a))), dim3(kThreads), args, 0, s));
  });
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
    if (is_gather_kernel(p.func)) return node;
  }
  return nullptr;
}

void update_gather_node(cudaGraphExec_t exec, cudaGraphNode_t node, const GatherArgs& a,
                        const std::vector<GatherSlot>& slots) {
  check(a, slots);
  with_params(a, slots, [&](const void* func, void* params) {
    void* args[] = {params};
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(func);
    p.gridDim = dim3(static_cast<unsigned>(grid_for(a)));   // as launch_gather_batch: same shape, same grid
    p.blockDim = dim3(kThreads);
    p.sharedMemBytes = 0;
    p.kernelParams = args;
    p.extra = nullptr;
    CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  });
}

}  // namespace ragtrain
