#include "exdyna/train/optimizer.hpp"

#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::train {

void SgdOptions::validate() const {
  EXDYNA_CHECK_ARG(lr > 0 && std::isfinite(lr), "--lr ", lr, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(momentum >= 0 && momentum < 1, "--momentum ", momentum,
                   " is not valid; expected [0, 1)");
  EXDYNA_CHECK_ARG(!nesterov || momentum > 0, "--nesterov needs --momentum > 0");
  EXDYNA_CHECK_ARG(weight_decay >= 0 && std::isfinite(weight_decay), "--weight-decay ",
                   weight_decay, " is not valid; expected >= 0");
}

Sgd::Sgd(std::int64_t n, SgdOptions opt) : opt_(opt), buf_(static_cast<std::size_t>(n), 0.0f) {
  opt_.validate();
}

void Sgd::step(std::span<float> params, std::span<const float> grad, double lr) {
  EXDYNA_CHECK_EQ(params.size(), buf_.size(), "sgd: parameter count");
  EXDYNA_CHECK_EQ(grad.size(), buf_.size(), "sgd: gradient count");
  const float m = static_cast<float>(opt_.momentum), wd = static_cast<float>(opt_.weight_decay),
              a = static_cast<float>(lr);
  float* __restrict p = params.data();
  const float* __restrict g = grad.data();
  float* __restrict b = buf_.data();
  const std::size_t n = buf_.size();
  if (m == 0) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= a * (g[i] + wd * p[i]);
  } else if (opt_.nesterov) {
    for (std::size_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * p[i];
      b[i] = m * b[i] + gi;
      p[i] -= a * (gi + m * b[i]);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * p[i];
      b[i] = m * b[i] + gi;
      p[i] -= a * b[i];
    }
  }
}

void LrSchedule::validate() const {
  EXDYNA_CHECK_ARG(base_lr > 0, "--lr ", base_lr, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(warmup_epochs >= 0, "--warmup ", warmup_epochs,
                   " is not valid; expected >= 0 epochs");
  EXDYNA_CHECK_ARG(decay_factor > 0 && decay_factor <= 1, "--lr-decay-factor ", decay_factor,
                   " is not valid; expected (0, 1]");
  for (double e : decay_epochs)
    EXDYNA_CHECK_ARG(e > 0, "--lr-decay epoch ", e, " is not valid; expected > 0");
}

double LrSchedule::at(std::int64_t step, std::int64_t steps_per_epoch) const {
  const double spe = static_cast<double>(steps_per_epoch > 0 ? steps_per_epoch : 1);
  const double epoch = static_cast<double>(step) / spe;
  double lr = base_lr;
  const double warm_steps = warmup_epochs * spe;
  if (warm_steps >= 1 && static_cast<double>(step) < warm_steps)
    lr *= static_cast<double>(step + 1) / warm_steps;
  for (double e : decay_epochs)
    if (epoch >= e) lr *= decay_factor;
  return lr;
}

double clip_grad_norm(std::span<float> grad, double max_norm) {
  double sq = 0;
  for (float g : grad) sq += static_cast<double>(g) * g;
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    const float s = static_cast<float>(max_norm / (norm + 1e-6));
    for (float& g : grad) g *= s;
  }
  return norm;
}

}  // namespace exdyna::train
