// What the device-path tests (device_step_test.cpp, resident_step_test.cpp) share: a config for
// ExDyna at a density on one rank of n, and the decisions two steps must agree on.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::test {

inline sparsifiers::SparsifierConfig device_path_config(std::int64_t n_g, int n, int rank,
                                                        double d) {
  sparsifiers::SparsifierConfig c;
  c.density = d;
  c.n_g = n_g;
  c.world_size = n;
  c.rank = rank;
  return c;
}

// The threshold, the counts and the partitions; each test adds what its paths also share.
inline void expect_same_decisions(const sparsifiers::StepStats& a,
                                  const sparsifiers::StepStats& b) {
  EXPECT_EQ(a.threshold, b.threshold);
  EXPECT_EQ(a.k_per_worker, b.k_per_worker);
  EXPECT_EQ(a.alloc_per_worker, b.alloc_per_worker);
  EXPECT_EQ(a.blocks_per_partition, b.blocks_per_partition);
}

}  // namespace exdyna::test
