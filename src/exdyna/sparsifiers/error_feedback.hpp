// Error feedback (Seide et al. 2014; paper Sec. 2 and Alg. 1), wrapped around any sparsifier:
//   acc = residual + grad                 (fused, in place in the residual buffer)
//   sparsifier selects and exchanges      (indices gathered, SUM of acc at them)
//   grad <- mean update (0 off the set)   (identical on every rank)
//   residual = acc with gathered indices zeroed, in place (with --values fp16|bf16: set to
//              acc - round(acc), this worker's rounding error, which is sent later)
// Invariant: after a step, residual + sent part = acc element by element, where the sent part is
// acc (or round(acc) with 16-bit values) at the gathered indices and 0 elsewhere.
// The convergence mechanisms (ConvergenceOptions, config.hpp) run around it, all off by default:
//   grad <- clip(grad, local_clip / sqrt(N))        local_clipping.hpp
//   grad <- u <- m u + grad                         momentum_correction.hpp (acc = residual + u)
//   ... the step above, at the warm-up density of this iteration (density_warmup.hpp) ...
//   update <- s update, ||update|| <= step_clip      step_clipping.hpp (the rest dropped)
//   u <- 0 where this worker's acc was sent         (momentum factor masking)
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "exdyna/core/reductions.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/density_warmup.hpp"
#include "exdyna/sparsifiers/momentum_correction.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

struct ErrorFeedbackOptions {
  // Eq. 1 global error, the mean over workers of ||e_{i,t}||: one extra all-reduce of one double.
  bool measure_global_error = true;
  ConvergenceOptions convergence;
  // The density warm-up's: the target density d, and what builds the sparsifier of a phase's
  // density (make_error_feedback sets both; required when convergence.warmup_steps > 0).
  double density = 0;
  Remake remake;
  // On a CUDA gradient (DeviceErrorFeedback): ExDyna's exact controller under a worker cap runs
  // its step on the device (resident_step.hpp) from its second iteration on, once a density
  // warm-up is over, where step_clip and the global error are off: no host round trip inside the
  // step. Its statistics come one step late, a non-finite gradient under non_finite = raise throws
  // one step late, and under skip the controller still advances that step (the update is NaN and
  // the residual restored, as in the synchronous step).
  bool resident = false;
};

class ErrorFeedback {
 public:
  ErrorFeedback(std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g,
                ErrorFeedbackOptions opt = {});

  // grad (size n_g) is this worker's raw gradient on entry and the averaged sparse update on
  // exit. A NaN or Inf in grad: with non_finite = raise (the default), throws DataError naming the
  // first non-finite element (checked before anything is exchanged, and before the velocity
  // changes); with skip, every rank returns NaN and keeps its state (non_finite_step.hpp).
  StepStats step(std::span<float> grad, comm::Communicator& comm);

  std::span<const float> residual() const { return residual_; }
  std::span<float> mutable_residual() { return residual_; }
  Sparsifier& sparsifier() { return *sparsifier_; }
  const Sparsifier& sparsifier() const { return *sparsifier_; }
  // The momentum correction's velocity u (empty when it is off).
  std::span<const float> velocity() const { return momentum_.velocity(); }
  std::span<float> mutable_velocity() { return momentum_.mutable_velocity(); }
  std::int64_t iteration() const { return iteration_; }
  // Also builds the sparsifier of t's warm-up phase: set it before loading the sparsifier's state.
  void set_iteration(std::int64_t t);
  // The density this iteration's sparsifier runs at (the warm-up's, else d).
  double phase_density() const { return warmup_.density(); }
  // The last step's sparse result (indices and summed values).
  const SparseResult& last_result() const { return result_; }

 private:
  void check_finite(std::span<const float> grad, int rank) const;
  StepStats skipped(std::span<float> grad, StepStats& stats, const comm::ByteCounts& flag_bytes);
  void scatter(std::span<float> grad, int world_size);
  void scale_update(std::span<float> grad, float s, int world_size) const;
  std::span<const Index> sent_only_here() const;

  std::unique_ptr<Sparsifier> sparsifier_;
  std::vector<float> residual_;
  ErrorFeedbackOptions opt_;
  MomentumCorrection momentum_;
  WarmupPhases warmup_;
  SparseResult result_;
  std::int64_t iteration_ = 0;
};

// What the host and device error feedback share: the refusal of a non-finite gradient element,
// naming it, and Eq. 1's global error, the mean over workers of ||e_{i,t}|| (one all-reduce of one
// double; measurement traffic, outside the sparsifier's byte counts).
DataError non_finite_gradient(std::int64_t index, std::int64_t iteration, int rank, float grad,
                              float accumulated);
double mean_residual_norm(double residual_sq, comm::Communicator& comm);

// acc = residual + grad in one pass (core/reductions.hpp).
using core::accumulate;
using core::AccumulateResult;

}  // namespace exdyna::sparsifiers
