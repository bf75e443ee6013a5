#include "exdyna/core/threshold.hpp"

#include <algorithm>
#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::core {

double initial_threshold(std::int64_t k) {
  EXDYNA_CHECK_ARG(k >= 1, "k ", k, " is not valid for the first threshold; expected k >= 1");
  return 1.0 / (2.0 * std::sqrt(static_cast<double>(k)));
}

double paper_scale_factor(std::int64_t k, std::int64_t k_actual, double beta, double gamma) {
  EXDYNA_CHECK_ARG(k >= 1, "k ", k, " is not valid for threshold scaling; expected k >= 1");
  const double exam = static_cast<double>(k_actual) / static_cast<double>(k);
  if (exam > beta) return 1.0 + gamma;
  if (exam > 1.0 / beta) return 1.0 + 0.25 * gamma;
  return 1.0 - gamma;
}

HistogramController::HistogramController(int rungs, double span) : rungs_(rungs) {
  EXDYNA_CHECK_ARG(rungs >= 3 && rungs <= 257, "ladder rungs ", rungs,
                   " is not valid; expected 3..257");
  EXDYNA_CHECK_ARG(std::isfinite(span) && span > 1, "ladder span ", span,
                   " is not valid; expected > 1");
  const double per_octave = (rungs - 1) / (2.0 * std::log2(span));
  mant_bits_ = std::clamp(static_cast<int>(std::lround(std::log2(per_octave))), 0, 10);
  // One rung below (at 4 per octave: 0.71..0.84 of the threshold) covers the drift between
  // iterations (a few percent) while adding only the values in that band to the binning work
  // (about 1.7 k more values for a Laplace tail at d = 0.01; two rungs doubled it).
  steady_down_ = std::min(1, (rungs_ - 1) / 2);
  down_ = steady_down_;
}

void HistogramController::set_down(int d) {
  EXDYNA_CHECK_ARG(d >= 0 && d < rungs_, "ladder reach ", d, " is not valid; expected 0..",
                   rungs_ - 1);
  down_ = d;
}

LadderGrid HistogramController::grid(double threshold) const {
  LadderGrid g;
  g.mant_bits = mant_bits_;
  g.rungs = rungs_;
  const std::uint32_t c = ladder_key(static_cast<float>(threshold), mant_bits_);
  g.lo_key = c > static_cast<std::uint32_t>(down_) ? c - static_cast<std::uint32_t>(down_) : 0;
  return g;
}

void HistogramController::set_trend(double last_exact, double log_trend) {
  EXDYNA_CHECK_ARG(std::isfinite(last_exact) && std::isfinite(log_trend), "histogram trend (",
                   last_exact, ", ", log_trend, ") is not valid; expected finite values");
  last_exact_ = last_exact;
  log_trend_ = log_trend;
}

double HistogramController::next_threshold(double threshold, std::int64_t k,
                                           std::span<const std::int64_t> bins) {
  EXDYNA_CHECK_ARG(static_cast<int>(bins.size()) == rungs_, "histogram controller got ",
                   bins.size(), " bins; expected ", rungs_);
  const LadderGrid g = grid(threshold);
  // Count at or above rung j, from the top down; find the highest rung still reaching k.
  std::int64_t above = 0;  // count at rung j + 1
  for (int j = rungs_ - 1; j >= 0; --j) {
    const std::int64_t at = above + bins[j];
    if (at < k) {
      above = at;
      continue;
    }
    down_ = steady_down_;
    if (j == rungs_ - 1 || !(g.value(j) > 0)) {
      // k lies above the ladder (or rung 0 sits at zero): the ladder's end, no trend.
      last_exact_ = -1;
      log_trend_ = 0;
      return g.value(j == rungs_ - 1 ? j : j + 1);
    }
    // Interpolate between rung j (count `at` >= k) and rung j + 1 (count `above` < k).
    const double lv0 = std::log(static_cast<double>(g.value(j)));
    const double lv1 = std::log(static_cast<double>(g.value(j + 1)));
    const double t =
        above > 0 ? (std::log(static_cast<double>(at)) - std::log(static_cast<double>(k))) /
                        (std::log(static_cast<double>(at)) - std::log(static_cast<double>(above)))
                  : static_cast<double>(at - k) / static_cast<double>(at - above);
    const double exact = std::exp(lv0 + t * (lv1 - lv0));
    if (last_exact_ > 0) {
      const double r = std::log(exact / last_exact_);
      // A drift is predicted at 0.7 of its smoothed rate: extrapolating the full last ratio
      // overshoots when the drift decelerates (the residual filling up after a cold start,
      // draining after a scale step) and alternates around the target; no trend leaves the
      // density 2-4% high for tens of iterations; an alpha-beta filter on log threshold (0.5/0.1,
      // 0.7/0.2) lagged: 5% low at d = 0.01. Measured in docs/exdyna-controller.md.
      log_trend_ = std::fabs(r) < std::log(1.25) ? 0.5 * log_trend_ + 0.5 * 0.7 * r : 0.0;
    }
    last_exact_ = exact;
    return exact * std::exp(log_trend_);
  }
  // k lies below the ladder: its lowest rung, and reach further down next time.
  down_ = wide_down();
  last_exact_ = -1;
  log_trend_ = 0;
  return g.value(0);
}

}  // namespace exdyna::core
