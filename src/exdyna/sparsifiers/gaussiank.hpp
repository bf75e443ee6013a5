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
// Then, like Top-k: the lists are all-gathered (padded or exact), united, and acc all-reduced at
// the union; workers' sets overlap (build-up) and their counts differ.
//
// Cost: 2 to 5 read passes over acc (the moments, then one selection per threshold tried).
// Statistics: threshold is the mean over workers of their final thresholds, all-gathered with the
// counts. No state: every step fits afresh.
#pragma once

#include <vector>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparse_exchange.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

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

class GaussianK final : public Sparsifier {
 public:
  explicit GaussianK(const SparsifierConfig& cfg);
  std::string_view name() const override { return "gaussiank"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override { return "gaussiank;" + cfg_.fingerprint(); }
  std::vector<std::byte> save_state() const override { return {}; }
  void load_state(std::span<const std::byte> state) override;

 private:
  SparsifierConfig cfg_;
  std::vector<Index> mine_;
  ExchangeBuffers bufs_;
};

}  // namespace exdyna::sparsifiers
