// DGC's selection (Lin, Han, Mao, Wang and Dally, "Deep Gradient Compression", ICLR 2018): each
// worker estimates its top-k threshold from a random sample of its accumulated gradient instead
// of sorting all of it, then refines hierarchically when the estimate lets far too many through.
//
//   sample:  s = min(n_g, max(ceil(r n_g), ceil(64 / d))) positions drawn uniformly with
//            replacement from a stream keyed by (rank, iteration); r = --dgc-sample (0.01)
//   estimate: thr = the ceil(d s)-th largest |acc| of the sample
//   select:  c = #{|acc| >= thr}; when c > 4k/3, the exact top-k of those c (the hierarchical
//            step: a top-k over c elements, not n_g)
// The paper samples "0.1 % to 1 %" and refines when "far more" pass than expected; the floor
// of 64 / d samples (so that at least 64 sampled values lie above the threshold: the count's
// relative standard deviation is about 1 / sqrt(d s) <= 1/8), the band 4k/3 and sampling with
// replacement are our choices. Fewer than k passing is accepted, as in the paper.
// Then the union step of threshold_union.hpp, with each worker's sampled threshold.
//
// DGC's other parts belong to the optimizer, not to the selection: momentum correction (the
// velocity, not the gradient, is accumulated), momentum factor masking and local gradient
// clipping are done by `exdyna train --sparsifier dgc` (train/dgc_momentum.hpp); `simulate`
// and the Python Sparsifier run the selection alone. The paper's density warm-up is driven by the
// trainer too (train/dgc_momentum.hpp: dgc_warmup_density), through set_density before each step.
//
// Statistics: threshold is the mean over workers of their sampled thresholds. State: the
// iteration counter (the sample stream), so a resumed run draws the samples it would have drawn.
#pragma once

#include <cstdint>
#include <vector>

#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/threshold_union.hpp"

namespace exdyna::sparsifiers {

// The sample size for n elements at density d and sample ratio r (see above).
std::size_t dgc_sample_size(std::size_t n, double density, double ratio);

struct DgcEstimate {
  double threshold = 0;    // the sampled threshold
  std::size_t passed = 0;  // #{|acc| >= threshold}
  std::size_t count = 0;   // selected: indices[0 .. count)
  bool refined = false;    // the hierarchical top-k ran (passed > 4k/3)
};

struct DgcScratch {
  std::vector<float> sample, values;
  std::vector<std::uint32_t> picked;
  core::TopkScratch topk;
};

// One worker's selection for k = floor(density * acc.size()) with the sample drawn from
// stream_key: writes the selected indices, ascending, into indices[0 .. count).
DgcEstimate dgc_select(std::span<const float> acc, double density, double ratio,
                       std::uint64_t stream_key, std::vector<Index>& indices, DgcScratch& scratch);

class Dgc final : public ThresholdUnion {
 public:
  explicit Dgc(const SparsifierConfig& cfg);
  std::string_view name() const override { return "dgc"; }
  // The union step, then the next iteration's sample stream.
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override { return "dgc;" + cfg().fingerprint(); }
  std::vector<std::byte> save_state() const override;
  void load_state(std::span<const std::byte> state) override;

  // The density of the following steps (the trainer's warm-up), in (0, 1] with
  // floor(density * n_g) >= 1. Not state: the trainer sets it before every step from the step
  // number, so a resumed run sets it again. The fingerprint keeps the configured (target) density.
  void set_density(double density);
  double density() const { return density_; }

 private:
  ThresholdSelection select(std::span<const float> acc, std::vector<Index>& indices) override;
  double target_density() const override { return density_; }

  double density_;  // the current density; the configured one unless set_density changed it
  std::int64_t iteration_ = 0;
  DgcScratch scratch_;
};

}  // namespace exdyna::sparsifiers
