// SIDCo, statistical threshold estimation with a multi-stage fit (Abdelmoniem, Elzanaty, Alouini
// and Canini, "An Efficient Statistical-based Gradient Compression Technique for Distributed
// Training Systems", MLSys 2021), with the exponential model (SIDCo-E): the magnitudes |acc| are
// modelled as exponential, whose maximum-likelihood scale is their mean, and the threshold that
// leaves a fraction delta above it is scale * ln(1 / delta).
//
// One stage rarely fits the far tail well, so the estimate is refined in M = cfg.sidco.stages
// stages with ratios delta_1 ... delta_M whose product is the target density d (here all equal,
// d^(1/M)):
//   stage 1:  eta_1 = mean(|acc|) * ln(1 / delta_1)
//   stage m:  the exceedances |acc_i| - eta_{m-1} over the elements with |acc_i| >= eta_{m-1} are
//             fitted again (the exponential is memoryless, so they are exponential too):
//             eta_m = eta_{m-1} + mean(exceedances) * ln(1 / delta_m)
// and the worker selects every |acc| >= eta_M. Each worker estimates its own threshold over its
// whole vector; then the union step of threshold_union.hpp.
//
// Cost: M + 1 branch-free read passes over acc: the mean, one exceedance pass per later stage,
// and the selection at eta_M (sparsifiers::select_threshold).
// Invariants: the selected set is {i : |acc_i| >= (float)eta_M}; if acc is all zero nothing is
// selected (count 0), never the whole vector. d = 1 selects everything.
// Statistics: threshold is the mean over workers of their eta_M, all-gathered with the counts.
#pragma once

#include "exdyna/core/reductions.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/threshold_union.hpp"

namespace exdyna::sparsifiers {

struct SidcoEstimate {
  double threshold = 0;   // eta of the last stage run
  std::size_t count = 0;  // selected elements: indices[0 .. count)
  int stages_run = 0;     // fewer than asked when a stage left no exceedances
};

// The estimate and the selection of one worker: writes the selected indices, ascending, into
// indices[0 .. count) (resized to room for acc.size(); its capacity is reused).
SidcoEstimate sidco_select(std::span<const float> acc, double density, int stages,
                           std::vector<Index>& indices);

// SIDCo's two passes over acc (core/reductions.hpp).
using core::Exceedance;
using core::exceedances;
using core::sum_abs;

class Sidco final : public ThresholdUnion {
 public:
  explicit Sidco(const SparsifierConfig& cfg) : ThresholdUnion(cfg, ThresholdSource::kPerWorker) {}
  std::string_view name() const override { return "sidco"; }
  std::string fingerprint() const override {
    return "sidco;model=exponential;" + cfg().fingerprint();
  }

 private:
  ThresholdSelection select(std::span<const float> acc, std::vector<Index>& indices) override;
};

}  // namespace exdyna::sparsifiers
