#include "exdyna/sim/gradient_source.hpp"

namespace exdyna::sim {
GradientSource::~GradientSource() = default;
}  // namespace exdyna::sim
