#include "exdyna/sparsifiers/step_clipping.hpp"

#include <cmath>

namespace exdyna::sparsifiers {

double step_clip_scale(std::span<const float> summed_values, double inv_n, double clip) {
  if (clip <= 0) return 1.0;
  double sq = 0;
  for (const float v : summed_values) sq += static_cast<double>(v) * v;
  const double norm = std::sqrt(sq) * inv_n;
  if (!std::isfinite(norm) || norm <= clip) return 1.0;
  return clip / norm;
}

}  // namespace exdyna::sparsifiers
