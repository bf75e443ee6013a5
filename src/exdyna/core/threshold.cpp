#include "exdyna/core/threshold.hpp"

#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::core {

double initial_threshold(std::int64_t k) {
  EXDYNA_CHECK_ARG(k >= 1, "k ", k, " is not valid for the first threshold; expected k >= 1");
  return 1.0 / (2.0 * std::sqrt(static_cast<double>(k)));
}

double paper_scale_factor(std::int64_t k, std::int64_t k_actual, double beta, double gamma) {
  EXDYNA_CHECK_ARG(k >= 1, "k ", k, " is not valid for threshold scaling; expected k >= 1");
  const double exam = static_cast<double>(k_actual) / static_cast<double>(k);
  if (exam > beta) return 1.0 + gamma;
  if (exam > 1.0 / beta) return 1.0 + 0.25 * gamma;
  return 1.0 - gamma;
}

}  // namespace exdyna::core
