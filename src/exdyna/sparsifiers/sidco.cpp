#include "exdyna/sparsifiers/sidco.hpp"

#include <cmath>

#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

SidcoEstimate sidco_select(std::span<const float> acc, double density, int stages,
                           std::vector<Index>& indices) {
  check_density("sidco", density);
  EXDYNA_CHECK_ARG(stages >= 1, "sidco: stages ", stages, " is not valid; expected >= 1");
  SidcoEstimate est;
  if (const auto count = select_without_estimate(acc, density, indices)) {
    est.count = *count;
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
  est.count = select_at_estimate(acc, eta, indices);
  return est;
}

ThresholdSelection Sidco::select(std::span<const float> acc, std::vector<Index>& indices) {
  const auto est = sidco_select(acc, cfg().density, cfg().sidco.stages, indices);
  return {est.threshold, est.count};
}

}  // namespace exdyna::sparsifiers
