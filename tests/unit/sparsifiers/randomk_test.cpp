// Random-k (sparsifiers/randomk.hpp): a hand-worked draw and its all-reduced values on 2 ranks,
// exactly k distinct indices, the same indices on every rank, uniform marginals and pairs (a
// chi-square bound that a biased draw would exceed), the seed in the fingerprint, and the state
// round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/randomk.hpp"
#include "exdyna/sparsifiers/registry.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

SparsifierConfig config(std::int64_t n_g, int n, int rank, double density, std::uint64_t seed) {
  SparsifierConfig c;
  c.n_g = n_g;
  c.world_size = n;
  c.rank = rank;
  c.density = density;
  c.randomk.seed = seed;
  return c;
}

std::vector<Index> draw(std::uint64_t seed, std::int64_t t, std::int64_t n_g, std::int64_t k) {
  std::vector<Index> out;
  std::vector<bool> mark;
  randomk_indices(seed, t, n_g, k, out, mark);
  return out;
}

// Pearson's statistic of observed counts against one expected count per cell.
double chi_square(const std::vector<std::int64_t>& observed, double expected) {
  double x = 0;
  for (const auto o : observed)
    x += (static_cast<double>(o) - expected) * (static_cast<double>(o) - expected) / expected;
  return x;
}

}  // namespace

// Seed 7, n_g = 10, d = 0.3 (k = 3), worked by hand from the stream (and by an independent
// Python transcription): stream = SplitMix64(mix(7) ^ mix(t + 1)); Floyd's loop for j = 7, 8, 9
// draws t_j uniform in [0, j]:
//   iteration 0: t_7 = 7 -> {7}; t_8 = 6 -> {6, 7}; t_9 = 6, taken, so j = 9 -> {6, 7, 9}
//   iteration 1: t_7 = 5, t_8 = 8, t_9 = 8 taken -> 9: {5, 8, 9}
//   iteration 2: t_7 = 0, t_8 = 1, t_9 = 8: {0, 1, 8}
// Rank r's acc[i] = 10 r + i + t, so the all-reduced value at i is 10 + 2 (i + t).
TEST(RandomK, HandWorkedDrawAndSumsOnTwoRanks) {
  const std::vector<std::vector<Index>> want = {{6, 7, 9}, {5, 8, 9}, {0, 1, 8}};
  for (int t = 0; t < 3; ++t) EXPECT_EQ(draw(7, t, 10, 3), want[static_cast<std::size_t>(t)]);
  std::vector<std::vector<SparseResult>> got(2, std::vector<SparseResult>(3));
  std::vector<StepStats> stats(2);
  std::vector<comm::ByteCounts> bytes(2);
  comm::run_local(2, [&](comm::Communicator& c) {
    RandomK sp(config(10, 2, c.rank(), 0.3, 7));
    std::vector<float> acc(10);
    for (int t = 0; t < 3; ++t) {
      for (int i = 0; i < 10; ++i) acc[static_cast<std::size_t>(i)] = 10.0f * c.rank() + i + t;
      StepStats st;
      sp.step(acc, c, got[static_cast<std::size_t>(c.rank())][static_cast<std::size_t>(t)], st);
      stats[static_cast<std::size_t>(c.rank())] = st;
    }
    bytes[static_cast<std::size_t>(c.rank())] = c.bytes();
  });
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 3; ++t) {
      const auto& res = got[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
      EXPECT_FALSE(res.dense);
      EXPECT_EQ(res.indices, want[static_cast<std::size_t>(t)]) << "rank " << r << " t " << t;
      ASSERT_EQ(res.values.size(), 3u);
      for (std::size_t j = 0; j < 3; ++j)
        EXPECT_EQ(res.values[j], 10.0f + 2.0f * static_cast<float>(res.indices[j] + t));
    }
  EXPECT_EQ(stats[0].k_unique, 3);
  EXPECT_EQ(stats[0].k_target, 3);
  EXPECT_DOUBLE_EQ(stats[0].density, 0.3);
  EXPECT_EQ(stats[0].f_t, 1.0);
  EXPECT_EQ(stats[0].padded_elements, 0);
  // Only the k values travel (3 steps x 3 floats): no count or index all-gather, no broadcast.
  EXPECT_EQ(bytes[0].allreduce, 36u);
  EXPECT_EQ(bytes[0].allgather_counts + bytes[0].allgather_indices + bytes[0].broadcast, 0u);
}

TEST(RandomK, ExactlyKDistinctSortedIndicesInRange) {
  for (const std::int64_t n_g : {1, 2, 37, 1009, 32771})
    for (const std::int64_t k : {std::int64_t{1}, n_g / 3, n_g - 1, n_g}) {
      if (k < 1) continue;
      for (std::int64_t t = 0; t < 5; ++t) {
        const auto v = draw(42, t, n_g, k);
        ASSERT_EQ(static_cast<std::int64_t>(v.size()), k) << n_g << " " << k;
        EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
        EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end()) << "duplicate";
        EXPECT_LT(static_cast<std::int64_t>(v.back()), n_g);
      }
    }
  // k = n_g: every index.
  const auto all = draw(3, 0, 37, 37);
  for (Index i = 0; i < 37; ++i) EXPECT_EQ(all[i], i);
  EXPECT_THROW(draw(3, 0, 10, 11), InvalidArgument);
}

// Every rank of a 5-rank group holds the same indices every iteration, the iterations differ, and
// another seed gives other indices (and another fingerprint).
TEST(RandomK, SameIndicesOnEveryRankAndNewOnesEachIteration) {
  const int n = 5, steps = 20;
  const std::int64_t n_g = 1009;
  std::vector<std::vector<std::vector<Index>>> seen(n);
  comm::run_local(n, [&](comm::Communicator& c) {
    auto ef = make_error_feedback("randomk", config(0, 0, 0, 0.02, 11), n_g, n, c.rank(),
                                  builtin_registry());
    std::vector<float> g(static_cast<std::size_t>(n_g));
    for (int t = 0; t < steps; ++t) {
      for (std::int64_t i = 0; i < n_g; ++i)
        g[static_cast<std::size_t>(i)] = static_cast<float>((i * 31 + c.rank() * 7 + t) % 13) - 6;
      ef.step(g, c);
      seen[static_cast<std::size_t>(c.rank())].push_back(ef.last_result().indices);
    }
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(seen[static_cast<std::size_t>(r)], seen[0]) << r;
  std::set<std::vector<Index>> distinct(seen[0].begin(), seen[0].end());
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(steps));
  for (const auto& v : seen[0]) EXPECT_EQ(v.size(), 20u);  // floor(0.02 * 1009)
  EXPECT_NE(draw(11, 0, n_g, 20), draw(12, 0, n_g, 20));
  RandomK a(config(n_g, 1, 0, 0.02, 11)), b(config(n_g, 1, 0, 0.02, 12));
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint().find("randomk"), std::string::npos);
}

// Over 20,000 draws of k = 5 of n_g = 50: each index is drawn 2,000 times in expectation, and
// index 0 with each other index 20000 * 5 * 4 / (50 * 49) = 163.3 times. Pearson's statistic has
// 49 degrees of freedom (mean 49, sd 9.9); the bound 110 is 6 sd out, so a correct draw fails
// with probability below 1e-6 (and the seeds are fixed). A draw that favoured low indices, or
// drew runs of neighbours, or a modulo-biased draw at this size, would exceed it by far.
TEST(RandomK, UniformMarginalsAndPairs) {
  const std::int64_t n_g = 50, k = 5, T = 20000;
  std::vector<std::int64_t> count(n_g, 0), with0(n_g - 1, 0);
  std::int64_t zero_drawn = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const auto v = draw(2024, t, n_g, k);
    for (const Index i : v) ++count[i];
    if (v.front() == 0) {
      ++zero_drawn;
      for (std::size_t j = 1; j < v.size(); ++j) ++with0[v[j] - 1];
    }
  }
  const double x_marginal = chi_square(count, static_cast<double>(T * k) / n_g);
  EXPECT_LT(x_marginal, 110.0) << "index counts are not uniform";
  const double pair_expected = static_cast<double>(T) * k * (k - 1) / (n_g * (n_g - 1.0));
  const double x_pairs = chi_square(with0, pair_expected);
  EXPECT_LT(x_pairs, 110.0) << "pairs with index 0 are not uniform";
  // Not a degenerate pass: the statistic of a uniform draw is near its mean, not 0.
  EXPECT_GT(x_marginal, 10.0);
  EXPECT_NEAR(static_cast<double>(zero_drawn), static_cast<double>(T * k) / n_g, 6 * 42.4);
}

TEST(RandomK, StateRoundTripContinuesTheSameStream) {
  const std::int64_t n_g = 1009;
  RandomK a(config(n_g, 1, 0, 0.05, 5));
  std::vector<float> acc(static_cast<std::size_t>(n_g), 1.0f);
  SparseResult ra, rb, rc;
  StepStats st;
  comm::run_local(1, [&](comm::Communicator& c) {
    for (int t = 0; t < 3; ++t) a.step(acc, c, ra, st);
    RandomK b(config(n_g, 1, 0, 0.05, 5)), fresh(config(n_g, 1, 0, 0.05, 5));
    b.load_state(a.save_state());
    EXPECT_EQ(b.iteration(), 3);
    a.step(acc, c, ra, st);
    b.step(acc, c, rb, st);
    fresh.step(acc, c, rc, st);
  });
  EXPECT_EQ(ra.indices, rb.indices);
  EXPECT_EQ(ra.indices, draw(5, 3, n_g, 50));
  EXPECT_NE(rc.indices, ra.indices);  // without the state, iteration 0's draw
  // A truncated or negative state is refused.
  auto s = a.save_state();
  s.pop_back();
  EXPECT_THROW(a.load_state(s), InvalidArgument);
  std::vector<std::byte> neg(8, std::byte{0xff});
  EXPECT_THROW(a.load_state(neg), InvalidArgument);
}
