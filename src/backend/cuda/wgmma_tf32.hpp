// Hopper's warpgroup products (wgmma) with tf32 operands from shared memory, for the split weight-gradient GEMM
// (fused_split_grad.cu). Why: its mma.sync form issues a load and a split for every operand a warp reads, and with the
// few warps its registers allow the GEMM waits on those chains (278 us at H = 256, K = 128 for ~45 us of products);
// a wgmma reads a 64 x 8 and a 32 x 8 operand straight from shared memory, one instruction for 16 K products.
// Operands are K-major (tf32 takes no transposed layout) in the 128-byte swizzle: a row of 32 tf32 (a staged chunk's
// timesteps) is 128 bytes, 16-byte group q of row r stored at group q ^ (r % 8), 8-row blocks 1,024 bytes apart.
// sw128_index is host and device (the unit tests check it is a permutation that keeps a chunk's rows apart);
// the device part exists only where the build targets sm_90a (RAGTRAIN_WGMMA, the Makefile's CUDA_ARCH).
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace ragtrain {

constexpr int kSwRow = 32;   // floats of a swizzled row: one staged chunk's timesteps (kSgC)

// The float index of (row r, column k < 32) in a 128-byte-swizzled K-major buffer whose base is 1,024-byte aligned.
RAGTRAIN_HD int sw128_index(int r, int k) { return r * kSwRow + ((((k >> 2) ^ (r & 7)) << 2) | (k & 3)); }

#if defined(__CUDACC__) && RAGTRAIN_WGMMA
// A shared-memory operand's descriptor: start address, leading byte offset 1 (unused by swizzled K-major), stride
// byte offset 1,024 (between 8-row blocks), 128-byte swizzle (mode 1 in bits 62-63). A step along K within the row
// adds its bytes / 16 to the start address (wgmma_advance).
__device__ __forceinline__ uint64_t wgmma_desc(const float* smem) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((a & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}
__device__ __forceinline__ uint64_t wgmma_advance(uint64_t desc, int bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Shared-memory writes of the generic proxy (the threads' stores) made visible to the wgmma that read them.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// d (64 x N, the warpgroup's accumulator) += A (64 x 8) B^T (N x 8), both tf32 from shared memory, N = 32 NSUB: one
// instruction for all of a block's columns (an operand is read from shared memory once an instruction, so a wider
// product reads A fewer times). Warp w of the group, lane (g, t) = (lane / 4, lane % 4): d[4 j + e] is row
// 16 w + g + 8 (e / 2), column 8 j + 2 t + e % 2.
template <int NSUB>
__device__ __forceinline__ void wgmma_tf32(float (&d)[16 * NSUB], uint64_t a, uint64_t b);
#define RT_W8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
template <>
__device__ __forceinline__ void wgmma_tf32<1>(float (&d)[16], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
               "}, %16, %17, p, 1, 1;\n}\n"
               : RT_W8(0), RT_W8(8)
               : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_tf32<2>(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
               "}, %32, %33, p, 1, 1;\n}\n"
               : RT_W8(0), RT_W8(8), RT_W8(16), RT_W8(24)
               : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_tf32<3>(float (&d)[48], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k8.f32.tf32.tf32 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
               "}, %48, %49, p, 1, 1;\n}\n"
               : RT_W8(0), RT_W8(8), RT_W8(16), RT_W8(24), RT_W8(32),
                 RT_W8(40)
               : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_tf32<4>(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
               "}, %64, %65, p, 1, 1;\n}\n"
               : RT_W8(0), RT_W8(8), RT_W8(16), RT_W8(24), RT_W8(32),
                 RT_W8(40), RT_W8(48), RT_W8(56)
               : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_tf32<5>(float (&d)[80], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n160k8.f32.tf32.tf32 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
               "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
               "}, %80, %81, p, 1, 1;\n}\n"
               : RT_W8(0), RT_W8(8), RT_W8(16), RT_W8(24), RT_W8(32),
                 RT_W8(40), RT_W8(48), RT_W8(56), RT_W8(64), RT_W8(72)
               : "l"(a), "l"(b), "r"(1));
}
#undef RT_W8

// Keeps the compiler from moving accesses of the accumulator across a wgmma wait.
template <int R>
__device__ __forceinline__ void wgmma_hold(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
#endif

}  // namespace ragtrain
