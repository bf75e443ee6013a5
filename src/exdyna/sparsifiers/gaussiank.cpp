#include "exdyna/sparsifiers/gaussiank.hpp"

#include <algorithm>
#include <cmath>

#include "exdyna/core/normal_quantile.hpp"
#include "exdyna/core/reductions.hpp"

namespace exdyna::sparsifiers {

namespace {

constexpr int kMaxCorrections = 3;

}  // namespace

GaussianKEstimate gaussiank_select(std::span<const float> acc, double density,
                                   std::vector<Index>& indices) {
  check_density("gaussiank", density);
  GaussianKEstimate est;
  if (const auto count = select_without_estimate(acc, density, indices)) {
    est.count = *count;
    return est;
  }
  const double n = static_cast<double>(acc.size());
  const auto m = core::moments(acc);
  const double mu = m.sum / n;
  const double sigma = std::sqrt(std::max(0.0, m.sum_sq / n - mu * mu));
  // Phi^-1(1 - d/2) as -Phi^-1(d/2): no rounding of 1 - d/2 for small d.
  est.threshold = std::fabs(mu) - sigma * core::normal_quantile(density / 2);
  const double k = std::floor(density * n);
  for (;;) {
    est.count = select_at_estimate(acc, est.threshold, indices);
    const double c = static_cast<double>(est.count);
    const bool few = c<2 * k / 3, many = c> 4 * k / 3;
    if ((!few && !many) || est.corrections == kMaxCorrections) break;
    est.threshold *= few ? 0.5 : 1.5;
    ++est.corrections;
  }
  return est;
}

ThresholdSelection GaussianK::select(std::span<const float> acc, std::vector<Index>& indices) {
  const auto est = gaussiank_select(acc, cfg().density, indices);
  return {est.threshold, est.count};
}

}  // namespace exdyna::sparsifiers
