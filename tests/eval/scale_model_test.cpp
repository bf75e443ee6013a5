// The scale model: cost forms, the alpha-beta fit on known inputs, predictions against the closed
// forms, and malformed measurement files refused with the file and line.
#include <gtest/gtest.h>

#include <map>

#include <cmath>
#include <filesystem>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/measurements.hpp"
#include "exdyna/eval/scale_model.hpp"
#include "fixtures.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace exdyna::eval {
namespace {

namespace fs = std::filesystem;
using testing::kAlpha;
using testing::kBeta;

// An exact ring all-reduce sweep (kAlpha, kBeta) at 1 Gbit/s, 50 us, 4 KiB .. 64 MiB per rank.
std::vector<CommPoint> allreduce_sweep(std::initializer_list<int> workers) {
  std::vector<CommPoint> pts;
  for (int w : workers)
    for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4)
      pts.push_back({w, 1e9, 50, "allreduce", m,
                     collective_time(CostForm::kRingAllreduce, kAlpha, kBeta, w, m)});
  return pts;
}

// Each test's own directory (for the ones that write measurement files), removed when it ends.
using FitLinks = TempDirTest;
using Measurements = TempDirTest;

TEST(CostForms, MatchTheClosedForms) {
  const double a = 1e-4, b = 1e-8, m = 1e6;
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kRingAllreduce, a, b, 8, m),
                   14 * a + 2.0 * 7 / 8 * m * b);
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kRingAllgather, a, b, 8, m), 7 * a + 7 * m * b);
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kBinomialBroadcast, a, b, 8, m), 3 * (a + m * b));
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kBinomialBroadcast, a, b, 5, m), 3 * (a + m * b));
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kRingAllreduce, a, b, 1, m), 0.0);
  // Pairwise all-to-all: W - 1 rounds of m / W, m what one rank sends in all.
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kPairwiseAlltoall, a, b, 8, m),
                   7 * a + 7.0 / 8 * m * b);
  EXPECT_EQ(cost_form("alltoall"), CostForm::kPairwiseAlltoall);
  EXPECT_THROW(cost_form("gather"), DataError);
}

// Below the Gloo engine's switch, log2 W rounds: bcube all-reduce, Bruck all-gather.
TEST(CostForms, LogRoundAlgorithmsMatchTheirClosedForms) {
  const double a = 1e-4, b = 1e-8, m = 1e6;
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kBcubeAllreduce, a, b, 8, m),
                   6 * a + 2.0 * 7 / 8 * m * b);
  EXPECT_DOUBLE_EQ(collective_time(CostForm::kBruckAllgather, a, b, 5, m), 3 * a + 4 * m * b);
  EXPECT_EQ(cost_form("allreduce", "bcube"), CostForm::kBcubeAllreduce);
  EXPECT_EQ(cost_form("allgather-exact", "bruck"), CostForm::kBruckAllgather);
  EXPECT_EQ(cost_form("allgather-padded", "ring"), CostForm::kRingAllgather);
  EXPECT_THROW(cost_form("allreduce", "bruck"), DataError);
  EXPECT_THROW(cost_form("broadcast", "bcube"), DataError);
}

// A sweep whose small sizes ran bcube and large ones the ring: each point is fitted under its own
// algorithm's form, so the one alpha and beta come back; predictions take the cheaper form.
TEST_F(FitLinks, FitsEachPointUnderTheFormOfItsAlgorithm) {
  std::vector<CommPoint> pts;
  for (int w : {2, 4, 8})
    for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4) {
      const bool log = m < 65536;
      const auto form = log ? CostForm::kBcubeAllreduce : CostForm::kRingAllreduce;
      pts.push_back({w, 1e9, 50, "allreduce", m, collective_time(form, kAlpha, kBeta, w, m),
                     log ? "bcube" : "ring"});
    }
  const auto fits = fit_links(pts);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_NEAR(fits[0].alpha_s, kAlpha, 0.01 * kAlpha);
  EXPECT_NEAR(fits[0].beta_s_per_byte, kBeta, 0.01 * kBeta);
  EXPECT_EQ(fits[0].log_algorithm, "bcube");
  // Under the ring's form alone the small points would bend alpha.
  auto ring_only = pts;
  for (auto& p : ring_only) p.algorithm = "ring";
  EXPECT_GT(std::abs(fit_links(ring_only)[0].alpha_s - kAlpha), 0.05 * kAlpha);

  MeasuredCell c;
  c.sparsifier = c.label = "dense";
  c.workers = 8;
  c.bandwidth_bps = 1e9;
  c.delay_us = 50;
  c.density = 1;
  c.n_g = 1'000'000;
  c.compute_ms = 1;
  c.non_comm_ms = 1;
  c.iter_ms = 10;
  const auto m = ScaleModel::fit(pts, {c});
  for (int w : {8, 256})
    for (double bytes : {4096.0, 1e8}) {
      SCOPED_TRACE(w);
      const double ring = collective_time(CostForm::kRingAllreduce, kAlpha, kBeta, w, bytes);
      const double log = collective_time(CostForm::kBcubeAllreduce, kAlpha, kBeta, w, bytes);
      EXPECT_NEAR(m.collective_s("allreduce", w, 1e9, bytes), std::min(ring, log),
                  0.02 * std::min(ring, log));
      // The stated latency in place of the fitted one.
      const double stated =
          std::min(collective_time(CostForm::kRingAllreduce, kStatedAlphaS, kBeta, w, bytes),
                   collective_time(CostForm::kBcubeAllreduce, kStatedAlphaS, kBeta, w, bytes));
      EXPECT_NEAR(m.collective_s("allreduce", w, 1e9, bytes, Latency::kStated), stated,
                  0.02 * stated);
    }
}

TEST_F(FitLinks, RecoversKnownAlphaAndBetaWithinOnePercent) {
  testing::write(dir_ / "comm.csv", testing::synthetic_comm(1e9, kAlpha, kBeta));
  const auto fits = fit_links(read_comm(dir_ / "comm.csv"));
  ASSERT_EQ(fits.size(), 4u);  // one per op on the one link
  for (const auto& f : fits) {
    SCOPED_TRACE(f.op);
    EXPECT_NEAR(f.alpha_s, kAlpha, 0.01 * kAlpha);
    EXPECT_NEAR(f.beta_s_per_byte, kBeta, 0.01 * kBeta);
    EXPECT_NEAR(f.link_efficiency, (8.0 / 1e9) / kBeta, 0.01);
    EXPECT_LT(f.rel_rms, 1e-4);  // the CSV keeps 6 significant digits
    EXPECT_EQ(f.points, 3 * 8);  // W = 2, 4, 8 x 4 KiB .. 64 MiB in steps of 4
  }
}

TEST_F(FitLinks, RecoversAlphaAndBetaUnderNoise) {
  // +-3 % multiplicative noise, alternating: the relative least squares stays within 3 %.
  std::vector<CommPoint> pts;
  int i = 0;
  for (int w : {2, 4, 8})
    for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 2, ++i) {
      const double t = collective_time(CostForm::kRingAllgather, kAlpha, kBeta, w, m);
      pts.push_back({w, 1e9, 50, "allgather-padded", m, t * (i % 2 ? 1.03 : 0.97)});
    }
  const auto fits = fit_links(pts);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_NEAR(fits[0].alpha_s, kAlpha, 0.03 * kAlpha);
  EXPECT_NEAR(fits[0].beta_s_per_byte, kBeta, 0.03 * kBeta);
}

TEST_F(FitLinks, DropsAStalledSweepPoint) {
  auto pts = allreduce_sweep({2, 4, 8});
  pts[1].time_s *= 8;  // one small call stalled by the shared machine
  const auto fits = fit_links(pts);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].points, 23);
  EXPECT_NEAR(fits[0].alpha_s, kAlpha, 0.01 * kAlpha);
  EXPECT_NEAR(fits[0].beta_s_per_byte, kBeta, 0.01 * kBeta);
  EXPECT_TRUE(fits[0].beta_from.empty());
}

// A point slower than a larger size of its series is a stall (a collective never gets faster with
// size): the envelope keeps the rest, series by series, and the model's fits do not see it.
TEST_F(Measurements, WithoutStallsDropsPointsSlowerThanALargerSize) {
  const std::map<double, double> s{{4096, 3e-3},   {16384, 1e-3},   {65536, 2e-3},
                                   {262144, 9e-3}, {1048576, 5e-3}, {4194304, 20e-3}};
  const std::map<double, double> want{
      {16384, 1e-3}, {65536, 2e-3}, {1048576, 5e-3}, {4194304, 20e-3}};
  EXPECT_EQ(without_stalls(s), want);
  EXPECT_EQ(without_stalls(want), want);  // a monotone series loses nothing
  EXPECT_TRUE(without_stalls(std::map<double, double>{}).empty());
  // Equal times are not stalls.
  const std::map<double, double> flat{{4096, 1e-3}, {16384, 1e-3}};
  EXPECT_EQ(without_stalls(flat), flat);
  // Per series: the same sizes on another W or op are judged on their own.
  std::vector<CommPoint> pts{{2, 1e9, 0, "allreduce", 4096, 3e-3},
                             {2, 1e9, 0, "allreduce", 16384, 1e-3},
                             {4, 1e9, 0, "allreduce", 4096, 3e-3},
                             {4, 1e9, 0, "allreduce", 16384, 4e-3},
                             {2, 1e9, 0, "broadcast", 4096, 3e-3}};
  const auto kept = without_stalls(pts);
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept[0].bytes, 16384);
  EXPECT_EQ(kept[1].workers, 4);
  EXPECT_EQ(kept[3].op, "broadcast");
}

TEST_F(FitLinks, AStalledMediumPointDoesNotBendTheLargeCallsLine) {
  // At 8 workers the 1 MiB all-reduce stalled (as in a default run: 89.8 ms against 61.5 at 4 MiB).
  auto pts = allreduce_sweep({2, 4, 8});
  for (auto& p : pts)
    if (p.workers == 8 && p.bytes == 1 << 20) p.time_s *= 6;
  const auto m = ScaleModel::fit(pts, {});
  const double exact = collective_time(CostForm::kRingAllreduce, kAlpha, kBeta, 8, 1 << 20);
  EXPECT_NEAR(m.collective_s("allreduce", 8, 1e9, 1 << 20, Latency::kAtMeasuredWorkers), exact,
              0.02 * exact);
}

TEST_F(FitLinks, AnOpWhoseSweepDoesNotPinBetaTakesTheLinks) {
  // Broadcast measured only up to 2 KiB (latency-bound, with 5 % noise): its beta comes from
  // the all-reduce on the same link, and alpha is refitted.
  std::vector<CommPoint> pts;
  int i = 0;
  for (int w : {2, 4, 8}) {
    for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4)
      pts.push_back({w, 1e9, 50, "allreduce", m,
                     collective_time(CostForm::kRingAllreduce, kAlpha, kBeta, w, m)});
    for (double m = 256; m <= 2048; m *= 2, ++i)
      pts.push_back({w, 1e9, 50, "broadcast", m,
                     collective_time(CostForm::kBinomialBroadcast, kAlpha, kBeta, w, m) *
                         (i % 2 ? 1.05 : 0.95)});
  }
  const auto fits = fit_links(pts);
  ASSERT_EQ(fits.size(), 2u);
  const auto& bc = fits[0].op == "broadcast" ? fits[0] : fits[1];
  EXPECT_EQ(bc.beta_from, "allreduce");
  EXPECT_NEAR(bc.beta_s_per_byte, kBeta, 0.01 * kBeta);
  EXPECT_NEAR(bc.alpha_s, kAlpha, 0.06 * kAlpha);
}

TEST_F(FitLinks, AlphaPerWorkersFollowsLatencyThatGrowsWithW) {
  // Core sharing: alpha grows with W (60, 120, 240 us at W = 2, 4, 8), beta is the link's.
  std::vector<CommPoint> pts;
  for (int w : {2, 4, 8})
    for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4)
      pts.push_back({w, 1e9, 50, "allgather-padded", m,
                     collective_time(CostForm::kRingAllgather, kAlpha * w / 2, kBeta, w, m)});
  const auto pooled = fit_links(pts);
  ASSERT_EQ(pooled.size(), 1u);
  const auto per_w = fit_alpha_per_workers(pts, pooled);
  ASSERT_EQ(per_w.size(), 6u);  // every size, and from 1 MiB up (the same line here), at each W
  for (const auto& f : per_w) {
    SCOPED_TRACE(f.workers);
    // Each W's sweep pins its own beta (sizes up to 64 MiB): the link's, and alpha at W within 5 %.
    EXPECT_EQ(f.beta_from, "");
    EXPECT_NEAR(f.beta_s_per_byte, kBeta, 0.01 * kBeta);
    EXPECT_NEAR(f.alpha_s, kAlpha * f.workers / 2, 0.05 * kAlpha * f.workers / 2);
  }
}

TEST_F(FitLinks, BetaPerWorkersFollowsTimePerByteThatGrowsWithW) {
  // Cores, not the link, limit the rate at larger W: beta 1x, 1.5x, 3x at W = 2, 4, 8.
  const std::map<int, double> slow{{2, 1.0}, {4, 1.5}, {8, 3.0}};
  std::vector<CommPoint> pts;
  for (const auto& [w, x] : slow)
    for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4)
      pts.push_back({w, 1e9, 50, "allreduce", m,
                     collective_time(CostForm::kRingAllreduce, kAlpha, kBeta * x, w, m)});
  const auto per_w = fit_alpha_per_workers(pts, fit_links(pts));
  ASSERT_EQ(per_w.size(), 6u);
  for (const auto& f : per_w) {
    SCOPED_TRACE(f.workers);
    EXPECT_NEAR(f.beta_s_per_byte, kBeta * slow.at(f.workers), 0.01 * kBeta * slow.at(f.workers));
    EXPECT_NEAR(f.alpha_s, kAlpha, 0.05 * kAlpha);
  }
}

TEST_F(FitLinks, LargeCallsGetTheirOwnLineWhereTheSlopeChanges) {
  // Above 1 MiB the time per byte doubles (the cores, not the link, limit large calls): the fit
  // over every size blends the two slopes; the fit from 1 MiB up has the large calls' own.
  std::vector<CommPoint> pts;
  for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4) {
    const double t = m < kLargeMessageBytes
                         ? collective_time(CostForm::kRingAllreduce, kAlpha, kBeta, 2, m)
                         : collective_time(CostForm::kRingAllreduce, 4 * kAlpha, 2 * kBeta, 2, m);
    pts.push_back({2, 1e9, 50, "allreduce", m, t});
  }
  const auto per_w = fit_alpha_per_workers(pts, fit_links(pts));
  ASSERT_EQ(per_w.size(), 2u);
  const auto& all = per_w[0].min_bytes > 0 ? per_w[1] : per_w[0];
  const auto& large = per_w[0].min_bytes > 0 ? per_w[0] : per_w[1];
  EXPECT_EQ(large.min_bytes, kLargeMessageBytes);
  EXPECT_EQ(large.points, 4);  // 1, 4, 16, 64 MiB
  EXPECT_NEAR(large.beta_s_per_byte, 2 * kBeta, 1e-3 * kBeta);
  EXPECT_NEAR(large.alpha_s, 4 * kAlpha, 1e-3 * kAlpha);
  EXPECT_LT(all.beta_s_per_byte, 1.9 * kBeta);
}

TEST_F(FitLinks, SmallSweepAtOneWorkerCountKeepsThePooledBeta) {
  // At W = 8 only latency-bound sizes (1 KiB .. 8 KiB): beta cannot be fitted there.
  auto pts = allreduce_sweep({2, 4});
  for (double m = 1024; m <= 8192; m *= 2)
    pts.push_back({8, 1e9, 50, "allreduce", m,
                   collective_time(CostForm::kRingAllreduce, 2 * kAlpha, kBeta, 8, m)});
  const auto pooled = fit_links(pts);
  const auto per_w = fit_alpha_per_workers(pts, pooled);
  // W = 2 and 4 over every size and from 1 MiB up; W = 8 has no large size: one fit.
  ASSERT_EQ(per_w.size(), 5u);
  const auto& w8 = per_w.back();
  ASSERT_EQ(w8.workers, 8);
  EXPECT_EQ(w8.min_bytes, 0);
  EXPECT_EQ(w8.beta_s_per_byte, pooled[0].beta_s_per_byte);
  EXPECT_NE(w8.beta_from, "");
}

// A model fitted on one 1 Gbit/s link and four labels measured at W = 2 and 8 (with `fused`, a
// fifth: exdyna-exact-fused, whose every step took the fused all-gather).
ScaleModel fixture_model(bool fused = false) {
  std::vector<CommPoint> comm;
  for (const char* op : {"allreduce", "allgather-padded", "broadcast"})
    for (int w : {2, 4, 8})
      for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4)
        comm.push_back({w, 1e9, 50, op, m, collective_time(cost_form(op), kAlpha, kBeta, w, m)});
  std::vector<MeasuredCell> cells;
  auto add = [&](const char* sp, const char* label, int w, double select_ms, double rest_ms,
                 double dr, double f_t) {
    MeasuredCell c;
    c.sparsifier = sp;
    c.label = label;
    c.workers = w;
    c.bandwidth_bps = 1e9;
    c.delay_us = 50;
    c.density = 0.001;
    c.n_g = 25'600'000;
    c.compute_ms = 10;
    c.select_ms = select_ms;
    c.non_comm_ms = select_ms + rest_ms;
    c.iter_ms = 100;
    c.density_ratio = dr;
    c.f_t = f_t;
    cells.push_back(c);
  };
  for (int w : {2, 8}) {
    add("dense", "dense", w, 0, 25.6, 1000, 1);
    add("topk", "topk", w, 102.4, 25.6, w, 1.0);  // 4 ns/element over n_g
    add("cltk", "cltk", w, 102.4, 25.6, 1, 1.0);  // the leader's selection, every iteration
    add("exdyna", "exdyna-exact", w, 7.68 / w, 25.6, 1.0, 1.1);  // 0.3 ns/element over n_g/W
    if (fused) {
      add("exdyna", "exdyna-exact-fused", w, 7.68 / w, 25.6, 1.0, 1.1);
      cells.back().fused_share = 1;
    }
  }
  return ScaleModel::fit(comm, cells);
}

TEST(ScaleModel, PredictionsEqualTheClosedForms) {
  const auto m = fixture_model();
  const double ng = 25'600'000, k = std::floor(0.001 * ng);
  const auto ar = [](int w, double bytes, double beta = kBeta) {
    return 1e3 * collective_time(CostForm::kRingAllreduce, kAlpha, beta, w, bytes);
  };
  const auto ag = [](int w, double bytes, double beta = kBeta) {
    return 1e3 * collective_time(CostForm::kRingAllgather, kAlpha, beta, w, bytes);
  };
  const auto bc = [](int w, double bytes) {
    return 1e3 * collective_time(CostForm::kBinomialBroadcast, kAlpha, kBeta, w, bytes);
  };
  const double rest = 25.6;  // 1 ns/element over n_g for every label
  {
    const auto p = m.predict("dense", 8, 1e9, 0.001, ng);
    EXPECT_NEAR(p.comm_ms, ar(8, 4 * ng), 1e-6 * p.comm_ms);
    EXPECT_NEAR(p.iter_ms, 10 + rest + ar(8, 4 * ng), 1e-6 * p.iter_ms);
  }
  {
    const auto p = m.predict("cltk", 8, 1e9, 0.001, ng);
    EXPECT_NEAR(p.select_ms, 102.4, 1e-6);  // the leader's scan of n_g is on the critical path
    EXPECT_NEAR(p.comm_ms, bc(8, 4 * k) + ar(8, 4 * k), 1e-6 * p.comm_ms);
  }
  {
    // Top-k: k' = W k (each worker sends k), f = 1, no overlap known: all-reduce of W k values.
    const auto p = m.predict("topk", 8, 1e9, 0.001, ng);
    EXPECT_NEAR(p.select_ms, 102.4, 1e-6);
    EXPECT_NEAR(p.comm_ms, ag(8, 8) + ag(8, 4 * k) + ar(8, 4 * 8 * k), 1e-6 * p.comm_ms);
    // At W = 32 (not measured) the build-up continues: k' = 32 k.
    const auto q = m.predict("topk", 32, 1e9, 0.001, ng);
    EXPECT_NEAR(q.comm_ms, ag(32, 8) + ag(32, 4 * k) + ar(32, 4 * 32 * k), 1e-6 * q.comm_ms);
  }
  {
    const auto p = m.predict("exdyna-exact", 8, 1e9, 0.001, ng);
    EXPECT_NEAR(p.select_ms, 0.3e-6 * ng / 8, 1e-6);
    EXPECT_NEAR(p.comm_ms, ag(8, 8) + ag(8, 4 * 1.1 * k / 8) + ar(8, 4 * k), 1e-6 * p.comm_ms);
    // W = 64: f(t) = the worker cap at the Poisson floor.
    const double share = k / 64,
                 cap = std::floor((1 + std::sqrt(2 * std::log(64.0) / share)) * share);
    const auto q = m.predict("exdyna-exact", 64, 1e9, 0.001, ng);
    EXPECT_NEAR(q.comm_ms, ag(64, 8) + ag(64, 4 * cap) + ar(64, 4 * k), 1e-6 * q.comm_ms);
    // 10 Gbit/s (not measured): beta scaled by the rate ratio, alpha kept.
    const auto r = m.predict("exdyna-exact", 8, 1e10, 0.001, ng);
    EXPECT_NEAR(
        r.comm_ms,
        ag(8, 8, kBeta / 10) + ag(8, 4 * 1.1 * k / 8, kBeta / 10) + ar(8, 4 * k, kBeta / 10),
        1e-6 * r.comm_ms);
  }
}

// A label that fused every step: one all-gather of the counts' head (8 bytes here), the list's
// length and the cap's indices with 2-byte places at a measured W; at other W the cheaper of
// that and the two all-gathers, as --fuse auto chooses.
TEST(ScaleModel, AFusedLabelPaysOneAllGatherOfItsSlots) {
  const auto m = fixture_model(true);
  const double ng = 25'600'000, k = std::floor(0.001 * ng);
  const auto ar = [](int w, double bytes) {
    return 1e3 * collective_time(CostForm::kRingAllreduce, kAlpha, kBeta, w, bytes);
  };
  const auto ag = [](int w, double bytes) {
    return 1e3 * collective_time(CostForm::kRingAllgather, kAlpha, kBeta, w, bytes);
  };
  const auto cap = [&](int w) {
    const double share = k / w;
    return std::floor((1 + std::sqrt(2 * std::log(static_cast<double>(w)) / share)) * share);
  };
  const auto p = m.predict("exdyna-exact-fused", 8, 1e9, 0.001, ng);
  EXPECT_NEAR(p.comm_ms, ag(8, 8 + 8 + 6 * cap(8)) + ar(8, 4 * k), 1e-6 * p.comm_ms);
  EXPECT_LT(p.allgather_ms, m.predict("exdyna-exact", 8, 1e9, 0.001, ng).allgather_ms);
  for (const int w : {64, 256}) {
    const double two = ag(w, 8) + ag(w, 4 * cap(w)), fused = ag(w, 16 + 6 * cap(w));
    const auto q = m.predict("exdyna-exact-fused", w, 1e9, 0.001, ng);
    EXPECT_NEAR(q.allgather_ms, std::min(two, fused), 1e-6 * q.allgather_ms) << w << " workers";
  }
}

// A selection that also merges the gathered lists (Top-k-like: k' = W k r, r the overshoot, in
// log2 W pairwise rounds) costs s_e n_g + s_v k' log2 W; fitted from W = 2 and 8 it predicts
// W = 4 and 32 exactly, and one whose k' does not move with W (CLT-k's leader) is all
// per-element cost.
TEST(ScaleModel, SelectionSeparatesTheScanFromTheUnionOfTheGatheredLists) {
  auto comm = allreduce_sweep({2, 4, 8});
  const double ng = 25'600'000, k = std::floor(0.01 * ng), se = 4e-9, sv = 2e-9;
  std::vector<MeasuredCell> cells;
  for (int w : {2, 8})
    for (const char* sp : {"hard-threshold", "cltk"}) {
      MeasuredCell c;
      c.sparsifier = c.label = sp;
      c.workers = w;
      c.bandwidth_bps = 1e9;
      c.delay_us = 50;
      c.density = 0.01;
      c.n_g = static_cast<std::int64_t>(ng);
      c.density_ratio = c.sparsifier == "cltk" ? 1.0 : 5.0 * w;
      const double rounds = c.sparsifier == "cltk" ? 1.0 : std::log2(w);
      c.select_ms = 1e3 * (se * ng + sv * c.density_ratio * k * rounds);
      c.non_comm_ms = c.select_ms + 10;
      c.iter_ms = 100;
      c.f_t = 1;
      cells.push_back(c);
    }
  const auto m = ScaleModel::fit(comm, cells);
  for (int w : {4, 32}) {
    EXPECT_NEAR(m.predict("hard-threshold", w, 1e9, 0.01, ng).select_ms,
                1e3 * (se * ng + sv * 5.0 * w * k * std::log2(w)), 1e-3)
        << "W " << w;
    EXPECT_NEAR(m.predict("cltk", w, 1e9, 0.01, ng).select_ms, 1e3 * (se * ng + sv * k), 1e-3);
  }
  for (const auto& c : m.costs())
    if (c.label == "cltk") {
      EXPECT_EQ(c.select_at(0.01).s_per_value, 0.0);
    }
}

TEST(ScaleModel, WritesModelForEveryLabelWorkerCountAndRate) {
  const auto m = fixture_model();
  const auto t = CsvTable::parse(
      m.model_csv(), "model.csv",
      {"label", "workers", "bandwidth_bps", "density", "n_g", "pred_iter_ms", "pred_select_ms",
       "pred_comm_ms", "stated_alpha_us", "stated_iter_ms", "stated_comm_ms"});
  EXPECT_EQ(t.rows(), 4u * 8 * 3);  // 4 labels x W = 2..256 x 3 rates
  const auto f = CsvTable::parse(m.fit_csv(), "model_fit.csv", {"kind", "name", "alpha_s"});
  // pooled fits, alpha at each W, the same from 1 MiB up (the fixture sweeps to 64 MiB), labels
  EXPECT_EQ(f.rows(), 3u + 3u * 3 + 3u * 3 + 4u);
}

TEST(ScaleModel, ErrorsAreRelativeToTheMeasurement) {
  const auto m = fixture_model();
  MeasuredCell c;
  c.sparsifier = "dense";
  c.label = "dense";
  c.workers = 8;
  c.bandwidth_bps = 1e9;
  c.density = 0.001;
  c.n_g = 25'600'000;
  const double pred = m.predict("dense", 8, 1e9, 0.001, 25'600'000).iter_ms;
  c.iter_ms = pred / 1.25;
  const auto e = model_errors(m, {c});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NEAR(e[0].rel_error, 0.25, 1e-9);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(Measurements, MalformedCellsCsvIsRefusedNamingFileAndLine) {
  const std::string good = testing::cells_csv({{"dense", "dense", 2, 1e9, 0.01, 50, 0, 30, 1, 1},
                                               {"topk", "topk", 2, 1e9, 0.01, 40, 8, 20, 2, 1}});
  // A short row on line 3.
  auto text = good;
  const auto line3 = text.find('\n', text.find('\n') + 1) + 1;
  text = text.substr(0, line3) + "topk,topk,2,1e9\n";
  testing::write(dir_ / "cells.csv", text);
  auto msg = error_of([&] { read_cells(dir_ / "cells.csv"); });
  EXPECT_NE(msg.find("cells.csv line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fields"), std::string::npos) << msg;
  // A field that is not a number on line 2.
  text = good;
  const auto pos = text.find(",50,", text.find('\n'));
  text.replace(pos, 4, ",fast,");
  testing::write(dir_ / "cells.csv", text);
  msg = error_of([&] { read_cells(dir_ / "cells.csv"); });
  EXPECT_NE(msg.find("cells.csv line 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
  // A header without a required column.
  testing::write(dir_ / "cells.csv", "sparsifier,label\ndense,dense\n");
  msg = error_of([&] { read_cells(dir_ / "cells.csv"); });
  EXPECT_NE(msg.find("cells.csv line 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'workers'"), std::string::npos) << msg;
}

TEST_F(Measurements, ParsesRatesAndCellDirectoryNames) {
  EXPECT_EQ(parse_rate("1gbit"), 1e9);
  EXPECT_EQ(parse_rate("100mbit"), 1e8);
  EXPECT_EQ(parse_rate("10000000000"), 1e10);
  EXPECT_FALSE(parse_rate("fast"));
  fs::create_directories(dir_ / "cells" / "exdyna-exact-w8-b1gbit-d0.001");
  fs::create_directories(dir_ / "cells" / "not-a-cell");
  const auto found = find_cell_dirs(dir_);
  ASSERT_EQ(found.size(), 1u);
  const auto& k = found.begin()->first;
  EXPECT_EQ(k.label, "exdyna-exact");
  EXPECT_EQ(k.workers, 8);
  EXPECT_EQ(k.bandwidth_bps, 1e9);
  EXPECT_EQ(k.density, 0.001);
}

}  // namespace
}  // namespace exdyna::eval
