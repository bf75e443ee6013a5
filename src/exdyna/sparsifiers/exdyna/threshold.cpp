#include "exdyna/sparsifiers/exdyna/threshold.hpp"

#include <algorithm>
#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

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
  // A quarter octave below (0.71..0.84 of the threshold at 4 rungs per octave, 0.84..0.88 at
  // 16) covers the drift between iterations (a few percent) while adding only the values in
  // that band to the binning work (about 1.7 k more values for a Laplace tail at d = 0.01).
  // At finer grids the same reach in octaves: a quarter octave (1 rung at m = 2, 4 at m = 4).
  steady_down_ = std::min(std::max(1, (1 << mant_bits_) / 4), (rungs_ - 1) / 2);
  down_ = steady_down_;
  min_down_ = steady_down_;
}

int HistogramController::movement_down() const {
  const double octaves = 2.0 * std::max(0.0, vol_ - std::log(1.05)) / std::log(2.0);
  const double extra = std::ceil(octaves * static_cast<double>(1 << mant_bits_));
  return static_cast<int>(std::min<double>(steady_down_ + extra, wide_down()));
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

void HistogramController::set_trend(double last_exact, double log_trend, double vol) {
  EXDYNA_CHECK_ARG(
      std::isfinite(last_exact) && std::isfinite(log_trend) && std::isfinite(vol) && vol >= 0,
      "histogram trend (", last_exact, ", ", log_trend, ", ", vol,
      ") is not valid; expected finite values and a movement >= 0");
  last_exact_ = last_exact;
  log_trend_ = log_trend;
  vol_ = vol;
}

void HistogramController::cap_pressure(bool binds, bool short_of_k) {
  if (short_of_k)
    min_down_ = std::min(wide_down(), 2 * std::max(std::max(down_, min_down_), 1));
  else if (binds)
    min_down_ = std::max(min_down_, std::min(wide_down(), 2 * steady_down_));
  else
    min_down_ = std::max(steady_down_, min_down_ / 2);
}

void HistogramController::cap_spread(int spread) {
  const int floor = std::min(wide_down(), 2 * steady_down_);
  const int target = std::clamp(std::max(spread, 0) + 2 * steady_down_, floor, wide_down());
  min_down_ = target >= min_down_ ? target : std::max(target, (min_down_ + target) / 2);
}

void HistogramController::set_min_down(int d) {
  EXDYNA_CHECK_ARG(d >= steady_down_ && d <= wide_down(), "ladder minimum reach ", d,
                   " is not valid; expected ", steady_down_, "..", wide_down());
  min_down_ = d;
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
      down_ = std::max(down_, min_down_);
      return g.value(j == rungs_ - 1 ? j : j + 1);
    }
    // Interpolate between rung j (count `at` >= k) and rung j + 1 (count `above` < k).
    const double lv0 = std::log(static_cast<double>(g.value(j)));
    const double lv1 = std::log(static_cast<double>(g.value(j + 1)));
    const double t =
        above > 0 ? (std::log(static_cast<double>(at)) - std::log(static_cast<double>(k))) /
                        (std::log(static_cast<double>(at)) - std::log(static_cast<double>(above)))
                  : static_cast<double>(at - k) / static_cast<double>(at - above);
    double lx = lv0 + t * (lv1 - lv0);
    const std::int64_t above2 = j + 2 < rungs_ ? above - bins[j + 1] : 0;  // count at rung j + 2
    if (above > 0 && above2 > 0 && g.value(j + 2) > 0) {
      // A third rung above: quadratic in log-log. The tail's log count is concave in log x
      // (Laplace-like: its slope steepens outwards), so the chord between two rungs lies below
      // it and the linear estimate sits low, by up to alpha h^2 / 8 in log count (alpha the local
      // slope, h the rung spacing): 3-4% too dense at d = 0.001, where alpha is large.
      const double x0 = lv0, x1 = lv1, x2 = std::log(static_cast<double>(g.value(j + 2)));
      const double y0 = std::log(static_cast<double>(at)),
                   y1 = std::log(static_cast<double>(above)),
                   y2 = std::log(static_cast<double>(above2)),
                   yk = std::log(static_cast<double>(k));
      const auto q = [&](double x) {
        return y0 * (x - x1) * (x - x2) / ((x0 - x1) * (x0 - x2)) +
               y1 * (x - x0) * (x - x2) / ((x1 - x0) * (x1 - x2)) +
               y2 * (x - x0) * (x - x1) / ((x2 - x0) * (x2 - x1));
      };
      // Bisection on [x0, x1], where q(x0) = y0 >= yk > y1 = q(x1); keep the linear estimate
      // if q is not monotone there (noise at small counts).
      double a = x0, b = x1;
      bool monotone = true;
      for (int it = 0; it < 8; ++it) {
        const double xm = x0 + (x1 - x0) * (it + 1) / 9.0;
        if (q(xm) > q(x0 + (x1 - x0) * it / 9.0)) monotone = false;
      }
      if (monotone) {
        for (int it = 0; it < 60; ++it) {
          const double m = 0.5 * (a + b);
          (q(m) >= yk ? a : b) = m;
        }
        lx = 0.5 * (a + b);
      }
    }
    const double exact = std::exp(lx);
    if (last_exact_ > 0) {
      const double r = std::log(exact / last_exact_);
      // A drift is predicted at 0.7 of its smoothed rate: extrapolating the full last ratio
      // overshoots when the drift decelerates (the residual filling up after a cold start,
      // draining after a scale step) and alternates around the target; no trend leaves the
      // density 2-4% high for tens of iterations; an alpha-beta filter on log threshold (0.5/0.1,
      // 0.7/0.2) lagged: 5% low at d = 0.01. Smoothing 0.75 instead of 0.5 halves the noise the
      // trend feeds back at d = 0.001 (k' noise ~3%). Measured in docs/controller.md.
      log_trend_ = std::fabs(r) < std::log(1.25) ? 0.75 * log_trend_ + 0.25 * 0.7 * r : 0.0;
      // Real gradients move in bursts (one large-loss batch, a few fast iterations early in
      // training): the next exact threshold may lie as far below as this one moved, and a ladder
      // reaching only a quarter octave below misses k (the density fell to 0.49-0.64 d in the
      // iteration after a spike on the CNN traces; docs/controller.md). So the reach
      // below follows the recent movement: a peak-hold of |r| that decays by 0.7 per iteration,
      // and twice its part above 5% in octaves is added to the steady reach. The synthetic
      // source moves by less than 5% per iteration once settled, so its cost is unchanged.
      vol_ = std::max(std::fabs(r), 0.7 * vol_);
      down_ = movement_down();
    }
    last_exact_ = exact;
    down_ = std::max(down_, min_down_);
    return exact * std::exp(log_trend_);
  }
  // k lies below the ladder: its lowest rung, and reach further down next time.
  down_ = wide_down();
  last_exact_ = -1;
  log_trend_ = 0;
  return g.value(0);
}

}  // namespace exdyna::sparsifiers
