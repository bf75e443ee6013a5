// Gaussian-k: the Gaussian fit's threshold, its corrections by counting, and the sparsifier on the
// in-process group (the cross-sparsifier properties are in sparsifiers_test.cpp).
#include "exdyna/sparsifiers/gaussiank.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/core/normal_quantile.hpp"

namespace exdyna::sparsifiers {
namespace {

std::vector<float> gaussian(std::size_t n, double sigma, std::uint64_t seed) {
  core::SplitMix64 g(seed);
  std::vector<float> x(n);
  for (auto& v : x)  // Box-Muller, one of the pair
    v = static_cast<float>(sigma * std::sqrt(-2 * std::log(g.uniform_open())) *
                           std::cos(2 * M_PI * g.uniform()));
  return x;
}

std::vector<float> laplace(std::size_t n, double b, std::uint64_t seed) {
  core::SplitMix64 g(seed);
  std::vector<float> x(n);
  for (auto& v : x)
    v = static_cast<float>(-b * std::log(g.uniform_open())) * (g.next() & 1 ? 1 : -1);
  return x;
}

// A hand-worked example: 10 values with mean 0 and sum of squares 4 + 4 + 1 + 1 + 6 * 0.25 = 11.5,
// so sigma = sqrt(1.15) = 1.0724. d = 0.2: thr = 0 + 1.0724 * Phi^-1(0.9) = 1.0724 * 1.2816 =
// 1.3743; |x| >= 1.3743 selects the two +-2 values (indices 0 and 1): 2 = k, inside [4/3, 8/3], so
// no correction.
TEST(GaussianK, HandWorkedExample) {
  const std::vector<float> acc = {2.0f, -2.0f, 1.0f, -1.0f, 0.5f, -0.5f, 0.5f, -0.5f, 0.5f, -0.5f};
  std::vector<Index> idx;
  const auto est = gaussiank_select(acc, 0.2, idx);
  EXPECT_NEAR(est.threshold, std::sqrt(1.15) * core::normal_quantile(0.9), 1e-6);
  EXPECT_EQ(est.corrections, 0);
  ASSERT_EQ(est.count, 2u);
  EXPECT_EQ(idx[0], 0u);
  EXPECT_EQ(idx[1], 1u);
}

TEST(GaussianK, OnGaussianDataTheFitAloneHitsK) {
  const auto x = gaussian(1'000'000, 0.01, 7);
  for (double d : {0.01, 0.001}) {
    std::vector<Index> idx;
    const auto est = gaussiank_select(x, d, idx);
    const double k = std::floor(d * 1e6);
    EXPECT_EQ(est.corrections, 0) << d;
    EXPECT_NEAR(static_cast<double>(est.count) / k, 1.0, 0.08) << d;
  }
}

// Heavier tails than the fit: at d = 0.001 the Gaussian threshold selects ~9x too many, and one
// correction (x1.5) brings the count into [2k/3, 4k/3].
TEST(GaussianK, CorrectionsBringHeavyTailsIntoTheBand) {
  const auto x = laplace(1'000'000, 0.01, 11);
  std::vector<Index> idx;
  const auto est = gaussiank_select(x, 0.001, idx);
  EXPECT_GE(est.corrections, 1);
  EXPECT_GE(static_cast<double>(est.count), 2.0 * 1000 / 3);
  EXPECT_LE(static_cast<double>(est.count), 4.0 * 1000 / 3);
  for (std::size_t j = 0; j < est.count; ++j)
    EXPECT_GE(std::fabs(x[idx[j]]), static_cast<float>(est.threshold));
}

TEST(GaussianK, AllZeroSelectsNothingAndDensityOneSelectsAll) {
  std::vector<float> zeros(1000, 0.0f);
  std::vector<Index> idx;
  EXPECT_EQ(gaussiank_select(zeros, 0.01, idx).count, 0u);
  const auto x = gaussian(1000, 1.0, 3);
  EXPECT_EQ(gaussiank_select(x, 1.0, idx).count, 1000u);
}

// Every rank ends with the same union and the mean threshold over ranks.
TEST(GaussianK, RanksAgreeOnTheUnionAndTheThreshold) {
  const int n = 4;
  const std::int64_t n_g = 20'000;
  std::vector<SparseResult> res(n);
  std::vector<StepStats> st(n);
  std::vector<double> own(n);
  comm::run_local(n, [&](comm::Communicator& c) {
    SparsifierConfig cfg;
    cfg.n_g = n_g, cfg.world_size = n, cfg.rank = c.rank(), cfg.density = 0.01;
    GaussianK g(cfg);
    const auto acc = gaussian(static_cast<std::size_t>(n_g), 1.0 + c.rank(), 100 + c.rank());
    std::vector<Index> idx;
    own[static_cast<std::size_t>(c.rank())] = gaussiank_select(acc, 0.01, idx).threshold;
    g.step(acc, c, res[static_cast<std::size_t>(c.rank())], st[static_cast<std::size_t>(c.rank())]);
  });
  const double mean = (own[0] + own[1] + own[2] + own[3]) / 4;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r].indices, res[0].indices) << r;
    EXPECT_EQ(res[r].values, res[0].values) << r;
    EXPECT_DOUBLE_EQ(st[r].threshold, mean) << r;
    EXPECT_EQ(st[r].k_target, 200);
  }
  EXPECT_GT(res[0].indices.size(), 200u);  // independent selections: the union exceeds k
}

}  // namespace
}  // namespace exdyna::sparsifiers
