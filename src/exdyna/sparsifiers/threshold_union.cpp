#include "exdyna/sparsifiers/threshold_union.hpp"

#include <cmath>
#include <string>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

ThresholdUnion::ThresholdUnion(const SparsifierConfig& cfg, ThresholdSource source)
    : cfg_(cfg), source_(source) {
  cfg_.validate();
}

void ThresholdUnion::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                          StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, name(), ": gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  const ThresholdSelection sel = select(acc, mine_);
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  const double density = target_density();
  stats.k_target = static_cast<std::int64_t>(std::floor(density * static_cast<double>(cfg_.n_g)));
  stats.target_density = density;
  const std::span<const Index> mine(mine_.data(), sel.count);
  if (source_ == ThresholdSource::kPerWorker) {
    exchange_union_with_threshold(acc, mine, sel.threshold, comm, cfg_.gather_mode, cfg_.values,
                                  out, stats, bufs_);
  } else {
    stats.threshold = sel.threshold;
    exchange_union(acc, mine, {}, comm, cfg_.gather_mode, cfg_.values, out, stats, bufs_);
  }
}

void ThresholdUnion::load_state(std::span<const std::byte> state) {
  core::ByteReader(state, std::string(name()) + " state").expect_end();
}

void check_density(std::string_view who, double density) {
  EXDYNA_CHECK_ARG(std::isfinite(density) && density > 0 && density <= 1, who, ": density ",
                   density, " is not valid; expected a value in (0, 1]");
}

std::optional<std::size_t> select_without_estimate(std::span<const float> acc, double density,
                                                   std::vector<Index>& indices) {
  core::resize_huge(indices, acc.size());
  if (acc.empty()) return 0;
  if (density >= 1) return select_threshold(acc, 0.0f, 0, indices.data());
  return std::nullopt;
}

std::size_t select_at_estimate(std::span<const float> acc, double threshold,
                               std::vector<Index>& indices) {
  return select_threshold(acc, as_compare_threshold(threshold), 0, indices.data());
}

}  // namespace exdyna::sparsifiers
