#include "exdyna/core/huge_pages.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace exdyna::core {

bool huge_pages_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("EXDYNA_HUGE_PAGES");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < kHugePageMinBytes || !huge_pages_enabled()) return;
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  // The allocator's chunk need not start on a huge page: only the whole ones inside are advised.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace exdyna::core
