// The exact controller's fused all-gather (sparsifiers/exdyna/fused_gather.hpp): the slot's lists
// and places, the cut order it relies on (take_cut's cut of c values is a prefix of its cut of
// c + 1 in cut_order_key order), and the sparsifier with --fuse on, off and auto making the same
// decisions, with the cap binding, not binding and yielding.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

// The c first of (index, key) pairs in the cut's order (key down, index up), in index order.
std::vector<std::uint32_t> top_in_cut_order(std::vector<std::pair<std::uint32_t, std::uint32_t>> v,
                                            std::size_t c) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < c; ++i) out.push_back(v[i].first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Any c of a slot's L entries come back as the c first in the cut's order, in index order, with
// 2-byte places (cap <= 65536) and 4-byte ones; ties of key go to the lower index.
TEST(FusedGather, ASlotGivesBackEveryPrefixOfItsCutOrder) {
  std::mt19937 rng(3);
  for (const std::int64_t cap : {std::int64_t{40}, std::int64_t{70'000}}) {
    const FusedLayout layout{3, cap};
    EXPECT_EQ(layout.place_bytes(), cap <= 65536 ? 2u : 4u);
    const std::size_t list = cap == 40 ? 37 : 66'000;
    std::vector<std::uint32_t> idx(list), keys(list);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
    std::uint32_t at = 5;
    for (std::size_t i = 0; i < list; ++i) {
      at += 1 + rng() % 9;
      idx[i] = at;
      keys[i] = rng() % 6;  // many ties
      pairs.emplace_back(idx[i], keys[i]);
    }
    std::vector<std::int64_t> slot(layout.slot_words(), -1);
    std::vector<std::uint64_t> scratch;
    pack_fused(idx, keys, layout, slot, scratch);
    EXPECT_EQ(slot[0], -1);  // the head is the caller's
    EXPECT_EQ(fused_count(slot, layout), static_cast<std::int64_t>(list));
    for (std::size_t c : {std::size_t{0}, std::size_t{1}, list / 3, list - 1, list}) {
      std::vector<std::uint32_t> got = {99};
      EXPECT_EQ(unpack_fused(slot, layout, static_cast<std::int64_t>(c), got), c);
      got.erase(got.begin());  // appended after what was there
      EXPECT_EQ(got, top_in_cut_order(pairs, c)) << "cap " << cap << ", c = " << c;
    }
    std::vector<std::uint32_t> out;
    EXPECT_THROW(unpack_fused(slot, layout, static_cast<std::int64_t>(list) + 1, out),
                 InvalidArgument);
  }
}

TEST(FusedGather, RefusesAListOverTheCapAndASlotClaimingOne) {
  const FusedLayout layout{2, 4};
  std::vector<std::int64_t> slot(layout.slot_words());
  std::vector<std::uint64_t> scratch;
  const std::vector<std::uint32_t> five = {1, 2, 3, 4, 5};
  EXPECT_THROW(pack_fused(five, five, layout, slot, scratch), InvalidArgument);
  std::vector<std::int64_t> short_slot(layout.slot_words() - 1);
  EXPECT_THROW(pack_fused({}, {}, layout, short_slot, scratch), InvalidArgument);
  slot[2] = 5;  // L > cap: corrupt data
  EXPECT_THROW(fused_count(slot, layout), DataError);
}

// take_cut keeps, for any count c, the c first candidates in cut_order_key order: the property
// the fused slot's places rest on. Values crowd a few bins (ties of bin and sub-bin), and some lie
// above the ladder's top (clamped into its last bin).
TEST(FusedGather, TakeCutKeepsThePrefixesOfTheCutOrder) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 11);
  const LadderGrid grid{4, ladder_key(0.25f, 4), 33};
  std::vector<float> part(20'000);
  for (auto& x : part) {
    const int p = pick(rng);
    x = p < 6 ? 0.01f : p < 11 ? grid.value(pick(rng) * 2) * (1.0f + 0.001f * pick(rng)) : 1e6f;
    if (rng() % 2) x = -x;
  }
  const std::uint32_t offset = 1000;
  std::vector<std::uint32_t> idx(part.size());
  std::vector<float> abs(part.size());
  std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
  const auto n = collect_ladder_candidates(part, offset, grid, idx.data(), abs.data(), bins.data());
  ASSERT_GT(n, 5000u);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (std::size_t i = 0; i < n; ++i) pairs.emplace_back(idx[i], cut_order_key(abs[i], grid));
  for (std::int64_t c : {std::int64_t{1}, std::int64_t{17}, std::int64_t{600},
                         static_cast<std::int64_t>(n) / 2, static_cast<std::int64_t>(n)}) {
    auto i2 = idx;
    auto a2 = abs;
    const auto [rung, quota] = own_cut(bins, c);
    const auto kept = take_cut(i2.data(), a2.data(), n, grid, rung, quota);
    ASSERT_EQ(kept, static_cast<std::size_t>(c));
    i2.resize(kept);
    EXPECT_EQ(i2, top_in_cut_order(pairs, static_cast<std::size_t>(c))) << "c = " << c;
  }
}

namespace {

SparsifierConfig capped(std::int64_t n_g, int n, int rank, Fuse fuse, Balance balance) {
  SparsifierConfig cfg;
  cfg.density = 0.01;
  cfg.n_g = n_g;
  cfg.world_size = n;
  cfg.rank = rank;
  cfg.exdyna.controller = Controller::kExact;
  cfg.exdyna.balance = balance;
  cfg.exdyna.worker_cap = ExDynaOptions::kAutoCap;
  cfg.exdyna.fuse = fuse;
  return cfg;
}

struct FuseRun {
  int fused_steps = 0;
  int binding_steps = 0;   // a worker sent the cap
  int yielding_steps = 0;  // a worker sent more than the cap
};

// Runs --fuse off beside `fuse` on every rank of an n-rank group for `steps` steps of fill(t, rank,
// acc), and checks every step's decisions alike: indices in order, summed values, counts and
// threshold. Counts, on rank 0, the fused steps and the steps where the cap bound or yielded.
FuseRun expect_same_decisions(int n, std::int64_t n_g, Fuse fuse, Balance balance, int steps,
                              const std::function<void(int, int, std::vector<float>&)>& fill) {
  FuseRun run;
  comm::run_local(n, [&](comm::Communicator& c) {
    ExDyna three(capped(n_g, n, c.rank(), Fuse::kOff, balance));
    ExDyna other(capped(n_g, n, c.rank(), fuse, balance));
    const auto cap = capped(n_g, n, c.rank(), fuse, balance).exdyna.max_per_worker(three.k(), n);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    for (int t = 0; t < steps; ++t) {
      fill(t, c.rank(), acc);
      SparseResult a, b;
      StepStats sa, sb;
      three.step(acc, c, a, sa);
      const auto before = c.bytes();
      other.step(acc, c, b, sb);
      sb.bytes = c.bytes() - before;
      ASSERT_EQ(a.indices, b.indices) << "step " << t;
      ASSERT_EQ(a.values, b.values) << "step " << t;
      ASSERT_EQ(sa.k_per_worker, sb.k_per_worker) << "step " << t;
      ASSERT_EQ(three.threshold(), other.threshold()) << "step " << t;
      EXPECT_EQ(sa.fused, 0);
      EXPECT_EQ(sb.bytes.collectives, sb.fused ? 2u : t == 0 ? 4u : 3u) << "step " << t;
      if (c.rank() != 0) continue;
      const auto most = *std::max_element(sa.k_per_worker.begin(), sa.k_per_worker.end());
      run.fused_steps += static_cast<int>(sb.fused);
      run.binding_steps += most == cap;
      run.yielding_steps += most > cap;
    }
  });
  return run;
}

// The first fifth of the vector 4x larger: at first inside one partition, where the cap binds.
void hot_fifth(int t, int rank, std::vector<float>& acc) {
  std::mt19937 rng(static_cast<unsigned>(77 * t + rank));
  std::exponential_distribution<float> e(1.0f);
  const auto n_g = acc.size();
  for (std::size_t i = 0; i < n_g; ++i)
    acc[i] = e(rng) * (i < n_g / 5 ? 4.0f : 1.0f) * ((i & 1) ? 1.0f : -1.0f);
}

// Every value alike: the counts sit near k / n, under the cap.
void even(int t, int rank, std::vector<float>& acc) {
  std::mt19937 rng(static_cast<unsigned>(13 * t + rank));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& x : acc) x = g(rng);
}

}  // namespace

TEST(FusedGather, SameDecisionsAsTwoAllGathersWhereTheCapBinds) {
  for (const int n : {4, 8}) {
    const auto run = expect_same_decisions(n, 200'003, Fuse::kOn, Balance::kPaper, 12, hot_fifth);
    EXPECT_EQ(run.fused_steps, 11) << n << " workers";  // every step after the cold one
    EXPECT_GE(run.binding_steps, 3) << n << " workers";
  }
}

TEST(FusedGather, SameDecisionsAsTwoAllGathersWhereTheCapDoesNotBind) {
  const auto run = expect_same_decisions(4, 100'003, Fuse::kOn, Balance::kExact, 10, even);
  EXPECT_EQ(run.fused_steps, 9);
  EXPECT_LT(run.binding_steps, 10);
}

// Three workers' partitions hold the cap's worth of 2s, the fourth's zeros: the cap yields, the
// lists cannot hold the plan, and the step falls back to the index all-gather on every rank.
TEST(FusedGather, AYieldingCapFallsBackToTheIndexAllGather) {
  const int n = 4;
  const std::int64_t n_g = 1 << 16;
  const auto fill = [&](int t, int, std::vector<float>& acc) {
    std::mt19937 rng(static_cast<unsigned>(17 + t));
    std::uniform_real_distribution<float> u(1.0f, 1.5f);
    const std::int64_t quarter = n_g / n;
    for (std::int64_t i = 0; i < n_g; ++i)
      acc[static_cast<std::size_t>(i)] = i >= 3 * quarter ? 0.0f
                                         : i % 97 == 0    ? 2.0f
                                                          : 0.01f * u(rng);
  };
  const auto run = expect_same_decisions(n, n_g, Fuse::kOn, Balance::kPaper, 4, fill);
  EXPECT_GE(run.yielding_steps, 1);
  EXPECT_LT(run.fused_steps, 3);
}

// --fuse auto measures the two all-gathers first, then chooses from the gathered timings; its
// decisions are the same whichever path it takes, and its estimates are identical on every rank.
TEST(FusedGather, AutoMeasuresThenChoosesWithTheSameDecisions) {
  expect_same_decisions(4, 100'003, Fuse::kAuto, Balance::kExact, 40, hot_fifth);
  comm::run_local(4, [&](comm::Communicator& c) {
    ExDyna a(capped(50'000, 4, c.rank(), Fuse::kAuto, Balance::kExact));
    std::vector<float> acc(50'000);
    SparseResult out;
    StepStats s;
    // Step 0 measures the two all-gathers, step 1 gathers every rank's timings with the counts:
    // step 2 is the first that may fuse.
    for (int t = 0; t < 2; ++t) {
      even(t, c.rank(), acc);
      a.step(acc, c, out, s);
      EXPECT_EQ(s.fused, 0) << "step " << t;
    }
    EXPECT_GT(a.fuse_latency(), 0);
    const double mine[2] = {a.fuse_latency(), a.fuse_seconds_per_byte()};
    std::vector<std::int64_t> all(8);
    c.allgather_counts(
        std::span<const std::int64_t>(reinterpret_cast<const std::int64_t*>(mine), 2), all);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(all[2 * static_cast<std::size_t>(r)], all[0]);
      EXPECT_EQ(all[2 * static_cast<std::size_t>(r) + 1], all[1]);
    }
  });
}

TEST(FusedGather, PaysWhenTheExtraBytesCostLessThanOneAllGather) {
  EXPECT_TRUE(fused_pays(1e-3, 1e-9, 0.5e6));  // 0.5 ms of bytes for 1 ms of latency
  EXPECT_FALSE(fused_pays(1e-3, 1e-9, 2e6));   // 2 ms for 1 ms
  EXPECT_TRUE(fused_pays(1e-3, 1e-9, -1e3));   // fewer bytes: always
}

TEST(FusedGather, OnNeedsAWorkerCap) {
  ExDynaOptions o;
  o.fuse = Fuse::kOn;
  o.worker_cap = 0;
  EXPECT_THROW(o.validate(4), InvalidArgument);
  o.worker_cap = ExDynaOptions::kAutoCap;
  EXPECT_NO_THROW(o.validate(4));
  EXPECT_EQ(parse_fuse("auto"), Fuse::kAuto);
  EXPECT_THROW(parse_fuse("yes"), InvalidArgument);
}
