#include "exdyna/sparsifiers/density_warmup.hpp"

#include <cmath>

namespace exdyna::sparsifiers {

double warmup_density(std::int64_t step, std::int64_t warmup_steps, double start, double target) {
  if (warmup_steps <= 0 || step >= warmup_steps || step < 0) return target;
  // In integers, so a phase's first step is the same on every machine.
  const std::int64_t phase = step * kWarmupPhases / warmup_steps;
  if (phase == 0) return start;
  return start * std::pow(target / start, static_cast<double>(phase) / kWarmupPhases);
}

}  // namespace exdyna::sparsifiers
