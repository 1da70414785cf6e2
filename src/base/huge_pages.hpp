// Transparent-huge-page allocation for large arrays the hot loops stream.
// Thread-safe (like operator new).
#pragma once

#include <cstddef>
#include <new>

namespace synapse::base {

// Memory for large arrays read row by row (the KV cache's pages, the
// repacked weights' chunks): `bytes` bytes, and when bytes >= 2 MiB they
// start on a 2 MiB boundary, are rounded up to whole 2 MiB pages and are
// marked for transparent huge pages (Linux madvise(MADV_HUGEPAGE), which
// the kernel's default "madvise" mode waits for) before first touched;
// else from operator new. Attention walks a KV group's slice of every
// position row (128 of each row's n_embd_k_gqa * 2 bytes), so with 4 KiB
// pages it changes page every few rows and misses the TLB; with 2 MiB pages
// one entry covers thousands of rows. Throws std::bad_alloc when the memory
// cannot be had. huge_page_free takes the same byte count back (it decides
// the same way how the block was made).
void* huge_page_alloc(size_t bytes);
void huge_page_free(void* p, size_t bytes) noexcept;

}  // namespace synapse::base
