#include "exdyna/train/dgc_momentum.hpp"

#include <cmath>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/momentum_correction.hpp"
#include "exdyna/train/optimizer.hpp"

namespace exdyna::train {

void dgc_velocity(std::span<float> grad, std::span<float> u, std::span<const float> params,
                  float momentum, float weight_decay, double max_norm, int workers) {
  EXDYNA_CHECK_EQ(grad.size(), u.size(), "dgc: velocity length");
  EXDYNA_CHECK_EQ(grad.size(), params.size(), "dgc: parameter count");
  // Each worker's clip norm shrinks with sqrt(N) so that the sum of N clipped gradients keeps the
  // global bound (the paper's local clipping).
  if (max_norm > 0) clip_grad_norm(grad, max_norm / std::sqrt(static_cast<double>(workers)));
  for (std::size_t i = 0; i < grad.size(); ++i) {
    u[i] = momentum * u[i] + (grad[i] + weight_decay * params[i]);
    grad[i] = u[i];
  }
}

void dgc_mask(std::span<float> u, std::span<const std::uint32_t> sent) {
  sparsifiers::mask_velocity(u, sent);
}

void dgc_apply(std::span<float> params, std::span<const float> update, double lr) {
  EXDYNA_CHECK_EQ(params.size(), update.size(), "dgc: update length");
  const auto a = static_cast<float>(lr);
  for (std::size_t i = 0; i < params.size(); ++i) params[i] -= a * update[i];
}

double dgc_warmup_density(std::int64_t epoch, std::int64_t warmup_epochs, double start,
                          double target) {
  if (epoch >= warmup_epochs) return target;
  const double frac = static_cast<double>(epoch) / static_cast<double>(warmup_epochs);
  return start * std::pow(target / start, frac);
}

void validate_dgc_warmup(std::int64_t warmup_epochs, double start, double target) {
  EXDYNA_CHECK_ARG(warmup_epochs >= 0, "--dgc-warmup-epochs ", warmup_epochs,
                   " is not valid; expected an integer >= 0 (0: no warm-up)");
  EXDYNA_CHECK_ARG(warmup_epochs == 0 || (std::isfinite(start) && start > target && start <= 1),
                   "--dgc-warmup-start ", start, " is not valid; expected a density in (", target,
                   ", 1] (above --density ", target, ")");
}

}  // namespace exdyna::train
