// Hard-threshold sparsification (Sahu et al., "Rethinking gradient sparsification as total error
// minimization", NeurIPS 2021; the paper's baseline [hardthreshold]): one threshold, fixed before
// training, over the whole accumulated gradient; each worker selects every |acc| >= threshold,
// then the union step of threshold_union.hpp (padded all-gather, as the paper, or exact).
//
// Threshold: cfg.hard_threshold, or 1 / (2 sqrt(k)) with k = floor(d n_g) when it is negative
// (the same value ExDyna starts from). Kept in double, compared in float: |acc| >= (float)thr.
// Invariants: the selection is a pure function of acc, so the counts follow the global error, not
// the density: k' can be far from k in either direction, workers pick overlapping indices (build-
// up), and a worker may select nothing (count 0, an empty list in the all-gather).
#pragma once

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/threshold_union.hpp"

namespace exdyna::sparsifiers {

class HardThreshold final : public ThresholdUnion {
 public:
  explicit HardThreshold(const SparsifierConfig& cfg);
  std::string_view name() const override { return "hard-threshold"; }
  std::string fingerprint() const override;
  double threshold() const { return threshold_; }

 private:
  ThresholdSelection select(std::span<const float> acc, std::vector<Index>& indices) override;

  double threshold_;
};

}  // namespace exdyna::sparsifiers
