// Exact top-k (both methods) against a sort-based reference, and the union of sorted lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/sidco.hpp"
#include "exdyna/sparsifiers/sparse_exchange.hpp"

using namespace exdyna;

namespace {

// Sort every index by |v| descending, then index ascending; keep k; return them ascending.
std::vector<std::uint32_t> reference_topk(const std::vector<float>& v, std::size_t k) {
  std::vector<std::uint32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](std::uint32_t a, std::uint32_t b) {
    const float fa = std::fabs(v[a]), fb = std::fabs(v[b]);
    return fa != fb ? fa > fb : a < b;
  });
  idx.resize(std::min(k, v.size()));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Values from a small set (many ties), both signs, signed zeros, and a few large ones.
std::vector<float> tie_heavy(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    const auto r = rng();
    x = static_cast<float>(r % 7) * 0.25f;
    if (r % 11 == 0) x = 100.0f + static_cast<float>(r % 3);
    if (r & 0x100) x = -x;  // -0.0f included
  }
  return v;
}

TEST(TopkSelect, BothMethodsEqualASortBasedReference) {
  core::TopkScratch scratch;
  std::vector<std::uint32_t> out;
  for (std::size_t n : {1u, 2u, 31u, 1000u, 4097u}) {
    for (unsigned seed : {1u, 2u, 3u}) {
      const auto v = tie_heavy(n, seed);
      for (std::size_t k :
           {std::size_t{0}, std::size_t{1}, std::size_t{5}, n / 3, n > 0 ? n - 1 : 0, n, n + 5}) {
        const auto want = reference_topk(v, k);
        for (auto m : {core::TopkMethod::kNthElement, core::TopkMethod::kHeap}) {
          core::topk_select(v, k, m, out, scratch);
          EXPECT_EQ(out, want) << core::to_string(m) << " n=" << n << " k=" << k
                               << " seed=" << seed;
        }
      }
    }
  }
}

TEST(TopkSelect, MagnitudeNotSignDecides) {
  const std::vector<float> v{0.5f, -3.0f, 2.0f, -0.1f, 3.0f};
  core::TopkScratch s;
  std::vector<std::uint32_t> out;
  for (auto m : {core::TopkMethod::kNthElement, core::TopkMethod::kHeap}) {
    core::topk_select(v, 2, m, out, s);
    EXPECT_EQ(out, (std::vector<std::uint32_t>{1, 4})) << core::to_string(m);
    core::topk_select(v, 3, m, out, s);
    EXPECT_EQ(out, (std::vector<std::uint32_t>{1, 2, 4})) << core::to_string(m);
  }
}

TEST(TopkSelect, MethodNamesRoundTripAndBadNamesAreRefused) {
  for (auto m : {core::TopkMethod::kNthElement, core::TopkMethod::kHeap})
    EXPECT_EQ(core::parse_topk_method(core::to_string(m)), m);
  EXPECT_THROW(core::parse_topk_method("quickselect"), InvalidArgument);
}

TEST(UnionOfSortedLists, EqualsASetUnion) {
  std::mt19937 rng(7);
  std::vector<sparsifiers::Index> out, scratch;
  std::vector<std::size_t> bounds;
  for (int lists = 1; lists <= 17; ++lists) {
    std::vector<sparsifiers::Index> all;
    std::vector<std::int64_t> counts;
    std::set<sparsifiers::Index> want;
    for (int l = 0; l < lists; ++l) {
      std::set<sparsifiers::Index> one;
      const auto len = rng() % 4 == 0 ? 0u : rng() % 40;  // some lists are empty
      while (one.size() < len) one.insert(static_cast<sparsifiers::Index>(rng() % 100));
      all.insert(all.end(), one.begin(), one.end());
      counts.push_back(static_cast<std::int64_t>(one.size()));
      want.insert(one.begin(), one.end());
    }
    sparsifiers::union_of_sorted_lists(all, counts, out, scratch, bounds);
    EXPECT_EQ(out, std::vector<sparsifiers::Index>(want.begin(), want.end())) << lists << " lists";
  }
}

TEST(SidcoSelect, SelectsExactlyTheElementsAtOrAboveItsThreshold) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(10007);
  for (auto& x : v) x = nd(rng);
  std::vector<sparsifiers::Index> idx;
  for (int stages : {1, 2, 4}) {
    const auto est = sparsifiers::sidco_select(v, 0.01, stages, idx);
    EXPECT_GE(est.stages_run, 1);
    EXPECT_LE(est.stages_run, stages);
    std::vector<sparsifiers::Index> want;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (std::fabs(v[i]) >= static_cast<float>(est.threshold))
        want.push_back(static_cast<sparsifiers::Index>(i));
    EXPECT_EQ(std::vector<sparsifiers::Index>(idx.begin(),
                                              idx.begin() + static_cast<std::ptrdiff_t>(est.count)),
              want);
  }
  // Density 1 keeps everything, zeros included.
  std::vector<float> z(50, 0.0f);
  EXPECT_EQ(sparsifiers::sidco_select(z, 1.0, 3, idx).count, 50u);
  EXPECT_THROW(sparsifiers::sidco_select(z, 0.0, 3, idx), InvalidArgument);
}

TEST(SumAbs, MatchesADoubleSum) {
  std::vector<float> v(100003);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i % 1000) * 1e-3f;
  double want = 0;
  for (float x : v) want += std::fabs(x);
  EXPECT_NEAR(sparsifiers::sum_abs(v), want, 1e-6 * want);
}

}  // namespace
