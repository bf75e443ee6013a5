#include "exdyna/sparsifiers/local_clipping.hpp"

#include <cmath>

namespace exdyna::sparsifiers {

double clip_locally(std::span<float> grad, double clip, int world_size) {
  if (clip <= 0) return 1.0;
  double sq = 0;
  for (const float g : grad) sq += static_cast<double>(g) * g;
  const double limit = clip / std::sqrt(static_cast<double>(world_size));
  const double norm = std::sqrt(sq);
  if (norm <= limit) return 1.0;
  const double scale = limit / norm;
  const auto s = static_cast<float>(scale);
  for (auto& g : grad) g *= s;
  return scale;
}

}  // namespace exdyna::sparsifiers
