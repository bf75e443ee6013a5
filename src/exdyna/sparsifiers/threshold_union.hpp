// The step shared by the sparsifiers whose workers each select every |acc| >= a threshold (hard
// threshold, SIDCo, Gaussian-k, DGC). Only the threshold is their own; the rest is one step:
//   select:   this worker's indices, ascending, from its own threshold (timed as the select phase)
//   exchange: the lists all-gathered (padded or exact), united, and acc all-reduced at the union
//             (sparse_exchange.hpp), like Top-k
// Workers' sets overlap (build-up) and their counts differ, as the paper says of threshold
// sparsifiers. Where the threshold comes from decides what the step reports as stats.threshold:
//   kPerWorker: each worker estimates its own (SIDCo, Gaussian-k, DGC); it rides with the count
//               in the all-gather, and every rank reports the same mean over the workers.
//   kShared:    the same on every worker (hard threshold); nothing rides, so the headers stay
//               one count wide, and it is reported as it is.
// Statistics: k_target = floor(target_density() n_g), target_density() (the configured density
// unless a subclass changes it between steps).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparse_exchange.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

// One worker's selection: indices[0 .. count), at the threshold it used.
struct ThresholdSelection {
  double threshold = 0;
  std::size_t count = 0;
};

class ThresholdUnion : public Sparsifier {
 public:
  enum class ThresholdSource { kPerWorker, kShared };

  // Refuses an acc of other than n_g elements, naming the sparsifier.
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  // No state unless a subclass keeps one: a threshold that is estimated afresh from every step's
  // acc, or fixed by the configuration, needs nothing saved.
  std::vector<std::byte> save_state() const override { return {}; }
  void load_state(std::span<const std::byte> state) override;

 protected:
  // Validates cfg (the one check of the options, sparsifier.hpp).
  ThresholdUnion(const SparsifierConfig& cfg, ThresholdSource source);

  // This worker's selection from acc, written into indices (which it may resize; its capacity
  // is kept from step to step).
  virtual ThresholdSelection select(std::span<const float> acc, std::vector<Index>& indices) = 0;
  virtual double target_density() const { return cfg_.density; }
  const SparsifierConfig& cfg() const { return cfg_; }

 private:
  SparsifierConfig cfg_;
  ThresholdSource source_;
  std::vector<Index> mine_;
  ExchangeBuffers bufs_;
};

// The parts of a threshold estimator's selection that do not depend on the estimate.

// Refuses a density outside (0, 1], naming `who`.
void check_density(std::string_view who, double density);

// Makes room in indices for every element of acc (select_threshold writes up to that many) and
// answers the selections that need no estimate: nothing from an empty acc, and at d = 1 every
// element, zeros included. nullopt when the estimator must run.
std::optional<std::size_t> select_without_estimate(std::span<const float> acc, double density,
                                                   std::vector<Index>& indices);

// Every |acc| >= threshold, compared as an estimate is (as_compare_threshold: in float, and never
// 0, so that exact zeros are not selected), into indices[0 .. count), which has room for acc.
std::size_t select_at_estimate(std::span<const float> acc, double threshold,
                               std::vector<Index>& indices);

}  // namespace exdyna::sparsifiers
