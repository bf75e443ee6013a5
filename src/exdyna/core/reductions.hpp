// The single-pass reductions over a gradient-sized float vector, beside the selection kernels:
// SSE2 (baseline x86-64) with a plain-loop fallback, float lanes per 4096-element chunk and the
// chunk sums in double, so results are accurate for tens of millions of elements and identical
// on every x86-64 machine.
#pragma once

#include <cstddef>
#include <span>

namespace exdyna::core {

// acc[i] = residual[i] + grad[i] in place in residual, where that sum is finite (elsewhere the
// residual keeps its value); returns sum of the old residual squared (the local error
// ||e_{i,t}||^2) and whether every sum was finite. One pass over memory.
struct AccumulateResult {
  double residual_sq = 0;
  bool finite = true;
};
AccumulateResult accumulate(std::span<float> residual, std::span<const float> grad);

// Sum of |x| in double; a single read pass.
double sum_abs(std::span<const float> x);

// Sum and sum of squares of x in double; a single read pass (a Gaussian fit's mean and spread).
struct Moments {
  double sum = 0;
  double sum_sq = 0;
};
Moments moments(std::span<const float> x);

// Over the elements with |x| >= thr: the sum of |x| - thr (in double) and their number. One pass.
struct Exceedance {
  double sum = 0;
  std::size_t count = 0;
};
Exceedance exceedances(std::span<const float> x, float thr);

// The largest |x| (0 for an empty span). x must hold no NaN (error feedback refuses them).
float max_abs(std::span<const float> x);

}  // namespace exdyna::core
