// DGC's optimizer side (train/dgc_momentum): the velocity, local clipping, momentum factor masking
// and the update, on hand-worked numbers; and a DGC training run on the in-process group.
#include "exdyna/train/dgc_momentum.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exdyna/core/error.hpp"

using namespace exdyna;
using namespace exdyna::train;

// m = 0.9, wd = 0.1, no clipping: u = 0.9 u + g + 0.1 p, and grad becomes u.
TEST(DgcMomentum, VelocityIsMomentumTimesOldPlusGradientAndDecay) {
  std::vector<float> g = {1, -2, 0.5f}, u = {0.5f, 0, -1}, p = {10, 0, -10};
  dgc_velocity(g, u, p, 0.9f, 0.1f, 0, 4);
  const std::vector<float> want = {0.45f + 1 + 1, 0 - 2 + 0, -0.9f + 0.5f - 1};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(u[i], want[i]) << i;
    EXPECT_FLOAT_EQ(g[i], want[i]) << i;
  }
}

// --clip 2 over 4 workers clips each local gradient to norm 2 / sqrt(4) = 1: (3, 4) -> (0.6, 0.8).
TEST(DgcMomentum, LocalClippingScalesTheNormBySqrtWorkers) {
  std::vector<float> g = {3, 4}, u = {0, 0}, p = {0, 0};
  dgc_velocity(g, u, p, 0.9f, 0, 2.0, 4);
  EXPECT_NEAR(g[0], 0.6, 1e-6);
  EXPECT_NEAR(g[1], 0.8, 1e-6);
  // Under the bound nothing changes.
  std::vector<float> small = {0.3f, 0.4f}, u2 = {0, 0};
  dgc_velocity(small, u2, p, 0.9f, 0, 2.0, 4);
  EXPECT_FLOAT_EQ(small[0], 0.3f);
}

TEST(DgcMomentum, MaskingZeroesTheSentIndicesOnly) {
  std::vector<float> u = {1, 2, 3, 4, 5};
  const std::vector<std::uint32_t> sent = {1, 4};
  dgc_mask(u, sent);
  EXPECT_EQ(u, (std::vector<float>{1, 0, 3, 4, 0}));
  const std::vector<std::uint32_t> bad = {5};
  EXPECT_THROW(dgc_mask(u, bad), Error);
}

TEST(DgcMomentum, ApplyStepsAgainstTheUpdateWithoutFurtherMomentum) {
  std::vector<float> p = {1, 1}, upd = {0.5f, -2};
  dgc_apply(p, upd, 0.1);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], 1.2f);
}
