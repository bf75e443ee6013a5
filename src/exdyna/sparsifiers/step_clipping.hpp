// Step clipping: the averaged update's L2 norm is at most step_clip, as
// torch.nn.utils.clip_grad_norm_ would leave it, and what the clip takes off is dropped. Why:
// below d = 0.005 each step puts a dense step's worth of norm or more on a few elements, each
// carrying many steps of stale accumulated gradient; the optimizer's momentum multiplies those
// jumps by 1 / (1 - m), the elements overshoot, their gradients flip and grow in the residual,
// and the sent values grow with them until the loss explodes (a CNN at d = 0.001 with SGD
// momentum 0.9: docs/python.md, "When the accuracy lags"). Keeping the clipped part in the
// residual was measured worse: the same stale mass is sent again step after step. The update
// is identical on every rank, so the scale is too, without any communication.
#pragma once

#include <span>

namespace exdyna::sparsifiers {

// The factor s in (0, 1] that brings the update (summed_values * inv_n) to an L2 norm of at most
// clip; 1 when it is already within it, when clip is 0 (off) or when the norm is not finite (a
// non-finite step is not clipped: skip and raise handle it).
double step_clip_scale(std::span<const float> summed_values, double inv_n, double clip);

// The same from the sum of the summed values' squares (the device path sums them on the GPU).
double step_clip_scale_of_squares(double summed_sq, double inv_n, double clip);

}  // namespace exdyna::sparsifiers
