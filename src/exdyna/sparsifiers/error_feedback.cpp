#include "exdyna/sparsifiers/error_feedback.hpp"

#include <algorithm>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

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
  constexpr std::size_t kChunk = 4096;
  double sq = 0;
  float poison = 0;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t end = std::min(n, base + kChunk);
    std::size_t i = base;
    float chunk_sq = 0;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    __m128 s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    __m128 p0 = zero, p1 = zero;
    for (; i + 16 <= end; i += 16) {
      const __m128 e0 = _mm_loadu_ps(r + i), e1 = _mm_loadu_ps(r + i + 4);
      const __m128 e2 = _mm_loadu_ps(r + i + 8), e3 = _mm_loadu_ps(r + i + 12);
      const __m128 a0 = _mm_add_ps(e0, _mm_loadu_ps(g + i));
      const __m128 a1 = _mm_add_ps(e1, _mm_loadu_ps(g + i + 4));
      const __m128 a2 = _mm_add_ps(e2, _mm_loadu_ps(g + i + 8));
      const __m128 a3 = _mm_add_ps(e3, _mm_loadu_ps(g + i + 12));
      _mm_storeu_ps(r + i, a0);
      _mm_storeu_ps(r + i + 4, a1);
      _mm_storeu_ps(r + i + 8, a2);
      _mm_storeu_ps(r + i + 12, a3);
      s0 = _mm_add_ps(s0, _mm_mul_ps(e0, e0));
      s1 = _mm_add_ps(s1, _mm_mul_ps(e1, e1));
      s2 = _mm_add_ps(s2, _mm_mul_ps(e2, e2));
      s3 = _mm_add_ps(s3, _mm_mul_ps(e3, e3));
      // Not (a0 + a1) * 0: two large finite values could overflow to Inf and flag wrongly.
      p0 = _mm_add_ps(p0, _mm_add_ps(_mm_mul_ps(a0, zero), _mm_mul_ps(a1, zero)));
      p1 = _mm_add_ps(p1, _mm_add_ps(_mm_mul_ps(a2, zero), _mm_mul_ps(a3, zero)));
    }
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
    chunk_sq = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    _mm_store_ps(lanes, _mm_add_ps(p0, p1));
    poison += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
    for (; i < end; ++i) {
      const float e = r[i];
      const float a = e + g[i];
      chunk_sq += e * e;
      poison += a * 0.0f;
      r[i] = a;
    }
    sq += chunk_sq;
  }
  res.residual_sq = sq;
  res.finite = !std::isnan(poison);
  return res;
}

ErrorFeedback::ErrorFeedback(std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g,
                             ErrorFeedbackOptions opt)
    : sparsifier_(std::move(sparsifier)),
      residual_(static_cast<std::size_t>(n_g), 0.0f),
      opt_(opt) {
  EXDYNA_CHECK_ARG(sparsifier_ != nullptr, "error feedback needs a sparsifier");
  EXDYNA_CHECK_ARG(n_g > 0, "n_g ", n_g, " is not valid; expected > 0");
}

core::StepStats ErrorFeedback::step(std::span<float> grad, comm::Communicator& comm) {
  EXDYNA_CHECK_ARG(grad.size() == residual_.size(), "gradient has ", grad.size(),
                   " elements, expected n_g = ", residual_.size());
  core::StepStats stats;
  stats.iteration = iteration_;
  stats.world_size = comm.size();
  stats.n_g = static_cast<std::int64_t>(residual_.size());

  core::Stopwatch sw;
  const auto acc = accumulate(residual_, grad);
  if (!acc.finite) {
    // Rare path: find the first offender so the message names it. The residual holds acc now,
    // so restore it (acc - grad is exact for finite values, and the step is refused anyway).
    for (std::size_t i = 0; i < grad.size(); ++i) {
      if (!std::isfinite(grad[i]) || !std::isfinite(residual_[i]))
        throw DataError(detail::concat("gradient element ", i, " of iteration ", iteration_,
                                       " on rank ", comm.rank(), " is ", grad[i], " (accumulated ",
                                       residual_[i], "); expected a finite value"));
    }
  }
  stats.times.accumulate = sw.lap();

  if (opt_.measure_global_error) {
    // Measurement traffic, outside the sparsifier's byte counts (taken around its step below).
    double e = std::sqrt(acc.residual_sq);
    comm.allreduce_sum(std::span<double>(&e, 1));
    stats.global_error = e / comm.size();
  }
  sw.lap();

  const auto bytes_before = comm.bytes();
  sparsifier_->step(residual_, comm, result_, stats);
  stats.bytes = comm.bytes() - bytes_before;
  sw.lap();

  // Scatter the mean update and zero the residual at the gathered indices.
  const float inv_n = 1.0f / static_cast<float>(comm.size());
  if (result_.dense) {
    EXDYNA_CHECK_EQ(result_.values.size(), grad.size(), "dense result size");
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = result_.values[i] * inv_n;
    std::fill(residual_.begin(), residual_.end(), 0.0f);
  } else {
    EXDYNA_CHECK_EQ(result_.values.size(), result_.indices.size(), "sparse result size");
    std::fill(grad.begin(), grad.end(), 0.0f);
    for (std::size_t j = 0; j < result_.indices.size(); ++j) {
      const Index i = result_.indices[j];
      grad[i] = result_.values[j] * inv_n;
      residual_[i] = 0.0f;
    }
  }
  stats.times.update = sw.lap();
  if (stats.k_per_worker.empty())
    stats.k_per_worker.assign(static_cast<std::size_t>(comm.size()), 0);
  ++iteration_;
  return stats;
}

}  // namespace exdyna::sparsifiers
