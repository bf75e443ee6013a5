#include "exdyna/sim/scaled_source.hpp"

#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::sim {

void validate_scale_steps(std::span<const ScaleStep> steps) {
  for (const auto& s : steps) {
    EXDYNA_CHECK_ARG(s.iteration >= 0, "scale step iteration ", s.iteration,
                     " is not valid; expected >= 0");
    EXDYNA_CHECK_ARG(std::isfinite(s.factor) && s.factor > 0, "scale step factor ", s.factor,
                     " at iteration ", s.iteration, " is not valid; expected a finite number > 0");
  }
}

ScaledSource::ScaledSource(std::unique_ptr<GradientSource> inner, std::vector<ScaleStep> steps)
    : inner_(std::move(inner)), steps_(std::move(steps)) {
  EXDYNA_CHECK_ARG(inner_ != nullptr, "scaled source: no inner source");
  validate_scale_steps(steps_);
}

double ScaledSource::factor(std::int64_t t) const {
  double f = 1;
  for (const auto& s : steps_)
    if (s.iteration <= t) f *= s.factor;
  return f;
}

void ScaledSource::fill(std::int64_t t, int worker, std::span<float> grad) {
  inner_->fill(t, worker, grad);
  const double f = factor(t);
  if (f == 1) return;
  for (auto& v : grad) v = static_cast<float>(static_cast<double>(v) * f);
}

}  // namespace exdyna::sim
