// normal_quantile: Phi^-1 to double precision, checked against Phi and known quantiles.
#include "exdyna/core/normal_quantile.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace exdyna::core {
namespace {

TEST(NormalQuantile, KnownQuantiles) {
  EXPECT_DOUBLE_EQ(normal_quantile(0.5), 0.0);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-13);
  EXPECT_NEAR(normal_quantile(0.995), 2.5758293035489004, 1e-13);
  EXPECT_NEAR(normal_quantile(0.9995), 3.2905267314918945, 1e-12);
  EXPECT_NEAR(normal_quantile(0.025), -1.959963984540054, 1e-13);
  EXPECT_NEAR(normal_quantile(1e-10), -6.361340902404056, 1e-9);
}

TEST(NormalQuantile, InvertsTheCdfInBothTailsAndTheCentre) {
  for (double p : {1e-12, 1e-6, 0.001, 0.02, 0.02425, 0.1, 0.3, 0.5, 0.7, 0.97, 0.999, 1 - 1e-9}) {
    const double x = normal_quantile(p);
    EXPECT_NEAR(normal_cdf(x), p, 1e-14 + 1e-12 * std::min(p, 1 - p)) << p;
    const double q = 1 - p;  // rounded; 1 - q is exact, so the pair is exactly symmetric
    EXPECT_DOUBLE_EQ(normal_quantile(q), -normal_quantile(1 - q)) << p;
  }
}

TEST(NormalQuantile, EdgesAndInvalidInput) {
  EXPECT_EQ(normal_quantile(0), -INFINITY);
  EXPECT_EQ(normal_quantile(1), INFINITY);
  EXPECT_TRUE(std::isnan(normal_quantile(-0.1)));
  EXPECT_TRUE(std::isnan(normal_quantile(1.5)));
  EXPECT_TRUE(std::isnan(normal_quantile(NAN)));
}

}  // namespace
}  // namespace exdyna::core
