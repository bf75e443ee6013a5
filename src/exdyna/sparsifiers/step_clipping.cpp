#include "exdyna/sparsifiers/step_clipping.hpp"

#include <cmath>

namespace exdyna::sparsifiers {

double step_clip_scale(std::span<const float> summed_values, double inv_n, double clip) {
  if (clip <= 0) return 1.0;
  double sq = 0;
  for (const float v : summed_values) sq += static_cast<double>(v) * v;
  return step_clip_scale_of_squares(sq, inv_n, clip);
}

double step_clip_scale_of_squares(double summed_sq, double inv_n, double clip) {
  if (clip <= 0) return 1.0;
  const double norm = std::sqrt(summed_sq) * inv_n;
  if (!std::isfinite(norm) || norm <= clip) return 1.0;
  return clip / norm;
}

}  // namespace exdyna::sparsifiers
