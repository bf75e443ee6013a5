#include "exdyna/sparsifiers/density_warmup.hpp"

#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

double warmup_density(std::int64_t step, std::int64_t warmup_steps, double start, double target) {
  if (warmup_steps <= 0 || step >= warmup_steps || step < 0) return target;
  // In integers, so a phase's first step is the same on every machine.
  const std::int64_t phase = step * kWarmupPhases / warmup_steps;
  if (phase == 0) return start;
  return start * std::pow(target / start, static_cast<double>(phase) / kWarmupPhases);
}

WarmupPhases::WarmupPhases(const ConvergenceOptions& options, double target, Remake remake)
    : options_(options), target_(target), remake_(std::move(remake)), density_(target) {
  EXDYNA_CHECK_ARG(options_.warmup_steps == 0 || remake_,
                   "a density warm-up needs a way to build each phase's sparsifier "
                   "(make_error_feedback and make_convergence_options set it)");
}

void WarmupPhases::enter(std::int64_t t, std::unique_ptr<Sparsifier>& sp) {
  if (options_.warmup_steps == 0) return;
  const double d = warmup_density(t, options_.warmup_steps, options_.warmup_start, target_);
  if (d == density_) return;
  sp = remake_(d);
  density_ = d;
}

}  // namespace exdyna::sparsifiers
