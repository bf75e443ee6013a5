#include "exdyna/sparsifiers/error_feedback.hpp"

#include <algorithm>
#include <cmath>

#include "exdyna/core/half_float.hpp"
#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/density_warmup.hpp"
#include "exdyna/sparsifiers/local_clipping.hpp"
#include "exdyna/sparsifiers/non_finite_step.hpp"
#include "exdyna/sparsifiers/step_clipping.hpp"

namespace exdyna::sparsifiers {

ErrorFeedback::ErrorFeedback(std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g,
                             ErrorFeedbackOptions opt)
    : sparsifier_(std::move(sparsifier)),
      opt_(std::move(opt)),
      momentum_(opt_.convergence.momentum_correction, n_g),
      warmup_(opt_.convergence, opt_.density, opt_.remake) {
  EXDYNA_CHECK_ARG(sparsifier_ != nullptr, "error feedback needs a sparsifier");
  EXDYNA_CHECK_ARG(n_g > 0, "n_g ", n_g, " is not valid; expected > 0");
  core::assign_huge(residual_, static_cast<std::size_t>(n_g), 0.0f);
  warmup_.enter(iteration_, sparsifier_);
}

void ErrorFeedback::set_iteration(std::int64_t t) {
  iteration_ = t;
  warmup_.enter(iteration_, sparsifier_);
}

// Clipping and momentum change state from grad before the exchange: refuse a non-finite one first.
void ErrorFeedback::check_finite(std::span<const float> grad, int rank) const {
  for (std::size_t i = 0; i < grad.size(); ++i)
    if (!std::isfinite(grad[i]))
      throw non_finite_gradient(static_cast<std::int64_t>(i), iteration_, rank, grad[i],
                                residual_[i]);
}

// Skip mode, some rank's gradient not finite: nothing selected or sent, no state changed (the
// caller undid the accumulate), the iteration not counted.
StepStats ErrorFeedback::skipped(std::span<float> grad, StepStats& stats,
                                 const comm::ByteCounts& flag_bytes) {
  stats.bytes = flag_bytes;
  fill_skipped_step(grad, stats);
  return stats;
}

DataError non_finite_gradient(std::int64_t index, std::int64_t iteration, int rank, float grad,
                              float accumulated) {
  return DataError(detail::concat("gradient element ", index, " of iteration ", iteration,
                                  " on rank ", rank, " is ", grad, " (accumulated ", accumulated,
                                  "); expected a finite value"));
}

double mean_residual_norm(double residual_sq, comm::Communicator& comm) {
  double e = std::sqrt(residual_sq);
  comm.allreduce_sum(std::span<double>(&e, 1));
  return e / comm.size();
}

// The mean update into grad (0 off the gathered indices) and the sent part out of the residual.
void ErrorFeedback::scatter(std::span<float> grad, int world_size) {
  const float inv_n = 1.0f / static_cast<float>(world_size);
  const core::ValueFormat fmt = result_.values_format;
  const auto keep = [fmt](float a) { return a - core::round_to_format(a, fmt); };
  if (result_.dense) {
    EXDYNA_CHECK_EQ(result_.values.size(), grad.size(), "dense result size");
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = result_.values[i] * inv_n;
    if (fmt == core::ValueFormat::kFp32)
      std::fill(residual_.begin(), residual_.end(), 0.0f);
    else
      for (auto& r : residual_) r = keep(r);
    return;
  }
  EXDYNA_CHECK_EQ(result_.values.size(), result_.indices.size(), "sparse result size");
  std::fill(grad.begin(), grad.end(), 0.0f);
  for (std::size_t j = 0; j < result_.indices.size(); ++j) {
    const Index i = result_.indices[j];
    grad[i] = result_.values[j] * inv_n;
    if (!result_.partial)
      residual_[i] = fmt == core::ValueFormat::kFp32 ? 0.0f : keep(residual_[i]);
  }
  for (const Index i : sent_only_here())
    residual_[i] = fmt == core::ValueFormat::kFp32 ? 0.0f : keep(residual_[i]);
}

// The update rewritten as s times the mean, where it is not zero (the residual is left as
// scatter set it); written from the values, so an index listed twice is not scaled twice.
void ErrorFeedback::scale_update(std::span<float> grad, float s, int world_size) const {
  const float scale = s / static_cast<float>(world_size);
  if (result_.dense) {
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = result_.values[i] * scale;
    return;
  }
  for (std::size_t j = 0; j < result_.indices.size(); ++j)
    grad[result_.indices[j]] = result_.values[j] * scale;
}

// Ok-Topk's partial result: where this worker's acc went in (empty for the others).
std::span<const Index> ErrorFeedback::sent_only_here() const {
  if (!result_.partial) return {};
  for (const Index i : result_.sent)
    EXDYNA_CHECK(i < residual_.size(), "sent index ", i, " outside the gradient");
  return result_.sent;
}

StepStats ErrorFeedback::step(std::span<float> grad, comm::Communicator& comm) {
  EXDYNA_CHECK_ARG(grad.size() == residual_.size(), "gradient has ", grad.size(),
                   " elements, expected n_g = ", residual_.size());
  StepStats stats;
  stats.iteration = iteration_;
  stats.world_size = comm.size();
  stats.n_g = static_cast<std::int64_t>(residual_.size());

  core::Stopwatch sw;
  warmup_.enter(iteration_, sparsifier_);
  const auto& conv = opt_.convergence;
  const bool skip_mode = conv.non_finite == NonFinite::kSkip;
  comm::ByteCounts flag_bytes;
  bool agreed = false;  // the ranks have agreed that every gradient is finite
  if (conv.local_clip > 0 || momentum_.on()) {
    if (skip_mode) {
      const bool mine =
          std::any_of(grad.begin(), grad.end(), [](float g) { return !std::isfinite(g); });
      if (any_rank_non_finite(mine, comm, flag_bytes)) return skipped(grad, stats, flag_bytes);
      agreed = true;
    } else {
      check_finite(grad, comm.rank());
    }
    clip_locally(grad, conv.local_clip, comm.size());
    momentum_.accumulate(grad);
  }
  const auto acc = accumulate(residual_, grad);
  if (skip_mode && !agreed && any_rank_non_finite(!acc.finite, comm, flag_bytes)) {
    undo_accumulate(residual_, grad);
    return skipped(grad, stats, flag_bytes);
  }
  if (!acc.finite) {
    // Rare path: the step is refused. accumulate kept the residual where the sum was not finite;
    // undo it elsewhere, then name the first element whose sum is not finite.
    undo_accumulate(residual_, grad);
    for (std::size_t i = 0; i < grad.size(); ++i) {
      const float sum = residual_[i] + grad[i];
      if (!std::isfinite(sum))
        throw non_finite_gradient(static_cast<std::int64_t>(i), iteration_, comm.rank(), grad[i],
                                  sum);
    }
  }
  stats.times.accumulate = sw.lap();

  // Measurement traffic, outside the sparsifier's byte counts (taken around its step below).
  if (opt_.measure_global_error) stats.global_error = mean_residual_norm(acc.residual_sq, comm);
  sw.lap();

  const auto bytes_before = comm.bytes();
  sparsifier_->step(residual_, comm, result_, stats);
  stats.bytes = comm.bytes() - bytes_before;
  stats.bytes += flag_bytes;
  sw.lap();

  // Scatter the mean update and take what was sent out of the residual at the gathered indices:
  // with float32 values all of acc (residual 0); with 16-bit values (--values) this worker sent
  // round(acc), so its own rounding error acc - round(acc) stays and error feedback sends it
  // later. That difference is exact in float32 (rounding to fewer mantissa bits leaves a
  // representable error), so residual + sent = acc holds bit for bit. The rounding of the 16-bit
  // partial sums inside the reduction is shared by all workers and not fed back. step_clip then
  // scales the update and drops what it took off: kept in the residual, that stale mass was sent
  // again step after step and diverged sooner (docs/python.md, "When the accuracy lags").
  scatter(grad, comm.size());
  const double s = step_clip_scale(result_.values, 1.0 / comm.size(), conv.step_clip);
  stats.step_scale = s;
  if (s < 1) scale_update(grad, static_cast<float>(s), comm.size());
  momentum_.mask(result_);
  stats.times.update = sw.lap();
  if (stats.k_per_worker.empty())
    stats.k_per_worker.assign(static_cast<std::size_t>(comm.size()), 0);
  ++iteration_;
  return stats;
}

}  // namespace exdyna::sparsifiers
