// The allocator of a shard's large arrays: elements left unset by resize, and large blocks mapped with
// transparent huge pages, so that a shard is faulted in once, by the threads that read into it.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace ragtrain {

// std::vector value-initialises what resize adds: for a shard that touches (faults in and zeroes) every page on
// one thread before the reader overwrites it, which costs as much as the read itself. With this allocator resize
// leaves new elements unset (the caller writes every one), and a block of kBulkMapBytes or more is an anonymous
// mapping advised to use huge pages (512 times fewer page faults), released to the system when freed.
inline constexpr std::size_t kBulkMapBytes = std::size_t{64} << 20;

template <class T>
struct BulkAllocator {
  using value_type = T;

  BulkAllocator() = default;
  template <class U>
  BulkAllocator(const BulkAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kBulkMapBytes) {
      void* p = std::malloc(bytes == 0 ? 1 : bytes);
      if (!p) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    (void)madvise(p, bytes, MADV_HUGEPAGE);   // advice: a kernel without THP keeps 4 KiB pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kBulkMapBytes)
      std::free(p);
    else
      (void)munmap(p, bytes);
  }

  // Default-initialisation (nothing, for float and int32) where std::allocator would value-initialise.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T, class U>
bool operator==(const BulkAllocator<T>&, const BulkAllocator<U>&) noexcept {
  return true;
}
template <class T, class U>
bool operator!=(const BulkAllocator<T>&, const BulkAllocator<U>&) noexcept {
  return false;
}

// A vector whose resize leaves new elements unset; see BulkAllocator.
template <class T>
using BulkVector = std::vector<T, BulkAllocator<T>>;

// The same values as a plain vector (a shard's features against the data set they came from).
template <class T>
bool operator==(const BulkVector<T>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}
template <class T>
bool operator==(const std::vector<T>& a, const BulkVector<T>& b) {
  return b == a;
}
template <class T>
bool operator!=(const BulkVector<T>& a, const std::vector<T>& b) {
  return !(a == b);
}
template <class T>
bool operator!=(const std::vector<T>& a, const BulkVector<T>& b) {
  return !(b == a);
}

}  // namespace ragtrain
