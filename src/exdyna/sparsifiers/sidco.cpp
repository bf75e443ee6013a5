#include "exdyna/sparsifiers/sidco.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/selection.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

double sum_abs(std::span<const float> x) {
  // Float lanes within a chunk, chunk sums in double so the total stays accurate for tens of
  // millions of elements. SSE2 (baseline x86-64): compilers vectorise the plain loop poorly.
  constexpr std::size_t kChunk = 4096;
  const float* p = x.data();
  const std::size_t n = x.size();
  double total = 0;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float s = 0;
#if defined(__SSE2__)
    const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (; i + 16 <= end; i += 16) {
      s0 = _mm_add_ps(s0, _mm_and_ps(_mm_loadu_ps(p + i), abs_mask));
      s1 = _mm_add_ps(s1, _mm_and_ps(_mm_loadu_ps(p + i + 4), abs_mask));
      s2 = _mm_add_ps(s2, _mm_and_ps(_mm_loadu_ps(p + i + 8), abs_mask));
      s3 = _mm_add_ps(s3, _mm_and_ps(_mm_loadu_ps(p + i + 12), abs_mask));
    }
    alignas(16) float l[4];
    _mm_store_ps(l, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
    s = (l[0] + l[1]) + (l[2] + l[3]);
#endif
    for (; i < end; ++i) s += std::fabs(p[i]);
    total += s;
  }
  return total;
}

namespace {

// Thresholds are kept in double and compared in float. A threshold of 0 would select exact
// zeros; the smallest positive float keeps them out.
float as_compare_threshold(double eta) {
  const float f = static_cast<float>(eta);
  return f > 0 ? f : std::numeric_limits<float>::denorm_min();
}

}  // namespace

Exceedance exceedances(std::span<const float> x, float thr) {
  // Float lanes per chunk (exact for the counts: a lane sees at most kChunk / 4 elements), chunk
  // sums in double. SSE2 compare-and-mask keeps the pass branch-free.
  constexpr std::size_t kChunk = 4096;
  const float* p = x.data();
  const std::size_t n = x.size();
  Exceedance out;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float sum = 0, cnt = 0;
#if defined(__SSE2__)
    const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
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
    alignas(16) float l[4];
    _mm_store_ps(l, _mm_add_ps(s0, s1));
    sum = (l[0] + l[1]) + (l[2] + l[3]);
    _mm_store_ps(l, _mm_add_ps(c0, c1));
    cnt = (l[0] + l[1]) + (l[2] + l[3]);
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

SidcoEstimate sidco_select(std::span<const float> acc, double density, int stages,
                           std::vector<Index>& indices) {
  EXDYNA_CHECK_ARG(std::isfinite(density) && density > 0 && density <= 1, "sidco: density ",
                   density, " is not valid; expected a value in (0, 1]");
  EXDYNA_CHECK_ARG(stages >= 1, "sidco: stages ", stages, " is not valid; expected >= 1");
  SidcoEstimate est;
  indices.resize(acc.size());
  if (acc.empty()) return est;
  if (density >= 1) {  // every element, zeros included
    est.count = core::select_threshold(acc, 0.0f, 0, indices.data());
    return est;
  }
  // ln(1 / delta_m) with delta_m = d^(1/M), the same for every stage.
  const double log_inv_delta = -std::log(density) / stages;

  // Every stage is one branch-free read pass over acc; at ratios like 0.2 a compacted candidate
  // list would cost more (mispredicted branches, scattered reads) than re-reading the vector.
  double eta = sum_abs(acc) / static_cast<double>(acc.size()) * log_inv_delta;
  est.stages_run = 1;
  for (int m = 2; m <= stages; ++m) {
    const float thr_prev = as_compare_threshold(eta);
    const auto ex = exceedances(acc, thr_prev);
    if (ex.count == 0) break;  // nothing left to fit: keep the last threshold
    eta = static_cast<double>(thr_prev) + ex.sum / static_cast<double>(ex.count) * log_inv_delta;
    est.stages_run = m;
  }
  est.threshold = eta;
  est.count = core::select_threshold(acc, as_compare_threshold(eta), 0, indices.data());
  return est;
}

Sidco::Sidco(const SparsifierConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
}

void Sidco::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                 core::StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "sidco: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::Stopwatch sw;
  const auto est = sidco_select(acc, cfg_.density, cfg_.sidco.stages, mine_);
  stats.times.select += sw.lap();
  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  // Each worker's threshold rides along with its count, so every rank reports the same mean.
  const std::int64_t rider = std::bit_cast<std::int64_t>(est.threshold);
  exchange_union(acc, std::span<const Index>(mine_.data(), est.count),
                 std::span<const std::int64_t>(&rider, 1), comm, cfg_.gather_mode, out, stats,
                 bufs_);
  double sum = 0;
  for (int r = 0; r < comm.size(); ++r) sum += std::bit_cast<double>(riders_of(bufs_, r)[0]);
  stats.threshold = sum / comm.size();
}

void Sidco::load_state(std::span<const std::byte> state) {
  core::ByteReader(state, "sidco state").expect_end();
}

}  // namespace exdyna::sparsifiers
