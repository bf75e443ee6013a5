#include "exdyna/sparsifiers/non_finite_step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "exdyna/core/enum_names.hpp"
#include "exdyna/sparsifiers/config.hpp"

namespace exdyna::sparsifiers {

namespace {
constexpr core::EnumNames<NonFinite, 2> kNonFiniteNames{
    {{NonFinite::kRaise, "raise"}, {NonFinite::kSkip, "skip"}}};
}  // namespace

const char* to_string(NonFinite v) {
  return core::enum_to_string(kNonFiniteNames, v);
}

NonFinite parse_non_finite(std::string_view s) {
  return core::enum_parse(kNonFiniteNames, "non_finite", s);
}

bool any_rank_non_finite(bool mine, comm::Communicator& comm, comm::ByteCounts& bytes) {
  const auto before = comm.bytes();
  double flag = mine ? 1.0 : 0.0;
  comm.allreduce_sum(std::span<double>(&flag, 1));
  bytes += comm.bytes() - before;
  return flag > 0;
}

void undo_accumulate(std::span<float> residual, std::span<const float> grad) {
  for (std::size_t i = 0; i < residual.size(); ++i)
    if (std::isfinite(residual[i] + grad[i])) residual[i] -= grad[i];
}

void mark_skipped(StepStats& stats) {
  stats.non_finite = 1;
  stats.threshold = std::numeric_limits<double>::quiet_NaN();
  stats.k_per_worker.assign(static_cast<std::size_t>(stats.world_size), 0);
  stats.finish_counts();
}

void fill_skipped_step(std::span<float> grad, StepStats& stats) {
  std::fill(grad.begin(), grad.end(), std::numeric_limits<float>::quiet_NaN());
  mark_skipped(stats);
}

}  // namespace exdyna::sparsifiers
