#include "exdyna/sparsifiers/sidco.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

SidcoEstimate sidco_select(std::span<const float> acc, double density, int stages,
                           std::vector<Index>& indices) {
  EXDYNA_CHECK_ARG(std::isfinite(density) && density > 0 && density <= 1, "sidco: density ",
                   density, " is not valid; expected a value in (0, 1]");
  EXDYNA_CHECK_ARG(stages >= 1, "sidco: stages ", stages, " is not valid; expected >= 1");
  SidcoEstimate est;
  core::resize_huge(indices, acc.size());
  if (acc.empty()) return est;
  if (density >= 1) {  // every element, zeros included
    est.count = sparsifiers::select_threshold(acc, 0.0f, 0, indices.data());
    return est;
  }
  // ln(1 / delta_m) with delta_m = d^(1/M), the same for every stage.
  const double log_inv_delta = -std::log(density) / stages;

  // Every stage is one branch-free read pass over acc; at ratios like 0.2 a compacted candidate
  // list would cost more (mispredicted branches, scattered reads) than re-reading the vector.
  double eta = sum_abs(acc) / static_cast<double>(acc.size()) * log_inv_delta;
  est.stages_run = 1;
  for (int m = 2; m <= stages; ++m) {
    const float thr_prev = sparsifiers::as_compare_threshold(eta);
    const auto ex = exceedances(acc, thr_prev);
    if (ex.count == 0) break;  // nothing left to fit: keep the last threshold
    eta = static_cast<double>(thr_prev) + ex.sum / static_cast<double>(ex.count) * log_inv_delta;
    est.stages_run = m;
  }
  est.threshold = eta;
  est.count =
      sparsifiers::select_threshold(acc, sparsifiers::as_compare_threshold(eta), 0, indices.data());
  return est;
}

Sidco::Sidco(const SparsifierConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
}

void Sidco::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                 StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "sidco: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  const auto est = sidco_select(acc, cfg_.density, cfg_.sidco.stages, mine_);
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  exchange_union_with_threshold(acc, std::span<const Index>(mine_.data(), est.count), est.threshold,
                                comm, cfg_.gather_mode, cfg_.values, out, stats, bufs_);
}

void Sidco::load_state(std::span<const std::byte> state) {
  core::ByteReader(state, "sidco state").expect_end();
}

}  // namespace exdyna::sparsifiers
