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

}  // namespace exdyna::train
