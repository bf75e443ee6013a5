// Alg. 4 selection kernel against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "exdyna/sparsifiers/exdyna/selection.hpp"

using namespace exdyna::sparsifiers;

namespace {

// The reference for the compacting kernels: of the first n (index, |value|) pairs, those with
// |value| >= lo, in order.
std::pair<std::vector<std::uint32_t>, std::vector<float>> pairs_at_least(
    const std::vector<std::uint32_t>& idx, const std::vector<float>& abs, std::size_t n, float lo) {
  std::pair<std::vector<std::uint32_t>, std::vector<float>> out;
  for (std::size_t i = 0; i < n; ++i)
    if (abs[i] >= lo) {
      out.first.push_back(idx[i]);
      out.second.push_back(abs[i]);
    }
  return out;
}

// Every kernel this CPU runs, and the dispatched entry point, against the scalar reference.
void expect_same(const std::vector<float>& v, float thr, std::uint32_t offset) {
  std::vector<std::uint32_t> ref(v.size() + 1, 0xdeadbeef);
  const auto nr = select_threshold_scalar(v, thr, offset, ref.data());
  auto check = [&](const char* who, auto&& fn) {
    // Room for v.size() entries, then a guard the kernel must never touch.
    std::vector<std::uint32_t> out(v.size() + 1, 0xdeadbeef);
    const auto nf = fn(out.data());
    ASSERT_EQ(nf, nr) << who << ": length " << v.size() << " threshold " << thr;
    for (std::size_t i = 0; i < nr; ++i) ASSERT_EQ(out[i], ref[i]) << who << ": entry " << i;
    EXPECT_EQ(out[v.size()], 0xdeadbeefu) << who << " wrote past part.size()";
  };
  check("select_threshold", [&](std::uint32_t* o) { return select_threshold(v, thr, offset, o); });
  for (auto k :
       {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2, SelectKernel::kAvx512}) {
    if (!select_kernel_available(k)) continue;
    check(to_string(k),
          [&](std::uint32_t* o) { return select_threshold_with(k, v, thr, offset, o); });
  }
}

}  // namespace

TEST(Selection, ScalarReferenceHasClosedForm) {
  const std::vector<float> v{0.5f, -0.5f, 0.49f, -1.0f, 0.0f, -0.0f, 2.0f};
  std::vector<std::uint32_t> out(v.size());
  ASSERT_EQ(select_threshold_scalar(v, 0.5f, 100, out.data()), 4u);
  EXPECT_EQ(out[0], 100u);
  EXPECT_EQ(out[1], 101u);
  EXPECT_EQ(out[2], 103u);
  EXPECT_EQ(out[3], 106u);
}

TEST(Selection, MatchesScalarOnRandomDataAndEveryLength) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0, 1);
  std::uniform_int_distribution<int> pick(0, 9);
  const float thr = 1.75f;
  for (std::size_t len = 0; len < 150; ++len) {
    std::vector<float> v(len);
    for (auto& x : v) {
      switch (pick(rng)) {
        case 0:
          x = thr;
          break;  // exactly +-threshold passes (>=)
        case 1:
          x = -thr;
          break;
        case 2:
          x = std::nextafter(thr, 0.0f);
          break;  // just below: never passes
        case 3:
          x = -std::nextafter(thr, 0.0f);
          break;
        default:
          x = g(rng);
      }
    }
    expect_same(v, thr, static_cast<std::uint32_t>(3 * len));
    if (HasFatalFailure()) return;
  }
}

TEST(Selection, LongVectorsDensitiesAndUnalignedStarts) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> v(100'003);
  for (auto& x : v) x = g(rng);
  for (float thr : {0.0f, 0.01f, 1.0f, 2.5f, 3.5f, 10.0f}) {
    expect_same(v, thr, 0);
    // A partition starting at an odd element: loads are unaligned.
    std::vector<float> tail(v.begin() + 3, v.end());
    expect_same(tail, thr, 3);
  }
  // Offsets near the top of the 32-bit index range.
  expect_same(v, 2.0f, 0xffffffffu - static_cast<std::uint32_t>(v.size()));
}

TEST(Selection, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float den = std::numeric_limits<float>::denorm_min();
  const float big = std::numeric_limits<float>::max();
  std::vector<float> v;
  for (int r = 0; r < 5; ++r)
    for (float x : {0.0f, -0.0f, den, -den, big, -big, inf, -inf, 1e-30f, -1e30f, 1.0f, -1.0f})
      v.push_back(x);
  for (float thr : {0.0f, den, 1.0f, big, inf}) expect_same(v, thr, 5);
  // Threshold 0 selects everything, including zeros.
  std::vector<std::uint32_t> out(v.size());
  EXPECT_EQ(select_threshold(v, 0.0f, 0, out.data()), v.size());
  // Infinity selects exactly the infinities.
  EXPECT_EQ(select_threshold(v, inf, 0, out.data()), 10u);
}

TEST(Selection, NaNNeverPassesAndHidesNoHit) {
  // A NaN next to a hit in the same group: the group-wise skip test must still find the hit.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t pos = 0; pos < 130; pos += 7) {
    std::vector<float> v(200, 0.25f);
    v[pos] = nan;
    v[(pos + 1) % 200] = 3.0f;
    v[(pos + 66) % 200] = -3.0f;
    expect_same(v, 1.0f, 0);
    std::vector<std::uint32_t> out(v.size());
    EXPECT_EQ(select_threshold(v, 1.0f, 0, out.data()), 2u);
  }
}

// The fuzzer's finding (tests/fuzz/ladder_cut_fuzz.cpp): a group skip that compared the lane-wise
// max of its vectors lost a hit when the same lane of a later vector held NaN (max(hit, NaN) is
// NaN, and max(NaN, x) is x). Every kernel, the hit at every lane of a group, a NaN 4, 8, 16 or 32
// values after it (the same lane of a later SSE2, AVX2 or AVX-512 vector).
TEST(Selection, ANaNInTheSameLaneOfALaterVectorHidesNoHit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const LadderGrid grid{4, ladder_key(0.5f, 4), 65};
  for (std::size_t pos = 0; pos < 64; ++pos)
    for (std::size_t gap : {4u, 8u, 16u, 32u}) {
      if (pos % 64 + gap >= 64) continue;  // the NaN in the hit's own group of 64
      std::vector<float> v(256, 0.25f);
      v[64 + pos] = 3.0f;
      v[64 + pos + gap] = nan;
      expect_same(v, 1.0f, 0);
      for (auto k : {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2,
                     SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::uint32_t> idx(v.size());
        std::vector<float> abs(v.size());
        std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
        ASSERT_EQ(
            collect_ladder_candidates_with(k, v, 0, grid, idx.data(), abs.data(), bins.data()), 1u)
            << to_string(k) << " hit at " << pos << ", NaN " << gap << " after";
        EXPECT_EQ(idx[0], 64 + pos);
        std::vector<std::uint8_t> bytes(v.size());
        EXPECT_EQ(count_ladder_candidates_with(k, v, grid, bins.data(), bytes.data()), 1u)
            << to_string(k) << " hit at " << pos << ", NaN " << gap << " after";
      }
    }
}

TEST(Selection, KernelInUseIsAvailable) {
  EXPECT_TRUE(select_kernel_available(select_kernel_in_use()));
  EXPECT_TRUE(select_kernel_available(SelectKernel::kScalar));
}

// take_cut's first step: idx and abs compacted together, in place and in order, by
// every kernel this CPU runs, equal to the one-at-a-time reference at every length.
TEST(Selection, KeepPairsAtLeastCompactsBothInPlaceOnEveryKernel) {
  std::mt19937 rng(12);
  std::exponential_distribution<float> e(1.0f);
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 31u, 32u, 33u, 63u, 64u, 65u, 100u, 1000u, 4097u}) {
    for (float thr : {0.0f, 0.05f, 1.0f, 3.0f, 100.0f}) {
      std::vector<float> abs(n);
      for (auto& a : abs) a = e(rng);
      if (n > 5) abs[n / 2] = thr;  // exactly at the threshold: kept
      std::vector<std::uint32_t> idx(n);
      for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::uint32_t>(1000 + 3 * i);
      const auto [ref_idx, ref_abs] = pairs_at_least(idx, abs, n, thr);
      for (auto k : {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2,
                     SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        auto i2 = idx;
        auto a2 = abs;
        const auto c = keep_pairs_at_least_with(k, i2.data(), a2.data(), n, thr);
        ASSERT_EQ(c, ref_idx.size()) << to_string(k) << " n " << n << " thr " << thr;
        i2.resize(c);
        a2.resize(c);
        EXPECT_EQ(i2, ref_idx) << to_string(k) << " n " << n << " thr " << thr;
        EXPECT_EQ(a2, ref_abs) << to_string(k) << " n " << n << " thr " << thr;
      }
      auto i3 = idx;
      auto a3 = abs;
      EXPECT_EQ(keep_pairs_at_least(i3.data(), a3.data(), n, thr), ref_idx.size());
    }
  }
}

// The counting pass of the exact controller's two-pass collection gives the
// count and bins of collect_ladder_candidates (the reference: the scalar collection) on every
// kernel, at every length, with NaN, infinities, zeros and values exactly on rungs, for ladders
// whose bins fit a byte (the AVX-512 byte stream) and one that does not (257 rungs); and it
// writes no byte past part.size().
TEST(Selection, CountLadderCandidatesEqualsTheCollectionOnEveryKernel) {
  std::mt19937 rng(31);
  std::lognormal_distribution<float> g(-5.0f, 2.5f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t n : {0u, 1u, 15u, 16u, 63u, 64u, 65u, 130u, 1000u, 4097u, 20000u}) {
    std::vector<float> part(n);
    for (auto& x : part) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
    for (std::size_t i = 0; i < n; i += 97) part[i] = 0.0f;
    if (n > 10) {
      part[3] = nan;
      part[5] = -inf;
      part[7] = ladder_value(ladder_key(1e-3f, 4), 4);  // exactly on a rung
    }
    for (const LadderGrid grid :
         {LadderGrid{4, ladder_key(1e-4f, 4), 129}, LadderGrid{4, ladder_key(3e-2f, 4), 129},
          LadderGrid{2, ladder_key(1e-6f, 2), 33}, LadderGrid{4, ladder_key(1e-6f, 4), 256},
          LadderGrid{4, ladder_key(1e-6f, 4), 257}, LadderGrid{0, 0, 129}}) {
      std::vector<std::uint32_t> idx(n + 1);
      std::vector<float> abs(n + 1);
      std::vector<std::int64_t> want(static_cast<std::size_t>(grid.rungs), 5);
      const auto c = collect_ladder_candidates_with(SelectKernel::kScalar, part, 0, grid,
                                                    idx.data(), abs.data(), want.data());
      for (auto k : {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2,
                     SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::uint8_t> scratch(n + 1, 0xab);
        std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 5);  // added to
        const auto got = count_ladder_candidates_with(k, part, grid, bins.data(), scratch.data());
        EXPECT_EQ(got, c) << to_string(k) << " n " << n << " rungs " << grid.rungs;
        EXPECT_EQ(bins, want) << to_string(k) << " n " << n << " rungs " << grid.rungs;
        EXPECT_EQ(scratch[n], 0xab) << to_string(k) << " wrote past part.size()";
      }
      std::vector<std::uint8_t> scratch(n + 1);
      std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 5);
      EXPECT_EQ(count_ladder_candidates(part, grid, bins.data(), scratch.data()), c);
      EXPECT_EQ(bins, want);
    }
  }
}

// The second pass: collect_at_least(grid.value(rung)) yields exactly the ladder's candidates at or
// above `rung`, indices and values, in the same order, on every kernel.
TEST(Selection, CollectAtLeastYieldsTheCandidatesAtOrAboveARungOnEveryKernel) {
  std::mt19937 rng(32);
  std::lognormal_distribution<float> g(-5.0f, 2.5f);
  for (std::size_t n : {0u, 1u, 31u, 64u, 65u, 1000u, 20000u}) {
    std::vector<float> part(n);
    for (auto& x : part) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
    if (n > 10) part[4] = std::numeric_limits<float>::quiet_NaN();
    const LadderGrid grid{4, ladder_key(1e-4f, 4), 129};
    std::vector<std::uint32_t> idx(n + 1);
    std::vector<float> abs(n + 1);
    std::vector<std::int64_t> bins(129, 0);
    const auto c = collect_ladder_candidates_with(SelectKernel::kScalar, part, 11, grid, idx.data(),
                                                  abs.data(), bins.data());
    for (int rung : {0, 1, 37, 64, 100, 128}) {
      const float lo = grid.value(rung);
      const auto [want_idx, want_abs] = pairs_at_least(idx, abs, c, lo);
      for (auto k : {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2,
                     SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::uint32_t> i2(n + 1, 0xdeadbeef);
        std::vector<float> a2(n + 1, -1.0f);
        const auto got = collect_at_least_with(k, part, 11, lo, i2.data(), a2.data());
        ASSERT_EQ(got, want_idx.size()) << to_string(k) << " n " << n << " rung " << rung;
        EXPECT_EQ(i2[n], 0xdeadbeefu) << to_string(k) << " wrote past part.size()";
        i2.resize(got);
        a2.resize(got);
        EXPECT_EQ(i2, want_idx) << to_string(k) << " n " << n << " rung " << rung;
        EXPECT_EQ(a2, want_abs) << to_string(k) << " n " << n << " rung " << rung;
      }
    }
  }
}

// The group map of the counting pass: collect_from_rung with it yields what collect_at_least at
// the rung's value yields, on every kernel, for rungs across the ladder (also past bin 254 of a
// 256-rung ladder, where the map saturates), at lengths with and without a partial vector of 64
// map bytes and a tail of fewer than 64 values.
TEST(Selection, CollectFromRungWithTheGroupMapEqualsCollectAtLeastOnEveryKernel) {
  std::mt19937 rng(34);
  std::lognormal_distribution<float> g(-5.0f, 3.0f);
  for (std::size_t n : {0u, 63u, 64u, 200u, 4096u, 4160u, 300000u}) {
    std::vector<float> part(n);
    for (auto& x : part) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
    for (std::size_t i = 0; i + 1000 < n; i += 1000)  // runs of groups below rung 0
      std::fill_n(part.begin() + static_cast<std::ptrdiff_t>(i), 300, 1e-30f);
    for (const LadderGrid grid :
         {LadderGrid{4, ladder_key(1e-4f, 4), 129}, LadderGrid{4, ladder_key(1e-9f, 4), 256}}) {
      for (auto k : {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2,
                     SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::uint8_t> scratch(n + 1), group_max(n / 64 + 1, 7);
        std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
        count_ladder_candidates_with(k, part, grid, bins.data(), scratch.data(), group_max.data());
        for (int rung : {0, 1, 50, 100, 128, 200, 254, 255}) {
          if (rung >= grid.rungs) continue;
          std::vector<std::uint32_t> want_idx(n + 1), idx(n + 1, 0xdeadbeef);
          std::vector<float> want_abs(n + 1), abs(n + 1);
          const auto want = collect_at_least_with(SelectKernel::kScalar, part, 3, grid.value(rung),
                                                  want_idx.data(), want_abs.data());
          const auto got = collect_from_rung_with(k, part, 3, grid, rung, group_max.data(),
                                                  idx.data(), abs.data());
          ASSERT_EQ(got, want) << to_string(k) << " n " << n << " rung " << rung;
          EXPECT_EQ(idx[n], 0xdeadbeefu) << to_string(k) << " wrote past part.size()";
          want_idx.resize(want);
          want_abs.resize(want);
          idx.resize(got);
          abs.resize(got);
          EXPECT_EQ(idx, want_idx) << to_string(k) << " n " << n << " rung " << rung;
          EXPECT_EQ(abs, want_abs) << to_string(k) << " n " << n << " rung " << rung;
        }
      }
    }
  }
}

// The one-pass collection (AVX-512: one word per candidate, position and
// bin, counted and then expanded) gives the scalar collection's indices, values and bins on every
// kernel, for ladders whose bins fit a byte and one that does not (257 rungs: the other path), a
// cold ladder (0 mantissa bits), NaN, infinities, zeros and values on rungs, at every length, with
// an offset far from 0; and it writes nothing past part.size().
TEST(Selection, CollectLadderCandidatesEqualsTheScalarOnEveryKernelAndGrid) {
  std::mt19937 rng(41);
  std::lognormal_distribution<float> g(-5.0f, 2.5f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::uint32_t offset = 1u << 30;
  for (std::size_t n :
       {0u, 1u, 15u, 16u, 17u, 63u, 64u, 65u, 130u, 1000u, 1024u, 1088u, 2047u, 4097u, 20000u}) {
    std::vector<float> part(n);
    for (auto& x : part) x = (rng() & 1 ? 1.0f : -1.0f) * g(rng);
    for (std::size_t i = 0; i < n; i += 97) part[i] = 0.0f;
    for (std::size_t i = 1500; i + 1100 < n; i += 2500)  // runs of groups below rung 0
      std::fill_n(part.begin() + static_cast<std::ptrdiff_t>(i), 1100, 0.0f);
    if (n >= 12400) std::fill_n(part.begin() + 10000, 2400, 0.0f);  // 32 whole groups, aligned
    if (n > 10) {
      part[3] = nan;
      part[5] = -inf;
      part[7] = ladder_value(ladder_key(1e-3f, 4), 4);  // exactly on a rung
      part[n - 1] = -ladder_value(ladder_key(1e-4f, 4), 4);
    }
    for (const LadderGrid grid :
         {LadderGrid{4, ladder_key(1e-4f, 4), 129}, LadderGrid{4, ladder_key(3e-2f, 4), 129},
          LadderGrid{2, ladder_key(1e-6f, 2), 33}, LadderGrid{4, ladder_key(1e-6f, 4), 256},
          LadderGrid{4, ladder_key(1e-6f, 4), 257}, LadderGrid{0, 0, 129}}) {
      std::vector<std::uint32_t> want_idx(n + 1);
      std::vector<float> want_abs(n + 1);
      std::vector<std::int64_t> want_bins(static_cast<std::size_t>(grid.rungs), 5);
      const auto want =
          collect_ladder_candidates_with(SelectKernel::kScalar, part, offset, grid, want_idx.data(),
                                         want_abs.data(), want_bins.data());
      want_idx.resize(want);
      want_abs.resize(want);
      for (auto k : {SelectKernel::kSse2, SelectKernel::kAvx2, SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::uint32_t> idx(n + 1, 0xdeadbeef);
        std::vector<float> abs(n + 1, -1.0f);
        std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 5);  // added to
        const auto got = collect_ladder_candidates_with(k, part, offset, grid, idx.data(),
                                                        abs.data(), bins.data());
        ASSERT_EQ(got, want) << to_string(k) << " n " << n << " rungs " << grid.rungs;
        EXPECT_EQ(idx[n], 0xdeadbeefu) << to_string(k) << " wrote past part.size()";
        EXPECT_EQ(abs[n], -1.0f) << to_string(k) << " wrote past part.size()";
        idx.resize(got);
        abs.resize(got);
        EXPECT_EQ(idx, want_idx) << to_string(k) << " n " << n << " rungs " << grid.rungs;
        EXPECT_EQ(abs, want_abs) << to_string(k) << " n " << n << " rungs " << grid.rungs;
        EXPECT_EQ(bins, want_bins) << to_string(k) << " n " << n << " rungs " << grid.rungs;
      }
      if (!ladder_words_fit(select_kernel_in_use(), n, grid)) continue;
      // The words of the one-pass path: each candidate's position and bin, and its sub-bin (the
      // 8 bits of |x| below the bin, which take_cut_words cuts by).
      std::vector<std::uint32_t> words(n + 1, 0xdeadbeef);
      std::vector<std::uint8_t> subs(n + 1, 0xa5);
      std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 5);
      const auto got = collect_ladder_words(part, grid, words.data(), subs.data(), bins.data());
      ASSERT_EQ(got, want) << "words n " << n << " rungs " << grid.rungs;
      EXPECT_EQ(bins, want_bins) << "words n " << n << " rungs " << grid.rungs;
      EXPECT_EQ(words[n], 0xdeadbeefu) << "words: wrote past part.size()";
      EXPECT_EQ(subs[n], 0xa5) << "sub-bins: wrote past part.size()";
      const int shift = 23 - grid.mant_bits;
      for (std::size_t i = 0; i < got; ++i) {
        const auto bits = std::bit_cast<std::uint32_t>(want_abs[i]);
        const auto bin = std::min<std::uint32_t>((bits >> shift) - grid.lo_key,
                                                 static_cast<std::uint32_t>(grid.rungs - 1));
        ASSERT_EQ(offset + (words[i] >> 8), want_idx[i]) << "words n " << n << " at " << i;
        ASSERT_EQ(words[i] & 0xff, bin) << "words n " << n << " at " << i;
        ASSERT_EQ(subs[i], (bits >> (shift - 8)) & 0xff) << "words n " << n << " at " << i;
      }
    }
  }
}

// The word path holds a position in 24 bits: the longest partition it takes (2^24 values, the last
// position 2^24 - 1) and one value more (the two-store path) give the same candidates.
TEST(Selection, CollectLadderCandidatesAtTheLongestWordPartition) {
  const LadderGrid grid{4, ladder_key(0.5f, 4), 129};
  for (std::size_t n : {std::size_t{1} << 24, (std::size_t{1} << 24) + 1}) {
    std::vector<float> part(n, 0.25f);
    const std::vector<std::size_t> at{0, 64, 1000, n / 2, n - 65, n - 2, n - 1};
    for (std::size_t j = 0; j < at.size(); ++j)
      part[at[j]] = (j & 1 ? -1.0f : 1.0f) * static_cast<float>(j + 1);
    std::vector<std::int64_t> want_bins(129, 0);
    for (std::size_t j = 0; j < at.size(); ++j)
      ++want_bins[static_cast<std::size_t>(ladder_key(static_cast<float>(j + 1), 4) - grid.lo_key)];
    std::vector<std::uint32_t> idx(n);
    std::vector<float> abs(n);
    for (auto k :
         {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2, SelectKernel::kAvx512}) {
      if (!select_kernel_available(k)) continue;
      std::vector<std::int64_t> bins(129, 0);
      const auto c =
          collect_ladder_candidates_with(k, part, 7, grid, idx.data(), abs.data(), bins.data());
      ASSERT_EQ(c, at.size()) << to_string(k) << " n " << n;
      for (std::size_t j = 0; j < c; ++j) {
        EXPECT_EQ(idx[j], at[j] + 7) << to_string(k) << " n " << n;
        EXPECT_EQ(abs[j], static_cast<float>(j + 1)) << to_string(k) << " n " << n;
      }
      EXPECT_EQ(bins, want_bins) << to_string(k) << " n " << n;
    }
  }
}
