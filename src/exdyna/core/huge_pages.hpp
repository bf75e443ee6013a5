// Gradient-sized buffers on transparent huge pages. Where the kernel's THP mode is "madvise" (the
// default of many distributions), a 100 MB buffer is otherwise 25,600 page faults when first
// touched and as many TLB entries for every pass over it; advised, it is 50 of each. Measured
// effect and command: docs/benchmarks.md, "Huge pages".
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace exdyna::core {

// Buffers below this size are left to the allocator as they are.
inline constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;

// False when the environment has EXDYNA_HUGE_PAGES=0 (read once): no advice is given, for a
// machine where huge pages cost more memory than they save time, and to measure the difference.
bool huge_pages_enabled();

// Advises the kernel to back the whole 2 MiB pages inside [p, p + bytes) with huge pages
// (madvise MADV_HUGEPAGE). Only pages not touched yet are affected at once; a no-op where THP
// is unavailable or bytes < kHugePageMinBytes. Never fails: the advice is an optimisation.
void advise_huge_pages(void* p, std::size_t bytes);

// Capacity for n elements; when that needs a new allocation of at least kHugePageMinBytes, the
// allocation is advised before anything touches it (std::vector's own growth would touch it
// first: its pages would be small). Contents and size are kept. A buffer that grows gets half
// again its old capacity at least, as std::vector's own growth would: lists that grow by a few
// percent per step (hard threshold's, while the residual fills) otherwise took a new allocation,
// a copy and fresh pages every step (4 ranks, 25.6M, d = 0.01: 190 ms of CPU in such a step
// against 125).
template <typename T>
void reserve_huge(std::vector<T>& v, std::size_t n) {
  if (n <= v.capacity() || n * sizeof(T) < kHugePageMinBytes) return;
  const std::size_t cap = v.capacity() == 0 ? n : std::max(n, v.capacity() + v.capacity() / 2);
  std::vector<T> fresh;
  fresh.reserve(cap);  // allocates without touching
  advise_huge_pages(fresh.data(), cap * sizeof(T));
  fresh.assign(v.begin(), v.end());
  v.swap(fresh);
}

// v.resize(n) into storage from reserve_huge.
template <typename T>
void resize_huge(std::vector<T>& v, std::size_t n) {
  reserve_huge(v, n);
  v.resize(n);
}

// v.assign(n, value) into storage from reserve_huge (the old contents are not copied).
template <typename T>
void assign_huge(std::vector<T>& v, std::size_t n, const T& value) {
  v.clear();
  reserve_huge(v, n);
  v.assign(n, value);
}

}  // namespace exdyna::core
