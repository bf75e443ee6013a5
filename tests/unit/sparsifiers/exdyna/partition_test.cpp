// Alg. 2 block partitioning, Alg. 3 dynamic partition allocation and the exact balance.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

// Partitions cover [0, n_g) exactly, in order, without overlap, and none is below min_blk.
void expect_cover(const Partitions& p, const char* when) {
  SCOPED_TRACE(when);
  const auto& l = p.layout();
  std::int64_t next = 0, blocks = 0;
  for (int j = 0; j < p.size(); ++j) {
    const auto r = p.range(j);
    ASSERT_EQ(r.begin, next) << "partition " << j;
    ASSERT_GT(r.end, r.begin) << "partition " << j;
    ASSERT_EQ(p.positions()[j], blocks);
    ASSERT_GE(static_cast<double>(p.blocks()[j]), p.min_blk()) << "partition " << j;
    blocks += p.blocks()[j];
    next = r.end;
  }
  ASSERT_EQ(next, l.n_g);
  ASSERT_EQ(blocks, l.n_blocks);
}

Partitions make(std::int64_t n_g, int n, std::int64_t nb = 1024, double min_blk = -1) {
  return Partitions(make_block_layout(n_g, n, nb), n, min_blk);
}

}  // namespace

TEST(BlockLayout, DefaultRoundsBlockSizeDownToMultipleOf32) {
  const auto l = make_block_layout(1'000'000, 8, 1024);
  EXPECT_EQ(l.n_blocks, 1024);
  EXPECT_EQ(l.block_size, 960);  // floor(1e6 / 1024) = 976 -> 960
  EXPECT_TRUE(l.note.empty());
  EXPECT_EQ(l.block_of(1023 * 960 + 5000), 1023);  // the remainder belongs to the last block
  const auto p = make(1'000'000, 8);
  EXPECT_EQ(p.range(7).end, 1'000'000);
  EXPECT_EQ(p.range(7).begin, 7 * 128 * 960);
}

TEST(BlockLayout, BlockOfU32MatchesTheDivision) {
  std::mt19937_64 rng(3);
  for (std::int64_t n_g : {std::int64_t{97}, std::int64_t{1'000'003}, std::int64_t{25'000'000},
                           std::int64_t{4'294'967'295}}) {
    const auto l = make_block_layout(n_g, 7, 1024);
    std::uniform_int_distribution<std::int64_t> u(0, n_g - 1);
    for (int r = 0; r < 20'000; ++r) {
      const std::int64_t i = r < 64 ? (r * l.block_size + (r % 2 ? -1 : 0) + n_g) % n_g : u(rng);
      ASSERT_EQ(static_cast<std::int64_t>(l.block_of_u32(static_cast<std::uint32_t>(i))),
                l.block_of(i))
          << "n_g " << n_g << " i " << i;
    }
    ASSERT_EQ(l.block_of_u32(static_cast<std::uint32_t>(n_g - 1)), l.n_blocks - 1);
  }
}

TEST(BlockLayout, SmallGradientFallsBackToFewerBlocks) {
  auto l = make_block_layout(1000, 4, 1024);  // 1000 < 32 * 1024
  EXPECT_EQ(l.n_blocks, 31);                  // max(4, floor(1000 / 32))
  EXPECT_EQ(l.block_size, 32);
  EXPECT_FALSE(l.note.empty());
  l = make_block_layout(100, 8, 1024);  // max(8, 3) = 8 blocks would hold 12 < 32 elements
  EXPECT_EQ(l.n_blocks, 8);
  EXPECT_EQ(l.block_size, 12);  // floor(100 / 8), not rounded to 32
  EXPECT_NE(l.note.find("under 32"), std::string::npos);
  l = make_block_layout(32 * 1024, 16, 1024);  // exactly enough: no fallback
  EXPECT_EQ(l.n_blocks, 1024);
  EXPECT_EQ(l.block_size, 32);
  EXPECT_TRUE(l.note.empty());
}

TEST(BlockLayout, RejectsBadInput) {
  EXPECT_THROW(make_block_layout(1000, 8, 4), InvalidArgument);  // n_b < n
  EXPECT_THROW(make_block_layout(3, 4, 1024), InvalidArgument);  // n_g < n
  EXPECT_THROW(make_block_layout(1000, 0, 1024), InvalidArgument);
  EXPECT_THROW(Partitions(make_block_layout(1 << 20, 4, 1024), 4, 300.0), InvalidArgument);
  EXPECT_THROW(Partitions(make_block_layout(1 << 20, 4, 1024), 4, -1, 0), InvalidArgument);
  EXPECT_THROW(Partitions(make_block_layout(1 << 20, 4, 1024), 4, -1, 1, 1.0), InvalidArgument);
  try {
    make_block_layout(1000, 8, 4);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("n_b"), std::string::npos);
  }
}

TEST(Partitions, Alg2GivesTheFirstRemainderPartitionsOneMoreBlock) {
  const auto p = make(1 << 20, 5);  // 1024 = 5 * 204 + 4
  ASSERT_EQ(p.size(), 5);
  EXPECT_EQ(p.blocks()[0], 205);
  EXPECT_EQ(p.blocks()[3], 205);
  EXPECT_EQ(p.blocks()[4], 204);
  EXPECT_DOUBLE_EQ(p.min_blk(), 1024.0 / 20.0);  // 51.2, a real number
  EXPECT_EQ(Partitions::allocation(0, 3, 5), 3);
  EXPECT_EQ(Partitions::allocation(7, 4, 5), 1);  // (7 % 5 + 4) % 5
}

// Hand-made counts, n = 4, n_g = 2^20 (1024 blocks of 1024), 256 blocks per partition.
// k_move = floor(1 * 1024 * (k' / 2^20)).
TEST(Partitions, Alg3MovesOneBlockFromTheHeavyToTheLightNeighbour) {
  auto p = make(1 << 20, 4);
  // t_prev = 1: worker i selected from partition (1 + i) % 4, so per partition [1500,500,1000,1000]
  // arrives in worker order as [p1, p2, p3, p0].
  const std::vector<std::int64_t> by_worker{500, 1000, 1000, 1500};
  EXPECT_EQ(p.adjust_paper(by_worker, 1), 1);
  EXPECT_EQ(std::vector<std::int64_t>(p.blocks().begin(), p.blocks().end()),
            (std::vector<std::int64_t>{255, 257, 256, 256}));
  EXPECT_EQ(p.positions()[1], 255);
  expect_cover(p, "after move");
}

TEST(Partitions, Alg3MovesRightToLeftAndUsesWorkerOrderOfTheIteration) {
  auto p = make(1 << 20, 4);
  // Per partition [1000, 1200, 700, 1100]; t_prev = 6: worker i had partition (2 + i) % 4.
  const std::vector<std::int64_t> per_part{1000, 1200, 700, 1100};
  std::vector<std::int64_t> by_worker(4);
  for (int i = 0; i < 4; ++i) by_worker[i] = per_part[(2 + i) % 4];
  EXPECT_EQ(p.adjust_paper(by_worker, 6), 2);
  // (1,2): 1.2 > 1.05 and 0.7 < 1/1.05: 1 -> 2. (2,3): 0.703 and 1.1: 3 -> 2.
  EXPECT_EQ(std::vector<std::int64_t>(p.blocks().begin(), p.blocks().end()),
            (std::vector<std::int64_t>{256, 255, 258, 255}));
}

TEST(Partitions, Alg3CarriesKMoveIntoTheNextPair) {
  auto p = make(1 << 20, 4);
  // k' = 200000: mean 50000, k_move = floor(1024 * 200000 / 2^20) = 195.
  // (0,1): 1.06 / 0.95 -> move 0 -> 1, and k[1] becomes 47695 (det 0.9539, no longer < 1/1.05),
  // so (1,2) does not move although the raw counts (0.95, 1.06) would; (2,3): 2 -> 3.
  const std::vector<std::int64_t> per_part{53000, 47500, 53000, 46500};
  EXPECT_EQ(p.adjust_paper(per_part, 0), 2);  // t_prev = 0: worker i had partition i
  EXPECT_EQ(std::vector<std::int64_t>(p.blocks().begin(), p.blocks().end()),
            (std::vector<std::int64_t>{255, 257, 255, 257}));
}

TEST(Partitions, Alg3BalancedCountsMoveNothing) {
  auto p = make(1 << 20, 4);
  EXPECT_EQ(p.adjust_paper(std::vector<std::int64_t>{1000, 1040, 960, 1000}, 3), 0);
  EXPECT_EQ(p.blocks()[0], 256);
  EXPECT_EQ(p.blocks()[3], 256);
  // A zero mean (k' < n, impossible with ExDyna's one-index rule) moves nothing either.
  EXPECT_EQ(p.adjust_paper(std::vector<std::int64_t>{3, 0, 0, 0}, 3), 0);
}

TEST(Partitions, Alg3ContinueKeepsMinBlkAsARealNumber) {
  // n = 5: min_blk = 1024 / 20 = 51.2. A partition of 52 blocks may not give one (51 < 51.2).
  auto p = make(1 << 20, 5);
  p.set_blocks(std::vector<std::int64_t>{52, 52, 300, 310, 310});
  // Partition 0 is heavy, 1 light: 52 - 1 < 51.2, so the pair is skipped (`continue`); partition
  // 1 (light) and 2 (heavy): 2 gives one block to 1.
  // mean floor(6700 / 5) = 1340; 1300 / 1340 = 0.97 is inside the band.
  const std::vector<std::int64_t> per_part{2000, 100, 2000, 1300, 1300};
  EXPECT_EQ(p.adjust_paper(per_part, 0), 1);
  EXPECT_EQ(std::vector<std::int64_t>(p.blocks().begin(), p.blocks().end()),
            (std::vector<std::int64_t>{52, 53, 299, 310, 310}));
  // With min_blk = 51 the same counts move partition 0's block as well.
  auto q = make(1 << 20, 5, 1024, 51.0);
  q.set_blocks(std::vector<std::int64_t>{52, 52, 300, 310, 310});
  EXPECT_EQ(q.adjust_paper(per_part, 0), 2);
  EXPECT_EQ(q.blocks()[0], 51);
  // A right-heavy pair whose right partition is at min_blk is skipped too.
  auto r = make(1 << 20, 2);  // min_blk = 128
  r.set_blocks(std::vector<std::int64_t>{896, 128});
  EXPECT_EQ(r.adjust_paper(std::vector<std::int64_t>{100, 2000}, 0), 0);
  EXPECT_EQ(r.blocks()[1], 128);
}

TEST(Partitions, ExactBalanceGivesEqualSharesOnHandMadeWeights) {
  // 16 blocks of 32, n = 4, min_blk = 16 / 16 = 1; 24 selections, 6 per partition.
  Partitions p(make_block_layout(16 * 32, 4, 16), 4);
  const std::vector<double> w{3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 6, 0, 0, 0, 0};
  p.balance_exact(w);
  EXPECT_EQ(std::vector<std::int64_t>(p.blocks().begin(), p.blocks().end()),
            (std::vector<std::int64_t>{2, 3, 6, 5}));
  expect_cover(p, "exact");
  // All weight in one block: every other partition keeps ceil(min_blk) blocks.
  Partitions q(make_block_layout(1 << 20, 4, 1024), 4);  // min_blk 64
  std::vector<double> one(1024, 0.0);
  one[1000] = 50;
  q.balance_exact(one);
  expect_cover(q, "one heavy block");
  EXPECT_EQ(q.blocks()[3], 64);
  // No weight: unchanged.
  std::vector<double> none(1024, 0.0);
  q.balance_exact(none);
  EXPECT_EQ(q.blocks()[3], 64);
}

TEST(Partitions, SetBlocksValidates) {
  auto p = make(1 << 20, 4);
  EXPECT_THROW(p.set_blocks(std::vector<std::int64_t>{256, 256, 256}), InvalidArgument);
  EXPECT_THROW(p.set_blocks(std::vector<std::int64_t>{256, 256, 256, 255}), InvalidArgument);
  EXPECT_THROW(p.set_blocks(std::vector<std::int64_t>{0, 512, 256, 256}), InvalidArgument);
}

// World sizes 1..16 and awkward n_g: coverage and min_blk before and after every adjustment.
class PartitionCover : public ::testing::TestWithParam<int> {};

TEST_P(PartitionCover, CoverExactlyBeforeAndAfterEveryAdjustment) {
  const int n = GetParam();
  std::mt19937_64 rng(1234 + n);
  for (std::int64_t n_g : {std::int64_t{97}, std::int64_t{1000}, std::int64_t{32 * 1024 - 1},
                           std::int64_t{104729}, std::int64_t{1'000'003}}) {
    if (n_g < n) continue;
    SCOPED_TRACE(n_g);
    auto p = make(n_g, n);
    expect_cover(p, "initial");
    // Random, often badly skewed counts push blocks around; many rounds walk into min_blk.
    std::lognormal_distribution<double> skew(5.0, 1.5);
    for (int t = 0; t < 300; ++t) {
      std::vector<std::int64_t> c(static_cast<std::size_t>(n));
      for (auto& x : c) x = 1 + static_cast<std::int64_t>(skew(rng));
      if (t % 3 == 0) c[0] *= 50;  // a persistent hot spot
      p.adjust_paper(c, t);
      expect_cover(p, "after Alg. 3");
      if (HasFatalFailure()) return;
    }
    std::uniform_real_distribution<double> u(0, 1);
    for (int t = 0; t < 20; ++t) {
      std::vector<double> w(static_cast<std::size_t>(p.layout().n_blocks));
      for (auto& x : w) x = u(rng) < 0.3 ? std::floor(10 * u(rng)) : 0.0;
      p.balance_exact(w);
      expect_cover(p, "after exact balance");
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, PartitionCover, ::testing::Range(1, 17));

// Counting per block in runs gives the same counts as one increment per index, in any order,
// including the last block's remainder.
TEST(BlockLayout, CountPerBlockMatchesOneIncrementPerIndex) {
  std::mt19937 rng(11);
  for (const std::int64_t n_g :
       {std::int64_t{1009}, std::int64_t{100'003}, std::int64_t{1} << 20}) {
    const auto l = exdyna::sparsifiers::make_block_layout(n_g, 4, 1024);
    std::vector<std::uint32_t> idx;
    for (int i = 0; i < 5000; ++i)
      idx.push_back(static_cast<std::uint32_t>(rng() % static_cast<std::uint32_t>(n_g)));
    idx.push_back(static_cast<std::uint32_t>(n_g - 1));
    for (const bool sorted : {true, false}) {
      if (sorted)
        std::sort(idx.begin(), idx.end());
      else
        std::shuffle(idx.begin(), idx.end(), rng);
      std::vector<std::uint32_t> want(static_cast<std::size_t>(l.n_blocks), 0),
          got(want.size(), 1);  // added to
      for (auto i : idx) ++want[l.block_of_u32(i)];
      for (auto& w : want) ++w;
      l.count_per_block(idx, got);
      EXPECT_EQ(got, want) << n_g << (sorted ? " sorted" : " shuffled");
    }
    std::vector<std::uint32_t> wrong(3);
    EXPECT_THROW(l.count_per_block(idx, wrong), exdyna::InvalidArgument);
  }
}
