// ExDyna's step on a device-resident gradient (sparsifier.hpp's step_device): step() line for
// line, with the passes that read the gradient and the exchange in DeviceStep. The decisions are
// step()'s: the paper controller selects every |acc| >= threshold of the partition; the exact
// controller counts its ladder from its floor, gathers it with the count, plans on the host, and
// keeps its own cut. What step() adds for speed on the CPU (one-pass words, two passes decided
// from the neighbour's candidates, storing only the capped candidates) changes no decision and
// has no place here: the device counts first and collects after the plan, always.
#include <algorithm>

#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/device_step.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"

namespace exdyna::sparsifiers {

bool ExDyna::runs_on_device() const {
  return cfg_.exdyna.controller != sparsifiers::Controller::kHistogram &&
         cfg_.values == core::ValueFormat::kFp32;
}

void ExDyna::step_device(const float* acc, DeviceStep& device, comm::Communicator& comm,
                         StepStats& stats) {
  EXDYNA_CHECK_ARG(runs_on_device(),
                   "exdyna on the GPU runs the paper and exact controllers with "
                   "float32 values; controller ",
                   sparsifiers::to_string(cfg_.exdyna.controller), " with values ",
                   core::to_string(cfg_.values), " is not supported there");
  const int n = cfg_.world_size;
  const std::int64_t t = iteration_;
  core::Stopwatch sw;
  const sparsifiers::ElementRange range = begin_step(comm, cfg_.n_g, stats);
  stats.times.other += sw.lap();

  // Alg. 4 on this worker's partition.
  const float* part = acc + range.begin;
  const std::int64_t len = range.size();
  const auto offset = static_cast<std::uint32_t>(range.begin);
  stats.own_partition = len;
  const bool exact = cfg_.exdyna.controller == sparsifiers::Controller::kExact;
  const bool cold = exact && t == 0;
  sparsifiers::LadderGrid grid;
  std::int64_t mine;
  if (exact) {
    if (cold) {
      const float top = device.max_abs(part, len);
      stats.times.select += sw.lap();
      grid = cold_grid(top, comm);
      stats.times.allgather += sw.lap();
    } else {
      grid = hist_->grid(threshold_);
    }
    floor_ = cold ? 0 : floor_rung(grid);
    std::fill(bins_.begin(), bins_.end(), 0);
    mine = device.ladder_count(part, len, from_floor(grid), bins_.data() + floor_);
    stats.own_candidates = mine;
  } else {
    mine = device.select_threshold(part, len, static_cast<float>(threshold_), offset);
  }
  stats.times.select += sw.lap();

  // Alg. 1 line 11: the counts (the ladder's bins ride along).
  const std::size_t per_rank = gather_mine_.size();
  gather_counts(mine, comm);
  stats.times.allgather += sw.lap();

  if (exact) {
    sparsifiers::plan_worker_counts(gather_all_, n, per_rank, 1, hist_->rungs(), k_, worker_cap_,
                                    counts_, plan_scratch_, summed_bins_);
    const auto [cut, quota] = sparsifiers::own_cut(bins_, counts_[cfg_.rank]);
    mine = device.take_cut(part, len, offset, from_floor(grid), std::max(cut - floor_, 0), quota);
    EXDYNA_CHECK(mine == counts_[cfg_.rank], "exdyna rank ", cfg_.rank, " kept ", mine,
                 " values on the device but the gathered ladders give it ", counts_[cfg_.rank]);
  } else {
    for (int i = 0; i < n; ++i) counts_[i] = gather_all_[i * per_rank];
  }
  if (mine == 0) {
    device.select_one(static_cast<Index>(range.begin + t % range.size()));
    mine = 1;
  }
  for (auto& c : counts_) c = std::max<std::int64_t>(c, 1);
  stats.times.select += sw.lap();

  // Alg. 1 lines 12-13: the indices, then the values.
  const std::int64_t gathered = device.allgather_selection(mine, counts_, cfg_.gather_mode, comm);
  stats.times.allgather += sw.lap();
  device.allreduce_values(acc, comm);
  stats.times.allreduce += sw.lap();

  if (cfg_.exdyna.balance == sparsifiers::Balance::kExact) {
    std::fill(block_hits_.begin(), block_hits_.end(), 0u);
    device.count_per_block(parts_.layout(), block_hits_);
  }
  end_step(grid, per_rank, cold, gathered, stats);
  stats.times.other += sw.lap();
}

}  // namespace exdyna::sparsifiers
