// Momentum correction with momentum factor masking (Lin et al., "Deep Gradient Compression", ICLR
// 2018, Sec. 3.2). Error feedback alone accumulates raw gradients and leaves momentum to the
// optimizer, after the exchange: a value held back for many steps then arrives at once and the
// optimizer's momentum multiplies it again, which at d = 0.001 throws single parameters far
// enough to diverge. Momentum correction accumulates the velocity instead:
//
//   u <- m u + g            this worker's velocity (before error feedback's acc = residual + u)
//   u[i] <- 0 at every i where this worker's acc was sent (masking: a sent value's momentum is
//                           in the update already, and must not keep pushing)
//
// and the optimizer applies no momentum of its own (its update is the mean of the sent velocity).
// A dense step (a warm-up phase at density 1) is not masked: there nothing is delayed, and the
// step is exactly momentum SGD.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

// Momentum factor masking: u[i] <- 0 at every index of `sent` (the one loop this class and the
// trainer's DGC path share). Throws naming an index outside u.
void mask_velocity(std::span<float> u, std::span<const Index> sent);

class MomentumCorrection {
 public:
  // momentum 0: off (no memory is held, every call does nothing).
  MomentumCorrection(double momentum, std::int64_t n);

  bool on() const { return momentum_ > 0; }
  // u <- m u + grad; grad <- u.
  void accumulate(std::span<float> grad);
  // u[i] <- 0 wherever this worker's accumulated value was sent in `sent` (no-op when dense).
  void mask(const SparseResult& sent);

  std::span<const float> velocity() const { return velocity_; }
  std::span<float> mutable_velocity() { return velocity_; }

 private:
  float momentum_;
  std::vector<float> velocity_;
};

}  // namespace exdyna::sparsifiers
