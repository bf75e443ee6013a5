// Hard-threshold sparsification (Sahu et al., "Rethinking gradient sparsification as total error
// minimization", NeurIPS 2021; the paper's baseline [hardthreshold]): one threshold, fixed before
// training, over the whole accumulated gradient; each worker selects every |acc| >= threshold,
// the workers all-gather their lists (padded, as the paper, or exact), take the union and
// all-reduce acc at it.
//
// Threshold: cfg.hard_threshold, or 1 / (2 sqrt(k)) with k = floor(d n_g) when it is negative
// (the same value ExDyna starts from). Kept in double, compared in float: |acc| >= (float)thr.
// Invariants: the selection is a pure function of acc, so the counts follow the global error, not
// the density: k' can be far from k in either direction, workers pick overlapping indices (build-
// up), and a worker may select nothing (count 0, an empty list in the all-gather).
#pragma once

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparse_exchange.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class HardThreshold final : public Sparsifier {
 public:
  explicit HardThreshold(const SparsifierConfig& cfg);
  std::string_view name() const override { return "hard-threshold"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override;
  // No mutable state: the threshold is fixed by the configuration.
  std::vector<std::byte> save_state() const override { return {}; }
  void load_state(std::span<const std::byte> state) override;
  double threshold() const { return threshold_; }

 private:
  SparsifierConfig cfg_;
  double threshold_;
  std::vector<Index> mine_;  // room for n_g indices, allocated on the first step
  ExchangeBuffers bufs_;
};

}  // namespace exdyna::sparsifiers
