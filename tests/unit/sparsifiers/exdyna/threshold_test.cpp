// Alg. 5 online threshold scaling.
#include <gtest/gtest.h>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

TEST(Threshold, FirstThresholdIsOneOverTwoRootK) {
  EXPECT_DOUBLE_EQ(initial_threshold(100), 0.05);
  EXPECT_DOUBLE_EQ(initial_threshold(1), 0.5);
  EXPECT_THROW(initial_threshold(0), InvalidArgument);
}

TEST(Threshold, ThreeFactorsOnEitherSideOfEachBandEdge) {
  const double beta = 1.1, gamma = 0.005;
  const std::int64_t k = 1000;
  // Upper edge: k'/k > beta (strictly).
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 1101, beta, gamma), 1 + gamma);
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 1100, beta, gamma), 1 + gamma / 4);  // exactly beta
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 1000, beta, gamma), 1 + gamma / 4);
  // Lower edge: k'/k > 1/beta = 0.90909...
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 910, beta, gamma), 1 + gamma / 4);
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 909, beta, gamma), 1 - gamma);
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 0, beta, gamma), 1 - gamma);
  EXPECT_DOUBLE_EQ(paper_scale_factor(k, 1'000'000, beta, gamma), 1 + gamma);
  // Other parameters are honoured: beta = 2, gamma = 0.1.
  EXPECT_DOUBLE_EQ(paper_scale_factor(10, 21, 2.0, 0.1), 1.1);
  EXPECT_DOUBLE_EQ(paper_scale_factor(10, 20, 2.0, 0.1), 1.025);
  EXPECT_DOUBLE_EQ(paper_scale_factor(10, 6, 2.0, 0.1), 1.025);
  EXPECT_DOUBLE_EQ(paper_scale_factor(10, 5, 2.0, 0.1), 0.9);
  EXPECT_DOUBLE_EQ(paper_next_threshold(0.5, 10, 21, 2.0, 0.1), 0.5 * 1.1);
  EXPECT_THROW(paper_scale_factor(0, 1, beta, gamma), InvalidArgument);
}
