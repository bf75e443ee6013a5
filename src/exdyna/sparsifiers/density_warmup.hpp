// Density warm-up (Lin et al., "Deep Gradient Compression", ICLR 2018, Sec. 3.3: "exponentially
// increase the gradient sparsity from a relatively small value to the final value"). The first
// warmup_steps steps run in kWarmupPhases phases of equal length at geometrically falling densities
//
//   d_p = start * (d / start)^(p / kWarmupPhases),   p = floor(kWarmupPhases * step / warmup_steps)
//
// (start, then three densities between start and d), then d itself. In phases, not per step: each
// phase builds its sparsifier afresh for its density (error_feedback.hpp), and four phases are
// DGC's four warm-up epochs (0.25, 0.0625, 0.0156, 0.004 before 0.001). The density is a function
// of the step alone, the same on every rank and after a resume, so it needs no saved state.
// start = 1 makes the first phase dense (every value sent).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

inline constexpr int kWarmupPhases = 4;

// The density of 0-based step `step`: exactly `target` when warmup_steps is 0 or step is past it.
double warmup_density(std::int64_t step, std::int64_t warmup_steps, double start, double target);

// Builds the sparsifier of a phase's density (make_error_feedback's: density 1 is "dense").
using Remake = std::function<std::unique_ptr<Sparsifier>(double density)>;

// Which sparsifier steps an iteration, for the host and the device error feedback alike: the
// one of its phase, built afresh when the phase changes (its threshold and partitions depend on
// the density; the residual, which error feedback holds, carries over).
class WarmupPhases {
 public:
  // options.warmup_steps 0: off (enter() never replaces anything, remake may be empty).
  WarmupPhases(const ConvergenceOptions& options, double target, Remake remake);
  // sp becomes the sparsifier of iteration t's phase.
  void enter(std::int64_t t, std::unique_ptr<Sparsifier>& sp);
  double density() const { return density_; }

 private:
  ConvergenceOptions options_;
  double target_;
  Remake remake_;
  double density_;
};

}  // namespace exdyna::sparsifiers
