// The sparsifier configuration and gradients shared by sparsifier_state_fuzz and the seed writer
// (make_seeds): seeds are states saved by sparsifiers built exactly like the fuzzed ones.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "exdyna/sparsifiers/config.hpp"

namespace exdyna::fuzz {

// The input: the sparsifier's registry name, a NUL byte, a controller byte c (exdyna uses
// controller c % kStateFuzzControllers: paper, histogram, exact; their states differ), then the
// state. Names rather than indices, so seeds stay valid when sparsifiers are registered.
inline constexpr int kStateFuzzControllers = 3;

inline sparsifiers::SparsifierConfig state_fuzz_config(int controller) {
  sparsifiers::SparsifierConfig c;
  c.n_g = 257;
  c.world_size = 1;
  c.rank = 0;
  c.density = 0.05;
  c.exdyna.n_blocks = 8;
  c.exdyna.controller = static_cast<sparsifiers::Controller>(
      controller);  // 32 elements a block: exdyna stays quiet about n_g < 32 * n_b
  return c;
}

inline std::vector<float> state_fuzz_gradient(int t) {
  std::vector<float> g(257);
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + t) * (1.0 + (i % 11)));
  return g;
}

}  // namespace exdyna::fuzz
