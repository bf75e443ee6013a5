// A non-finite gradient under non_finite = skip (config.hpp's NonFinite): what fp16 AMP's
// GradScaler needs from a communication hook. Its first scales overflow by design; DDP's dense
// all-reduce then hands every rank an inf, the scaler skips the step everywhere and halves the
// scale. Error feedback does the same here:
//   1. each rank knows whether its own gradient (or acc) holds a NaN or Inf (the accumulate pass
//      already says so, at no cost);
//   2. one all-reduce of one double tells every rank whether any rank's does (every step in skip
//      mode: the ranks must agree before anyone exchanges or changes state);
//   3. if so, every rank returns an update of NaN (the scaler sees a non-finite gradient on every
//      rank), the accumulate is undone, and the sparsifier (threshold, partitions), the velocity
//      and the iteration count stay as they were.
#pragma once

#include <span>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sparsifiers {

// True on every rank when `mine` is true on any rank (one all-reduce of one double). bytes gets
// what it sent.
bool any_rank_non_finite(bool mine, comm::Communicator& comm, comm::ByteCounts& bytes);

// Undoes core::accumulate's residual += grad. Where that sum was not finite accumulate kept the
// residual (and residual + grad is still not finite): it stays. Elsewhere residual -= grad, the
// residual before to the rounding of that add and subtract.
void undo_accumulate(std::span<float> residual, std::span<const float> grad);

// The skipped step's result: the update is NaN everywhere, and stats say non_finite = 1 with no
// value sent (k_per_worker zeros, threshold NaN).
void fill_skipped_step(std::span<float> grad, StepStats& stats);
void mark_skipped(StepStats& stats);

}  // namespace exdyna::sparsifiers
