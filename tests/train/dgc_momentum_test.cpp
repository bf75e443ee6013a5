// DGC's optimizer side (train/dgc_momentum): the velocity, local clipping, momentum factor masking,
// the update and the density warm-up's schedule and its refusals, on hand-worked numbers (the DGC
// training runs are in training_test.cpp).
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

// The paper's warm-up: start 0.25, target 0.001 over 4 epochs. d_e = 0.25 * 0.004^(e / 4), by hand:
// 0.004^(1/4) = 0.251487, 0.004^(1/2) = 0.0632456, 0.004^(3/4) = 0.0159054.
TEST(DgcWarmup, PaperScheduleAtHandWorkedPoints) {
  EXPECT_EQ(dgc_warmup_density(0, 4, 0.25, 0.001), 0.25);  // exactly the start
  EXPECT_NEAR(dgc_warmup_density(1, 4, 0.25, 0.001), 0.0628717, 1e-7);
  EXPECT_NEAR(dgc_warmup_density(2, 4, 0.25, 0.001), 0.0158114, 1e-7);
  EXPECT_NEAR(dgc_warmup_density(3, 4, 0.25, 0.001), 0.00397635, 1e-8);
  // The paper's list (0.0625, 0.015625, 0.004) within 2 %.
  EXPECT_NEAR(dgc_warmup_density(1, 4, 0.25, 0.001) / 0.0625, 1, 0.02);
  EXPECT_NEAR(dgc_warmup_density(2, 4, 0.25, 0.001) / 0.015625, 1, 0.02);
  EXPECT_NEAR(dgc_warmup_density(3, 4, 0.25, 0.001) / 0.004, 1, 0.02);
  // Exactly the target from epoch E on, and always without a warm-up.
  for (std::int64_t e : {4, 5, 100}) EXPECT_EQ(dgc_warmup_density(e, 4, 0.25, 0.001), 0.001);
  for (std::int64_t e : {0, 1, 7}) EXPECT_EQ(dgc_warmup_density(e, 0, 0.25, 0.01), 0.01);
  // Two epochs from 0.5 to 0.05: 0.5, 0.5 * sqrt(0.1) = 0.158114, then 0.05.
  EXPECT_EQ(dgc_warmup_density(0, 2, 0.5, 0.05), 0.5);
  EXPECT_NEAR(dgc_warmup_density(1, 2, 0.5, 0.05), 0.1581139, 1e-7);
  EXPECT_EQ(dgc_warmup_density(2, 2, 0.5, 0.05), 0.05);
}

TEST(DgcWarmup, DecreasesStrictlyThenHoldsTheTarget) {
  for (const std::int64_t E : {1, 3, 10}) {
    double prev = 2;
    for (std::int64_t e = 0; e <= E; ++e) {
      const double d = dgc_warmup_density(e, E, 0.3, 0.01);
      EXPECT_LT(d, prev) << "E " << E << " epoch " << e;
      EXPECT_GE(d, 0.01);
      prev = d;
    }
    EXPECT_EQ(prev, 0.01);
  }
}

namespace {
std::string refusal(std::int64_t epochs, double start, double target) {
  try {
    validate_dgc_warmup(epochs, start, target);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(DgcWarmup, BadOptionsAreRefusedNamingOptionValueAndRange) {
  EXPECT_NE(refusal(-1, 0.25, 0.01)
                .find("--dgc-warmup-epochs -1 is not valid; expected an integer "
                      ">= 0"),
            std::string::npos);
  for (const double s : {0.005, 0.01, 1.5, std::nan("")}) {
    const auto m = refusal(2, s, 0.01);
    EXPECT_NE(m.find("--dgc-warmup-start "), std::string::npos) << s << ": " << m;
    EXPECT_NE(m.find("expected a density in (0.01, 1]"), std::string::npos) << m;
  }
  EXPECT_EQ(refusal(2, 1.0, 0.01), "");
  EXPECT_EQ(refusal(0, 0.25, 0.5), "");  // off: the start is not used
}
