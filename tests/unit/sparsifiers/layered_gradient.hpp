// The gradients the device-path tests (device_step_test.cpp, resident_step_test.cpp) hold their
// steps to step() on: heavy-tailed values in 8 layers whose scales span three decades, a part
// shared by all ranks, and a scale step at iteration 12 (as a learning-rate decay), so the
// controller has to move.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace exdyna::test {

inline void fill_layered_gradient(std::vector<float>& g, int rank, std::int64_t t) {
  std::mt19937_64 shared(static_cast<std::uint64_t>(1000 + t));
  std::mt19937_64 own(static_cast<std::uint64_t>(rank * 7919 + t * 104729 + 1));
  std::exponential_distribution<float> e(1.0f);
  const std::size_t layer = g.size() / 8 + 1;
  const float step = t >= 12 ? 0.1f : 1.0f;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const float scale = std::pow(10.0f, static_cast<float>((i / layer) * 3 % 8) / 2.5f - 2.0f);
    const float a = e(shared) * (shared() & 1 ? 1.0f : -1.0f);
    const float b = e(own) * (own() & 1 ? 1.0f : -1.0f);
    g[i] = step * scale * (a + b);
  }
}

}  // namespace exdyna::test
