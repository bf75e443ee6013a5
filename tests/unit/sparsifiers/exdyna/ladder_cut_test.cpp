// The exact controller's cut (sparsifiers/exdyna/ladder_cut.hpp): the rung and bin share that make
// the gathered selection exactly k, the apportionment of a bin among workers, and one worker's part
// of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <random>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {
constexpr SelectKernel kAllKernels[] = {SelectKernel::kScalar, SelectKernel::kSse2,
                                        SelectKernel::kAvx2, SelectKernel::kAvx512};
}  // namespace

TEST(LadderCut, FindsTheBinThatHoldsTheKthValue) {
  // Bins, lowest rung first: counts at or above rung j are 100 60 30 10 4.
  const std::vector<std::int64_t> summed{40, 30, 20, 6, 4};
  auto c = cut_ladder(summed, 25);  // 10 above rung 3, 15 of bin 2's 20
  EXPECT_EQ(c.rung, 2);
  EXPECT_EQ(c.need, 15);
  EXPECT_TRUE(c.bracketed);
  EXPECT_EQ(c.total, 25);
  c = cut_ladder(summed, 30);  // exactly the count at rung 2: all of bin 2
  EXPECT_EQ(c.rung, 2);
  EXPECT_EQ(c.need, 20);
  c = cut_ladder(summed, 3);  // inside the open top bin
  EXPECT_EQ(c.rung, 4);
  EXPECT_EQ(c.need, 3);
  c = cut_ladder(summed, 100);
  EXPECT_EQ(c.rung, 0);
  EXPECT_EQ(c.need, 40);
  EXPECT_TRUE(c.bracketed);
  c = cut_ladder(summed, 250);  // the ladder holds fewer than k: everything, not bracketed
  EXPECT_EQ(c.rung, 0);
  EXPECT_EQ(c.need, 40);
  EXPECT_EQ(c.total, 100);
  EXPECT_FALSE(c.bracketed);
  EXPECT_THROW(cut_ladder(summed, 0), InvalidArgument);
  EXPECT_THROW(cut_ladder(std::vector<std::int64_t>{}, 1), InvalidArgument);
  EXPECT_THROW(cut_ladder(std::vector<std::int64_t>{3, -1}, 1), InvalidArgument);
}

TEST(LadderCut, ApportionAddsUpAndStaysWithinEachShare) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 16);
    std::vector<std::int64_t> have(static_cast<std::size_t>(n)), share(have.size());
    for (auto& h : have) h = static_cast<std::int64_t>(rng() % 50);
    const std::int64_t total = std::accumulate(have.begin(), have.end(), std::int64_t{0});
    const std::int64_t need = total ? static_cast<std::int64_t>(rng() % (total + 1)) : 0;
    apportion(need, have, share);
    EXPECT_EQ(std::accumulate(share.begin(), share.end(), std::int64_t{0}), need);
    for (std::size_t w = 0; w < have.size(); ++w) {
      EXPECT_LE(share[w], have[w]);
      EXPECT_GE(share[w], 0);
      // Largest remainders: within one of the exact proportional share.
      if (total) {
        const double exact = static_cast<double>(need) * have[w] / total;
        EXPECT_LT(std::abs(share[w] - exact), 1.0);
      }
    }
  }
  // Ties in the remainder go to the lower index.
  std::vector<std::int64_t> share(3);
  apportion(1, std::vector<std::int64_t>{5, 5, 5}, share);
  EXPECT_EQ(share, (std::vector<std::int64_t>{1, 0, 0}));
  apportion(2, std::vector<std::int64_t>{1, 3, 3}, share);  // 2/7, 6/7, 6/7: the larger two
  EXPECT_EQ(share, (std::vector<std::int64_t>{0, 1, 1}));
  // Counts near 2^40 do not overflow the products.
  std::vector<std::int64_t> big{std::int64_t{1} << 40, std::int64_t{3} << 40};
  std::vector<std::int64_t> bs(2);
  apportion(std::int64_t{1} << 41, big, bs);
  EXPECT_EQ(bs[0], std::int64_t{1} << 39);
  EXPECT_EQ(bs[1], std::int64_t{3} << 39);
  EXPECT_THROW(apportion(5, std::vector<std::int64_t>{1, 2}, share), InvalidArgument);
  EXPECT_THROW(apportion(-1, std::vector<std::int64_t>{1, 2}, bs), InvalidArgument);
}

// The shares equal those of the plain round-by-round search (floor, then one more to the largest
// remaining remainder, ties to the lower index, each worker at most once), which apportion now
// runs with each floor and remainder computed once.
TEST(LadderCut, ApportionEqualsTheRoundByRoundLargestRemainder) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const auto n = static_cast<std::size_t>(1 + rng() % 24);
    std::vector<std::int64_t> have(n), share(n), want(n);
    const std::uint64_t range = trial % 3 == 0 ? 4 : (trial % 3 == 1 ? 1000 : (1ull << 50));
    for (auto& h : have) h = static_cast<std::int64_t>(rng() % range);
    const std::int64_t total = std::accumulate(have.begin(), have.end(), std::int64_t{0});
    const std::int64_t need =
        total ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total + 1)) : 0;
    using U = unsigned __int128;
    std::vector<bool> raised(n, false);
    std::int64_t given = 0;
    for (std::size_t w = 0; w < n && total; ++w) {
      want[w] = static_cast<std::int64_t>(U(need) * U(have[w]) / U(total));
      given += want[w];
    }
    for (std::int64_t left = total ? need - given : 0; left > 0; --left) {
      std::size_t best = n;
      std::int64_t best_r = 0;
      for (std::size_t w = 0; w < n; ++w) {
        const auto r = static_cast<std::int64_t>(U(need) * U(have[w]) % U(total));
        if (!raised[w] && r > best_r) {
          best = w;
          best_r = r;
        }
      }
      ASSERT_LT(best, n);
      ++want[best];
      raised[best] = true;
    }
    apportion(need, have, share);
    EXPECT_EQ(share, want) << "trial " << trial;
  }
}

// One worker: the candidates above the cut's bin, and the largest `quota` of the bin (ties: the
// lower index), in index order.
TEST(LadderCut, TakeCutKeepsTheLargestOfTheBin) {
  const int m = 2;                                   // 4 rungs per octave
  const LadderGrid grid{m, ladder_key(1.0f, m), 5};  // rungs 1, 1.19, 1.41, 1.68, 2 (open top)
  ASSERT_EQ(grid.value(1), 1.25f);                   // the 2-bit grid: 1, 1.25, 1.5, 1.75, 2
  // bin 1 is [1.25, 1.5): values 1.3, 1.4, 1.4 (two ties), 1.26; above it 1.6 and 9.
  std::vector<float> abs{1.3f, 1.0f, 1.4f, 1.6f, 1.4f, 9.0f, 1.26f, 1.1f};
  std::vector<std::uint32_t> base(abs.size());
  std::iota(base.begin(), base.end(), 100u);
  auto run = [&](int rung, std::int64_t quota) {
    auto idx = base;
    auto a = abs;  // take_cut compacts it alongside idx
    const auto c = take_cut(idx.data(), a.data(), a.size(), grid, rung, quota);
    idx.resize(c);
    return idx;
  };
  using V = std::vector<std::uint32_t>;
  EXPECT_EQ(run(1, 0), (V{103, 105}));
  EXPECT_EQ(run(1, 1), (V{102, 103, 105}));  // 1.4 at 102 before its tie at 104
  EXPECT_EQ(run(1, 2), (V{102, 103, 104, 105}));
  EXPECT_EQ(run(1, 3), (V{100, 102, 103, 104, 105}));
  EXPECT_EQ(run(1, 4), (V{100, 102, 103, 104, 105, 106}));
  EXPECT_EQ(run(4, 1), (V{105}));                                     // the open top bin
  EXPECT_EQ(run(0, 2), (V{100, 101, 102, 103, 104, 105, 106, 107}));  // bin 0 holds 2
  EXPECT_THROW(run(1, 5), InvalidArgument);                           // more than the bin holds
  EXPECT_THROW(run(5, 0), InvalidArgument);
}

// Most candidates lie far below the cut on real gradients, and take_cut drops them
// first. Against a reference that orders bin `rung` by sub-bin (1/256 of the bin), then index, on
// candidates from collect_ladder_candidates over a wide ladder, at many rungs and quotas.
TEST(LadderCut, TakeCutMatchesTheSubBinOrderWhenMostCandidatesLieBelow) {
  std::mt19937 rng(5);
  std::lognormal_distribution<float> g(-6.0f, 2.0f);
  std::vector<float> part(20000);
  for (auto& x : part) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
  const LadderGrid grid{4, ladder_key(1e-5f, 4), 129};  // 16 rungs per octave, 8 octaves
  std::vector<std::uint32_t> idx0(part.size());
  std::vector<float> abs0(part.size());
  std::vector<std::int64_t> bins(129, 0);
  const auto n = collect_ladder_candidates(part, 7, grid, idx0.data(), abs0.data(), bins.data());
  ASSERT_GT(n, 1000u);
  const int shift = 23 - grid.mant_bits;
  for (int rung : {0, 1, 40, 64, 100, 127, 128}) {
    for (std::int64_t quota : {std::int64_t{0}, std::int64_t{1}, bins[rung] / 3, bins[rung]}) {
      // The reference: bins above whole; of bin `rung` the quota largest by sub-bin, then index.
      std::vector<std::pair<std::uint32_t, std::size_t>> in_bin;  // (sub-bin, position)
      std::vector<bool> keep(n, false);
      for (std::size_t i = 0; i < n; ++i) {
        const auto bits = std::bit_cast<std::uint32_t>(abs0[i]);
        const auto b = std::min<std::uint32_t>((bits >> shift) - grid.lo_key, 128);
        if (b > static_cast<std::uint32_t>(rung)) keep[i] = true;
        if (b == static_cast<std::uint32_t>(rung))
          in_bin.emplace_back((bits >> (shift - 8)) & 255u, i);
      }
      ASSERT_EQ(static_cast<std::int64_t>(in_bin.size()), bins[rung]);
      std::stable_sort(in_bin.begin(), in_bin.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (std::int64_t q = 0; q < quota; ++q)
        keep[in_bin[static_cast<std::size_t>(q)].second] = true;
      std::vector<std::uint32_t> want;
      for (std::size_t i = 0; i < n; ++i)
        if (keep[i]) want.push_back(idx0[i]);
      for (auto k : kAllKernels) {
        if (!select_kernel_available(k)) continue;
        auto idx = idx0;
        auto abs = abs0;
        const auto c = take_cut_with(k, idx.data(), abs.data(), n, grid, rung, quota);
        idx.resize(c);
        EXPECT_EQ(idx, want) << "rung " << rung << " quota " << quota << " kernel " << to_string(k);
      }
    }
  }
}

// Many exact ties in the cut's sub-bin, spread over many vectors of 16: the vector kernel takes
// the first `quota` of them in index order, as the one-at-a-time passes do, at every quota.
TEST(LadderCut, TakeCutBreaksLongRunsOfTiesByIndexOnEveryKernel) {
  const LadderGrid grid{4, ladder_key(0.5f, 4), 65};
  std::vector<float> part(3001);
  for (std::size_t i = 0; i < part.size(); ++i)
    part[i] = i % 3 == 0 ? 1.0f : (i % 3 == 1 ? 0.75f : (i % 7 == 0 ? 3.0f : 0.1f));
  std::vector<std::uint32_t> idx0(part.size());
  std::vector<float> abs0(part.size());
  std::vector<std::int64_t> bins(65, 0);
  const auto n = collect_ladder_candidates(part, 0, grid, idx0.data(), abs0.data(), bins.data());
  const int rung = static_cast<int>(ladder_key(1.0f, 4) - grid.lo_key);
  ASSERT_EQ(bins[rung], 1001);  // every third value is 1.0
  for (std::int64_t quota : {0, 1, 15, 16, 17, 500, 1000, 1001}) {
    std::vector<std::uint32_t> want;
    std::int64_t taken = 0;
    for (std::size_t i = 0; i < part.size(); ++i) {
      if (part[i] == 3.0f) want.push_back(static_cast<std::uint32_t>(i));
      if (part[i] == 1.0f && taken < quota) {
        want.push_back(static_cast<std::uint32_t>(i));
        ++taken;
      }
    }
    for (auto k : kAllKernels) {
      if (!select_kernel_available(k)) continue;
      auto idx = idx0;
      auto abs = abs0;
      const auto c = take_cut_with(k, idx.data(), abs.data(), n, grid, rung, quota);
      idx.resize(c);
      EXPECT_EQ(idx, want) << "quota " << quota << " kernel " << to_string(k);
    }
  }
}

// The exact controller's two-pass path (count_ladder_candidates, the plan,
// then collect_at_least, or collect_from_rung with the count's group map, at the worker's own
// cut, and take_cut) keeps the same indices as the one-pass path (collect_ladder_candidates, then
// take_cut) for every count a plan can give the worker, on every kernel, on spread values and on
// long runs of exact ties.
TEST(LadderCut, TwoPassCutEqualsTheOnePassCutOnEveryKernel) {
  std::mt19937 rng(33);
  std::lognormal_distribution<float> g(-6.0f, 2.0f);
  std::vector<float> spread(20000), ties(3001);
  for (auto& x : spread) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
  for (std::size_t i = 0; i < ties.size(); ++i)
    ties[i] = i % 3 == 0 ? -1.0f : (i % 3 == 1 ? 0.75f : (i % 7 == 0 ? 3.0f : 0.1f));
  const LadderGrid grids[] = {LadderGrid{4, ladder_key(1e-5f, 4), 129},
                              LadderGrid{4, ladder_key(0.5f, 4), 65}};
  for (const auto* part : {&spread, &ties}) {
    const LadderGrid& grid = grids[part == &spread ? 0 : 1];
    const std::size_t n = part->size();
    std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
    std::vector<std::uint8_t> scratch(n);
    const auto total = count_ladder_candidates(*part, grid, bins.data(), scratch.data());
    const auto held = static_cast<std::int64_t>(total);
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{15}, std::int64_t{16},
                               std::int64_t{17}, std::int64_t{500}, held / 3, held - 1, held}) {
      if (count < 0 || count > held) continue;
      const auto [rung, quota] = own_cut(bins, count);
      for (auto k : kAllKernels) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::uint32_t> idx1(n), idx2(n);
        std::vector<float> abs1(n), abs2(n);
        std::vector<std::int64_t> bins1(bins.size(), 0);
        const auto c1 = collect_ladder_candidates_with(k, *part, 9, grid, idx1.data(), abs1.data(),
                                                       bins1.data());
        ASSERT_EQ(c1, total);
        ASSERT_EQ(bins1, bins);
        idx1.resize(take_cut_with(k, idx1.data(), abs1.data(), c1, grid, rung, quota));
        if (k == SelectKernel::kAvx512 && ladder_words_fit(k, n, grid) &&
            select_kernel_in_use() == k) {
          // The one-pass path as words: the same bins and cut.
          std::vector<std::uint32_t> words(n);
          std::vector<std::uint8_t> subs(n);
          std::vector<std::int64_t> bins4(bins.size(), 0);
          ASSERT_EQ(collect_ladder_words(*part, grid, words.data(), subs.data(), bins4.data()),
                    total);
          ASSERT_EQ(bins4, bins);
          words.resize(take_cut_words(9, words.data(), subs.data(), total, grid, rung, quota));
          EXPECT_EQ(words, idx1) << "count " << count << (part == &ties ? " (ties)" : "");
        }
        const auto c2 =
            collect_at_least_with(k, *part, 9, grid.value(rung), idx2.data(), abs2.data());
        idx2.resize(take_cut_with(k, idx2.data(), abs2.data(), c2, grid, rung, quota));
        EXPECT_EQ(static_cast<std::int64_t>(idx1.size()), count) << to_string(k);
        EXPECT_EQ(idx2, idx1) << "count " << count << " kernel " << to_string(k)
                              << (part == &ties ? " (ties)" : "");
        // As the sparsifier runs it: the group map of this kernel's count, then collect_from_rung
        // (and with a map that skips nothing).
        std::vector<std::int64_t> bins2(bins.size(), 0);
        std::vector<std::uint8_t> group_max(n / 64 + 1, 0), all(n / 64 + 1, 255);
        ASSERT_EQ(count_ladder_candidates_with(k, *part, grid, bins2.data(), scratch.data(),
                                               group_max.data()),
                  total);
        ASSERT_EQ(bins2, bins);
        for (const auto* map : {&group_max, &all}) {
          std::vector<std::uint32_t> idx3(n);
          std::vector<float> abs3(n);
          const auto c3 = collect_from_rung_with(k, *part, 9, grid, rung, map->data(), idx3.data(),
                                                 abs3.data());
          idx3.resize(take_cut_with(k, idx3.data(), abs3.data(), c3, grid, rung, quota));
          EXPECT_EQ(idx3, idx1) << "count " << count << " kernel " << to_string(k)
                                << (part == &ties ? " (ties)" : "")
                                << (map == &all ? " (no map)" : " (map)");
        }
      }
    }
  }
}

// A capped worker keeps only the words from the bin of its cap-th largest
// value (keep_words_from_bin, before the counts all-gather); every cut of at most the cap then
// keeps the same indices as on all the words, and the words kept are exactly those of bin >= it,
// in order, with their sub-bins.
TEST(LadderCut, KeepingTheWordsFromTheCapsBinChangesNoCutUpToTheCap) {
  if (!ladder_words_fit(select_kernel_in_use(), 1, LadderGrid{4, ladder_key(1e-5f, 4), 129}))
    GTEST_SKIP() << "ladder words need the avx512 kernel";
  std::mt19937 rng(41);
  std::lognormal_distribution<float> g(-6.0f, 2.0f);
  std::vector<float> part(20011);
  for (auto& x : part) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
  const LadderGrid grid{4, ladder_key(1e-5f, 4), 129};
  const std::size_t n = part.size();
  std::vector<std::uint32_t> all(n);
  std::vector<std::uint8_t> all_subs(n);
  std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
  const auto total = collect_ladder_words(part, grid, all.data(), all_subs.data(), bins.data());
  const auto held = static_cast<std::int64_t>(total);
  for (const std::int64_t cap : {std::int64_t{1}, std::int64_t{17}, held / 5, held - 1, held}) {
    const int bin = own_cut(bins, cap).first;
    auto words = all;
    auto subs = all_subs;
    const auto kept = keep_words_from_bin(words.data(), subs.data(), total, bin);
    std::vector<std::uint32_t> expect_words;
    std::vector<std::uint8_t> expect_subs;
    for (std::size_t i = 0; i < total; ++i)
      if (static_cast<int>(all[i] & 0xff) >= bin) {
        expect_words.push_back(all[i]);
        expect_subs.push_back(all_subs[i]);
      }
    ASSERT_EQ(std::vector<std::uint32_t>(words.begin(), words.begin() + kept), expect_words);
    ASSERT_EQ(std::vector<std::uint8_t>(subs.begin(), subs.begin() + kept), expect_subs);
    for (const std::int64_t count : {std::int64_t{0}, std::int64_t{1}, cap / 2, cap}) {
      const auto [rung, quota] = own_cut(bins, count);
      auto from_all = all;
      from_all.resize(
          take_cut_words(9, from_all.data(), all_subs.data(), total, grid, rung, quota));
      auto from_kept = words;
      from_kept.resize(take_cut_words(9, from_kept.data(), subs.data(), kept, grid, rung, quota));
      EXPECT_EQ(from_kept, from_all) << "cap " << cap << " count " << count;
    }
  }
}

namespace {

// Gathered layout as the sparsifier sends it: [count, bins...] per worker.
std::vector<std::int64_t> gathered(const std::vector<std::vector<std::int64_t>>& ladders) {
  std::vector<std::int64_t> g;
  for (const auto& l : ladders) {
    g.push_back(-1);  // the count slot, not read by the plan
    g.insert(g.end(), l.begin(), l.end());
  }
  return g;
}

std::vector<std::int64_t> scratch(3 * 16);

std::int64_t sum(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

}  // namespace

// Without a cap the plan is cut_ladder's cut, split by worker.
TEST(LadderPlan, WithoutACapEachWorkerSendsItsShareOfTheGlobalCut) {
  const std::vector<std::vector<std::int64_t>> l{{10, 6, 4, 2}, {20, 2, 0, 1}, {5, 5, 5, 5}};
  const auto g = gathered(l);
  std::vector<std::int64_t> counts(3);
  // k = 20: above rung 2 are 2+1+5 = 8 (bins 3) ... count >= rung 2: 4+0+5 + 8 = 17; >= rung 1:
  // 17 + 6+2+5 = 30 >= 20, so bin 1 is cut: need 3 of (6, 2, 5).
  EXPECT_EQ(plan_worker_counts(g, 3, 5, 1, 4, 20, 0, counts, scratch), 20);
  EXPECT_EQ(sum(counts), 20);
  const auto cut = cut_ladder(std::vector<std::int64_t>{35, 13, 9, 8}, 20);
  EXPECT_EQ(cut.rung, 1);
  std::vector<std::int64_t> share(3);
  apportion(cut.need, std::vector<std::int64_t>{6, 2, 5}, share);
  EXPECT_EQ(counts[0], 6 + share[0]);
  EXPECT_EQ(counts[1], 1 + share[1]);
  EXPECT_EQ(counts[2], 10 + share[2]);
  // Each worker's own cut keeps exactly its count.
  for (int w = 0; w < 3; ++w) {
    const auto [rung, quota] = own_cut(l[static_cast<std::size_t>(w)], counts[w]);
    std::int64_t kept = quota;
    for (int j = rung + 1; j < 4; ++j) kept += l[static_cast<std::size_t>(w)][j];
    EXPECT_EQ(kept, counts[w]);
  }
}

// With a cap no worker exceeds it, and the others make up the difference from lower bins.
TEST(LadderPlan, ACapMovesTheExcessToTheOtherWorkers) {
  // Worker 0 holds 30 values in the top bin; the others a few in each bin.
  const std::vector<std::vector<std::int64_t>> l{{0, 0, 0, 30}, {8, 4, 2, 1}, {8, 4, 2, 1}};
  const auto g = gathered(l);
  std::vector<std::int64_t> counts(3);
  // Uncapped: the top bin (30 + 1 + 1) is cut, in proportion: worker 0 sends almost all.
  EXPECT_EQ(plan_worker_counts(g, 3, 5, 1, 4, 30, 0, counts, scratch), 30);
  EXPECT_EQ(sum(counts), 30);
  EXPECT_GE(counts[0], 26);
  EXPECT_EQ(plan_worker_counts(g, 3, 5, 1, 4, 30, 12, counts, scratch), 30);
  EXPECT_EQ(counts[0], 12);
  EXPECT_LE(counts[1], 12);
  EXPECT_LE(counts[2], 12);
  EXPECT_EQ(sum(counts), 30);
}

// A cap that would leave k out of reach yields: the plan takes the smallest cap that reaches k,
// so the density stays exact (the cap bounds the padding; the density is the user's setting).
TEST(LadderPlan, ACapThatWouldMissKYieldsJustEnough) {
  const std::vector<std::vector<std::int64_t>> l{{0, 0, 0, 30}, {8, 4, 2, 1}, {8, 4, 2, 1}};
  const auto g = gathered(l);
  std::vector<std::int64_t> counts(3);
  // Under 12 the ladders (30, 15, 15 values) give 36 < 40; under 13, 39; under 14, 42.
  EXPECT_EQ(plan_worker_counts(g, 3, 5, 1, 4, 40, 12, counts, scratch), 40);
  EXPECT_EQ(counts, (std::vector<std::int64_t>{14, 13, 13}));
  // The ladders hold fewer than k: everything they hold, as without a cap.
  EXPECT_EQ(plan_worker_counts(g, 3, 5, 1, 4, 70, 12, counts, scratch), 60);
  EXPECT_EQ(counts, (std::vector<std::int64_t>{30, 15, 15}));
  // A cap that binds without costing k is kept exactly.
  EXPECT_EQ(plan_worker_counts(g, 3, 5, 1, 4, 36, 12, counts, scratch), 36);
  EXPECT_EQ(counts, (std::vector<std::int64_t>{12, 12, 12}));
}

// A worker left with nothing sends one index anyway: the plan aims lower by the number of such
// workers, so the total sent (plan + forced) stays k.
TEST(LadderPlan, EmptyWorkersForcedIndexIsCountedInK) {
  const std::vector<std::vector<std::int64_t>> l{{0, 0, 50}, {0, 0, 0}, {0, 0, 0}, {3, 0, 0}};
  const auto g = gathered(l);
  std::vector<std::int64_t> counts(4);
  const auto total = plan_worker_counts(g, 4, 4, 1, 3, 20, 0, counts, scratch);
  const auto empty = std::count(counts.begin(), counts.end(), 0);
  EXPECT_EQ(empty, 3);
  EXPECT_EQ(total + empty, 20);
  EXPECT_EQ(counts[0], 17);
  EXPECT_THROW(plan_worker_counts(g, 4, 4, 1, 3, 0, 0, counts, scratch), InvalidArgument);
  EXPECT_THROW(plan_worker_counts(g, 5, 4, 1, 3, 5, 0, counts, scratch), InvalidArgument);
  EXPECT_THROW(own_cut(l[0], 51), InvalidArgument);
}

// The plan starts at the highest rung the uncapped total could stop at instead of walking the
// ladder's empty top: the same counts as a walk of every rung from the top, with and without a
// cap, with empty workers (whose forced index lowers the target), on random ladders.
TEST(LadderPlan, EqualsAWalkFromTheTopOfTheLadder) {
  std::mt19937_64 rng(17);
  // The reference: the plan's rule rung by rung from the top, with apportion for the cut bin.
  const auto reference = [](const std::vector<std::vector<std::int64_t>>& l, std::int64_t k,
                            std::int64_t cap, std::vector<std::int64_t>& counts) {
    const auto nw = l.size();
    const int rungs = static_cast<int>(l[0].size());
    std::int64_t target = k, total = 0;
    const auto plan = [&](std::int64_t c) {
      const auto capped = [&](std::int64_t v) { return c > 0 && v > c ? c : v; };
      std::vector<std::int64_t> above(nw, 0), room(nw), share(nw);
      for (int j = rungs - 1; j >= 0; --j) {
        std::int64_t reach = 0;
        for (std::size_t w = 0; w < nw; ++w) reach += capped(above[w] + l[w][j]);
        if (reach >= target || j == 0) {
          std::int64_t base = 0;
          for (std::size_t w = 0; w < nw; ++w) {
            counts[w] = capped(above[w]);
            room[w] = capped(above[w] + l[w][j]) - counts[w];
            base += counts[w];
          }
          apportion(std::min(target, reach) - base, room, share);
          total = 0;
          for (std::size_t w = 0; w < nw; ++w) total += counts[w] += share[w];
          return;
        }
        for (std::size_t w = 0; w < nw; ++w) above[w] += l[w][j];
      }
    };
    for (std::size_t round = 0; round <= nw; ++round) {
      plan(cap);
      if (cap > 0 && total < target) {
        // The cap yields: the lowest cap, counted up one by one, that gives the target or all.
        std::vector<std::int64_t> held(nw, 0);
        for (std::size_t w = 0; w < nw; ++w) held[w] = sum(l[w]);
        const auto given = [&](std::int64_t c) {
          std::int64_t g = 0;
          for (const auto h : held) g += std::min(h, c);
          return g;
        };
        const auto goal = std::min(target, sum(held));
        std::int64_t c = cap;
        while (given(c) < goal) ++c;
        if (c != cap) plan(c);
      }
      const auto empty = static_cast<std::int64_t>(std::count(counts.begin(), counts.end(), 0));
      if (k - empty == target || k - empty < 1) break;
      target = k - empty;
    }
    return total;
  };
  for (int trial = 0; trial < 1000; ++trial) {
    const auto nw = static_cast<std::size_t>(1 + rng() % 16);
    const int rungs = 2 + static_cast<int>(rng() % 129);
    const int filled = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(rungs));
    std::vector<std::vector<std::int64_t>> l(nw, std::vector<std::int64_t>(rungs, 0));
    for (auto& w : l) {
      if (rng() % 5 == 0) continue;  // an empty worker
      for (int j = 0; j < filled; ++j) w[j] = static_cast<std::int64_t>(rng() % 40);
    }
    std::int64_t all = 0;
    for (const auto& w : l) all += sum(w);
    const std::int64_t k =
        1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(all + 5));
    const std::int64_t cap =
        rng() % 2 ? 0 : 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(k + 3));
    std::vector<std::int64_t> want(nw), got(nw), scr(3 * nw);
    const auto want_total = reference(l, k, cap, want);
    const auto g = gathered(l);
    const auto got_total = plan_worker_counts(
        g, static_cast<int>(nw), static_cast<std::size_t>(rungs) + 1, 1, rungs, k, cap, got, scr);
    EXPECT_EQ(got, want) << "trial " << trial;
    EXPECT_EQ(got_total, want_total) << "trial " << trial;
    // The same with the summed ladder given, as the sparsifier passes it.
    std::vector<std::int64_t> summed(static_cast<std::size_t>(rungs), 0), got2(nw);
    for (const auto& w : l)
      for (int j = 0; j < rungs; ++j) summed[static_cast<std::size_t>(j)] += w[j];
    EXPECT_EQ(plan_worker_counts(g, static_cast<int>(nw), static_cast<std::size_t>(rungs) + 1, 1,
                                 rungs, k, cap, got2, scr, summed),
              want_total);
    EXPECT_EQ(got2, want) << "trial " << trial << " (summed given)";
  }
}

// The first iteration's ladder (cold_ladder): one rung per octave, the max's octave on top,
// reaching rungs - 1 octaves below (clamped at the smallest key).
TEST(ColdLadder, TopRungHoldsTheMaxAndEachRungIsAnOctave) {
  const auto g = cold_ladder(3.0f, 129);
  EXPECT_EQ(g.mant_bits, 0);
  EXPECT_EQ(g.rungs, 129);
  EXPECT_EQ(g.value(128), 2.0f);  // [2, 4) holds 3
  EXPECT_EQ(g.value(127), 1.0f);
  // 3 has biased exponent 128: 128 octaves below is key 0, so rung 0 takes every value, 0 too.
  EXPECT_EQ(g.lo_key, 0u);
  EXPECT_EQ(g.value(0), 0.0f);
  EXPECT_EQ(cold_ladder(3.0f, 64).value(0), std::ldexp(1.0f, -62));
  EXPECT_EQ(cold_ladder(std::ldexp(1.0f, -120), 129).lo_key, 0u);  // clamped at the smallest key
  EXPECT_THROW(cold_ladder(1.0f, 0), InvalidArgument);
}

TEST(ColdLadder, CutValueLiesInsideTheCutBinEvenInLog) {
  const auto g = cold_ladder(8.0f, 5);  // rungs 0.5, 1, 2, 4, 8
  const std::vector<std::int64_t> summed{0, 10, 4, 2, 1};
  // k = 5: 3 from rungs 3-4, 2 of the 4 values of bin 2 = [2, 4): sqrt(2 * 4).
  const auto cut = cut_ladder(summed, 5);
  ASSERT_EQ(cut.rung, 2);
  EXPECT_NEAR(cut_value(g, summed, cut), std::sqrt(8.0), 1e-12);
  // All of bin 1 = [1, 2): its lower edge.
  EXPECT_NEAR(cut_value(g, summed, cut_ladder(summed, 17)), 1.0, 1e-12);
  // Fewer than k: the lowest rung.
  EXPECT_EQ(cut_value(g, summed, cut_ladder(summed, 100)), 0.5);
}
