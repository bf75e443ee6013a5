// core/reductions: the SSE2 passes agree with plain loops at every length (vector body, tails,
// several chunks) and flag NaN and Inf.
#include "exdyna/core/reductions.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "exdyna/core/hash.hpp"

using namespace exdyna::core;

namespace {

std::vector<float> values(std::size_t n, std::uint64_t seed) {
  SplitMix64 g(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(g.uniform() * 2 - 1);
  return v;
}

TEST(Reductions, AgreeWithPlainLoops) {
  for (std::size_t n : {0u, 1u, 7u, 16u, 17u, 4095u, 4096u, 4113u, 20000u}) {
    const auto x = values(n, n + 1);
    const auto g = values(n, n + 1000);
    double want_abs = 0, want_sq = 0, want_exc = 0;
    std::size_t want_cnt = 0;
    for (std::size_t i = 0; i < n; ++i) {
      want_abs += std::fabs(x[i]);
      want_sq += static_cast<double>(x[i]) * x[i];
      if (std::fabs(x[i]) >= 0.5f) want_exc += std::fabs(x[i]) - 0.5, ++want_cnt;
    }
    EXPECT_NEAR(sum_abs(x), want_abs, 1e-5 * (1 + want_abs)) << n;
    const auto e = exceedances(x, 0.5f);
    EXPECT_EQ(e.count, want_cnt) << n;
    EXPECT_NEAR(e.sum, want_exc, 1e-5 * (1 + want_exc)) << n;
    auto r = x;
    const auto a = accumulate(r, g);
    EXPECT_TRUE(a.finite);
    EXPECT_NEAR(a.residual_sq, want_sq, 1e-5 * (1 + want_sq)) << n;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], x[i] + g[i]) << n << " " << i;
  }
}

TEST(Reductions, AccumulateFlagsNanAndInfAnywhere) {
  for (std::size_t at : {0u, 15u, 16u, 4100u, 4112u}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      auto r = values(4113, 3);
      auto g = values(4113, 4);
      g[at] = bad;
      const auto before = r;
      EXPECT_FALSE(accumulate(r, g).finite) << at << " " << bad;
      // The non-finite sum is not stored (non_finite = skip undoes the rest); the others are.
      for (std::size_t i = 0; i < r.size(); ++i)
        ASSERT_EQ(r[i], i == at ? before[i] : before[i] + g[i]) << at << " " << i;
    }
  }
  // A finite gradient whose sum overflows keeps the residual too.
  std::vector<float> big(20, 3e38f), push(20, 3e38f);
  EXPECT_FALSE(accumulate(big, push).finite);
  EXPECT_EQ(big, std::vector<float>(20, 3e38f));
  // Large finite values whose sum overflows only in the wrong formula stay finite.
  std::vector<float> r(32, 3e38f), g(32, 0.0f);
  EXPECT_TRUE(accumulate(r, g).finite);
}

}  // namespace
