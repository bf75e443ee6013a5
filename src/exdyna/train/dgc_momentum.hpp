// DGC's optimizer side (Lin et al., "Deep Gradient Compression", ICLR 2018, Sec. 3.2), used by
// `exdyna train --sparsifier dgc`. Plain error feedback accumulates gradients and applies
// momentum after the exchange, so the momentum of values left in the residual is lost; DGC
// accumulates the velocity instead:
//
//   g <- clip(g, clip / sqrt(N)) + wd p      local gradient clipping (only with --clip > 0)
//   u <- m u + g                             momentum correction: u is the local velocity
//   v <- v + u;  send the top of v           (error feedback: v is its residual, acc = v + u)
//   u[i] <- 0 at every sent i                momentum factor masking (v is zeroed there by the
//                                            error feedback); stale momentum does not push on
//   p <- p - lr * mean of the sent v         no further momentum: it is in v already
//
// u lives in the optimizer's momentum buffer (Sgd::mutable_momentum_buffer), so checkpoints
// carry it unchanged. Nesterov momentum is refused with dgc (the paper's form is for plain
// momentum here).
//
// Density warm-up (the paper's Sec. 3.3 and 4: "exponentially increase the gradient sparsity from
// a relatively small value to the final value", 75 %, 93.75 %, 98.4375 %, 99.6 %, 99.9 % over the
// first four epochs, i.e. densities 0.25, 0.0625, 0.0156, 0.004, then 0.001): with
// --dgc-warmup-epochs E > 0 and --dgc-warmup-start s, epoch e (0-based) runs at
//   d_e = s * (d / s)^(e / E)  for e < E,   d  from epoch E on,
// the geometric interpolation from s to the target d (s = 0.25, d = 0.001, E = 4 gives 0.25,
// 0.0629, 0.0158, 0.0040, then 0.001: the paper's list within 2 %). Per epoch, not per iteration,
// as the paper: one density per epoch, which the log shows epoch by epoch. d_e is a function of
// the step number alone (e = step / steps per epoch), the same on every rank and after a resume,
// so it needs no state in checkpoints. Default E = 0 (off): the paper warms up 4 of 90 (ImageNet)
// or 164 (CIFAR-10) epochs, 2-4 % of the run, and the main job is 4 epochs, where no whole number
// of warm-up epochs is such a small part (and off keeps earlier DGC runs and checkpoints valid).
#pragma once

#include <cstdint>
#include <span>

namespace exdyna::train {

// Before the exchange: local clipping (max_norm > 0, scaled by 1/sqrt(workers)), weight decay and
// the velocity update; grad becomes u (what error feedback adds to its residual v).
void dgc_velocity(std::span<float> grad, std::span<float> u, std::span<const float> params,
                  float momentum, float weight_decay, double max_norm, int workers);

// After the exchange: momentum factor masking at the sent indices.
void dgc_mask(std::span<float> u, std::span<const std::uint32_t> sent);

// p <- p - lr * update (the momentum is in the update already).
void dgc_apply(std::span<float> params, std::span<const float> update, double lr);

// The density warm-up's density of 0-based epoch `epoch` (see above): exactly `target` when
// warmup_epochs is 0 or epoch >= warmup_epochs.
double dgc_warmup_density(std::int64_t epoch, std::int64_t warmup_epochs, double start,
                          double target);

// Refuses a negative warmup_epochs, and a start outside (target, 1] when warming up, naming the
// options --dgc-warmup-epochs and --dgc-warmup-start.
void validate_dgc_warmup(std::int64_t warmup_epochs, double start, double target);

}  // namespace exdyna::train
