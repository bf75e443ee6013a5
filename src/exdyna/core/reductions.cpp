#include "exdyna/core/reductions.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exdyna/core/error.hpp"

namespace exdyna::core {

namespace {

// Elements per chunk: summed in float lanes (exact for counts, a lane sees at most kChunk / 4
// elements; accurate enough for sums), each chunk's total then added in double.
constexpr std::size_t kChunk = 4096;

#if defined(__SSE2__)
// The lanes of v added as (l0 + l1) + (l2 + l3): every reduction here rounds the same way.
inline float hsum(__m128 v) {
  alignas(16) float l[4];
  _mm_store_ps(l, v);
  return (l[0] + l[1]) + (l[2] + l[3]);
}
inline __m128 abs_mask_ps() {
  return _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
}
#endif

}  // namespace

AccumulateResult accumulate(std::span<float> residual, std::span<const float> grad) {
  EXDYNA_CHECK_EQ(residual.size(), grad.size(), "accumulate: size mismatch");
  AccumulateResult res;
  float* __restrict r = residual.data();
  const float* __restrict g = grad.data();
  const std::size_t n = residual.size();
  // One pass, meant to run at memory speed. Squares are summed in float lanes within a chunk and
  // each chunk's sum goes to double. x * 0 is NaN exactly when x is NaN or Inf, so `poison` flags
  // both without a branch. The loop is written with SSE2 (baseline x86-64) because compilers
  // turn the plain loop into shuffle-heavy code that ran at a fraction of the bandwidth.
  double sq = 0;
  float poison = 0;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float chunk_sq = 0;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    __m128 s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    __m128 p0 = zero;
    for (; i + 16 <= end; i += 16) {
      const __m128 e0 = _mm_loadu_ps(r + i), e1 = _mm_loadu_ps(r + i + 4);
      const __m128 e2 = _mm_loadu_ps(r + i + 8), e3 = _mm_loadu_ps(r + i + 12);
      const __m128 a0 = _mm_add_ps(e0, _mm_loadu_ps(g + i));
      const __m128 a1 = _mm_add_ps(e1, _mm_loadu_ps(g + i + 4));
      const __m128 a2 = _mm_add_ps(e2, _mm_loadu_ps(g + i + 8));
      const __m128 a3 = _mm_add_ps(e3, _mm_loadu_ps(g + i + 12));
      // Not (a0 + a1) * 0: two large finite values could overflow to Inf and flag wrongly.
      const __m128 z = _mm_add_ps(_mm_add_ps(_mm_mul_ps(a0, zero), _mm_mul_ps(a1, zero)),
                                  _mm_add_ps(_mm_mul_ps(a2, zero), _mm_mul_ps(a3, zero)));
      if (_mm_movemask_ps(_mm_cmpunord_ps(z, z)) == 0) [[likely]] {
        _mm_storeu_ps(r + i, a0);
        _mm_storeu_ps(r + i + 4, a1);
        _mm_storeu_ps(r + i + 8, a2);
        _mm_storeu_ps(r + i + 12, a3);
      } else {  // a non-finite sum leaves the residual as it was (non_finite = skip undoes it)
        for (std::size_t j = i; j < i + 16; ++j)
          if (std::isfinite(r[j] + g[j])) r[j] += g[j];
      }
      s0 = _mm_add_ps(s0, _mm_mul_ps(e0, e0));
      s1 = _mm_add_ps(s1, _mm_mul_ps(e1, e1));
      s2 = _mm_add_ps(s2, _mm_mul_ps(e2, e2));
      s3 = _mm_add_ps(s3, _mm_mul_ps(e3, e3));
      p0 = _mm_add_ps(p0, z);
    }
    chunk_sq = hsum(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
    poison += hsum(p0);
#endif
    for (; i < end; ++i) {
      const float e = r[i];
      const float a = e + g[i];
      chunk_sq += e * e;
      poison += a * 0.0f;
      r[i] = std::isfinite(a) ? a : e;
    }
    sq += chunk_sq;
  }
  res.residual_sq = sq;
  res.finite = !std::isnan(poison);
  return res;
}

float max_abs(std::span<const float> x) {
  // On the sign-cleared bit patterns: for finite and infinite floats their order is the order of
  // the values, and an integer max vectorises where a float max (NaN rules) does not.
  std::uint32_t m = 0;
  for (const float v : x) m = std::max(m, std::bit_cast<std::uint32_t>(v) & 0x7fffffffu);
  return std::bit_cast<float>(m);
}

double sum_abs(std::span<const float> x) {
  // Float lanes within a chunk, chunk sums in double so the total stays accurate for tens of
  // millions of elements. SSE2 (baseline x86-64): compilers vectorise the plain loop poorly.
  const float* p = x.data();
  const std::size_t n = x.size();
  double total = 0;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float s = 0;
#if defined(__SSE2__)
    const __m128 abs_mask = abs_mask_ps();
    __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (; i + 16 <= end; i += 16) {
      s0 = _mm_add_ps(s0, _mm_and_ps(_mm_loadu_ps(p + i), abs_mask));
      s1 = _mm_add_ps(s1, _mm_and_ps(_mm_loadu_ps(p + i + 4), abs_mask));
      s2 = _mm_add_ps(s2, _mm_and_ps(_mm_loadu_ps(p + i + 8), abs_mask));
      s3 = _mm_add_ps(s3, _mm_and_ps(_mm_loadu_ps(p + i + 12), abs_mask));
    }
    s = hsum(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
#endif
    for (; i < end; ++i) s += std::fabs(p[i]);
    total += s;
  }
  return total;
}

Moments moments(std::span<const float> x) {
  // The same chunking as sum_abs: float lanes within a chunk, chunk sums in double.
  const float* p = x.data();
  const std::size_t n = x.size();
  Moments m;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float s = 0, q = 0;
#if defined(__SSE2__)
    __m128 s0 = _mm_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
    for (; i + 8 <= end; i += 8) {
      const __m128 a = _mm_loadu_ps(p + i), b = _mm_loadu_ps(p + i + 4);
      s0 = _mm_add_ps(s0, a);
      s1 = _mm_add_ps(s1, b);
      q0 = _mm_add_ps(q0, _mm_mul_ps(a, a));
      q1 = _mm_add_ps(q1, _mm_mul_ps(b, b));
    }
    s = hsum(_mm_add_ps(s0, s1));
    q = hsum(_mm_add_ps(q0, q1));
#endif
    for (; i < end; ++i) s += p[i], q += p[i] * p[i];
    m.sum += s;
    m.sum_sq += q;
  }
  return m;
}

Exceedance exceedances(std::span<const float> x, float thr) {
  // Float lanes per chunk (exact for the counts: a lane sees at most kChunk / 4 elements), chunk
  // sums in double. SSE2 compare-and-mask keeps the pass branch-free.
  const float* p = x.data();
  const std::size_t n = x.size();
  Exceedance out;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float sum = 0, cnt = 0;
#if defined(__SSE2__)
    const __m128 abs_mask = abs_mask_ps();
    const __m128 t = _mm_set1_ps(thr), one = _mm_set1_ps(1.0f);
    __m128 s0 = _mm_setzero_ps(), s1 = s0, c0 = s0, c1 = s0;
    for (; i + 8 <= end; i += 8) {
      const __m128 a0 = _mm_and_ps(_mm_loadu_ps(p + i), abs_mask);
      const __m128 a1 = _mm_and_ps(_mm_loadu_ps(p + i + 4), abs_mask);
      const __m128 m0 = _mm_cmpge_ps(a0, t), m1 = _mm_cmpge_ps(a1, t);
      s0 = _mm_add_ps(s0, _mm_and_ps(m0, _mm_sub_ps(a0, t)));
      s1 = _mm_add_ps(s1, _mm_and_ps(m1, _mm_sub_ps(a1, t)));
      c0 = _mm_add_ps(c0, _mm_and_ps(m0, one));
      c1 = _mm_add_ps(c1, _mm_and_ps(m1, one));
    }
    sum = hsum(_mm_add_ps(s0, s1));
    cnt = hsum(_mm_add_ps(c0, c1));
#endif
    for (; i < end; ++i) {
      const float a = std::fabs(p[i]);
      if (a >= thr) {
        sum += a - thr;
        cnt += 1.0f;
      }
    }
    out.sum += sum;
    out.count += static_cast<std::size_t>(cnt);
  }
  return out;
}

}  // namespace exdyna::core
