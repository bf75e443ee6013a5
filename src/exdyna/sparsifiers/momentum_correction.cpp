#include "exdyna/sparsifiers/momentum_correction.hpp"

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

MomentumCorrection::MomentumCorrection(double momentum, std::int64_t n)
    : momentum_(static_cast<float>(momentum)) {
  EXDYNA_CHECK_ARG(momentum >= 0 && momentum < 1, "--momentum-correction ", momentum,
                   " is not valid; expected a momentum in [0, 1) (0: off)");
  if (on()) velocity_.assign(static_cast<std::size_t>(n), 0.0f);
}

void MomentumCorrection::accumulate(std::span<float> grad) {
  if (!on()) return;
  EXDYNA_CHECK_EQ(grad.size(), velocity_.size(), "momentum correction: gradient length");
  const float m = momentum_;
  float* u = velocity_.data();
  for (std::size_t i = 0; i < grad.size(); ++i) {
    u[i] = m * u[i] + grad[i];
    grad[i] = u[i];
  }
}

void mask_velocity(std::span<float> u, std::span<const Index> sent) {
  for (const Index i : sent) {
    EXDYNA_CHECK(i < u.size(), "sent index ", i, " outside the velocity of ", u.size());
    u[i] = 0.0f;
  }
}

void MomentumCorrection::mask(const SparseResult& sent) {
  if (!on() || sent.dense) return;
  // Ok-Topk sums only the workers that selected an index: this worker's velocity went out only
  // at its own `sent` indices.
  mask_velocity(velocity_, sent.partial ? sent.sent : sent.indices);
}

}  // namespace exdyna::sparsifiers
