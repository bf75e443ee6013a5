// Scale steps over any gradient source: from each step's iteration on, every gradient is multiplied
// by the product of the factors of all steps at or before that iteration. The synthetic source
// applies its steps itself; this wrapper gives a recorded trace the same learning-rate-decay-like
// change of scale, so a controller's recovery after a step can be measured on real gradients.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "exdyna/sim/gradient_source.hpp"
#include "exdyna/sim/synthetic_source.hpp"

namespace exdyna::sim {

// Throws InvalidArgument naming the step when an iteration is negative or a factor is not a finite
// number > 0.
void validate_scale_steps(std::span<const ScaleStep> steps);

class ScaledSource final : public GradientSource {
 public:
  ScaledSource(std::unique_ptr<GradientSource> inner, std::vector<ScaleStep> steps);

  std::int64_t n_g() const override { return inner_->n_g(); }
  std::int64_t iterations() const override { return inner_->iterations(); }
  int workers() const override { return inner_->workers(); }
  // The inner gradient times factor(t), each product rounded once to float. Thread-safe when the
  // inner source is.
  void fill(std::int64_t t, int worker, std::span<float> grad) override;

  // Product of the factors of the steps at or before t (1 before the first step).
  double factor(std::int64_t t) const;
  const GradientSource& inner() const { return *inner_; }

 private:
  std::unique_ptr<GradientSource> inner_;
  std::vector<ScaleStep> steps_;
};

}  // namespace exdyna::sim
