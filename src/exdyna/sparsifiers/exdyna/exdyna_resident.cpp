// ExDyna's step with every pass on the device (resident_step.hpp): the fused step of step() with
// the host's part cut to what it knew before the step. Before: the partition, the grid and this
// worker's floor (its state), every worker's one index (the partitions). On the device: the count
// pass, the own list of the cap's largest, the slot, the all-gather, the plan, the list, the
// values, the per-block counts. After, one step late: the gathered slots decoded as
// gather_counts decodes them, the plan made again on the host from them (the device's and the
// host's plans are one function's: sparsifiers/exdyna/device_plan.hpp, held to it by the tests),
// and end_step as step() runs it.
#include <algorithm>

#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"

namespace exdyna::sparsifiers {

bool ExDyna::runs_resident() const {
  return resident_layout_.cap > 0 && cfg_.values == core::ValueFormat::kFp32;
}

ResidentShape ExDyna::resident_shape() const {
  ResidentShape s;
  s.workers = cfg_.world_size;
  s.rank = cfg_.rank;
  s.rungs = hist_->rungs();
  s.ladder_words = ladder_words_;
  s.layout = resident_layout_;
  s.plan_cap = worker_cap_;
  s.k = k_;
  s.n_g = cfg_.n_g;
  return s;
}

void ExDyna::step_resident(const float* acc, ResidentStep& device, comm::Communicator& comm,
                           StepStats& stats) {
  EXDYNA_CHECK_ARG(runs_resident(),
                   "the resident step runs the exact controller with float32 values, under a "
                   "worker cap with the fused all-gather or on one worker; this exdyna has "
                   "controller ",
                   sparsifiers::to_string(cfg_.exdyna.controller), ", cap ", worker_cap_, ", fuse ",
                   sparsifiers::to_string(cfg_.exdyna.fuse), ", values ",
                   core::to_string(cfg_.values));
  stats = StepStats{};
  finish_resident(device, stats);
  EXDYNA_CHECK_ARG(iteration_ >= 1, "the resident step starts at iteration 1 (iteration 0 ",
                   "gathers the cold ladder's maximum first: step or step_device); this is ",
                   "iteration ", iteration_);
  const int n = cfg_.world_size;
  const std::int64_t t = iteration_;
  core::Stopwatch sw;
  StepStats& s = resident_stats_;
  s = StepStats{};
  const sparsifiers::ElementRange range = begin_step(comm, cfg_.n_g, s);
  s.own_partition = range.size();
  const sparsifiers::LadderGrid grid = hist_->grid(threshold_);
  floor_ = floor_rung(grid);
  const ResidentShape shape = resident_shape();
  s.times.other += sw.lap();
  device.pack_slot(acc, range.begin, range.size(), from_floor(grid), floor_, shape);
  s.times.select += sw.lap();
  device.allgather_slots(comm, shape);
  s.times.allgather += sw.lap();
  // A worker left with nothing sends one index of its partition (step()'s rule, unpack_lists).
  resident_one_.resize(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    const auto r = parts_.range(sparsifiers::Partitions::allocation(t, j, n));
    resident_one_[static_cast<std::size_t>(j)] = static_cast<Index>(r.begin + t % r.size());
  }
  device.plan_list(resident_one_, shape);
  s.times.select += sw.lap();
  device.allreduce_values(acc, comm, shape);
  s.times.allreduce += sw.lap();
  if (cfg_.exdyna.balance == sparsifiers::Balance::kExact) device.count_per_block(parts_.layout());
  device.post_readback();
  resident_grid_ = grid;
  resident_pending_ = true;
  s.times.other += sw.lap();
}

void ExDyna::finish_resident(ResidentStep& device, StepStats& stats) {
  if (!resident_pending_) return;
  const int n = cfg_.world_size;
  const ResidentStep::Readback rb = device.wait_readback();
  EXDYNA_CHECK_T(DataError, rb.status == rules::kPlanOk || rb.status == rules::kFusedCapYielded,
                 "exdyna rank ", cfg_.rank, ": the device's plan of iteration ", iteration_,
                 " failed (status ", rb.status, ", sparsifiers/exdyna/device_wire.hpp)");
  const std::size_t stride = resident_layout_.slot_words();
  EXDYNA_CHECK_T(DataError, rb.slots.size() == stride * static_cast<std::size_t>(n), "exdyna rank ",
                 cfg_.rank, ": the device read back ", rb.slots.size(), " slot words; expected ",
                 stride * static_cast<std::size_t>(n));
  decode_gathered(rb.slots, stride);
  const std::size_t per_rank = gather_mine_.size();
  sparsifiers::plan_worker_counts(gather_all_, n, per_rank, 1, hist_->rungs(), k_, worker_cap_,
                                  counts_, plan_scratch_, summed_bins_);
  // resident_step.hpp's rule where the cap yielded: a worker's count above its list takes its
  // list. Then step()'s: a worker with nothing sends one index.
  std::int64_t gathered = 0;
  for (std::size_t j = 0; j < counts_.size(); ++j) {
    const std::int64_t list =
        sparsifiers::fused_count(rb.slots.subspan(j * stride, stride), resident_layout_);
    counts_[j] = std::max<std::int64_t>(std::min(counts_[j], list), 1);
    gathered += counts_[j];
  }
  EXDYNA_CHECK_T(DataError, gathered == rb.listed, "exdyna rank ", cfg_.rank,
                 ": the device listed ", rb.listed, " indices in iteration ", iteration_,
                 " but the gathered slots plan ", gathered);
  if (cfg_.exdyna.balance == sparsifiers::Balance::kExact) {
    EXDYNA_CHECK_T(DataError, rb.hits.size() == block_hits_.size(), "exdyna rank ", cfg_.rank,
                   ": the device read back ", rb.hits.size(), " block counts; expected ",
                   block_hits_.size());
    std::copy(rb.hits.begin(), rb.hits.end(), block_hits_.begin());
  }
  StepStats& s = resident_stats_;
  s.own_candidates = gather_all_[static_cast<std::size_t>(cfg_.rank) * per_rank];
  resident_pending_ = false;
  end_step(resident_grid_, per_rank, false, gathered, s);
  if (worker_cap_ > 0) {  // (one worker: the plain step's statistics, nothing padded)
    s.fused = 1;
    s.padded_elements = n * worker_cap_ - s.k_total;
  }
  stats = s;
}

}  // namespace exdyna::sparsifiers
