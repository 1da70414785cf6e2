// Transparent-huge-page allocation for large arrays the hot loops stream.
// Thread-safe (like operator new).
#pragma once

#include <cstddef>
#include <new>

namespace synapse::base {

// An allocator for large arrays read row by row (the KV cache's rows, the
// repacked weights): an allocation of 2 MiB or more starts on a
// 2 MiB boundary and is marked for transparent huge pages (Linux
// madvise(MADV_HUGEPAGE), which the kernel's default "madvise" mode waits
// for) before it is first touched. Attention walks a KV group's slice of
// every position row (128 of each row's n_embd_k_gqa * 2 bytes), so with
// 4 KiB pages it changes page every few rows and misses the TLB; with 2 MiB
// pages one entry covers thousands of rows. Anything else: plain new.
// Throws std::bad_alloc when the memory cannot be had.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n);
  void deallocate(T* p, size_t n) noexcept;
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

// The allocation behind HugePageAllocator: `bytes` bytes, 2 MiB-aligned and
// rounded up to whole 2 MiB pages with the huge-page advice when bytes >= 2 MiB,
// else from operator new. Throws std::bad_alloc. huge_page_free takes the
// same byte count back (it decides the same way how the block was made).
void* huge_page_alloc(size_t bytes);
void huge_page_free(void* p, size_t bytes) noexcept;

template <class T>
T* HugePageAllocator<T>::allocate(size_t n) {
  if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_alloc();
  return static_cast<T*>(huge_page_alloc(n * sizeof(T)));
}
template <class T>
void HugePageAllocator<T>::deallocate(T* p, size_t n) noexcept {
  huge_page_free(p, n * sizeof(T));
}

}  // namespace synapse::base
