// The per-element rules of the CUDA kernels (core/device_rules.hpp and
// sparsifiers/exdyna/device_rules.hpp), on the CPU, against the CPU code they mirror:
// select_threshold, ladder_key and count_ladder_candidates' bins, take_cut's cut (every selection
// kernel this CPU runs), and BlockLayout::block_of. The last tests replay the kernels' tile
// compaction (sparsifiers/exdyna/selection.cu: tiles of 4,096, per-tile counts, the ranked class
// split by q_t = clamp(need - ranked before, 0, ranked in tile)) on the host from the same rules,
// so the bookkeeping of the device cut is checked here too; the kernels themselves run only on a
// GPU (exdyna_cuda_check).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "exdyna/sparsifiers/exdyna/device_rules.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

constexpr SelectKernel kAllKernels[] = {SelectKernel::kScalar, SelectKernel::kSse2,
                                        SelectKernel::kAvx2, SelectKernel::kAvx512};

float from_bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}

// Gaussian values with specials (NaN, Inf, -0, denormals, FLT_MAX) and exact ties.
std::vector<float> adversarial(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1e-2f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(),
                            from_bits(0x7f800001u),
                            0.75f,
                            -0.75f,
                            from_bits(std::bit_cast<std::uint32_t>(0.75f) | 3u)};
  std::uniform_int_distribution<std::size_t> pos(0, n - 1);
  for (std::size_t i = 0; i < n / 20 + 1; ++i) x[pos(rng)] = specials[i % std::size(specials)];
  return x;
}

std::vector<LadderGrid> grids_for(const std::vector<float>& x) {
  std::vector<float> a;
  for (float v : x)
    if (std::isfinite(v)) a.push_back(std::fabs(v));
  std::sort(a.begin(), a.end(), std::greater<float>());
  const float thr = a.empty() ? 1e-2f : std::max(a[a.size() / 50], 1e-6f);
  const float max_abs = a.empty() ? 1.0f : a.front();
  std::vector<LadderGrid> g;
  auto around = [&](int m, int rungs, int below) {
    LadderGrid l;
    l.mant_bits = m;
    l.rungs = rungs;
    const std::uint32_t c = ladder_key(thr, m);
    l.lo_key = c > static_cast<std::uint32_t>(below) ? c - static_cast<std::uint32_t>(below) : 0;
    return l;
  };
  g.push_back(around(4, 129, 64));
  g.push_back(cold_ladder(max_abs, 129));
  g.push_back(around(2, 33, 16));
  g.push_back(around(10, 257, 128));
  g.push_back(around(0, 2, 1));
  LadderGrid zero;
  zero.mant_bits = 3;
  zero.rungs = 100;
  zero.lo_key = 0;
  g.push_back(zero);
  LadderGrid top;
  top.mant_bits = 1;
  top.rungs = 8;
  top.lo_key = (0x7f800000u >> 22) - 4;
  g.push_back(top);
  return g;
}

// The device's take_cut replayed on the host from the rules and the kernels' bookkeeping: the
// sub-bin histogram of bin `rung`, sub_cut, the classes, then tiles of `tile` values with their
// counts, the scan (q_t) and the emit (kept position b1 + min(b2, q_t)).
std::vector<std::uint32_t> replay_device_cut(const std::vector<float>& x, std::uint32_t offset,
                                             const LadderGrid& grid, int rung, std::int64_t quota,
                                             std::size_t tile) {
  rules::CutRule c = rules::make_cut_rule(grid, rung);
  std::vector<std::uint64_t> sub(c.sub_mask + 1, 0);
  std::int64_t in_bin = 0;
  for (float v : x) {
    const int s = rules::cut_sub_bin(v, c);
    if (s >= 0) ++sub[static_cast<std::size_t>(s)], ++in_bin;
  }
  EXPECT_LE(quota, in_bin);
  const rules::SubCut sc = rules::sub_cut(sub.data(), c.sub_mask, quota);
  c.last = sc.last;
  const std::size_t tiles = (x.size() + tile - 1) / tile;
  // compact_tiles: each tile's entries (position, ranked flag) in order, and its counts.
  std::vector<std::vector<std::pair<std::uint32_t, bool>>> entries(tiles);
  std::vector<std::uint32_t> all(tiles, 0), ranked(tiles, 0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint8_t k = rules::cut_class(x[i], c);
    if (k == rules::kCutDrop) continue;
    const std::size_t t = i / tile;
    entries[t].push_back({static_cast<std::uint32_t>(i % tile), k == rules::kCutRanked});
    ++all[t];
    ranked[t] += k == rules::kCutRanked;
  }
  // scan_tiles
  std::vector<std::uint32_t> prefix(tiles), q(tiles);
  std::int64_t a = 0, p = 0;
  for (std::size_t t = 0; t < tiles; ++t) {
    const std::int64_t left = sc.last_need - a;
    q[t] = static_cast<std::uint32_t>(std::clamp<std::int64_t>(left, 0, ranked[t]));
    prefix[t] = static_cast<std::uint32_t>(p);
    p += all[t] - ranked[t] + q[t];
    a += ranked[t];
  }
  // emit_tiles
  std::vector<std::uint32_t> out(static_cast<std::size_t>(p), 0xdeadbeefu);
  for (std::size_t t = 0; t < tiles; ++t) {
    std::uint32_t b1 = 0, b2 = 0;
    for (const auto& [pos, is2] : entries[t]) {
      const std::uint32_t idx = offset + static_cast<std::uint32_t>(t * tile) + pos;
      if (!is2) out[prefix[t] + b1 + std::min(b2, q[t])] = idx;
      if (is2 && b2 < q[t]) out[prefix[t] + b1 + b2] = idx;
      b1 += !is2;
      b2 += is2;
    }
  }
  return out;
}

}  // namespace

TEST(DeviceRules, BitsAndAbsMatchTheCpu) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    const auto u = static_cast<std::uint32_t>(rng());
    const float v = from_bits(u);
    EXPECT_EQ(rules::bits_of(v), u);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(rules::abs_of(v)),
              std::bit_cast<std::uint32_t>(std::fabs(v)));
    EXPECT_EQ(rules::abs_bits(v), u & 0x7fffffffu);
    for (int m = 0; m <= 10; ++m)
      ASSERT_EQ(rules::key_of(v, m), ladder_key(v, m)) << u << " m=" << m;
  }
}

TEST(DeviceRules, PassesIsSelectThreshold) {
  const std::vector<float> x = adversarial(5000, 2);
  std::vector<std::uint32_t> cpu(x.size());
  for (const float thr : {0.0f, std::numeric_limits<float>::denorm_min(), 1e-3f, 1e-2f, 0.75f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    for (const auto offset : {0u, 77u, 0xffffff00u}) {
      const std::size_t c = select_threshold(x, thr, offset, cpu.data());
      std::vector<std::uint32_t> mine;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (rules::passes(x[i], thr)) mine.push_back(offset + static_cast<std::uint32_t>(i));
      ASSERT_EQ(mine.size(), c) << "thr " << thr;
      EXPECT_TRUE(std::equal(mine.begin(), mine.end(), cpu.begin())) << "thr " << thr;
    }
  }
}

TEST(DeviceRules, LadderBinIsCountLadderCandidates) {
  for (const std::uint64_t seed : {3u, 4u}) {
    const std::vector<float> x = adversarial(7000, seed);
    for (const LadderGrid& grid : grids_for(x)) {
      for (const SelectKernel k : kAllKernels) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::int64_t> cpu(static_cast<std::size_t>(grid.rungs), 0);
        std::vector<std::uint8_t> scratch(x.size() + 64);
        const std::size_t c = count_ladder_candidates_with(k, x, grid, cpu.data(), scratch.data());
        std::vector<std::int64_t> mine(cpu.size(), 0);
        const rules::GridRule g = rules::make_grid_rule(grid);
        std::size_t count = 0;
        for (float v : x) {
          const int b = rules::ladder_bin(v, g);
          if (b >= 0) ++mine[static_cast<std::size_t>(b)], ++count;
        }
        ASSERT_EQ(count, c) << to_string(k) << " m=" << grid.mant_bits << " R=" << grid.rungs;
        EXPECT_EQ(mine, cpu) << to_string(k) << " m=" << grid.mant_bits << " R=" << grid.rungs;
      }
    }
  }
}

TEST(DeviceRules, GridValueIsLadderGridValue) {
  // The device's rung values (cut_rule_at's at_least) are LadderGrid::value's bit for bit, up to
  // the clamp at +Inf at the top of the floats.
  for (const int m : {0, 2, 4, 10}) {
    const std::uint32_t top_key = 0x7f800000u >> (23 - m);
    for (const std::uint32_t lo : {0u, 1u, top_key / 2, top_key - 40, top_key}) {
      LadderGrid grid;
      grid.mant_bits = m;
      grid.lo_key = lo;
      grid.rungs = 129;
      for (int j = 0; j < 300; ++j) {
        const float cpu = grid.value(j), dev = rules::grid_value(lo, m, j);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(dev), std::bit_cast<std::uint32_t>(cpu))
            << "m " << m << " lo " << lo << " j " << j;
      }
      const rules::CutRule c = rules::cut_rule_at(lo, m, grid.rungs, 7);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(c.at_least),
                std::bit_cast<std::uint32_t>(grid.value(7)));
      EXPECT_EQ(c.sub_mask, (1u << std::min(8, 23 - m)) - 1);
    }
  }
}

TEST(DeviceRules, SubCutIsFindSubCut) {
  // quota 0: no sub-bin; otherwise the sub-bin of the quota-th largest and the part of it.
  std::vector<std::uint32_t> sub(256, 0);
  sub[255] = 2;
  sub[10] = 5;
  sub[3] = 1;
  auto c = rules::sub_cut(sub.data(), 255, 0);
  EXPECT_EQ(c.last, 256u);
  EXPECT_EQ(c.last_need, 0);
  c = rules::sub_cut(sub.data(), 255, 2);
  EXPECT_EQ(c.last, 255u);
  EXPECT_EQ(c.last_need, 2);
  c = rules::sub_cut(sub.data(), 255, 4);
  EXPECT_EQ(c.last, 10u);
  EXPECT_EQ(c.last_need, 2);
  c = rules::sub_cut(sub.data(), 255, 8);
  EXPECT_EQ(c.last, 3u);
  EXPECT_EQ(c.last_need, 1);
}

// The classes and the sub-bin cut against take_cut (every kernel of this CPU), for every rung that
// holds values, rung 0 and the top rung, with quotas 0, 1, a third, all but one and all; the
// device's tile bookkeeping replayed with small tiles (so that the ranked sub-bin straddles many)
// and the kernels' own 4,096.
TEST(DeviceRules, ReplayedDeviceCutIsTakeCut) {
  for (const std::uint64_t seed : {5u}) {
    const std::vector<float> x = adversarial(5000, seed);
    for (const LadderGrid& grid : grids_for(x)) {
      for (const std::uint32_t offset : {0u, 0xfffff000u}) {
        std::vector<std::uint32_t> idx(x.size() + 64);
        std::vector<float> abs(x.size() + 64);
        std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
        const std::size_t count =
            collect_ladder_candidates(x, offset, grid, idx.data(), abs.data(), bins.data());
        std::vector<int> rungs = {0, grid.rungs - 1};
        for (int j = 0; j < grid.rungs; ++j)
          if (bins[static_cast<std::size_t>(j)] > 0) rungs.push_back(j);
        for (const int r : rungs) {
          const std::int64_t in_bin = bins[static_cast<std::size_t>(r)];
          for (const std::int64_t q :
               {std::int64_t{0}, std::int64_t{1}, in_bin / 3, in_bin - 1, in_bin}) {
            if (q < 0 || q > in_bin) continue;
            for (const SelectKernel k : kAllKernels) {
              if (!select_kernel_available(k)) continue;
              std::vector<std::uint32_t> ci(idx.begin(),
                                            idx.begin() + static_cast<std::ptrdiff_t>(count));
              std::vector<float> ca(abs.begin(), abs.begin() + static_cast<std::ptrdiff_t>(count));
              ci.resize(count + 64);
              ca.resize(count + 64);
              const std::size_t c = take_cut_with(k, ci.data(), ca.data(), count, grid, r, q);
              ci.resize(c);
              for (const std::size_t tile : {std::size_t{64}, std::size_t{4096}}) {
                const auto mine = replay_device_cut(x, offset, grid, r, q, tile);
                ASSERT_EQ(mine, ci) << to_string(k) << " m=" << grid.mant_bits
                                    << " R=" << grid.rungs << " lo_key=" << grid.lo_key
                                    << " rung=" << r << " quota=" << q << " tile=" << tile;
              }
            }
          }
        }
      }
    }
  }
}

TEST(DeviceRules, BlockOfIsTheLayouts) {
  const std::tuple<std::int64_t, int, std::int64_t> layouts[] = {
      {1'000'003, 8, 1024}, {100, 3, 1024}, {70, 1, 2}};
  for (const auto& [n_g, workers, nb] : layouts) {
    const BlockLayout l = make_block_layout(n_g, workers, nb);
    for (std::int64_t i = 0; i < n_g; i += 1 + i / 97) {
      ASSERT_EQ(static_cast<std::int64_t>(rules::block_of(static_cast<std::uint32_t>(i),
                                                          static_cast<std::uint64_t>(l.block_size),
                                                          static_cast<std::uint64_t>(l.n_blocks))),
                l.block_of(i))
          << i;
    }
  }
}
