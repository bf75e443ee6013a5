// DGC's selection: a hand-worked example, the sampled threshold's error on known distributions,
// the hierarchical refinement, and the sparsifier's state (the cross-sparsifier properties are in
// sparsifiers_test.cpp).
#include "exdyna/sparsifiers/dgc.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

SparsifierConfig config(std::int64_t n_g, double density, double sample = 0.01) {
  SparsifierConfig c;
  c.n_g = n_g;
  c.density = density;
  c.dgc.sample = sample;
  return c;
}

// Draws from three shapes: Gaussian, Laplace (heavier tails), uniform (none).
std::vector<float> draw(int shape, std::size_t n, std::uint64_t seed) {
  core::SplitMix64 g(seed);
  std::vector<float> x(n);
  for (auto& v : x) {
    const double u = g.uniform_open(), w = g.uniform();
    if (shape == 0) v = static_cast<float>(std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * w));
    if (shape == 1) v = static_cast<float>(-std::log(u) * (w < 0.5 ? 1 : -1));
    if (shape == 2) v = static_cast<float>(2 * u - 1);
  }
  return x;
}

}  // namespace

// Five values of magnitude 2 among five of 0.5, d = 0.5 (k = 5, a sample of 10 draws, the 5th
// largest sampled magnitude as threshold). Whatever the draws: at least five 2s sampled gives
// threshold 2, exactly the five 2s pass; fewer gives 0.5, all ten pass (10 > 4k/3) and the
// refinement keeps the top five, the 2s again. Either way indices {0, 3, 4, 7, 9}.
TEST(Dgc, HandWorkedExampleSelectsTheFiveLargest) {
  const std::vector<float> acc = {2, 0.5f, -0.5f, -2, 2, 0.5f, -0.5f, -2, 0.5f, 2};
  EXPECT_EQ(dgc_sample_size(acc.size(), 0.5, 0.01), 10u);
  for (std::uint64_t key = 0; key < 50; ++key) {
    std::vector<Index> idx;
    DgcScratch s;
    const auto est = dgc_select(acc, 0.5, 0.01, key, idx, s);
    ASSERT_EQ(est.count, 5u) << key;
    EXPECT_EQ(std::vector<Index>(idx.begin(), idx.begin() + 5),
              (std::vector<Index>{0, 3, 4, 7, 9}));
    EXPECT_TRUE(est.threshold == 2.0 || (est.threshold == 0.5 && est.refined)) << key;
  }
}

// The sample size: r n_g, at least 64 / d, at most n_g.
TEST(Dgc, SampleSize) {
  EXPECT_EQ(dgc_sample_size(1'000'000, 0.01, 0.01), 10'000u);   // r n_g = 10,000 >= 6,400
  EXPECT_EQ(dgc_sample_size(1'000'000, 0.001, 0.01), 64'000u);  // 64 / d wins
  EXPECT_EQ(dgc_sample_size(1'000'000, 0.01, 0.5), 500'000u);
  EXPECT_EQ(dgc_sample_size(1'000, 0.001, 0.01), 1'000u);  // capped at n_g
}

// The stated error: the count passing the sampled threshold has a relative standard deviation of
// about 1 / sqrt(d s) (d s sampled values lie above it). Over 20 sample streams on each shape and
// density: every count within 5 of those deviations of k, their mean within 4 / sqrt(20).
TEST(Dgc, SampledThresholdIsWithinItsStatedErrorOnKnownDistributions) {
  const std::size_t n = 1'000'000;
  for (int shape = 0; shape < 3; ++shape) {
    const auto x = draw(shape, n, 100 + static_cast<std::uint64_t>(shape));
    for (const double d : {0.01, 0.001}) {
      const double k = std::floor(d * static_cast<double>(n));
      const double sd = 1 / std::sqrt(d * static_cast<double>(dgc_sample_size(n, d, 0.01)));
      double sum = 0;
      const int trials = 20;
      for (int key = 0; key < trials; ++key) {
        std::vector<Index> idx;
        DgcScratch s;
        const auto est = dgc_select(x, d, 0.01, static_cast<std::uint64_t>(key), idx, s);
        const double r = static_cast<double>(est.passed) / k;
        EXPECT_NEAR(r, 1.0, 5 * sd) << "shape " << shape << " d " << d << " key " << key;
        sum += r;
      }
      EXPECT_NEAR(sum / trials, 1.0, 4 * sd / std::sqrt(trials)) << "shape " << shape << " d " << d;
    }
  }
}

// When far too many pass (a sample that misses the tail), the refinement keeps exactly the top k,
// the same set as an exact top-k of the whole vector.
TEST(Dgc, RefinementKeepsTheExactTopK) {
  const std::size_t n = 100'000;
  auto x = draw(1, n, 9);
  // 500 equal outliers: a sample of 64,000 (64 / d at d = 0.001) holds about 320 of them, so the
  // 64th largest sampled magnitude is 1000 and all 500 pass: 500 > 4k/3 with k = 100. The top 100
  // of equal magnitudes are the first 100 by index, for the refinement as for the exact top-k.
  for (std::size_t i = 0; i < n; i += 200) x[i] = -1000.0f;
  const double d = 0.001;  // k = 100 < 500 outliers
  std::vector<Index> idx;
  DgcScratch s;
  const auto est = dgc_select(x, d, 0.01, 3, idx, s);
  ASSERT_TRUE(est.refined);
  ASSERT_EQ(est.count, 100u);
  std::vector<std::uint32_t> exact;
  core::TopkScratch ts;
  core::topk_select(x, 100, core::TopkMethod::kNthElement, exact, ts);
  EXPECT_EQ(std::vector<Index>(idx.begin(), idx.begin() + 100), exact);
}

TEST(Dgc, StateRoundTripDrawsTheSameSamples) {
  const std::int64_t n_g = 20'011;
  const auto x = draw(0, static_cast<std::size_t>(n_g), 5);
  Dgc a(config(n_g, 0.01)), b(config(n_g, 0.01)), fresh(config(n_g, 0.01));
  SparseResult ra, rb, rc;
  StepStats st;
  std::vector<double> thr(3);
  comm::run_local(1, [&](comm::Communicator& c) {
    for (int t = 0; t < 3; ++t) a.step(x, c, ra, st);
    b.load_state(a.save_state());
    a.step(x, c, ra, st);
    thr[0] = st.threshold;
    b.step(x, c, rb, st);
    thr[1] = st.threshold;
    fresh.step(x, c, rc, st);
    thr[2] = st.threshold;
  });
  EXPECT_EQ(ra.indices, rb.indices);
  EXPECT_EQ(thr[0], thr[1]);
  EXPECT_NE(thr[0], thr[2]);  // iteration 0's sample is another one
  auto s = a.save_state();
  s.pop_back();
  EXPECT_THROW(a.load_state(s), InvalidArgument);
}

TEST(Dgc, SampleRatioOutsideZeroOneIsRefusedByName) {
  for (const double r : {0.0, -0.1, 1.5, std::nan("")}) {
    try {
      Dgc sp(config(1000, 0.01, r));
      FAIL() << r;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--dgc-sample"), std::string::npos) << e.what();
    }
  }
}

// The trainer's warm-up sets the density before each step: the selection follows it (k and the
// reported target), the fingerprint keeps the configured density, and a density that selects
// nothing is refused.
TEST(Dgc, SetDensityChangesTheSelectionNotTheFingerprint) {
  const std::int64_t n_g = 20'011;
  const auto x = draw(0, static_cast<std::size_t>(n_g), 7);
  Dgc a(config(n_g, 0.01));
  const auto fp = a.fingerprint();
  EXPECT_EQ(a.density(), 0.01);
  SparseResult r;
  StepStats at_target, warm;
  comm::run_local(1, [&](comm::Communicator& c) {
    a.step(x, c, r, at_target);
    a.set_density(0.1);
    a.step(x, c, r, warm);
  });
  EXPECT_EQ(at_target.k_target, 200);
  EXPECT_EQ(warm.k_target, 2001);
  EXPECT_EQ(warm.target_density, 0.1);
  // One worker: about k selected (the refinement caps at k, fewer may pass).
  EXPECT_GT(warm.k_total, 1000);
  EXPECT_LE(warm.k_total, 2001 * 4 / 3);
  EXPECT_EQ(a.fingerprint(), fp);
  EXPECT_THROW(a.set_density(0), InvalidArgument);
  EXPECT_THROW(a.set_density(1.5), InvalidArgument);
  EXPECT_THROW(a.set_density(1e-6), InvalidArgument);  // floor(d n_g) = 0
}
