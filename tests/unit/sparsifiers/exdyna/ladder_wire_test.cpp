// The ladder on the wire (sparsifiers/exdyna/ladder_wire.hpp): a count and R bins packed into a
// fixed slot of int64 words, top rung first, and the plan read off decoded slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_wire.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

struct Decoded {
  std::int64_t count = -1;
  std::vector<std::int64_t> bins;
};

Decoded decode(const std::vector<std::int64_t>& slot, std::size_t rungs) {
  Decoded d;
  d.bins.assign(rungs, -7);  // every entry must be written
  decode_ladder(slot, d.count, d.bins);
  return d;
}

// A ladder shaped like a worker's: empty at the top, a tail growing geometrically towards the
// cut, counts `scale` around it, and a reach below.
std::vector<std::int64_t> tail_ladder(std::mt19937& rng, int rungs, double scale) {
  std::vector<std::int64_t> bins(static_cast<std::size_t>(rungs), 0);
  std::uniform_int_distribution<int> top(rungs / 4, rungs - 1);
  const int hi = top(rng);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (int j = hi; j >= 0; --j) {
    const double c = scale * std::pow(1.3, static_cast<double>(std::min(hi - j, 40) - 20)) * u(rng);
    bins[static_cast<std::size_t>(j)] = static_cast<std::int64_t>(c);
  }
  return bins;
}

}  // namespace

TEST(LadderWire, RoundTripsLaddersThatFit) {
  std::mt19937 rng(3);
  for (const double scale : {0.3, 5.0, 300.0, 1e5, 1e9}) {
    for (int trial = 0; trial < 50; ++trial) {
      const auto bins = tail_ladder(rng, 129, scale);
      const std::int64_t count = std::accumulate(bins.begin(), bins.end(), std::int64_t{0});
      const std::size_t bytes = ladder_wire_bytes(count, bins);
      std::vector<std::int64_t> slot((bytes + 7) / 8, 12345);  // overwritten whole
      ASSERT_EQ(encode_ladder(count, bins, slot), 0) << scale;
      const auto d = decode(slot, bins.size());
      EXPECT_EQ(d.count, count);
      EXPECT_EQ(d.bins, bins);
      // One byte less than the stream and the lowest non-empty rung no longer fits.
      if (bytes % 8 == 0 && bytes > 8) {
        slot.pop_back();
        EXPECT_GT(encode_ladder(count, bins, slot), 0);
      }
    }
  }
}

TEST(LadderWire, EmptyLaddersAndCountsCostOneByteEach) {
  const std::vector<std::int64_t> zeros(129, 0);
  EXPECT_EQ(ladder_wire_bytes(0, zeros), 1u);
  EXPECT_EQ(ladder_wire_bytes(100, zeros), 1u);  // the empty rungs at the bottom cost nothing
  std::vector<std::int64_t> slot(1);
  EXPECT_EQ(encode_ladder(0, zeros, slot), 0);
  auto d = decode(slot, zeros.size());
  EXPECT_EQ(d.count, 0);
  EXPECT_EQ(d.bins, zeros);
  EXPECT_EQ(encode_ladder(100, zeros, slot), 0);
  EXPECT_EQ(decode(slot, zeros.size()).count, 100);
  // A ladder of no rungs carries the count alone.
  EXPECT_EQ(encode_ladder(5, std::vector<std::int64_t>{}, slot), 0);
  d = decode(slot, 0);
  EXPECT_EQ(d.count, 5);
}

// Counts of a large n_g: near and above 2^32, up to the largest int64.
TEST(LadderWire, RoundTripsCountsNearAndAbove32Bits) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::vector<std::int64_t> counts{(1LL << 32) - 1, 1LL << 32, (1LL << 32) + 1, 1LL << 40,
                                         kMax};
  for (const auto c : counts) {
    std::vector<std::int64_t> bins(9, 0);
    bins[8] = c;
    bins[4] = (1LL << 32) - 1;
    bins[0] = 1;
    std::vector<std::int64_t> slot(6);
    ASSERT_EQ(encode_ladder(c, bins, slot), 0) << c;
    const auto d = decode(slot, bins.size());
    EXPECT_EQ(d.count, c);
    EXPECT_EQ(d.bins, bins);
  }
  EXPECT_EQ(ladder_wire_bytes(kMax, std::vector<std::int64_t>{}), 9u);  // 63 bits, 7 a byte
  EXPECT_EQ(ladder_wire_bytes((1LL << 32) - 1, std::vector<std::int64_t>{}), 5u);
}

// The non-empty rungs at the ends of the ladder, and long runs of empty rungs between them.
TEST(LadderWire, RoundTripsTheLadderEnds) {
  for (const int rungs : {1, 2, 129, 300}) {
    for (const auto& [lo, hi] : {std::pair{true, false}, {false, true}, {true, true}}) {
      std::vector<std::int64_t> bins(static_cast<std::size_t>(rungs), 0);
      if (lo) bins.front() = 70;
      if (hi) bins.back() = 9000;
      std::vector<std::int64_t> slot(2);
      ASSERT_EQ(encode_ladder(9070, bins, slot), 0) << rungs;
      const auto d = decode(slot, bins.size());
      EXPECT_EQ(d.bins, bins) << rungs << " " << lo << hi;
    }
  }
}

// A slot too small for the ladder keeps its top rungs whole and reads the rest as empty; it
// never splits a bin, and the count always fits or the encoder refuses.
TEST(LadderWire, ATooSmallSlotKeepsTheTopRungs) {
  std::vector<std::int64_t> bins(20, 0);
  for (int j = 0; j < 20; ++j) bins[static_cast<std::size_t>(j)] = 100 + j;  // 2 bytes each
  // 8 bytes: the count (2 bytes) and rungs 19, 18, 17 (6 bytes).
  std::vector<std::int64_t> slot(1);
  EXPECT_EQ(encode_ladder(300, bins, slot), 17);
  const auto d = decode(slot, bins.size());
  EXPECT_EQ(d.count, 300);
  for (int j = 0; j < 20; ++j)
    EXPECT_EQ(d.bins[static_cast<std::size_t>(j)], j >= 17 ? bins[static_cast<std::size_t>(j)] : 0)
        << j;
  // An empty run before a bin that does not fit is dropped with it.
  std::vector<std::int64_t> gap(20, 0);
  gap[19] = 1;
  gap[0] = 1LL << 50;  // 8 bytes
  EXPECT_EQ(encode_ladder(1, gap, slot), 1);
  std::vector<std::int64_t> top_only(20, 0);
  top_only[19] = 1;
  EXPECT_EQ(decode(slot, gap.size()).bins, top_only);
  EXPECT_THROW(encode_ladder(1, bins, std::span<std::int64_t>{}), InvalidArgument);
  std::vector<std::int64_t> one(1);
  EXPECT_THROW(encode_ladder(std::numeric_limits<std::int64_t>::max(), bins, one),
               InvalidArgument);  // 9 bytes of count in 8
  EXPECT_THROW(encode_ladder(-1, bins, one), InvalidArgument);
  bins[3] = -2;
  EXPECT_THROW(encode_ladder(1, bins, slot), InvalidArgument);
  EXPECT_THROW(ladder_wire_bytes(1, bins), InvalidArgument);
}

TEST(LadderWire, RefusesMalformedSlots) {
  std::vector<std::int64_t> bins(4, 0);
  std::int64_t count = 0;
  // count 1, then a run of 5 empty rungs on a ladder of 4.
  std::vector<std::int64_t> slot{0x01 | (11 << 8)};
  EXPECT_THROW(decode_ladder(slot, count, bins), DataError);
  // count 1, then bins 1 1 1 1 1: five bins on a ladder of 4.
  slot = {0x01 | (2 << 8) | (2 << 16) | (2 << 24) | (2LL << 32) | (2LL << 40)};
  EXPECT_THROW(decode_ladder(slot, count, bins), DataError);
  // A number still going on at the slot's end.
  slot = {static_cast<std::int64_t>(0x8080808080808080ULL)};
  EXPECT_THROW(decode_ladder(slot, count, bins), DataError);
  // More than 64 bits, and a count that does not fit 63.
  slot = {-1, 0xff | (0x02 << 8)};
  EXPECT_THROW(decode_ladder(slot, count, bins), DataError);
  slot = {-1, 0xff | (0x01 << 8)};
  EXPECT_THROW(decode_ladder(slot, count, bins), DataError);  // 2^64 - 1
  EXPECT_THROW(decode_ladder(std::vector<std::int64_t>{}, count, bins), DataError);
}

// What the sparsifier relies on: every rank decodes the same slots, so it computes the same plan;
// each worker's planned count is within what its own decoded ladder holds, so its own cut on its
// decoded ladder keeps exactly that many; and when every slot holds the rungs down to the cut,
// the plan is the one of the full ladders.
TEST(LadderWire, PlansFromDecodedSlotsAreConsistentAndLosslessAboveTheCut) {
  std::mt19937 rng(11);
  const int rungs = 129, workers = 8;
  const std::size_t stride = 1 + rungs;
  int lossless = 0, lossy = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t words = 1 + trial % 24;
    const std::int64_t k = 1 + static_cast<std::int64_t>(rng() % 20000);
    const std::int64_t cap =
        trial % 3 == 0 ? 0 : k / workers + 1 + static_cast<std::int64_t>(rng() % 200);
    std::vector<std::int64_t> full(workers * stride), decoded(workers * stride);
    std::vector<int> lowest(workers);
    for (int w = 0; w < workers; ++w) {
      const auto bins = tail_ladder(rng, rungs, 10.0 + static_cast<double>(rng() % 500));
      std::int64_t count = 0;
      for (const auto b : bins) count += b;
      std::copy(bins.begin(), bins.end(), full.begin() + static_cast<long>(w * stride + 1));
      full[w * stride] = count;
      std::vector<std::int64_t> slot(words);
      lowest[static_cast<std::size_t>(w)] = encode_ladder(count, bins, slot);
      auto out = std::span<std::int64_t>(decoded).subspan(w * stride, stride);
      decode_ladder(slot, out[0], out.subspan(1));
      ASSERT_EQ(out[0], count);
    }
    std::vector<std::int64_t> counts(workers), again(workers), scratch(3 * workers);
    const auto total =
        plan_worker_counts(decoded, workers, stride, 1, rungs, k, cap, counts, scratch);
    plan_worker_counts(decoded, workers, stride, 1, rungs, k, cap, again, scratch);
    EXPECT_EQ(counts, again);
    for (int w = 0; w < workers; ++w) {
      const auto bins = std::span<const std::int64_t>(decoded).subspan(w * stride + 1, rungs);
      const auto [rung, quota] = own_cut(bins, counts[static_cast<std::size_t>(w)]);
      EXPECT_GE(rung, lowest[static_cast<std::size_t>(w)]);
      EXPECT_LE(quota, bins[static_cast<std::size_t>(rung)]);
    }
    // The plan reads the rungs from the top down to the highest one whose capped count reaches
    // k (or all): when every slot holds those, it is the plan of the full ladders.
    int reads_to = 0;
    std::vector<std::int64_t> above(workers, 0);
    for (int j = rungs - 1; j >= 0 && reads_to == 0; --j) {
      std::int64_t reach = 0;
      for (int w = 0; w < workers; ++w) {
        above[static_cast<std::size_t>(w)] += full[w * stride + 1 + static_cast<std::size_t>(j)];
        const auto c = above[static_cast<std::size_t>(w)];
        reach += cap > 0 ? std::min(c, cap) : c;
      }
      if (reach >= k) reads_to = j;
    }
    std::vector<std::int64_t> ref(workers);
    plan_worker_counts(full, workers, stride, 1, rungs, k, cap, ref, scratch);
    if (*std::max_element(lowest.begin(), lowest.end()) <= reads_to) {
      ++lossless;
      EXPECT_EQ(counts, ref) << "trial " << trial;
      EXPECT_EQ(total, std::accumulate(ref.begin(), ref.end(), std::int64_t{0}));
    } else {
      ++lossy;
    }
    if (*std::max_element(lowest.begin(), lowest.end()) == 0) {
      EXPECT_EQ(counts, ref) << "trial " << trial;
      EXPECT_EQ(decoded, full);
    }
  }
  // Both cases occur (the slots run from 8 to 192 bytes).
  EXPECT_GT(lossless, 20);
  EXPECT_GT(lossy, 20);
}
