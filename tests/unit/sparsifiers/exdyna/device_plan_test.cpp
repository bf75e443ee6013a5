// The device forms of the exact controller's plan (sparsifiers/exdyna/device_plan.hpp), on the
// CPU, against the CPU functions they mirror: plan_worker_counts over random ladders (empty
// workers, caps that bind and caps that yield, counts large enough for apportion's 128-bit
// products, k above what the ladders hold) and own_cut of every worker's planned count. The kernel
// that runs them (ladder_cut.cu) is checked against the CPU on a GPU by exdyna_cuda_check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/device_plan.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

// The count all-gather's layout: per worker its count, then its `rungs` bins.
struct Gathered {
  int workers = 0;
  int rungs = 0;
  std::vector<std::int64_t> words;
  std::size_t stride() const { return 1 + static_cast<std::size_t>(rungs); }
  std::int64_t* bins(int w) { return words.data() + static_cast<std::size_t>(w) * stride() + 1; }
  rules::PlanLadders view() const {
    return rules::PlanLadders{words.data(), workers, stride(), 1, rungs};
  }
};

// Ladders like the workers': some empty, the rest non-empty over a band of rungs, with counts of
// `scale` (large scales reach apportion's 128-bit products).
Gathered random_ladders(std::mt19937_64& rng, int workers, int rungs, std::int64_t scale) {
  Gathered g{workers, rungs,
             std::vector<std::int64_t>(
                 static_cast<std::size_t>(workers) * (1 + static_cast<std::size_t>(rungs)), 0)};
  std::uniform_int_distribution<int> rung(0, rungs - 1);
  std::uniform_int_distribution<std::int64_t> count(0, scale);
  std::bernoulli_distribution empty(0.15), filled(0.6);
  for (int w = 0; w < workers; ++w) {
    if (empty(rng)) continue;
    int lo = rung(rng), hi = rung(rng);
    if (lo > hi) std::swap(lo, hi);
    std::int64_t held = 0;
    for (int j = lo; j <= hi; ++j) {
      if (!filled(rng)) continue;
      g.bins(w)[j] = count(rng);
      held += g.bins(w)[j];
    }
    g.words[static_cast<std::size_t>(w) * g.stride()] = held;
  }
  return g;
}

std::int64_t held_by(Gathered& g, int w) {
  std::int64_t s = 0;
  for (int j = 0; j < g.rungs; ++j) s += g.bins(w)[j];
  return s;
}

// plan_worker_counts and plan_counts_form on the same ladders: the same counts and total, and
// every worker's own cut of its count the same.
void expect_same_plan(Gathered& g, std::int64_t k, std::int64_t cap, const std::string& ctx) {
  const auto n = static_cast<std::size_t>(g.workers);
  std::vector<std::int64_t> cpu(n, -1), dev(n, -2), scratch(3 * n), dev_scratch(4 * n);
  const std::int64_t cpu_total =
      plan_worker_counts(g.words, g.workers, g.stride(), 1, g.rungs, k, cap, cpu, scratch);
  int status = -1;
  const std::int64_t dev_total =
      rules::plan_counts_form(g.view(), k, cap, dev.data(), dev_scratch.data(), &status);
  ASSERT_EQ(status, rules::kPlanOk) << ctx;
  ASSERT_EQ(dev_total, cpu_total) << ctx;
  ASSERT_EQ(dev, cpu) << ctx;
  for (int w = 0; w < g.workers; ++w) {
    const std::span<const std::int64_t> bins(g.bins(w), static_cast<std::size_t>(g.rungs));
    int rung = -1;
    std::int64_t quota = -1;
    const int s = rules::own_cut_form(bins.data(), g.rungs, cpu[w], &rung, &quota);
    ASSERT_LE(cpu[w], held_by(g, w)) << ctx << " worker " << w;  // a plan takes what is held
    ASSERT_EQ(s, rules::kPlanOk) << ctx << " worker " << w;
    const auto [cpu_rung, cpu_quota] = own_cut(bins, cpu[w]);
    EXPECT_EQ(rung, cpu_rung) << ctx << " worker " << w;
    EXPECT_EQ(quota, cpu_quota) << ctx << " worker " << w;
  }
}

TEST(DevicePlan, EqualsTheCpuPlanOnRandomLadders) {
  std::mt19937_64 rng(20261128);
  int cases = 0;
  for (const int workers : {1, 2, 3, 4, 8, 16, 33}) {
    for (const int rungs : {1, 2, 17, 129, 257}) {
      for (const std::int64_t scale : {3LL, 1000LL, 1LL << 34}) {
        for (int rep = 0; rep < 6; ++rep) {
          Gathered g = random_ladders(rng, workers, rungs, scale);
          std::int64_t all = 0, most = 0;
          for (int w = 0; w < workers; ++w) {
            all += held_by(g, w);
            most = std::max(most, held_by(g, w));
          }
          const std::int64_t ks[] = {1, std::max<std::int64_t>(1, all / 3),
                                     std::max<std::int64_t>(1, all), all + 5};
          for (const std::int64_t k : ks) {
            // No cap, a cap that binds, a cap below every worker's share (it yields), a cap above
            // every worker's ladder.
            const std::int64_t caps[] = {0, std::max<std::int64_t>(1, k / workers + 1),
                                         std::max<std::int64_t>(1, k / (4 * workers)), most + 1};
            for (const std::int64_t cap : caps) {
              expect_same_plan(g, k, cap,
                               "workers " + std::to_string(workers) + " rungs " +
                                   std::to_string(rungs) + " scale " + std::to_string(scale) +
                                   " k " + std::to_string(k) + " cap " + std::to_string(cap));
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 7 * 5 * 3 * 6 * 4 * 4);
}

TEST(DevicePlan, ApportionSharesEqualsApportionWithLargeProducts) {
  // need * have beyond 2^63: the 128-bit branch.
  const std::vector<std::int64_t> have = {(1LL << 40) + 3, (1LL << 40) + 1, 7, (1LL << 39) + 5};
  std::int64_t total = 0;
  for (const auto h : have) total += h;
  for (const std::int64_t need : {std::int64_t{0}, std::int64_t{1}, total / 3, total - 1, total}) {
    std::vector<std::int64_t> cpu(have.size()), dev(have.size()), rem(have.size());
    apportion(need, have, cpu);
    ASSERT_EQ(rules::apportion_shares(need, have.data(), 4, dev.data(), rem.data()),
              rules::kPlanOk);
    EXPECT_EQ(dev, cpu) << "need " << need;
  }
  std::vector<std::int64_t> share(4), rem(4);
  EXPECT_EQ(rules::apportion_shares(total + 1, have.data(), 4, share.data(), rem.data()),
            rules::kPlanShareFailed);
  EXPECT_EQ(rules::apportion_shares(-1, have.data(), 4, share.data(), rem.data()),
            rules::kPlanShareFailed);
}

TEST(DevicePlan, OwnCutRefusesMoreThanTheBinsHold) {
  const std::int64_t bins[] = {4, 0, 2};
  int rung = -1;
  std::int64_t quota = -1;
  EXPECT_EQ(rules::own_cut_form(bins, 3, 7, &rung, &quota), rules::kOwnCutShort);
  EXPECT_EQ(rules::own_cut_form(bins, 3, -1, &rung, &quota), rules::kOwnCutShort);
  ASSERT_EQ(rules::own_cut_form(bins, 3, 6, &rung, &quota), rules::kPlanOk);
  EXPECT_EQ(rung, 0);
  EXPECT_EQ(quota, 4);
}

}  // namespace
