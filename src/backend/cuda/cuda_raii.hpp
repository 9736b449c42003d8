// RAII owners for CUDA and cuDNN handles: device and pinned buffers, streams, events, graphs, cuDNN handle and
// descriptors. Move-only; destructors release quietly (they run on error paths, where throwing would abort).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ragtrain/core/error_cuda.hpp"

namespace ragtrain {

// Base for a move-only owner of one handle `H` released by `Release`.
template <class H, class Release>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(H h) : h_(h) {}
  ~UniqueHandle() { reset(); }
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, H{})) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;

  H get() const { return h_; }
  explicit operator bool() const { return h_ != H{}; }
  void reset() {
    if (h_ != H{}) Release()(h_);
    h_ = H{};
  }

 private:
  H h_{};
};

struct StreamRelease { void operator()(cudaStream_t s) const { cudaStreamDestroy(s); } };
struct EventRelease { void operator()(cudaEvent_t e) const { cudaEventDestroy(e); } };
struct GraphRelease { void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); } };
struct GraphExecRelease { void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); } };
struct CudnnRelease { void operator()(cudnnHandle_t h) const { cudnnDestroy(h); } };
struct TensorDescRelease { void operator()(cudnnTensorDescriptor_t d) const { cudnnDestroyTensorDescriptor(d); } };
struct RnnDescRelease { void operator()(cudnnRNNDescriptor_t d) const { cudnnDestroyRNNDescriptor(d); } };
struct RnnDataDescRelease { void operator()(cudnnRNNDataDescriptor_t d) const { cudnnDestroyRNNDataDescriptor(d); } };
struct DropoutDescRelease { void operator()(cudnnDropoutDescriptor_t d) const { cudnnDestroyDropoutDescriptor(d); } };

using GraphExec = UniqueHandle<cudaGraphExec_t, GraphExecRelease>;
using Graph = UniqueHandle<cudaGraph_t, GraphRelease>;

// A non-blocking stream: it does not synchronise with the legacy default stream.
class Stream : public UniqueHandle<cudaStream_t, StreamRelease> {
 public:
  static Stream create() {
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return Stream(s);
  }

 private:
  using UniqueHandle::UniqueHandle;
};

class Event : public UniqueHandle<cudaEvent_t, EventRelease> {
 public:
  // timing=false gives the cheaper event used only for ordering and completion.
  static Event create(bool timing) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return Event(e);
  }

 private:
  using UniqueHandle::UniqueHandle;
};

class CudnnHandle : public UniqueHandle<cudnnHandle_t, CudnnRelease> {
 public:
  static CudnnHandle create(cudaStream_t stream) {
    cudnnHandle_t h = nullptr;
    CUDNN_CHECK(cudnnCreate(&h));
    CudnnHandle owner(h);
    CUDNN_CHECK(cudnnSetStream(h, stream));
    return owner;
  }

 private:
  using UniqueHandle::UniqueHandle;
};

class TensorDesc : public UniqueHandle<cudnnTensorDescriptor_t, TensorDescRelease> {
 public:
  static TensorDesc create() {
    cudnnTensorDescriptor_t d = nullptr;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    return TensorDesc(d);
  }

 private:
  using UniqueHandle::UniqueHandle;
};

class RnnDesc : public UniqueHandle<cudnnRNNDescriptor_t, RnnDescRelease> {
 public:
  static RnnDesc create() {
    cudnnRNNDescriptor_t d = nullptr;
    CUDNN_CHECK(cudnnCreateRNNDescriptor(&d));
    return RnnDesc(d);
  }

 private:
  using UniqueHandle::UniqueHandle;
};

class RnnDataDesc : public UniqueHandle<cudnnRNNDataDescriptor_t, RnnDataDescRelease> {
 public:
  static RnnDataDesc create() {
    cudnnRNNDataDescriptor_t d = nullptr;
    CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&d));
    return RnnDataDesc(d);
  }

 private:
  using UniqueHandle::UniqueHandle;
};

class DropoutDesc : public UniqueHandle<cudnnDropoutDescriptor_t, DropoutDescRelease> {
 public:
  static DropoutDesc create() {
    cudnnDropoutDescriptor_t d = nullptr;
    CUDNN_CHECK(cudnnCreateDropoutDescriptor(&d));
    return DropoutDesc(d);
  }

 private:
  using UniqueHandle::UniqueHandle;
};

// `count` elements of T in device memory (cudaMalloc: plain allocations, never managed memory).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { resize_discard(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Reallocates to exactly `count` elements; the old contents are dropped (the address changes).
  void resize_discard(size_t count) {
    release();
    if (count == 0) return;
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    p_ = static_cast<T*>(p);
    n_ = count;
  }
  // Grows to at least `count` elements (contents dropped); returns true when the address changed.
  bool reserve_discard(size_t count) {
    if (count <= n_) return false;
    resize_discard(count);
    return true;
  }
  void zero_async(cudaStream_t s) {
    if (n_) CUDA_CHECK(cudaMemsetAsync(p_, 0, n_ * sizeof(T), s));
  }

  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

// `count` elements of T in page-locked host memory; `mapped` also makes it addressable from kernels
// (device_ptr()), which lets a kernel write a few result words straight to the host.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t count, bool mapped) {
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, count * sizeof(T), mapped ? cudaHostAllocMapped : cudaHostAllocDefault));
    p_ = static_cast<T*>(p);
    n_ = count;
    if (mapped) {
      void* d = nullptr;
      CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
      d_ = static_cast<T*>(d);
    }
  }
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), d_(std::exchange(o.d_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFreeHost(p_);
      p_ = std::exchange(o.p_, nullptr);
      d_ = std::exchange(o.d_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* get() const { return p_; }
  T* device_ptr() const { return d_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
  T* d_ = nullptr;
  size_t n_ = 0;
};

}  // namespace ragtrain
