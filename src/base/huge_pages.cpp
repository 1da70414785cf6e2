#include "base/huge_pages.hpp"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace synapse::base {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

void* huge_page_alloc(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: on failure the pages are 4 KiB
#endif
  return p;
}

void huge_page_free(void* p, size_t bytes) noexcept {
  if (bytes < kHugePage) ::operator delete(p);
  else std::free(p);
}

}  // namespace synapse::base
