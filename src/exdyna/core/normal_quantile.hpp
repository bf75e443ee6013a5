// The standard normal distribution's quantile function Phi^-1(p): Gaussian-k's threshold from a
// fitted Gaussian. Acklam's rational approximation (relative error ~1e-9), then one Halley step
// on erfc, which brings it to double precision (relative to the tail probability min(p, 1 - p)).
#pragma once

namespace exdyna::core {

// Phi^-1(p) for p in (0, 1); -inf at 0, +inf at 1; NaN outside [0, 1].
double normal_quantile(double p);

// Phi(x) = P(X <= x) for X ~ N(0, 1).
double normal_cdf(double x);

}  // namespace exdyna::core
