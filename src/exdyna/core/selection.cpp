#include "exdyna/core/selection.hpp"

#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace exdyna::core {

std::size_t select_threshold_scalar(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < part.size(); ++i)
    if (std::fabs(part[i]) >= threshold) out[c++] = offset + static_cast<std::uint32_t>(i);
  return c;
}

std::size_t select_threshold(std::span<const float> part, float threshold, std::uint32_t offset,
                             std::uint32_t* out) {
  const float* p = part.data();
  const std::size_t n = part.size();
  std::size_t c = 0;
  std::size_t i = 0;
#if defined(__SSE2__)
  // |x| by clearing the sign bit; cmpge is false for NaN, like the scalar >=.
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 thr = _mm_set1_ps(threshold);
  for (; i + 16 <= n; i += 16) {
    const __m128 m0 = _mm_cmpge_ps(_mm_and_ps(_mm_loadu_ps(p + i), abs_mask), thr);
    const __m128 m1 = _mm_cmpge_ps(_mm_and_ps(_mm_loadu_ps(p + i + 4), abs_mask), thr);
    const __m128 m2 = _mm_cmpge_ps(_mm_and_ps(_mm_loadu_ps(p + i + 8), abs_mask), thr);
    const __m128 m3 = _mm_cmpge_ps(_mm_and_ps(_mm_loadu_ps(p + i + 12), abs_mask), thr);
    const __m128 any = _mm_or_ps(_mm_or_ps(m0, m1), _mm_or_ps(m2, m3));
    if (_mm_movemask_ps(any) == 0) continue;  // the common case at small density
    unsigned bits = static_cast<unsigned>(_mm_movemask_ps(m0)) |
                    static_cast<unsigned>(_mm_movemask_ps(m1)) << 4 |
                    static_cast<unsigned>(_mm_movemask_ps(m2)) << 8 |
                    static_cast<unsigned>(_mm_movemask_ps(m3)) << 12;
    const std::uint32_t base = offset + static_cast<std::uint32_t>(i);
    while (bits != 0) {
      out[c++] = base + static_cast<std::uint32_t>(__builtin_ctz(bits));
      bits &= bits - 1;
    }
  }
#endif
  for (; i < n; ++i)
    if (std::fabs(p[i]) >= threshold) out[c++] = offset + static_cast<std::uint32_t>(i);
  return c;
}

}  // namespace exdyna::core
