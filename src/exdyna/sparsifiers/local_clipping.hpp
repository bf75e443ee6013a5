// Local gradient clipping (Lin et al., "Deep Gradient Compression", ICLR 2018, Sec. 3.3): each
// worker clips its own gradient before accumulating it, to clip / sqrt(N) for N workers, so the
// norm of the N gradients' sum stays near what clipping the summed gradient to `clip` would give
// (the sum of N independent vectors of norm c / sqrt(N) has norm about c). It bounds what one
// bad batch puts into the residual, where it would otherwise stay until sent. The norm is over
// the gradient error feedback sees: the whole flat gradient in `exdyna train`, one bucket in the
// DDP hook.
#pragma once

#include <span>

namespace exdyna::sparsifiers {

// Scales grad so its L2 norm is at most clip / sqrt(world_size); returns the factor applied (1
// when it was under the limit or clip is 0). grad must be finite.
double clip_locally(std::span<float> grad, double clip, int world_size);

}  // namespace exdyna::sparsifiers
