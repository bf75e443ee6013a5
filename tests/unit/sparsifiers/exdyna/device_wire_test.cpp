// The device forms of the exact controller's wire (sparsifiers/exdyna/device_wire.hpp), on the
// CPU, against the CPU functions they mirror: encode_ladder and decode_ladder on random ladders
// and slots of every size (those that drop the lowest rungs too), decode_ladder on corrupted
// slots, and unpack_fused on slots pack_fused wrote. The kernels over them (ladder_wire.cu,
// fused_gather.cu) are checked against the CPU on a GPU by exdyna_cuda_check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_wire.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

// A worker's ladder: empty, or non-empty over a band of rungs with counts up to `scale`.
std::vector<std::int64_t> random_bins(std::mt19937_64& rng, int rungs, std::int64_t scale) {
  std::vector<std::int64_t> bins(static_cast<std::size_t>(rungs), 0);
  if (rng() % 8 == 0) return bins;
  std::uniform_int_distribution<int> rung(0, rungs - 1);
  std::uniform_int_distribution<std::int64_t> count(1, scale);
  int lo = rung(rng), hi = rung(rng);
  if (lo > hi) std::swap(lo, hi);
  for (int j = lo; j <= hi; ++j)
    if (rng() % 3 != 0) bins[static_cast<std::size_t>(j)] = count(rng);
  return bins;
}

TEST(DeviceWire, EncodesAndDecodesAsTheCpu) {
  std::mt19937_64 rng(7);
  int dropped = 0, refused = 0;
  for (const int rungs : {1, 17, 129, 257}) {
    for (const std::size_t words : {0u, 1u, 2u, 4u, 12u, 64u}) {
      for (int rep = 0; rep < 40; ++rep) {
        const std::vector<std::int64_t> bins =
            random_bins(rng, rungs, rep % 3 == 0 ? (std::int64_t{1} << 40) : 1000);
        const std::int64_t count = rep % 5 == 0
                                       ? std::numeric_limits<std::int64_t>::max()
                                       : std::accumulate(bins.begin(), bins.end(), std::int64_t{0});
        std::vector<std::int64_t> cpu_slot(words, -3), dev_slot(words, -5);
        int dev_lowest = -1;
        const int s = rules::encode_ladder_slot(count, bins.data(), rungs, dev_slot.data(), words,
                                                &dev_lowest);
        int cpu_lowest = -1;
        try {
          cpu_lowest = encode_ladder(count, bins, cpu_slot);
        } catch (const InvalidArgument&) {
          EXPECT_EQ(s, rules::kSlotTooSmall) << "words " << words << " count " << count;
          ++refused;
          continue;
        }
        ASSERT_EQ(s, rules::kPlanOk) << "words " << words;
        EXPECT_EQ(dev_lowest, cpu_lowest) << "rungs " << rungs << " words " << words;
        EXPECT_EQ(dev_slot, cpu_slot) << "rungs " << rungs << " words " << words;
        dropped += cpu_lowest > 0 ? 1 : 0;
        std::int64_t cpu_count = -1, dev_count = -2;
        std::vector<std::int64_t> cpu_bins(bins.size(), -7), dev_bins(bins.size(), -9);
        decode_ladder(cpu_slot, cpu_count, cpu_bins);
        ASSERT_EQ(
            rules::decode_ladder_slot(dev_slot.data(), words, rungs, &dev_count, dev_bins.data()),
            rules::kPlanOk);
        EXPECT_EQ(dev_count, cpu_count);
        EXPECT_EQ(dev_bins, cpu_bins);
      }
    }
  }
  EXPECT_GT(dropped, 50);  // slots that held only the top rungs
  EXPECT_GT(refused, 20);  // slots too small for the count
  int lowest = -1;
  std::vector<std::int64_t> slot(2);
  const std::int64_t bad[] = {1, -1};
  EXPECT_EQ(rules::encode_ladder_slot(-1, bad, 2, slot.data(), 2, &lowest),
            rules::kSlotCountTooWide);
  EXPECT_EQ(rules::encode_ladder_slot(1, bad, 2, slot.data(), 2, &lowest),
            rules::kSlotCountTooWide);
}

// decode_ladder_slot on a slot; -1 in count when it failed.
struct DeviceDecoded {
  int status = -1;
  std::int64_t count = -1;
  std::vector<std::int64_t> bins;
};
DeviceDecoded device_decode(const std::vector<std::int64_t>& slot, int rungs) {
  DeviceDecoded d;
  d.bins.assign(static_cast<std::size_t>(rungs), -7);
  d.status = rules::decode_ladder_slot(slot.data(), slot.size(), rungs, &d.count, d.bins.data());
  return d;
}

TEST(DeviceWire, RefusesTheSlotsDecodeLadderRefuses) {
  // Random words: decode_ladder throws DataError exactly where the device form returns a status,
  // and otherwise both read the same ladder.
  std::mt19937_64 rng(11);
  int refused = 0;
  for (int rep = 0; rep < 4000; ++rep) {
    std::vector<std::int64_t> slot(1 + rep % 3);
    for (auto& w : slot) w = static_cast<std::int64_t>(rng());
    if (rep % 4 == 0) slot.back() |= static_cast<std::int64_t>(0x8080808080808080ULL);
    const int rungs = rep % 2 ? 5 : 129;
    std::int64_t count = -1;
    std::vector<std::int64_t> cpu(static_cast<std::size_t>(rungs));
    bool threw = false;
    try {
      decode_ladder(slot, count, cpu);
    } catch (const DataError&) {
      threw = true;
    }
    const DeviceDecoded d = device_decode(slot, rungs);
    ASSERT_EQ(d.status != rules::kPlanOk, threw) << "slot word 0 " << slot[0];
    refused += threw ? 1 : 0;
    if (!threw) {
      EXPECT_EQ(d.count, count);
      EXPECT_EQ(d.bins, cpu);
    }
  }
  EXPECT_GT(refused, 100);  // the corrupted slots reached every refusal below
  // Each refusal by name: an empty slot, a number past 64 bits, a count past 63 bits, a run
  // past the ladder's bottom.
  EXPECT_EQ(device_decode({}, 4).status, rules::kSlotEndsInNumber);
  EXPECT_EQ(device_decode({-1, -1}, 4).status, rules::kSlotNumberTooWide);
  // Nine bytes 0xff, then 0x01: a count of 2^64 - 1, past 63 bits.
  EXPECT_EQ(device_decode({-1, 0x01ff}, 4).status, rules::kSlotCountTooWide);
  // Count 1, then a run of 9 empty bins (token 19) on a ladder of 4 rungs.
  EXPECT_EQ(device_decode({0x1301}, 4).status, rules::kSlotPastLadder);
}

TEST(DeviceWire, UnpacksAsUnpackFused) {
  std::mt19937_64 rng(3);
  for (const std::int64_t cap :
       {std::int64_t{1}, std::int64_t{7}, std::int64_t{300}, std::int64_t{70000}}) {
    FusedLayout layout;
    layout.head_words = 5;
    layout.cap = cap;
    for (int rep = 0; rep < 20; ++rep) {
      // A worker's list: L sorted distinct indices, keys with ties.
      const auto list = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(cap + 1));
      std::vector<std::uint32_t> kept(list), keys(list);
      std::uint32_t at = static_cast<std::uint32_t>(rng() % 1000);
      for (std::size_t i = 0; i < list; ++i) {
        at += 1 + static_cast<std::uint32_t>(rng() % 50);
        kept[i] = at;
        keys[i] = static_cast<std::uint32_t>(rng() % 40);
      }
      std::vector<std::int64_t> slot(layout.slot_words(), 0);
      std::vector<std::uint64_t> scratch;
      pack_fused(kept, keys, layout, slot, scratch);
      const rules::FusedSlot dev{slot.data(), layout.head_words, cap};
      ASSERT_EQ(dev.count(), static_cast<std::int64_t>(list));
      for (const std::int64_t c : {std::int64_t{0}, static_cast<std::int64_t>(list / 2),
                                   static_cast<std::int64_t>(list)}) {
        std::vector<std::uint32_t> cpu;
        unpack_fused(slot, layout, c, cpu);
        std::vector<std::uint32_t> got(static_cast<std::size_t>(c) + 1, 0xdeadbeefu);
        int status = -1;
        ASSERT_EQ(rules::unpack_slot_form(dev, c, got.data(), &status), c) << "cap " << cap;
        EXPECT_EQ(status, rules::kPlanOk);
        got.pop_back();
        EXPECT_EQ(got, cpu) << "cap " << cap << " list " << list << " c " << c;
      }
      int status = -1;
      std::vector<std::uint32_t> got(list + 2);
      EXPECT_EQ(
          rules::unpack_slot_form(dev, static_cast<std::int64_t>(list) + 1, got.data(), &status),
          -1);
      EXPECT_EQ(status, rules::kFusedCapYielded);
    }
    // A slot whose L is past the cap: fused_count's DataError, the form's status.
    std::vector<std::int64_t> slot(layout.slot_words(), 0);
    slot[layout.head_words] = cap + 1;
    EXPECT_THROW(fused_count(slot, layout), DataError);
    const rules::FusedSlot dev{slot.data(), layout.head_words, cap};
    int status = -1;
    std::uint32_t out[2];
    EXPECT_EQ(rules::unpack_slot_form(dev, 0, out, &status), -1);
    EXPECT_EQ(status, rules::kFusedCountBad);
  }
}

}  // namespace
