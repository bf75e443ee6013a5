// Gaussian-k (Shi, Chu, Cheung and See, "Understanding Top-k Sparsification in Distributed Deep
// Learning", 2019): each worker approximates its top-k by a threshold read off a Gaussian fitted
// to its accumulated gradient, then corrects the threshold a few times by counting, because real
// gradients are only bell-shaped, not Gaussian.
//
//   fit:      mu = mean(acc), sigma = std(acc) (one read pass, core::moments)
//   estimate: thr = |mu| + sigma * Phi^-1(1 - d / 2): for acc ~ N(0, sigma^2) a fraction d of
//             the elements has |acc| >= thr (both tails)
//   correct:  count c = #{|acc| >= thr}; while c is outside [2k/3, 4k/3] and fewer than 3
//             corrections ran: thr *= 0.5 when c is below (too few), 1.5 when above
// The paper states the fit and that the threshold is adjusted until the count is near k; the band
// [2k/3, 4k/3], the factors 0.5 and 1.5 and the limit of 3 corrections are our choice (the
// factors are asymmetric so that an overshoot followed by an undershoot does not return to the
// same threshold). With d = 1 every element is selected.
// Then the union step of threshold_union.hpp, with each worker's own threshold.
//
// Cost: 2 to 5 read passes over acc (the moments, then one selection per threshold tried).
// Statistics: threshold is the mean over workers of their final thresholds, all-gathered with the
// counts. No state: every step fits afresh.
#pragma once

#include <vector>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/threshold_union.hpp"

namespace exdyna::sparsifiers {

struct GaussianKEstimate {
  double threshold = 0;   // the threshold the selection used
  std::size_t count = 0;  // selected elements: indices[0 .. count)
  int corrections = 0;    // 0..3
};

// One worker's fit and selection for k = floor(density * acc.size()): writes the selected
// indices, ascending, into indices[0 .. count) (resized to room for acc.size()).
GaussianKEstimate gaussiank_select(std::span<const float> acc, double density,
                                   std::vector<Index>& indices);

class GaussianK final : public ThresholdUnion {
 public:
  explicit GaussianK(const SparsifierConfig& cfg)
      : ThresholdUnion(cfg, ThresholdSource::kPerWorker) {}
  std::string_view name() const override { return "gaussiank"; }
  std::string fingerprint() const override { return "gaussiank;" + cfg().fingerprint(); }

 private:
  ThresholdSelection select(std::span<const float> acc, std::vector<Index>& indices) override;
};

}  // namespace exdyna::sparsifiers
