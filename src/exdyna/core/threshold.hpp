// Online threshold scaling (paper Alg. 5) and its first threshold.
//
// Thresholds are kept in double and compared in float (|acc| >= (float)threshold), so repeated
// scaling by 1 +- gamma does not lose the small steps to float rounding.
#pragma once

#include <cstdint>

namespace exdyna::core {

// DESIGN.md: the first threshold is 1 / (2 sqrt(k)). Throws InvalidArgument for k < 1.
double initial_threshold(std::int64_t k);

// Alg. 5 lines 1-7: exam = k'/k; 1 + gamma if exam > beta, 1 + gamma/4 if exam > 1/beta, else
// 1 - gamma. (Inside the band the threshold still creeps up by gamma/4: the paper's choice.)
double paper_scale_factor(std::int64_t k, std::int64_t k_actual, double beta, double gamma);

// Alg. 5 line 8: delta_{t+1} = delta_t * sf.
inline double paper_next_threshold(double threshold, std::int64_t k, std::int64_t k_actual,
                                   double beta, double gamma) {
  return threshold * paper_scale_factor(k, k_actual, beta, gamma);
}

}  // namespace exdyna::core
